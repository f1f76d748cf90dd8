// gemm_nt's tensor-core algorithm tc on the default device. On PoCL (CI) its kernel runs the
// exact emulation of mma.sync (no OCLTK_PTX): the fragment layouts, the staging, the edges,
// the element types and both TF32 modes are checked against the double reference at several
// legal points, each within its own bound (16-bit and 3×TF32: the f32 bound with the store's
// rounding; TF32: its own). Then the precision contract (what tc refuses), the tensor-core
// probe and the fallback to the portable kernels where it fails or cannot run, and that
// PoCL never chooses tc by default.
//
// The emulation is slow to build (about a second or more a program on PoCL), so the points
// and element types below are few: each pair is one program, and the probe's point is also
// the first test point, so the probe tests reuse its builds.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fixture.hpp"

namespace {

using ocltk::Choice;
using ocltk::ElementType;
using ocltk::ErrorCode;
using ocltk::GemmNtArgs;
using ocltk::GemmPrecision;
using ocltk::GemmProblem;
using ocltk::Params;
using ocltk::Status;
using ocltk_test::GemmCase;
using ocltk_test::ScopedEnv;

struct TcKind {
  const char* name;
  ElementType in, out;
  GemmPrecision precision;
};
constexpr TcKind kBf16{"bf16", ElementType::bf16, ElementType::bf16, GemmPrecision::exact};
constexpr TcKind kBf16IntoF32{"bf16_into_f32", ElementType::bf16, ElementType::f32, GemmPrecision::exact};
constexpr TcKind kF16{"f16", ElementType::f16, ElementType::f16, GemmPrecision::exact};
constexpr TcKind kTf32{"tf32", ElementType::f32, ElementType::f32, GemmPrecision::tf32};
constexpr TcKind kTf32x3{"tf32x3", ElementType::f32, ElementType::f32, GemmPrecision::tf32x3};

// The probe's point (runtime/src/gemm_nt_probe.cpp): two warps, the smallest tiles.
const Params kProbePoint = {{"MWG", 32}, {"NWG", 32}, {"KCH", 2}, {"MWARPS", 1}, {"NWARPS", 2}};

struct TcCase {
  std::string name;
  Params params;  // over the defaults
  TcKind kind;
  std::string algorithm = "tc";  // or tcs (the same kernel with K split between warp groups), or tcd
};
void PrintTo(const TcCase& c, std::ostream* out) { *out << c.name; }

// Every parameter at each of its values somewhere: tile shapes of 1, 2, 4 and 8 warps (odd
// NI with LDSM 0), KCH 2 .. 16 (SWZ 1's both rules: CH < 8 and CH >= 8), 2 .. 4 stages,
// copies by cp.async (past L1 and through it) and through registers, ldmatrix and word
// loads, plain, swizzled and padded rows, GM 1, 4 and 8; every element type and both TF32
// modes, C in f32 from bf16; the three stores (EPI), with C in 16 bits and in f32. tcs at K
// split 2, 4 and 8 (groups past K's end with nothing but zeros to multiply), one and two
// warps a group, both its row layouts and copies. tcd with each of its column layouts, piece
// widths and rounds in flight, K split and not, 1, 2 and 4 tiles a workgroup (B's pieces kept
// where K fits a step: the K = 8 case).
const std::vector<TcCase>& tc_cases() {
  static const Params defaults = {};
  static const Params registers_words = {{"MWG", 64},    {"NWG", 32},   {"KCH", 4},  {"MWARPS", 2}, {"NWARPS", 4},
                                         {"CPASYNC", 0}, {"STAGES", 2}, {"LDSM", 0}, {"SWZ", 2},    {"GM", 1}};
  static const Params four_stages_plain = {{"MWG", 32},   {"NWG", 64},   {"KCH", 8}, {"MWARPS", 1},
                                           {"NWARPS", 1}, {"STAGES", 4}, {"SWZ", 0}, {"GM", 4}};
  static const Params kch16_swizzled = {{"MWG", 32},   {"NWG", 32},   {"KCH", 16}, {"MWARPS", 1},
                                        {"NWARPS", 2}, {"STAGES", 3}, {"SWZ", 1},  {"CPASYNC", 1}};
  static const Params epi_narrow = {{"MWG", 32}, {"NWG", 64}, {"KCH", 2}, {"MWARPS", 1}, {"NWARPS", 2}, {"EPI", 1}};
  static const Params epi2_narrow = {{"MWG", 64}, {"NWG", 64}, {"KCH", 4}, {"MWARPS", 2}, {"NWARPS", 2}, {"EPI", 2}};
  static const Params tcs_split4 = {{"MWG", 32}, {"NWG", 16}, {"MWARPS", 2}, {"NWARPS", 1}, {"KSPLIT", 4}};
  static const Params tcs_split2_padded = {{"MWG", 16},   {"NWG", 64},   {"KCH", 8}, {"MWARPS", 1}, {"NWARPS", 2},
                                           {"KSPLIT", 2}, {"STAGES", 2}, {"SWZ", 2}, {"CPASYNC", 1}};
  static const Params tcs_split8 = {{"MWG", 16},   {"NWG", 32},   {"KCH", 2},   {"MWARPS", 1},
                                    {"NWARPS", 1}, {"KSPLIT", 8}, {"STAGES", 4}};
  // tcd: lanes owning 8 consecutive columns (NI 4 and 8) with and without the old C read first,
  // the mma's own columns (NI 1 and 2), 8- and 16-byte pieces, 1, 2 and 4 rounds in flight, K
  // split 2 and 4.
  static const Params tcd_defaults = {};
  static const Params tcd_quad_split = {{"MWG", 32}, {"NWG", 64}, {"MWARPS", 2}, {"NWARPS", 2}, {"KSPLIT", 2},
                                        {"KV", 2},   {"UNR", 2},  {"PRE", 0},    {"MREP", 2}};
  static const Params tcd_rows4 = {{"MWG", 16}, {"NWG", 32}, {"MWARPS", 1}, {"NWARPS", 1}, {"MREP", 4}};
  static const Params tcd_narrow = {{"MWG", 64},   {"NWG", 16}, {"MWARPS", 2}, {"NWARPS", 1},
                                    {"KSPLIT", 4}, {"KV", 2},   {"UNR", 4},    {"PRE", 0}};
  static const std::vector<TcCase> all = {
      {"probe_point_bf16", kProbePoint, kBf16},
      {"probe_point_f16", kProbePoint, kF16},
      {"probe_point_tf32", kProbePoint, kTf32},
      {"probe_point_tf32x3", kProbePoint, kTf32x3},
      {"defaults_bf16_into_f32", defaults, kBf16IntoF32},
      {"defaults_tf32x3", defaults, kTf32x3},
      {"registers_words_f16", registers_words, kF16},
      {"registers_words_tf32", registers_words, kTf32},
      {"four_stages_plain_bf16", four_stages_plain, kBf16},
      {"four_stages_plain_tf32x3", four_stages_plain, kTf32x3},
      {"kch16_swizzled_bf16", kch16_swizzled, kBf16},
      {"epi_defaults_bf16", {{"EPI", 1}}, kBf16},
      {"epi_defaults_bf16_into_f32", {{"EPI", 1}}, kBf16IntoF32},
      {"epi_narrow_f16", epi_narrow, kF16},
      {"epi_narrow_tf32x3", epi_narrow, kTf32x3},
      {"epi2_narrow_bf16", epi2_narrow, kBf16},
      {"epi2_narrow_bf16_into_f32", epi2_narrow, kBf16IntoF32},
      {"tcs_split4_bf16", tcs_split4, kBf16, "tcs"},
      {"tcs_split2_padded_f16", tcs_split2_padded, kF16, "tcs"},
      {"tcs_split8_tf32x3", tcs_split8, kTf32x3, "tcs"},
      {"tcs_split8_bf16_into_f32", tcs_split8, kBf16IntoF32, "tcs"},
      {"tcd_defaults_bf16", tcd_defaults, kBf16, "tcd"},
      {"tcd_defaults_bf16_into_f32", tcd_defaults, kBf16IntoF32, "tcd"},
      {"tcd_quad_split_tf32x3", tcd_quad_split, kTf32x3, "tcd"},
      {"tcd_quad_split_bf16", tcd_quad_split, kBf16, "tcd"},
      {"tcd_narrow_f16", tcd_narrow, kF16, "tcd"},
      {"tcd_narrow_tf32", tcd_narrow, kTf32, "tcd"},
      {"tcd_rows4_f16", tcd_rows4, kF16, "tcd"},
  };
  return all;
}

Choice tc_choice(const Params& params, const std::string& algorithm = "tc") {
  Choice choice;
  choice.kernel = "gemm_nt";
  choice.shape_class = "test";
  choice.algorithm = algorithm;
  choice.params = ocltk::gemm_nt_family().find_algorithm(algorithm)->complete(params);
  return choice;
}

// Problems filed under class large (M > 16, N > 64, K > 64), for the profile path.
constexpr GemmProblem kLarge{70, 80, 72};

class GemmNtTcTest : public ocltk_test::RuntimeTest {
 protected:
  // A runtime of its own: a profile that names tc (for the device's name), a fresh program
  // cache folder (the probe's answers land there), verbose as asked.
  static std::unique_ptr<ocltk::Runtime> open_with_profile(const std::vector<ocltk::ProfileEntry>& entries,
                                                           const std::string& dir, int verbose = 0) {
    ocltk::Profile profile;
    profile.device = ocltk::profile_device_of(runtime().device());
    profile.tuner_version = ocltk::version();
    profile.entries = entries;
    const std::string path = (ocltk_test::fs::path(dir) / "profile.yaml").string();
    ocltk::write_profile_atomically(path, profile);
    ocltk::RuntimeOptions options = ocltk_test::test_runtime_options((ocltk_test::fs::path(dir) / "cache").string());
    options.use_profiles = true;
    options.profile_path = path;
    options.verbose = verbose;
    ocltk::Result<ocltk::Runtime> opened = ocltk::Runtime::open(options);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    return opened.ok() ? std::make_unique<ocltk::Runtime>(std::move(opened.value())) : nullptr;
  }

  static ocltk::ProfileEntry entry(const std::string& shape_class, const std::string& algorithm, const Params& params) {
    ocltk::ProfileEntry e;
    e.kernel = "gemm_nt";
    e.shape_class = shape_class;
    e.algorithm = algorithm;
    e.params = ocltk::gemm_nt_family().find_algorithm(algorithm)->complete(params);
    return e;
  }

  // The probe answers a runtime left in its cache folder.
  static std::vector<std::string> probe_files(const std::string& dir) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& f : ocltk_test::fs::recursive_directory_iterator(dir, ec))
      if (f.path().extension() == ".tc-probe") files.push_back(f.path().string());
    return files;
  }

  // `algorithm` at each of `points` on every case, in bf16, f16 and bf16 into f32, where mma.sync
  // runs (skipped with the reason elsewhere: the emulation's tests cover the same code).
  void run_points_at_scale(const std::string& algorithm, const std::vector<Params>& points,
                           const std::vector<GemmCase>& cases) {
    if (!limits().tensor_mma)
      GTEST_SKIP() << "needs mma.sync (NVIDIA's OpenCL at sm_80 or newer); " << runtime().device().name << " runs "
                   << algorithm << " only through the emulation, tested above";
    const ocltk::AlgorithmSpec& spec = *ocltk::gemm_nt_family().find_algorithm(algorithm);
    const ocltk::DeviceLimits device_limits = limits();
    for (const Params& point : points) {
      const Choice choice = tc_choice(point, algorithm);
      ASSERT_FALSE(spec.violation(choice.params, &device_limits).has_value())
          << spec.violation(choice.params, &device_limits).value_or("");
      for (const TcKind& kind : {kBf16, kF16, kBf16IntoF32}) {
        SCOPED_TRACE(std::string(kind.name) + " " + algorithm + " {" + ocltk::format_params(choice.params) + "}");
        for (const GemmCase& c : cases)
          EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, kind.in, kind.out, choice));
      }
    }
  }

  // Launches through the profile path (gemm_nt or gemm_nt_accum as the case says).
  static ocltk_test::GemmLauncher profile_path(ocltk::Runtime& rt, bool accumulate) {
    return [&rt, accumulate](const GemmNtArgs& args) { return accumulate ? rt.gemm_nt_accum(args) : rt.gemm_nt(args); };
  }
};

class GemmNtTcCaseTest : public GemmNtTcTest, public ::testing::WithParamInterface<TcCase> {};

TEST_P(GemmNtTcCaseTest, OddShapesAccumulateAndSlices) {
  const TcCase& t = GetParam();
  const Choice choice = tc_choice(t.params, t.algorithm);
  const ocltk::AlgorithmSpec& tc = *ocltk::gemm_nt_family().find_algorithm(t.algorithm);
  const ocltk::DeviceLimits device_limits = limits();
  ASSERT_FALSE(tc.violation(choice.params, &device_limits).has_value())
      << t.name << ": " << tc.violation(choice.params, &device_limits).value_or("");
  SCOPED_TRACE(t.name + " {" + ocltk::format_params(choice.params) + "}");
  std::vector<GemmCase> cases;
  // Packed: rows of 70 elements are not 16-byte aligned (element loads), rows of 64 are
  // (16-byte chunks, cp.async on the GPU); one row of C, and K = 8, one f32 mma step.
  for (const GemmProblem& p : {GemmProblem{37, 45, 70}, GemmProblem{37, 45, 64}, GemmProblem{1, 9, 8}}) {
    GemmCase c;
    c.problem = p;
    c.alpha = -0.37f;
    cases.push_back(c);
  }
  // LoRA expand's short K: one step of tcd's loop at all its points, its B pieces kept for the
  // tiles below the first (MREP > 1).
  GemmCase short_k;
  short_k.problem = {37, 45, 16};
  short_k.alpha = 0.5f;
  short_k.accumulate = true;
  cases.push_back(short_k);
  GemmCase unaligned;  // accumulate into a slice; every operand off 16-byte alignment
  unaligned.problem = {33, 65, 127};
  unaligned.accumulate = true;
  unaligned.lda = 130;
  unaligned.ldb = 128;
  unaligned.ldc = 70;
  unaligned.a_offset = 1;
  unaligned.b_offset = 4;
  unaligned.c_offset = 3;
  cases.push_back(unaligned);
  unaligned.alpha = -0.37f;
  cases.push_back(unaligned);
  GemmCase aligned;  // leading dimensions and offsets at 16 bytes for every type: chunk loads
  aligned.problem = {20, 40, 96};
  aligned.alpha = 0.5f;
  aligned.accumulate = true;
  aligned.lda = 104;
  aligned.ldb = 96;
  aligned.ldc = 45;
  aligned.a_offset = 8;
  aligned.b_offset = 16;
  aligned.c_offset = 3;
  cases.push_back(aligned);
  GemmCase rows16;                 // C's rows at 16 bytes for every type, N not a multiple of 8: EPI 1's
  rows16.problem = {40, 100, 64};  // 16-byte stores, then element stores for the last 4
  rows16.alpha = 0.5f;
  rows16.accumulate = true;
  rows16.ldc = 104;
  rows16.c_offset = 8;
  cases.push_back(rows16);
  for (const GemmCase& c : cases)
    EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, t.kind.in, t.kind.out, choice, t.kind.precision));
}

INSTANTIATE_TEST_SUITE_P(Points, GemmNtTcCaseTest, ::testing::ValuesIn(tc_cases()),
                         [](const ::testing::TestParamInfo<TcCase>& info) { return info.param.name; });

// TF32 alone is held to its own bound, and is visibly less accurate than f32 (so its test
// above could not pass with a kernel that ignored the rounding); 3×TF32 meets the f32 bound
// on the same kind of data.
TEST_F(GemmNtTcTest, Tf32IsHeldToItsBoundAnd3xTf32ToTheF32One) {
  const Choice choice = tc_choice(kProbePoint);
  GemmCase c;
  c.problem = {32, 32, 127};
  double tf32_worst = 0, tf32x3_worst = 0;
  ASSERT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, ElementType::f32, ElementType::f32, choice,
                                         GemmPrecision::tf32, &tf32_worst));
  EXPECT_GT(tf32_worst, 1.0) << "TF32 met the f32 bound everywhere: are the operands rounded?";
  ASSERT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, ElementType::f32, ElementType::f32, choice,
                                         GemmPrecision::tf32x3, &tf32x3_worst));
  EXPECT_LE(tf32x3_worst, 1.0);
  EXPECT_LT(tf32x3_worst * 10, tf32_worst) << "3×TF32 should be far closer than TF32";

  // TF32 takes any K; 3×TF32 from K = 8 on.
  c.problem = {9, 10, 7};
  EXPECT_TRUE(
      ocltk_test::run_typed_case(runtime(), rng(), c, ElementType::f32, ElementType::f32, choice, GemmPrecision::tf32));
}

// On tensor cores (mma.sync through inline PTX): 3×TF32 within the f32 bound from K = 8 to
// 4096 at the defaults and at the f32 point measured fastest on the H200, TF32 within its
// own. Prints the worst error over the f32 bound per K (the figure the kernel's header
// quotes). Skipped where there is no mma.sync: there the emulation's tests above cover the
// same arithmetic at small sizes.
TEST_F(GemmNtTcTest, OnTensorCoresAtScale) {
  if (!limits().tensor_mma)
    GTEST_SKIP() << "needs mma.sync (NVIDIA's OpenCL at sm_80 or newer); " << runtime().device().name
                 << " runs tc only through the emulation, tested above";
  const Params f32_point = {{"KCH", 2}, {"STAGES", 4}, {"SWZ", 1}};
  for (const Params& point : {Params{}, f32_point}) {
    const Choice choice = tc_choice(point);
    for (const std::int64_t k : {8, 9, 16, 64, 257, 1024, 4096}) {
      GemmCase c;
      c.problem = {384, 320, k};
      c.alpha = -0.37f;
      double worst = 0;
      EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, ElementType::f32, ElementType::f32, choice,
                                             GemmPrecision::tf32x3, &worst));
      std::printf("tc {%s} 3xTF32 K=%lld: worst error %.3f of the f32 bound\n",
                  ocltk::format_params(choice.params).c_str(), static_cast<long long>(k), worst);
    }
    GemmCase c;
    c.problem = {384, 320, 1024};
    EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, ElementType::f32, ElementType::f32, choice,
                                           GemmPrecision::tf32));
  }
}

// The 16-bit types at sizes that fill the GPU, with each of the three stores, where mma.sync
// runs.
TEST_F(GemmNtTcTest, HalfStoresOnTensorCoresAtScale) {
  if (!limits().tensor_mma)
    GTEST_SKIP() << "needs mma.sync (NVIDIA's OpenCL at sm_80 or newer); " << runtime().device().name
                 << " runs tc only through the emulation, tested above";
  // The defaults and the three stores (EPI 1 and 2's 16-byte accesses where C's rows are
  // aligned: the first case and the accumulate at ldc 1040; elements at ldc 1033).
  for (const Params& point : {Params{}, Params{{"EPI", 1}}, Params{{"EPI", 2}}}) {
    const Choice choice = tc_choice(point);
    for (const TcKind& kind : {kBf16, kF16, kBf16IntoF32}) {
      SCOPED_TRACE(std::string(kind.name) + " {" + ocltk::format_params(choice.params) + "}");
      GemmCase c;
      c.problem = {1000, 1024, 1536};  // 8 × 8 tiles of 128, the last row partial
      EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, kind.in, kind.out, choice));
      c.problem = {1000, 1030, 1536};
      c.accumulate = true;
      c.alpha = 0.5f;
      c.lda = 1536 + 8;
      for (const std::int64_t ldc : {1033, 1040}) {
        c.ldc = ldc;
        c.a_offset = 8;
        c.c_offset = ldc == 1040 ? 16 : 5;
        EXPECT_TRUE(ocltk_test::run_typed_case(runtime(), rng(), c, kind.in, kind.out, choice));
      }
    }
  }
}

// tcs on the LoRA shrink shape (N 16 and 64) and a small batch, K split 2 .. 8, where
// mma.sync runs (the emulation's tests above cover the same code at small sizes).
// The tcs points the GPU test below runs: K split 2 .. 8, the H200's small-batch point.
const std::vector<Params>& tcs_gpu_points() {
  static const std::vector<Params> points = {
      {{"MWG", 32}, {"NWG", 16}, {"KCH", 4}, {"MWARPS", 2}, {"NWARPS", 1}, {"KSPLIT", 4}},
      {{"MWG", 16}, {"NWG", 64}, {"KCH", 2}, {"MWARPS", 1}, {"NWARPS", 2}, {"KSPLIT", 4}, {"STAGES", 2}},
      {{"MWG", 16}, {"NWG", 16}, {"KCH", 4}, {"MWARPS", 1}, {"NWARPS", 1}, {"KSPLIT", 8}, {"STAGES", 2}},
      {{"MWG", 64}, {"NWG", 32}, {"KCH", 4}, {"MWARPS", 2}, {"NWARPS", 1}, {"KSPLIT", 2}, {"SWZ", 2}, {"CPASYNC", 1}},
      {{"MWG", 16}, {"NWG", 32}, {"KCH", 8}, {"MWARPS", 1}, {"NWARPS", 2}, {"KSPLIT", 2}, {"SWZ", 2}},
  };
  return points;
}

TEST_F(GemmNtTcTest, TcsOnTensorCoresAtScale) {
  std::vector<GemmCase> cases;
  for (const GemmProblem& p : {GemmProblem{4096, 16, 4096}, GemmProblem{1000, 64, 4000}, GemmProblem{16, 1000, 4096}}) {
    GemmCase c;
    c.problem = p;
    c.alpha = -0.37f;
    c.accumulate = p.n == 64;
    cases.push_back(c);
  }
  run_points_at_scale("tcs", tcs_gpu_points(), cases);
}

// tcd on the LoRA shapes (expand at rank 16 and 64, shrink at 16 and 64), a small batch and an
// unaligned accumulate, where mma.sync runs; the points fit the H200 (checked on every device).
const std::vector<Params>& tcd_gpu_points() {
  static const std::vector<Params> points = {
      {},
      {{"MWG", 64}, {"NWG", 128}, {"MWARPS", 2}, {"NWARPS", 2}, {"KV", 2}},
      {{"MWG", 32}, {"NWG", 16}, {"MWARPS", 2}, {"NWARPS", 1}, {"KSPLIT", 4}, {"KV", 2}, {"UNR", 2}, {"PRE", 0}},
      {{"MWG", 16}, {"NWG", 64}, {"MWARPS", 1}, {"NWARPS", 2}, {"KSPLIT", 4}, {"KV", 2}, {"UNR", 4}},
      {{"MWG", 32}, {"NWG", 128}, {"MWARPS", 1}, {"NWARPS", 2}, {"MREP", 4}, {"KV", 2}},
  };
  return points;
}

// Every device, so that a GPU call never meets a point its device refuses: the tcs and tcd
// GPU points are legal within the H200's limits (48 KiB of local memory, workgroups of up to
// 1024).
TEST(GemmNtTcPoints, GpuPointsFitTheH200) {
  ocltk::DeviceLimits h200;
  h200.local_mem_bytes = 48 * 1024;
  h200.gpu = h200.tensor_mma = h200.ptx_binaries = true;
  for (const auto& [name, points] : {std::pair{"tcs", &tcs_gpu_points()}, std::pair{"tcd", &tcd_gpu_points()}}) {
    const ocltk::AlgorithmSpec& algorithm = *ocltk::gemm_nt_family().find_algorithm(name);
    for (const Params& point : *points) {
      const Params params = algorithm.complete(point);
      EXPECT_FALSE(algorithm.violation(params, &h200).has_value())
          << name << " " << ocltk::format_params(params) << ": " << algorithm.violation(params, &h200).value_or("");
    }
  }
}

TEST_F(GemmNtTcTest, TcdOnTensorCoresAtScale) {
  std::vector<GemmCase> cases;
  for (const GemmProblem& p : {GemmProblem{4096, 4096, 16}, GemmProblem{1000, 1030, 64}, GemmProblem{4096, 16, 4096},
                               GemmProblem{1000, 64, 4000}, GemmProblem{16, 1000, 4096}}) {
    GemmCase c;
    c.problem = p;
    c.alpha = -0.37f;
    c.accumulate = p.k <= 64 || p.n == 64;
    if (p.n == 1030) {  // C's rows off 16 bytes: element stores
      c.ldc = 1033;
      c.c_offset = 5;
    }
    cases.push_back(c);
  }
  run_points_at_scale("tcd", tcd_gpu_points(), cases);
}

// tc on f32 needs a precision that allows TF32, and 3×TF32 needs K >= 8: an explicit choice
// that breaks either is refused by name and writes nothing.
TEST_F(GemmNtTcTest, ExplicitTcIsRefusedWhereThePrecisionForbidsIt) {
  ocltk::Runtime& rt = runtime();
  const Choice choice = tc_choice(kProbePoint);
  struct Case {
    GemmProblem p;
    GemmPrecision precision;
    std::vector<std::string> named;
  };
  const Case cases[] = {
      {{9, 10, 11}, GemmPrecision::exact, {"gemm_nt/tc", "precision exact", "tf32"}},
      {{9, 10, 7}, GemmPrecision::tf32x3, {"gemm_nt/tc", "K = 7", "f32 bound"}},
      {{9, 10, 1}, GemmPrecision::tf32x3, {"K = 1"}},
  };
  for (const Case& k : cases) {
    const std::vector<float> a = ocltk_test::random_floats(rng(), k.p.m * k.p.k);
    const std::vector<float> b = ocltk_test::random_floats(rng(), k.p.n * k.p.k);
    const std::vector<float> c = ocltk_test::random_floats(rng(), k.p.m * k.p.n);
    boost::compute::buffer a_buf = ocltk_test::upload(rt, a), b_buf = ocltk_test::upload(rt, b),
                           c_buf = ocltk_test::upload(rt, c);
    GemmNtArgs args;
    args.problem = k.p;
    args.a = {a_buf.get(), 0, 0};
    args.b = {b_buf.get(), 0, 0};
    args.c = {c_buf.get(), 0, 0};
    args.precision = k.precision;
    for (bool accumulate : {false, true}) {
      const Status s = rt.gemm_nt_with(choice, accumulate, args);
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
      for (const std::string& word : k.named) EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
    }
    rt.queue().finish();
    EXPECT_EQ(ocltk_test::download(rt, c_buf, c.size()), c) << "a refused launch wrote C";
  }
  // 16-bit A and B take any precision: their products are exact on every path.
  GemmCase c;
  c.problem = {9, 10, 7};
  EXPECT_TRUE(
      ocltk_test::run_typed_case(rt, rng(), c, ElementType::bf16, ElementType::bf16, choice, GemmPrecision::tf32x3));
}

// Without OCLTK_TC_PROBE, PoCL has no tensor cores: the probe says so without running, no
// class's built-in is tc under any precision, and a profile that names tc (written by hand
// or on another device) is served by the portable kernels, with the reason in the choice.
TEST_F(GemmNtTcTest, PoclNeverChoosesTcByDefault) {
  if (limits().tensor_mma) GTEST_SKIP() << runtime().device().name << " has tensor cores: this is PoCL's test";
  ScopedEnv unset("OCLTK_TC_PROBE", std::nullopt);
  for (const ElementType in : {ElementType::bf16, ElementType::f16, ElementType::f32}) {
    const ocltk::TensorCoreProbe probe = runtime().probe_tensor_cores(in, GemmPrecision::tf32x3);
    EXPECT_FALSE(probe.usable);
    EXPECT_NE(probe.reason.find("mma.sync"), std::string::npos) << probe.reason;
  }
  const ocltk::TensorCoreProbe exact = runtime().probe_tensor_cores(ElementType::f32, GemmPrecision::exact);
  EXPECT_FALSE(exact.usable);
  EXPECT_NE(exact.reason.find("precision exact"), std::string::npos) << exact.reason;
  const GemmProblem problems[] = {{1, 100, 300}, {40, 16, 300}, {70, 65, 16}, {16, 100, 130}, kLarge};
  for (const GemmProblem& p : problems)
    for (const ElementType in : {ElementType::f32, ElementType::bf16, ElementType::f16})
      for (const GemmPrecision precision : {GemmPrecision::exact, GemmPrecision::tf32, GemmPrecision::tf32x3}) {
        const Choice c = runtime().choose_gemm_nt(p, in, precision);
        EXPECT_NE(c.algorithm, "tc") << c.describe();
        EXPECT_EQ(c.source, "built-in") << c.describe();
      }

  const std::string dir = ocltk_test::make_temp_dir("tc_pocl");
  std::unique_ptr<ocltk::Runtime> rt =
      open_with_profile({entry("large_half", "tc", kProbePoint), entry("large_tf32x3", "tc", kProbePoint)}, dir);
  ASSERT_NE(rt, nullptr);
  GemmCase c;
  c.problem = kLarge;
  EXPECT_TRUE(
      ocltk_test::run_typed_case(*rt, rng(), c, ElementType::bf16, ElementType::bf16, profile_path(*rt, false)));
  Choice used = rt->last_choice();
  EXPECT_EQ(used.algorithm, "tiled") << used.describe();
  EXPECT_NE(used.adjusted.find("tc from " + dir), std::string::npos) << used.describe();
  EXPECT_NE(used.adjusted.find("mma.sync"), std::string::npos) << used.describe();
  c.accumulate = true;
  EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true),
                                         GemmPrecision::tf32x3));
  used = rt->last_choice();
  EXPECT_EQ(used.algorithm, "tiled") << used.describe();
  EXPECT_NE(used.adjusted.find("mma.sync"), std::string::npos) << used.describe();
  EXPECT_TRUE(probe_files(dir).empty()) << "nothing was probed, so nothing is cached";
  std::error_code ec;
  ocltk_test::fs::remove_all(dir, ec);
}

// OCLTK_TC_PROBE=emulated probes on PoCL too (through the emulation): the probe passes, the
// profile's tc entries serve 16-bit and 3×TF32 launches, never exact ones, and the answers
// are written beside the program cache; a runtime opened later reads them from there.
TEST_F(GemmNtTcTest, ProbedTcServesTheProfileAndItsAnswerIsKeptOnDisk) {
  ScopedEnv emulated("OCLTK_TC_PROBE", std::string("emulated"));
  const std::string dir = ocltk_test::make_temp_dir("tc_probe");
  const std::vector<ocltk::ProfileEntry> entries = {
      entry("large_half", "tc", kProbePoint), entry("large_tf32x3", "tc", kProbePoint), entry("large", "tiled", {}),
      entry("lora_expand_tf32x3", "tc", kProbePoint), entry("lora_expand", "tc", kProbePoint)};
  {
    std::unique_ptr<ocltk::Runtime> rt = open_with_profile(entries, dir);
    ASSERT_NE(rt, nullptr);
    const ocltk::TensorCoreProbe probe = rt->probe_tensor_cores(ElementType::bf16);
    EXPECT_TRUE(probe.usable) << probe.reason;
    EXPECT_EQ(probe.kind, "bf16");
    EXPECT_NE(probe.reason.find("matched the CPU reference"), std::string::npos) << probe.reason;

    GemmCase c;
    c.problem = kLarge;
    c.alpha = -0.37f;
    EXPECT_TRUE(
        ocltk_test::run_typed_case(*rt, rng(), c, ElementType::bf16, ElementType::bf16, profile_path(*rt, false)));
    EXPECT_EQ(rt->last_choice().algorithm, "tc") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "large_half");
    c.accumulate = true;
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true),
                                           GemmPrecision::tf32x3));
    EXPECT_EQ(rt->last_choice().algorithm, "tc") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "large_tf32x3");
    // Exact f32 never reaches tc, whatever the profile says.
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true)));
    EXPECT_EQ(rt->last_choice().algorithm, "tiled") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "large");
    // TF32 has no entry: large's serves, and the choice says so.
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true),
                                           GemmPrecision::tf32));
    EXPECT_EQ(rt->last_choice().algorithm, "tiled") << rt->last_choice().describe();
    EXPECT_NE(rt->last_choice().adjusted.find("no profile entry for large_tf32"), std::string::npos)
        << rt->last_choice().describe();

    // A tc entry in lora_expand_tf32x3: 3×TF32 LoRA launches take it from K = 8 on; below,
    // where tc may not compute them, they are lora_expand's, as exact launches are. A tc entry
    // written by hand there serves neither: the built-in runs instead, saying why.
    c.problem = {70, 80, 40};
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true),
                                           GemmPrecision::tf32x3));
    EXPECT_EQ(rt->last_choice().algorithm, "tc") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "lora_expand_tf32x3");
    c.problem = {70, 80, 5};
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true),
                                           GemmPrecision::tf32x3));
    EXPECT_EQ(rt->last_choice().algorithm, "tiled") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "lora_expand");
    EXPECT_NE(rt->last_choice().adjusted.find("below K = 8"), std::string::npos) << rt->last_choice().describe();
    c.problem = {70, 80, 40};
    EXPECT_TRUE(ocltk_test::run_typed_case(*rt, rng(), c, ElementType::f32, ElementType::f32, profile_path(*rt, true)));
    EXPECT_EQ(rt->last_choice().algorithm, "tiled") << rt->last_choice().describe();
    EXPECT_EQ(rt->last_choice().shape_class, "lora_expand");
    EXPECT_NE(rt->last_choice().adjusted.find("precision exact"), std::string::npos) << rt->last_choice().describe();
  }
  // One answer per kind probed (bf16, tf32x3), keyed like the probe's program.
  const std::vector<std::string> files = probe_files(dir);
  ASSERT_EQ(files.size(), 2u);
  std::string bf16_file;
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::string magic, verdict, reason;
    std::getline(in, magic);
    std::getline(in, verdict);
    std::getline(in, reason);
    EXPECT_EQ(verdict, "usable") << f;
    if (reason.find(" bf16 tc product") != std::string::npos) bf16_file = f;
  }
  ASSERT_FALSE(bf16_file.empty());
  // A later runtime reads the answers instead of probing: one changed to a failure is taken
  // as it stands, and bf16 launches fall back to the built-in while 3×TF32 keeps tc.
  std::ofstream(bf16_file, std::ios::trunc) << "ocltk-tc-probe 1\nunusable\ntampered with by the test\n";
  std::unique_ptr<ocltk::Runtime> later = open_with_profile(entries, dir);
  ASSERT_NE(later, nullptr);
  const ocltk::TensorCoreProbe read = later->probe_tensor_cores(ElementType::bf16);
  EXPECT_FALSE(read.usable);
  EXPECT_NE(read.reason.find("tampered with by the test"), std::string::npos) << read.reason;
  EXPECT_NE(read.reason.find(bf16_file), std::string::npos) << read.reason;
  GemmCase c;
  c.problem = kLarge;
  EXPECT_TRUE(
      ocltk_test::run_typed_case(*later, rng(), c, ElementType::bf16, ElementType::bf16, profile_path(*later, false)));
  EXPECT_EQ(later->last_choice().algorithm, "tiled") << later->last_choice().describe();
  EXPECT_NE(later->last_choice().adjusted.find("tampered"), std::string::npos) << later->last_choice().describe();
  EXPECT_TRUE(ocltk_test::run_typed_case(*later, rng(), c, ElementType::f32, ElementType::f32,
                                         profile_path(*later, false), GemmPrecision::tf32x3));
  EXPECT_EQ(later->last_choice().algorithm, "tc") << later->last_choice().describe();
  later.reset();
  std::error_code ec;
  ocltk_test::fs::remove_all(dir, ec);
}

// A probe that fails (forced by OCLTK_TC_PROBE=fail: the comparison's reference is wrong on
// purpose) costs no error: the launch runs the built-in, the verbose log says why, and the
// forced answer is never written to disk. OCLTK_TC_PROBE=off refuses tc without probing; a
// value it does not know does the same and names the value.
TEST_F(GemmNtTcTest, FailedProbeFallsBackWithoutError) {
  const std::string dir = ocltk_test::make_temp_dir("tc_fail");
  {
    ScopedEnv fail("OCLTK_TC_PROBE", std::string("fail"));
    std::unique_ptr<ocltk::Runtime> rt = open_with_profile({entry("large_half", "tc", kProbePoint)}, dir, 1);
    ASSERT_NE(rt, nullptr);
    GemmCase c;
    c.problem = kLarge;
    ::testing::internal::CaptureStderr();
    const ::testing::AssertionResult ran =
        ocltk_test::run_typed_case(*rt, rng(), c, ElementType::bf16, ElementType::bf16, profile_path(*rt, false));
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(ran);
    const Choice used = rt->last_choice();
    EXPECT_EQ(used.algorithm, "tiled") << used.describe();
    EXPECT_EQ(used.source, "built-in") << used.describe();
    EXPECT_NE(used.adjusted.find("OCLTK_TC_PROBE=fail"), std::string::npos) << used.describe();
    EXPECT_NE(log.find("tensor-core probe (bf16)"), std::string::npos) << log;
    EXPECT_NE(log.find("not usable"), std::string::npos) << log;
    EXPECT_NE(log.find("tc from " + dir), std::string::npos) << "the launch's line names the fallback: " << log;
    EXPECT_TRUE(probe_files(dir).empty()) << "a forced failure was cached";
  }
  for (const char* mode : {"off", "sometimes"}) {
    ScopedEnv set("OCLTK_TC_PROBE", std::string(mode));
    const ocltk::TensorCoreProbe probe = runtime().probe_tensor_cores(ElementType::f16);
    EXPECT_FALSE(probe.usable) << mode;
    EXPECT_NE(probe.reason.find(std::string("OCLTK_TC_PROBE") + (std::string(mode) == "off" ? "=off" : "='sometimes'")),
              std::string::npos)
        << probe.reason;
  }
  std::error_code ec;
  ocltk_test::fs::remove_all(dir, ec);
}

}  // namespace

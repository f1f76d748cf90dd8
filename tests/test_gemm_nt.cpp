// gemm_nt correctness on the default device against the CPU reference: odd shapes at
// several legal points of each algorithm, accumulate and alpha, slices of larger
// buffers, problems split over several dispatches, the profile-driven path, argument
// checking and illegal choices.
//
// PoCL compiles each distinct parameter point in about a second, so the points below
// are few and every test reuses them.
#include <cstring>

#include "fixture.hpp"

#ifdef OCLTK_TEST_HAVE_CLBLAST
#include <clblast.h>
#endif

namespace {

using ocltk::Choice;
using ocltk::ErrorCode;
using ocltk::GemmNtArgs;
using ocltk::GemmProblem;
using ocltk::Params;
using ocltk::Status;
using ocltk_test::GemmCase;
using ocltk_test::run_typed_case;

struct Point {
  std::string name;  // test-name suffix
  std::string algorithm;
  Params params;  // over the defaults
};

// Chosen to cover USE_LOCAL 0/1, VW 1/4/8/16, non-default MDIMC/NDIMC and tall/wide
// tiles (tiled); KWG 8/16/32, VWM/VWN 1/2/4, LOADK 0/1, PREFETCH 0/1/2 and 128
// accumulators (xgemm); RW 1/4/8/32, TR 1/2/4/8, KWG 128/512 and WGS 16..256 (reduce); RW
// 1..32, BR 1..8, SR 1..64, VW 1/2/4/8 and UNROLL 1/2/4 (skinny).
const std::vector<Point>& points() {
  static const std::vector<Point> all = {
      {"tiled_defaults", "tiled", {}},
      {"tiled_local_vw4", "tiled", {{"MWG", 32}, {"NWG", 16}, {"KWG", 32}, {"MDIMC", 4}, {"NDIMC", 2}, {"VW", 4}}},
      {"tiled_global_vw16",
       "tiled",
       {{"MWG", 16}, {"NWG", 8}, {"MDIMC", 4}, {"NDIMC", 4}, {"VW", 16}, {"USE_LOCAL", 0}}},
      {"tiled_global_vw4_wide",
       "tiled",
       {{"MWG", 8}, {"NWG", 32}, {"MDIMC", 2}, {"NDIMC", 16}, {"VW", 4}, {"USE_LOCAL", 0}}},
      {"tiled_local_vw16_tall",
       "tiled",
       {{"MWG", 128}, {"NWG", 4}, {"KWG", 32}, {"MDIMC", 16}, {"NDIMC", 2}, {"VW", 16}}},
      {"xgemm_defaults", "xgemm", {}},
      {"xgemm_kwg8_vwn2",
       "xgemm",
       {{"MWG", 32}, {"NWG", 64}, {"KWG", 8}, {"MDIMC", 8}, {"NDIMC", 8}, {"VWM", 1}, {"VWN", 2}}},
      {"xgemm_kwg32_vwm2",
       "xgemm",
       {{"MWG", 64}, {"NWG", 32}, {"KWG", 32}, {"MDIMC", 16}, {"NDIMC", 8}, {"VWM", 2}, {"VWN", 4}}},
      {"xgemm_rows_vwn1",  // the shipped H200 lora_expand choice
       "xgemm",
       {{"MWG", 64}, {"NWG", 64}, {"KWG", 16}, {"MDIMC", 8}, {"NDIMC", 16}, {"VWM", 4}, {"VWN", 1}}},
      {"xgemm_loadk_kwg32_vwm1",
       "xgemm",
       {{"MWG", 32}, {"NWG", 128}, {"KWG", 32}, {"MDIMC", 16}, {"NDIMC", 8}, {"VWM", 1}, {"VWN", 4}, {"LOADK", 1}}},
      {"xgemm_prefetch1_kwg32",
       "xgemm",
       {{"MWG", 64}, {"NWG", 128}, {"KWG", 32}, {"MDIMC", 8}, {"NDIMC", 16}, {"LOADK", 1}, {"PREFETCH", 1}}},
      {"xgemm_prefetch2_kwg8_acc128",
       "xgemm",
       {{"MWG", 128}, {"NWG", 64}, {"KWG", 8}, {"MDIMC", 8}, {"NDIMC", 8}, {"LOADK", 1}, {"PREFETCH", 2}}},
      {"reduce_defaults", "reduce", {}},
      {"reduce_rw1_tr4_vw4", "reduce", {{"WGS", 64}, {"RW", 1}, {"TR", 4}, {"VW", 4}}},
      {"reduce_local_tr8_kwg128",
       "reduce",
       {{"WGS", 128}, {"RW", 32}, {"TR", 8}, {"VW", 4}, {"USE_LOCAL", 1}, {"KWG", 128}}},
      {"reduce_wgs16_vw16", "reduce", {{"WGS", 16}, {"RW", 4}, {"VW", 16}}},
      {"reduce_local_tr2_vw16",
       "reduce",
       {{"WGS", 32}, {"RW", 8}, {"TR", 2}, {"VW", 16}, {"USE_LOCAL", 1}, {"KWG", 512}}},
      // skinny's lane exchange: as many sums as lanes (defaults), more (each lane keeps 16 or
      // 4), fewer (halving, then sums shared by 2 or 16 lanes), none (RW 1); SR 1 .. 64.
      {"skinny_defaults", "skinny", {}},
      {"skinny_rw8_sr64_vw2", "skinny", {{"WGS", 64}, {"RW", 8}, {"BR", 2}, {"SR", 64}, {"VW", 2}, {"UNROLL", 4}}},
      {"skinny_rw4_br8_sr2", "skinny", {{"WGS", 256}, {"RW", 4}, {"BR", 8}, {"SR", 2}, {"VW", 4}, {"UNROLL", 1}}},
      {"skinny_rw32_sr2_vw1", "skinny", {{"WGS", 64}, {"RW", 32}, {"BR", 2}, {"SR", 2}, {"VW", 1}, {"UNROLL", 4}}},
      {"skinny_rw16_sr1", "skinny", {{"WGS", 256}, {"RW", 16}, {"BR", 8}, {"SR", 1}, {"VW", 4}, {"UNROLL", 1}}},
      {"skinny_rw1_vw8", "skinny", {{"WGS", 32}, {"RW", 1}, {"BR", 4}, {"SR", 4}, {"VW", 8}, {"UNROLL", 1}}},
  };
  return all;
}

const Point& point_named(const std::string& name) {
  for (const Point& p : points())
    if (p.name == name) return p;
  throw std::logic_error("no test point " + name);
}

class GemmNtTest : public ocltk_test::RuntimeTest {
 protected:
  // The explicit choice for a point, after asserting it is legal on this device.
  static Choice legal_choice(const Point& point) {
    const ocltk::AlgorithmSpec* algorithm = ocltk::gemm_nt_family().find_algorithm(point.algorithm);
    EXPECT_NE(algorithm, nullptr) << point.algorithm;
    Choice choice;
    choice.kernel = "gemm_nt";
    choice.shape_class = "test";
    choice.algorithm = point.algorithm;
    if (algorithm == nullptr) return choice;
    choice.params = algorithm->complete(point.params);
    const ocltk::DeviceLimits device_limits = limits();
    const auto bad = algorithm->violation(choice.params, &device_limits);
    EXPECT_FALSE(bad.has_value()) << point.name << " {" << ocltk::format_params(choice.params)
                                  << "} is illegal: " << bad.value_or("");
    return choice;
  }

  static ocltk_test::GemmLauncher with(ocltk::Runtime& rt, const Choice& choice, bool accumulate) {
    return [&rt, choice, accumulate](const GemmNtArgs& args) { return rt.gemm_nt_with(choice, accumulate, args); };
  }
};

class GemmNtPointTest : public GemmNtTest, public ::testing::WithParamInterface<Point> {};

TEST_P(GemmNtPointTest, OddShapes) {
  const Choice choice = legal_choice(GetParam());
  SCOPED_TRACE(choice.algorithm + " {" + ocltk::format_params(choice.params) + "}");
  const GemmProblem shapes[] = {{1, 1, 1},    {1, 127, 65}, {127, 1, 33}, {65, 127, 7}, {7, 33, 127}, {33, 65, 1},
                                {127, 7, 65}, {7, 7, 7},    {1, 33, 127}, {65, 1, 127}, {33, 7, 65},  {127, 65, 33}};
  for (const GemmProblem& p : shapes) {
    GemmCase c;
    c.problem = p;
    EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, with(runtime(), choice, false)));
  }
}

TEST_P(GemmNtPointTest, AlphaAndAccumulate) {
  const Choice choice = legal_choice(GetParam());
  SCOPED_TRACE(choice.algorithm + " {" + ocltk::format_params(choice.params) + "}");
  const GemmProblem shapes[] = {{33, 65, 127}, {1, 127, 65}, {65, 7, 33}};
  for (const GemmProblem& p : shapes) {
    for (const auto& [alpha, accumulate] : {std::pair{-0.37f, false}, {1.0f, true}, {-0.37f, true}}) {
      GemmCase c;
      c.problem = p;
      c.alpha = alpha;
      c.accumulate = accumulate;
      EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, with(runtime(), choice, accumulate)));
    }
  }
}

TEST_P(GemmNtPointTest, SlicesOfLargerBuffers) {
  const Choice choice = legal_choice(GetParam());
  SCOPED_TRACE(choice.algorithm + " {" + ocltk::format_params(choice.params) + "}");
  GemmCase c;
  c.problem = {33, 65, 127};
  c.lda = 127 + 5;
  c.ldb = 127 + 17;
  c.ldc = 65 + 3;
  c.a_offset = 11;
  c.b_offset = 29;
  c.c_offset = 7;
  EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, with(runtime(), choice, false)));

  GemmCase gemv;  // one row of C inside a wider buffer, accumulating
  gemv.problem = {1, 127, 65};
  gemv.alpha = 0.5f;
  gemv.accumulate = true;
  gemv.ldb = 70;
  gemv.ldc = 200;
  gemv.a_offset = 3;
  gemv.b_offset = 1;
  gemv.c_offset = 41;
  EXPECT_TRUE(run_gemm_case(runtime(), rng(), gemv, with(runtime(), choice, true)));

  GemmCase column;  // one column of C: every row but the first starts mid-buffer
  column.problem = {65, 1, 33};
  column.lda = 40;
  column.ldc = 9;
  column.c_offset = 4;
  EXPECT_TRUE(run_gemm_case(runtime(), rng(), column, with(runtime(), choice, false)));
}

TEST_P(GemmNtPointTest, LongK) {
  const Choice choice = legal_choice(GetParam());
  SCOPED_TRACE(choice.algorithm + " {" + ocltk::format_params(choice.params) + "}");
  GemmCase c;
  c.problem = {9, 37, 4099};  // K: prime, past several KWG stages, not a multiple of any VW
  c.alpha = -0.37f;
  c.accumulate = true;
  EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, with(runtime(), choice, true)));
}

// skinny loads whole vectors where every row of both operands starts VW-aligned (pointers and
// leading dimensions), element-wise elsewhere: both orientations, each with a K tail and without.
TEST_P(GemmNtPointTest, AlignedRows) {
  const Choice choice = legal_choice(GetParam());
  if (choice.algorithm != "skinny") GTEST_SKIP() << "skinny's aligned loads";
  SCOPED_TRACE(choice.algorithm + " {" + ocltk::format_params(choice.params) + "}");
  const GemmProblem shapes[] = {{3, 200, 1032}, {200, 5, 1032}, {17, 33, 1033}, {65, 2, 1033}};
  for (const GemmProblem& p : shapes) {
    GemmCase c;
    c.problem = p;
    c.alpha = -0.37f;
    c.accumulate = p.k % 2 == 1;
    c.lda = c.ldb = 1040;  // a multiple of every VW
    c.a_offset = 16;
    c.b_offset = 8;
    c.ldc = std::size_t(p.n) + 1;
    c.c_offset = 5;
    EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, with(runtime(), choice, c.accumulate)));
  }
}

INSTANTIATE_TEST_SUITE_P(Points, GemmNtPointTest, ::testing::ValuesIn(points()),
                         [](const ::testing::TestParamInfo<Point>& info) { return info.param.name; });

// The checker itself: an unwritten C, a C one bound off, and a write outside the
// slice must each fail.
TEST_F(GemmNtTest, CheckerCatchesWrongResults) {
  GemmCase c;
  c.problem = {7, 9, 33};
  c.ldc = 11;
  const ::testing::AssertionResult unwritten =
      run_gemm_case(runtime(), rng(), c, [](const GemmNtArgs&) { return Status(); });
  EXPECT_FALSE(unwritten);
  EXPECT_NE(std::string(unwritten.message()).find("C(0, 0)"), std::string::npos) << unwritten.message();

  const GemmProblem p = c.problem;
  const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
  const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
  std::vector<float> before = ocltk_test::random_floats(rng(), p.m * p.n + 3);
  std::vector<double> exact(p.m * p.n);
  ocltk::gemm_nt_reference(p, 1.0f, false, a.data(), p.k, b.data(), p.k, nullptr, 0, exact.data(), p.n);
  std::vector<float> after = before;
  for (std::size_t i = 0; i < exact.size(); ++i) after[i] = float(exact[i]);
  EXPECT_TRUE(ocltk_test::gemm_nt_matches(p, 1.0f, false, a.data(), p.k, b.data(), p.k, before, after, 0, p.n));

  std::vector<float> off = after;
  double abs_dot = 0;
  for (std::int64_t q = 0; q < p.k; ++q) abs_dot += std::fabs(double(a[2 * p.k + q]) * double(b[3 * p.k + q]));
  off[2 * p.n + 3] = float(exact[2 * p.n + 3] + 2 * ocltk::gemm_nt_error_bound(p.k, abs_dot, 1.0, 0.0));
  const ::testing::AssertionResult wrong =
      ocltk_test::gemm_nt_matches(p, 1.0f, false, a.data(), p.k, b.data(), p.k, before, off, 0, p.n);
  EXPECT_FALSE(wrong);
  EXPECT_NE(std::string(wrong.message()).find("C(2, 3)"), std::string::npos) << wrong.message();

  std::vector<float> spilled = after;
  spilled.back() += 1.0f;
  const ::testing::AssertionResult outside =
      ocltk_test::gemm_nt_matches(p, 1.0f, false, a.data(), p.k, b.data(), p.k, before, spilled, 0, p.n);
  EXPECT_FALSE(outside);
  EXPECT_NE(std::string(outside.message()).find("outside the slice"), std::string::npos) << outside.message();
}

// Problems whose workgroup grid exceeds the per-dispatch cap in both dimensions are
// split into several dispatches; each must address its own block of every operand.
TEST_F(GemmNtTest, SplitOverSeveralDispatches) {
  const std::string cache = ocltk_test::make_temp_dir("cap_cache");
  ocltk::RuntimeOptions options = ocltk_test::test_runtime_options(cache);
  options.max_groups_per_dispatch = 3;
  ocltk::Result<ocltk::Runtime> opened = ocltk::Runtime::open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ocltk::Runtime& capped = opened.value();

  struct Case {
    const char* point;
    GemmProblem p;
  };
  const Case cases[] = {
      {"tiled_defaults", {257, 263, 33}},               // 64×64 tiles: 5×5 groups
      {"tiled_local_vw16_tall", {400, 50, 17}},         // 128×4 tiles: 4×13 groups
      {"tiled_global_vw4_wide", {30, 130, 21}},         // 8×32 tiles: 4×5 groups
      {"xgemm_kwg8_vwn2", {130, 270, 19}},              // 32×64 tiles: 5×5 groups
      {"xgemm_prefetch2_kwg8_acc128", {530, 270, 19}},  // 128×64 tiles: 5×5 groups
      {"reduce_defaults", {11, 70, 300}},               // 1×8 tiles: 11×9 groups
      {"reduce_local_tr8_kwg128", {50, 30, 200}},       // 8×4 tiles: 7×8 groups
      {"skinny_rw4_br8_sr2", {9, 1600, 40}},            // A small: 512×2 tiles: 4×5 groups
      {"skinny_rw4_br8_sr2", {1600, 9, 40}},            // B small: 2×512 tiles: 5×4 groups
  };
  for (const Case& k : cases) {
    const Choice choice = legal_choice(point_named(k.point));
    SCOPED_TRACE(std::string(k.point) + " {" + ocltk::format_params(choice.params) + "}");
    const ocltk::LaunchGeometry g = ocltk::gemm_nt_geometry(choice.algorithm, choice.params, k.p);
    ASSERT_GT(g.global[0] / g.local[0], 3u);
    ASSERT_GT(g.global[1] / g.local[1], 3u);

    GemmCase packed;
    packed.problem = k.p;
    EXPECT_TRUE(run_gemm_case(capped, rng(), packed, with(capped, choice, false)));

    GemmCase slice;
    slice.problem = k.p;
    slice.alpha = -0.37f;
    slice.accumulate = true;
    slice.lda = std::size_t(k.p.k) + 3;
    slice.ldb = std::size_t(k.p.k) + 1;
    slice.ldc = std::size_t(k.p.n) + 6;
    slice.a_offset = 5;
    slice.b_offset = 2;
    slice.c_offset = 13;
    EXPECT_TRUE(run_gemm_case(capped, rng(), slice, with(capped, choice, true)));
  }

  // The event handed back is the last dispatch's, and waiting on it is enough.
  const Choice choice = legal_choice(point_named("reduce_defaults"));
  GemmCase c;
  c.problem = {11, 70, 300};
  EXPECT_TRUE(run_gemm_case(capped, rng(), c, [&](const GemmNtArgs& args) {
    cl_event event = nullptr;
    ocltk::Launch launch;
    launch.event = &event;
    Status s = capped.gemm_nt_with(choice, false, args, launch);
    if (s.ok()) {
      EXPECT_NE(event, nullptr);
      if (event != nullptr) {
        EXPECT_EQ(clWaitForEvents(1, &event), CL_SUCCESS);
        clReleaseEvent(event);
      }
    }
    return s;
  }));

  // An out-of-order queue put in place through queue(): the runtime asks its mode again (it
  // used to keep the mode of the queue it opened with) and chains the dispatches by events.
  EXPECT_FALSE(capped.queue_out_of_order());
  cl_int err = CL_SUCCESS;
  cl_command_queue ooo = clCreateCommandQueue(capped.context().get(), capped.device().handle.id(),
                                              CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
  if (err == CL_SUCCESS) {
    capped.queue() = boost::compute::command_queue(ooo, false);
    EXPECT_TRUE(capped.queue_out_of_order());
    for (const char* point : {"tiled_defaults", "reduce_defaults"}) {
      const Choice ooo_choice = legal_choice(point_named(point));
      GemmCase split;
      split.problem = {257, 263, 33};
      EXPECT_TRUE(run_gemm_case(capped, rng(), split, with(capped, ooo_choice, false))) << point;
    }
  } else {
    std::printf("note: the device refuses out-of-order queues (%d); that part is not run\n", err);
  }
  std::error_code ec;
  ocltk_test::fs::remove_all(cache, ec);
}

// The default path: choice by shape class (built-in defaults here, use_profiles=false).
TEST_F(GemmNtTest, ProfileDrivenPathPerShapeClass) {
  const GemmProblem problems[] = {
      {1, 100, 300},  {1, 7, 65},     // gemv
      {40, 16, 300},  {100, 64, 70},  // lora_shrink
      {70, 65, 16},   {33, 200, 64},  // lora_expand
      {16, 100, 130}, {5, 65, 65},    // small_batch
      {65, 65, 65},   {100, 90, 80},  // large
  };
  const ocltk::KernelFamily& family = ocltk::gemm_nt_family();
  for (const GemmProblem& p : problems) {
    const std::string cls = ocltk::gemm_nt_shape_class(p);
    const ocltk::BuiltinChoice builtin = family.builtin_for(cls);
    const Params builtin_params = family.find_algorithm(builtin.algorithm)->complete(builtin.params);
    for (bool accumulate : {false, true}) {
      GemmCase c;
      c.problem = p;
      c.alpha = accumulate ? -0.37f : 1.0f;
      c.accumulate = accumulate;
      EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, [&](const GemmNtArgs& args) {
        return accumulate ? runtime().gemm_nt_accum(args) : runtime().gemm_nt(args);
      }));
      const Choice& used = runtime().last_choice();
      EXPECT_EQ(used.kernel, "gemm_nt");
      EXPECT_EQ(used.shape_class, cls) << c.describe();
      EXPECT_EQ(used.algorithm, builtin.algorithm) << c.describe();
      EXPECT_EQ(used.params, builtin_params) << c.describe();
      EXPECT_EQ(used.source, "built-in");
    }
  }
}

// gemm_nt and gemm_nt_accum keep a launch plan per problem (Runtime::find_plan): a problem met
// again gets its own choice back, not the latest launch's, with fresh operands and offsets
// each time; past Runtime::kMaxPlans problems the plans are forgotten and made again.
TEST_F(GemmNtTest, ALaunchPlanServesItsProblemAgainAndNoOther) {
  // Neighbours one key field apart, each in another class: M (gemv, large), N (lora_shrink,
  // large), K (large, lora_expand).
  const GemmProblem gemv{1, 100, 300}, large{40, 100, 300}, shrink{40, 16, 300}, expand{40, 100, 16};
  const GemmProblem order[] = {gemv, large, gemv, shrink, large, expand, shrink, large, gemv, expand};
  const ocltk::KernelFamily& family = ocltk::gemm_nt_family();
  auto expect_served = [&](const GemmProblem& p, bool accumulate, std::size_t a_offset) {
    const std::string cls = ocltk::gemm_nt_shape_class(p);
    const ocltk::BuiltinChoice builtin = family.builtin_for(cls);
    GemmCase c;
    c.problem = p;
    c.accumulate = accumulate;
    c.alpha = accumulate ? 0.5f : 1.0f;
    c.a_offset = a_offset;
    EXPECT_TRUE(run_gemm_case(runtime(), rng(), c, [&](const GemmNtArgs& args) {
      return accumulate ? runtime().gemm_nt_accum(args) : runtime().gemm_nt(args);
    }));
    const Choice used = runtime().last_choice();
    EXPECT_EQ(used.shape_class, cls) << c.describe();
    EXPECT_EQ(used.algorithm, builtin.algorithm) << c.describe();
    EXPECT_EQ(used.params, family.find_algorithm(builtin.algorithm)->complete(builtin.params)) << c.describe();
  };
  std::size_t offset = 0;
  for (const GemmProblem& p : order)
    for (bool accumulate : {false, true}) expect_served(p, accumulate, offset++ % 3);
  // More problems than plans are kept: gemv launches of every N up to past the limit (tiny
  // kernels), then the first problems again.
  std::vector<float> a(8, 1.0f), b((ocltk::Runtime::kMaxPlans + 8) * 8, 1.0f), c(ocltk::Runtime::kMaxPlans + 8);
  boost::compute::buffer a_buf = ocltk_test::upload(runtime(), a), b_buf = ocltk_test::upload(runtime(), b),
                         c_buf = ocltk_test::upload(runtime(), c);
  for (std::int64_t n = 1; n <= std::int64_t(ocltk::Runtime::kMaxPlans) + 8; ++n) {
    GemmNtArgs args;
    args.problem = {1, n, 8};
    args.a = {a_buf.get()};
    args.b = {b_buf.get()};
    args.c = {c_buf.get()};
    const ocltk::Status s = runtime().gemm_nt(args);
    ASSERT_TRUE(s.ok()) << "N = " << n << ": " << s.message();
  }
  runtime().queue().finish();
  const std::vector<float> out = ocltk_test::download(runtime(), c_buf, c.size());
  for (std::size_t j = 0; j < out.size(); ++j) ASSERT_EQ(out[j], 8.0f) << "C[" << j << "]";
  for (const GemmProblem& p : order) expect_served(p, false, 1);
}

TEST_F(GemmNtTest, HalfTypes) {
  using ocltk::ElementType;
  struct TypedPoint {
    const char* point;
    ElementType in, out;
  };
  // Every algorithm's global loads (tiled without local memory and xgemm's prefetch included)
  // and both of xgemm's store paths, f16 and bf16, and a 16-bit A and B into an f32 C.
  const TypedPoint typed[] = {
      {"reduce_defaults", ElementType::f16, ElementType::f16},
      {"reduce_defaults", ElementType::bf16, ElementType::f32},
      {"reduce_local_tr8_kwg128", ElementType::bf16, ElementType::bf16},
      {"tiled_defaults", ElementType::bf16, ElementType::bf16},
      {"tiled_global_vw16", ElementType::f16, ElementType::f16},
      {"xgemm_defaults", ElementType::f16, ElementType::f32},
      {"xgemm_prefetch1_kwg32", ElementType::bf16, ElementType::bf16},
      {"skinny_defaults", ElementType::bf16, ElementType::bf16},
      {"skinny_defaults", ElementType::f16, ElementType::f32},
      {"skinny_rw8_sr64_vw2", ElementType::f16, ElementType::f16},
  };
  const GemmProblem shapes[] = {{1, 127, 65}, {65, 33, 127}, {7, 7, 7}, {9, 37, 1031}, {40, 3, 1032}};
  for (const TypedPoint& t : typed) {
    const Choice choice = legal_choice(point_named(t.point));
    SCOPED_TRACE(std::string(t.point) + " " + ocltk::to_string(t.in) + " -> " + ocltk::to_string(t.out));
    for (const GemmProblem& p : shapes) {
      GemmCase c;
      c.problem = p;
      c.alpha = -0.37f;
      EXPECT_TRUE(run_typed_case(runtime(), rng(), c, t.in, t.out, choice));
      c.accumulate = true;
      c.lda = std::size_t(p.k) + 3;
      c.ldc = std::size_t(p.n) + 5;
      c.a_offset = 1;
      c.b_offset = 4;
      c.c_offset = 3;
      EXPECT_TRUE(run_typed_case(runtime(), rng(), c, t.in, t.out, choice));
    }
  }
  // The profile path: 16-bit launches are filed under the *_half classes.
  EXPECT_EQ(ocltk::gemm_nt_shape_class({1, 10, 10}, ElementType::bf16), "gemv_half");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 100, 100}, ElementType::f16), "large_half");
  EXPECT_EQ(ocltk::gemm_nt_shape_class({100, 100, 100}), "large");
  EXPECT_EQ(ocltk::gemm_nt_class_input("lora_expand_half"), ElementType::bf16);
  EXPECT_EQ(ocltk::gemm_nt_problem_of({3, 4, 5}, ElementType::f16).at("input_bits"), 16);
  EXPECT_EQ(ocltk::gemm_nt_problem_of({3, 4, 5}).count("input_bits"), 0u);
  GemmCase c;
  c.problem = {5, 70, 90};
  c.accumulate = true;
  const Choice half_small_batch = runtime().choose_gemm_nt(c.problem, ElementType::bf16);
  EXPECT_EQ(half_small_batch.shape_class, "small_batch_half");
  EXPECT_TRUE(run_typed_case(runtime(), rng(), c, ElementType::bf16, ElementType::bf16, half_small_batch));
}

#ifdef OCLTK_TEST_HAVE_CLBLAST
// A second, independent reference: CLBlast's SGEMM, row-major, B transposed.
TEST_F(GemmNtTest, AgreesWithCLBlast) {
  const GemmProblem p{70, 90, 130};
  const float alpha = -0.37f;
  const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
  const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
  std::vector<float> c0(p.m * p.n);
  ocltk_test::poison(c0, 0, p.m, p.n, p.n);
  boost::compute::buffer a_buf = ocltk_test::upload(runtime(), a), b_buf = ocltk_test::upload(runtime(), b);
  boost::compute::buffer ours = ocltk_test::upload(runtime(), c0);
  const std::vector<float> zeros(p.m * p.n, 0.0f);  // beta = 0 still reads C in some CLBlast kernels
  boost::compute::buffer theirs = ocltk_test::upload(runtime(), zeros);

  GemmNtArgs args;
  args.problem = p;
  args.alpha = alpha;
  args.a = {a_buf.get(), 0, 0};
  args.b = {b_buf.get(), 0, 0};
  args.c = {ours.get(), 0, 0};
  const Status s = runtime().gemm_nt(args);
  ASSERT_TRUE(s.ok()) << s.message();
  cl_command_queue queue = runtime().queue().get();
  const clblast::StatusCode code = clblast::Gemm<float>(
      clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, p.m, p.n, p.k, alpha, a_buf.get(),
      0, p.k, b_buf.get(), 0, p.k, 0.0f, theirs.get(), 0, p.n, &queue, nullptr);
  ASSERT_EQ(code, clblast::StatusCode::kSuccess) << "CLBlast status " << int(code);
  runtime().queue().finish();
  const std::vector<float> got = ocltk_test::download(runtime(), ours, c0.size());
  const std::vector<float> want = ocltk_test::download(runtime(), theirs, c0.size());
  EXPECT_TRUE(ocltk_test::gemm_nt_matches(p, alpha, false, a.data(), p.k, b.data(), p.k, c0, want, 0, p.n))
      << "CLBlast itself disagrees with the reference";
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double abs_dot = 0;
      for (std::int64_t q = 0; q < p.k; ++q) abs_dot += std::fabs(double(a[i * p.k + q]) * double(b[j * p.k + q]));
      // Both are within one bound of the exact result, so within two of each other.
      const double bound = 2 * ocltk::gemm_nt_error_bound(p.k, abs_dot, alpha, 0.0);
      ASSERT_LE(std::fabs(double(got[i * p.n + j]) - double(want[i * p.n + j])), bound)
          << "C(" << i << ", " << j << ") ocltk " << got[i * p.n + j] << " vs CLBlast " << want[i * p.n + j];
    }
  }
}
#endif

// check(...) runs before any enqueue: every bad argument is named and C stays as it was.
TEST_F(GemmNtTest, ArgumentCheckingNamesTheArgumentAndWritesNothing) {
  const GemmProblem p{5, 6, 7};
  ocltk::Runtime& rt = runtime();
  const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
  const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
  const std::vector<float> c = ocltk_test::random_floats(rng(), p.m * p.n);
  boost::compute::buffer a_buf = ocltk_test::upload(rt, a), b_buf = ocltk_test::upload(rt, b),
                         c_buf = ocltk_test::upload(rt, c);
  boost::compute::buffer small = rt.allocate(4 * 20).value();  // 20 floats: too small for any operand

  boost::compute::context other_context(rt.device().handle);
  boost::compute::buffer foreign(other_context, 4 * 64);

  GemmNtArgs good;
  good.problem = p;
  good.a = {a_buf.get(), 0, 0};
  good.b = {b_buf.get(), 0, 0};
  good.c = {c_buf.get(), 0, 0};
  ASSERT_TRUE(rt.check_gemm_nt(good).ok()) << rt.check_gemm_nt(good).message();

  struct Case {
    std::string what;
    std::function<void(GemmNtArgs&)> spoil;
    std::vector<std::string> named;  // each must appear in the message
  };
  const std::vector<Case> cases = {
      {"M = 0", [](GemmNtArgs& x) { x.problem.m = 0; }, {"M = 0"}},
      {"N < 0", [](GemmNtArgs& x) { x.problem.n = -3; }, {"N = -3"}},
      {"K = 0", [](GemmNtArgs& x) { x.problem.k = 0; }, {"K = 0"}},
      {"K < 0", [](GemmNtArgs& x) { x.problem.k = -1; }, {"K = -1"}},
      {"null A", [](GemmNtArgs& x) { x.a.buffer = nullptr; }, {"A", "null"}},
      {"null B", [](GemmNtArgs& x) { x.b.buffer = nullptr; }, {"B", "null"}},
      {"null C", [](GemmNtArgs& x) { x.c.buffer = nullptr; }, {"C", "null"}},
      {"A too small", [&](GemmNtArgs& x) { x.a.buffer = small.get(); }, {"buffer A"}},
      {"B too small", [&](GemmNtArgs& x) { x.b.buffer = small.get(); }, {"buffer B"}},
      {"C too small", [&](GemmNtArgs& x) { x.c.buffer = small.get(); }, {"buffer C"}},
      {"A offset past the end", [](GemmNtArgs& x) { x.a.offset = 1; }, {"buffer A", "offset"}},
      {"C offset past the end", [](GemmNtArgs& x) { x.c.offset = 100; }, {"buffer C", "offset"}},
      {"lda < K", [](GemmNtArgs& x) { x.a.ld = 6; }, {"lda"}},
      {"ldb < K", [](GemmNtArgs& x) { x.b.ld = 3; }, {"ldb"}},
      {"ldc < N", [](GemmNtArgs& x) { x.c.ld = 5; }, {"ldc"}},
      {"lda > K overruns A", [](GemmNtArgs& x) { x.a.ld = 8; }, {"buffer A"}},
      {"A from another context", [&](GemmNtArgs& x) { x.a.buffer = foreign.get(); }, {"A", "another"}},
      {"C from another context", [&](GemmNtArgs& x) { x.c.buffer = foreign.get(); }, {"C", "another"}},
      {"B of another type than A",
       [](GemmNtArgs& x) { x.b.type = ocltk::ElementType::bf16; },
       {"B is bf16", "A is f32"}},
      {"C half with f32 A and B", [](GemmNtArgs& x) { x.c.type = ocltk::ElementType::f16; }, {"C is f16"}},
      {"C of the other half type",
       [](GemmNtArgs& x) {
         x.a.type = x.b.type = ocltk::ElementType::bf16;
         x.c.type = ocltk::ElementType::f16;
       },
       {"C is f16", "bf16"}},
  };
  Choice explicit_choice;
  explicit_choice.kernel = "gemm_nt";
  explicit_choice.algorithm = "reduce";
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    GemmNtArgs args = good;
    k.spoil(args);
    const Status statuses[] = {rt.check_gemm_nt(args), rt.gemm_nt(args), rt.gemm_nt_accum(args),
                               rt.gemm_nt_with(explicit_choice, false, args)};
    for (const Status& s : statuses) {
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
      for (const std::string& word : k.named) EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
    }
  }
  rt.queue().finish();
  EXPECT_EQ(ocltk_test::download(rt, c_buf, c.size()), c) << "a refused launch wrote C";
}

TEST_F(GemmNtTest, IllegalExplicitChoiceIsRefused) {
  const GemmProblem p{9, 10, 11};
  ocltk::Runtime& rt = runtime();
  const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
  const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
  const std::vector<float> c = ocltk_test::random_floats(rng(), p.m * p.n);
  boost::compute::buffer a_buf = ocltk_test::upload(rt, a), b_buf = ocltk_test::upload(rt, b),
                         c_buf = ocltk_test::upload(rt, c);
  GemmNtArgs args;
  args.problem = p;
  args.a = {a_buf.get(), 0, 0};
  args.b = {b_buf.get(), 0, 0};
  args.c = {c_buf.get(), 0, 0};

  Choice too_many_columns;  // NWG / NDIMC = 16 outputs per work-item along N
  too_many_columns.kernel = "gemm_nt";
  too_many_columns.algorithm = "tiled";
  too_many_columns.params = {{"MWG", 64}, {"MDIMC", 16}, {"NWG", 128}, {"NDIMC", 8}};
  Status s = rt.gemm_nt_with(too_many_columns, false, args);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("NWG / NDIMC <= 8"), std::string::npos) << s.message();

  Choice unknown = too_many_columns;
  unknown.algorithm = "strassen";
  s = rt.gemm_nt_with(unknown, true, args);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("strassen"), std::string::npos) << s.message();

  rt.queue().finish();
  EXPECT_EQ(ocltk_test::download(rt, c_buf, c.size()), c) << "a refused launch wrote C";
}

// A caller's explicit choice naming an unknown parameter or a value outside the table
// is an invalid argument of gemm_nt_with, like an illegal combination: no profile is
// involved, so kProfile would send the reader to the wrong place.
TEST_F(GemmNtTest, ExplicitChoiceWithBadParameterIsInvalidArgument) {
  const GemmProblem p{3, 4, 5};
  ocltk::Runtime& rt = runtime();
  const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
  const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
  const std::vector<float> c = ocltk_test::random_floats(rng(), p.m * p.n);
  boost::compute::buffer a_buf = ocltk_test::upload(rt, a), b_buf = ocltk_test::upload(rt, b),
                         c_buf = ocltk_test::upload(rt, c);
  GemmNtArgs args;
  args.problem = p;
  args.a = {a_buf.get(), 0, 0};
  args.b = {b_buf.get(), 0, 0};
  args.c = {c_buf.get(), 0, 0};

  Choice bad;
  bad.kernel = "gemm_nt";
  bad.algorithm = "tiled";
  bad.params = {{"MWG", 48}};
  Status s = rt.gemm_nt_with(bad, false, args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("MWG"), std::string::npos) << s.message();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << ocltk::to_string(s.code()) << ": " << s.message();

  bad.params = {{"WARP", 32}};
  s = rt.gemm_nt_with(bad, false, args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("WARP"), std::string::npos) << s.message();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << ocltk::to_string(s.code()) << ": " << s.message();

  rt.queue().finish();
  EXPECT_EQ(ocltk_test::download(rt, c_buf, c.size()), c) << "a refused launch wrote C";
}

}  // namespace

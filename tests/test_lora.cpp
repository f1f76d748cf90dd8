// LoRA on the default device against the double reference: lora_shrink, lora_expand and
// lora_apply (fused and split) at several legal points of each, in f32, f16 and bf16, with
// odd sizes and ranks, many segments (empty ones, -1 ones, an adapter on several, ranks below
// R, per-adapter scales), accumulate and overwrite, slices of larger buffers and dispatch
// splits; the segments built on the device from unsorted rows; every bad input refused
// before anything is written.
//
// PoCL compiles each (point, type) in about a second: the points below are few, and the
// half types run at one point per algorithm.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "fixture.hpp"
#include "ocltk/lora.hpp"

namespace {

using ocltk::Choice;
using ocltk::ElementType;
using ocltk::ErrorCode;
using ocltk::LoraArgs;
using ocltk::LoraProblem;
using ocltk::Params;
using ocltk::Status;

enum class Op { kShrink, kExpand, kApply };

const char* kernel_of(Op op) {
  return op == Op::kShrink ? "lora_shrink" : op == Op::kExpand ? "lora_expand" : "lora_apply";
}

// Values of `type` in a buffer's bytes, and the f32 values they hold.
struct Typed {
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;
};

Typed encode(ElementType type, const std::vector<float>& v) {
  Typed t;
  const std::size_t es = ocltk::element_size(type);
  t.bytes.resize(v.size() * es);
  t.values.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint32_t bits = ocltk::float_to_element(type, v[i]);
    std::memcpy(t.bytes.data() + i * es, &bits, es);  // little-endian: the low bytes
    t.values[i] = ocltk::element_to_float(type, bits);
  }
  return t;
}

std::vector<float> decode(ElementType type, const std::vector<std::uint8_t>& bytes) {
  const std::size_t es = ocltk::element_size(type);
  std::vector<float> v(bytes.size() / es);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, bytes.data() + i * es, es);
    v[i] = ocltk::element_to_float(type, bits);
  }
  return v;
}

boost::compute::buffer upload_bytes(ocltk::Runtime& rt, const void* data, std::size_t bytes) {
  boost::compute::buffer b = rt.allocate(std::max<std::size_t>(bytes, 4)).value();
  if (bytes) rt.queue().enqueue_write_buffer(b, 0, bytes, data);
  return b;
}

template <class T>
boost::compute::buffer upload_vector(ocltk::Runtime& rt, const std::vector<T>& v) {
  return upload_bytes(rt, v.data(), v.size() * sizeof(T));
}

std::vector<std::uint8_t> download_bytes(ocltk::Runtime& rt, const boost::compute::buffer& b, std::size_t bytes) {
  std::vector<std::uint8_t> host(bytes);
  if (bytes) rt.queue().enqueue_read_buffer(b, 0, bytes, host.data());
  return host;
}

// One launch to check. Segments empty: the launch without segment buffers (all rows on
// adapter 0). Padding: extra elements per row (ld) and before the first (offset) of X and Y,
// and between adapters of A and B (stride).
struct LoraCase {
  LoraProblem problem;
  std::vector<std::uint32_t> offsets;
  std::vector<std::int32_t> adapters;
  std::vector<std::int32_t> ranks;  // empty: none given (all R)
  bool per_adapter_scales = false;
  float scale = -0.37f;
  bool accumulate = false;
  ElementType type = ElementType::f32;
  std::size_t pad = 0;

  std::string describe() const {
    std::ostringstream out;
    out << "M=" << problem.m << " N=" << problem.n << " K=" << problem.k << " L=" << problem.adapters
        << " R=" << problem.max_rank << " S=" << adapters.size() << " " << ocltk::to_string(type)
        << (accumulate ? " accumulate" : "") << (per_adapter_scales ? " scales" : "") << " pad=" << pad;
    return out.str();
  }
};

using LoraLauncher = std::function<Status(const LoraArgs&)>;

// The NaN of a type, as bits.
std::uint32_t nan_bits(ElementType type) {
  return type == ElementType::f32 ? 0x7FC00000u : type == ElementType::f16 ? 0x7E00u : 0x7FC0u;
}

// Draws fresh operands in the case's type, poisons what the operation writes (unless it
// accumulates), launches, waits and checks every element of the output buffer: inside the
// output against the reference within lora_error_bound, outside it (and, for shrink, the rows
// without adapter and the columns past the rank) unchanged.
::testing::AssertionResult run_lora_case(ocltk::Runtime& rt, std::mt19937& rng, Op op, const LoraCase& c,
                                         const LoraLauncher& launch) {
  const LoraProblem& p = c.problem;
  const ElementType type = c.type;
  const std::size_t es = ocltk::element_size(type), pad = c.pad;
  const std::size_t M = std::size_t(p.m), N = std::size_t(p.n), K = std::size_t(p.k), L = std::size_t(p.adapters),
                    R = std::size_t(p.max_rank);
  const std::size_t ldx = K + pad, ldy = N + pad, ldt = R + pad, a_stride = R * K + pad, b_stride = N * R + pad;
  // Host copies, packed, of what the buffers hold (the values rounded to the type).
  const Typed x = encode(type, ocltk_test::random_floats(rng, M * K));
  const Typed a = encode(type, ocltk_test::random_floats(rng, L * R * K));
  const Typed b = encode(type, ocltk_test::random_floats(rng, L * N * R));
  const std::vector<float> t_in = ocltk_test::random_floats(rng, M * R);
  // Buffers laid out with the padding, which holds random values that must survive.
  auto layout = [&](const Typed& packed, std::size_t rows, std::size_t cols, std::size_t ld, std::size_t off) {
    Typed full = encode(type, ocltk_test::random_floats(rng, off + (rows - 1) * ld + cols + pad));
    for (std::size_t r = 0; r < rows; ++r)
      std::memcpy(full.bytes.data() + (off + r * ld) * es, packed.bytes.data() + r * cols * es, cols * es);
    return full;
  };
  const Typed x_buf = layout(x, M, K, ldx, pad);
  // A and B: adapter l's rows at l·stride.
  Typed a_buf = encode(type, ocltk_test::random_floats(rng, pad + (L - 1) * a_stride + R * K + pad));
  for (std::size_t l = 0; l < L; ++l)
    std::memcpy(a_buf.bytes.data() + (pad + l * a_stride) * es, a.bytes.data() + l * R * K * es, R * K * es);
  Typed b_buf = encode(type, ocltk_test::random_floats(rng, pad + (L - 1) * b_stride + N * R + pad));
  for (std::size_t l = 0; l < L; ++l)
    std::memcpy(b_buf.bytes.data() + (pad + l * b_stride) * es, b.bytes.data() + l * N * R * es, N * R * es);
  // Y (in the type) and T (f32): random everywhere, the written part poisoned unless
  // accumulating (shrink never accumulates into T).
  Typed y_before = encode(type, ocltk_test::random_floats(rng, pad + (M - 1) * ldy + N + pad));
  std::vector<float> t_before = ocltk_test::random_floats(rng, pad + (M - 1) * ldt + R + pad);
  if (op == Op::kExpand)
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t j = 0; j < R; ++j) t_before[pad + m * ldt + j] = t_in[m * R + j];
  if (op != Op::kShrink && !c.accumulate) {
    const std::uint32_t nan = nan_bits(type);
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n) std::memcpy(y_before.bytes.data() + (pad + m * ldy + n) * es, &nan, es);
  }
  if (op == Op::kShrink) {
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t j = 0; j < R; ++j) t_before[pad + m * ldt + j] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<float> scales(L);
  for (float& s : scales) s = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);

  boost::compute::buffer dx = upload_vector(rt, x_buf.bytes), da = upload_vector(rt, a_buf.bytes),
                         db = upload_vector(rt, b_buf.bytes), dy = upload_vector(rt, y_before.bytes),
                         dt = upload_vector(rt, t_before);
  boost::compute::buffer doff, dseg, dranks, dscales;
  LoraArgs args;
  args.problem = p;
  args.x = {dx.get(), pad, ldx, type};
  args.a = {da.get(), pad, K, a_stride, type};
  args.b = {db.get(), pad, R, b_stride, type};
  args.y = {dy.get(), pad, ldy, type};
  args.intermediate = {dt.get(), pad, ldt, ElementType::f32};
  args.scale = c.scale;
  args.accumulate = c.accumulate;
  if (!c.adapters.empty()) {
    doff = upload_vector(rt, c.offsets);
    dseg = upload_vector(rt, c.adapters);
    args.segments = std::int64_t(c.adapters.size());
    args.offsets = doff.get();
    args.segment_adapters = dseg.get();
  }
  if (!c.ranks.empty()) {
    dranks = upload_vector(rt, c.ranks);
    args.ranks = dranks.get();
  }
  if (c.per_adapter_scales) {
    dscales = upload_vector(rt, scales);
    args.scales = dscales.get();
  }
  const Status status = launch(args);
  if (!status.ok())
    return ::testing::AssertionFailure() << c.describe() << ": launch failed: " << ocltk::to_string(status.code())
                                         << ": " << status.message();
  rt.queue().finish();

  ocltk::LoraHostSegments host;
  host.offsets = c.offsets;
  host.adapters = c.adapters;
  host.ranks = c.ranks;
  if (c.per_adapter_scales) host.scales = scales;
  const std::vector<std::int32_t> row_adapter = host.row_adapters(p.m);
  std::size_t bad = 0, touched = 0;
  std::ostringstream first;
  auto fail = [&](std::size_t* count, const std::string& what) {
    if ((*count)++ == 0 && bad + touched == 1) first << what;
  };

  if (op == Op::kShrink) {
    std::vector<double> t, t_abs;
    ocltk::lora_shrink_reference(p, host, x.values.data(), a.values.data(), t, t_abs);
    const std::vector<float> t_after = ocltk_test::download(rt, dt, t_before.size());
    for (std::size_t idx = 0; idx < t_after.size(); ++idx) {
      const bool inside = idx >= pad && (idx - pad) / ldt < M && (idx - pad) % ldt < R;
      const std::size_t m = inside ? (idx - pad) / ldt : 0, j = inside ? (idx - pad) % ldt : 0;
      const std::int32_t ad = inside ? row_adapter[m] : -1;
      const bool written = inside && ad >= 0 && std::int64_t(j) < (c.ranks.empty() ? p.max_rank : c.ranks[ad]);
      if (written) {
        const double want = t[m * R + j];
        const double bound = ocltk::gemm_nt_error_bound(p.k, t_abs[m * R + j], 1.0, 0.0);
        if (!(std::fabs(double(t_after[idx]) - want) <= bound)) {
          std::ostringstream w;
          w << "T(" << m << ", " << j << ") = " << t_after[idx] << ", want " << want << " (bound " << bound << ")";
          fail(&bad, w.str());
        }
      } else if (!(std::memcmp(&t_after[idx], &t_before[idx], 4) == 0)) {
        std::ostringstream w;
        w << "T buffer element " << idx << " (not to be written) changed from " << t_before[idx] << " to "
          << t_after[idx];
        fail(&touched, w.str());
      }
    }
  } else {
    std::vector<double> t, t_abs, y_old(M * N), y, y_abs;
    const std::vector<float> before = decode(type, y_before.bytes);
    for (std::size_t m = 0; m < M; ++m)
      for (std::size_t n = 0; n < N; ++n) y_old[m * N + n] = before[pad + m * ldy + n];
    if (op == Op::kApply) {
      ocltk::lora_reference(p, host, c.scale, x.values.data(), a.values.data(), b.values.data(),
                            c.accumulate ? y_old.data() : nullptr, t, t_abs, y, y_abs);
    } else {
      t.resize(M * R);
      t_abs.resize(M * R);
      for (std::size_t i = 0; i < M * R; ++i) {
        t[i] = t_in[i];
        t_abs[i] = std::fabs(double(t_in[i]));
      }
      ocltk::lora_expand_reference(p, host, c.scale, t.data(), t_abs.data(), b.values.data(),
                                   c.accumulate ? y_old.data() : nullptr, y, y_abs);
    }
    const std::vector<std::uint8_t> after_bytes = download_bytes(rt, dy, y_before.bytes.size());
    const std::vector<float> after = decode(type, after_bytes);
    for (std::size_t idx = 0; idx < after.size(); ++idx) {
      const bool inside = idx >= pad && (idx - pad) / ldy < M && (idx - pad) % ldy < N;
      if (inside) {
        const std::size_t m = (idx - pad) / ldy, n = (idx - pad) % ldy;
        const std::int32_t ad = row_adapter[m];
        const std::int64_t rank = ad < 0 ? 0 : c.ranks.empty() ? p.max_rank : c.ranks[ad];
        const double want = y[m * N + n];
        const double bound = ocltk::lora_error_bound(op == Op::kApply ? p.k : 0, rank, y_abs[m * N + n],
                                                     c.accumulate ? y_old[m * N + n] : 0.0, want, type);
        if (!(std::fabs(double(after[idx]) - want) <= bound)) {
          std::ostringstream w;
          w << "Y(" << m << ", " << n << ") = " << after[idx] << ", want " << want << " (adapter " << ad << ", bound "
            << bound << ")";
          fail(&bad, w.str());
        }
      } else if (std::memcmp(after_bytes.data() + idx * es, y_before.bytes.data() + idx * es, es) != 0) {
        std::ostringstream w;
        w << "Y buffer element " << idx << " outside the output changed from " << before[idx] << " to " << after[idx];
        fail(&touched, w.str());
      }
    }
  }
  if (bad == 0 && touched == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.describe() << ": " << bad << " wrong, " << touched
                                       << " written outside; first: " << first.str();
}

struct Point {
  std::string name;
  Op op;
  std::string algorithm;
  Params params;  // over the defaults
  std::vector<ElementType> types;
};

// Chosen to cover WGS 1..256 (one work-item: no reduction; 4: a short tree), TR 1..16, RC
// 4..32, VW 1..16, VA 0/1, CB 32..4096, CN 1..8 and CW 1/4 (runs of 4 columns: its 4-wide
// stores, the tail run crossing N, the rank's last 1 to 3, WGS 1 and 4), each algorithm at its
// defaults in all three types and elsewhere in one type each, CW 4 in each type over its
// points (one PoCL build per point and type).
const std::vector<Point>& points() {
  using T = ElementType;
  static const std::vector<Point> all = {
      {"shrink_defaults", Op::kShrink, "tiled", {}, {T::f32, T::f16, T::bf16}},
      {"shrink_wgs1_tr4_rc4_vw16_va1",
       Op::kShrink,
       "tiled",
       {{"WGS", 1}, {"TR", 4}, {"RC", 4}, {"VW", 16}, {"VA", 1}},
       {T::f32}},
      {"shrink_wgs32_tr2_rc32_vw8", Op::kShrink, "tiled", {{"WGS", 32}, {"TR", 2}, {"RC", 32}, {"VW", 8}}, {T::bf16}},
      {"expand_defaults", Op::kExpand, "tiled", {}, {T::f32, T::f16, T::bf16}},
      {"expand_wgs1_tr1_cb64_cn8_va1",
       Op::kExpand,
       "tiled",
       {{"WGS", 1}, {"TR", 1}, {"CB", 64}, {"CN", 8}, {"VA", 1}},
       {T::f32}},
      {"expand_wgs256_tr16_cb512_cn2",
       Op::kExpand,
       "tiled",
       {{"WGS", 256}, {"TR", 16}, {"CB", 512}, {"CN", 2}},
       {T::f16}},
      {"expand_wgs1_tr4_cb64_cn2_cw4_va1",
       Op::kExpand,
       "tiled",
       {{"WGS", 1}, {"TR", 4}, {"CB", 64}, {"CN", 2}, {"CW", 4}, {"VA", 1}},
       {T::f32, T::bf16}},
      {"fused_defaults", Op::kApply, "fused", {}, {T::f32, T::f16, T::bf16}},
      {"fused_wgs64_tr2_rc16_vw8_cb64",
       Op::kApply,
       "fused",
       {{"WGS", 64}, {"TR", 2}, {"RC", 16}, {"VW", 8}, {"CB", 64}},
       {T::f32}},
      {"fused_wgs1_tr2_rc8_vw16_va1_cb4096_cn8",
       Op::kApply,
       "fused",
       {{"WGS", 1}, {"TR", 2}, {"RC", 8}, {"VW", 16}, {"VA", 1}, {"CB", 4096}, {"CN", 8}},
       {T::bf16}},
      {"fused_wgs4_tr16_rc4_vw1_cb32",
       Op::kApply,
       "fused",
       {{"WGS", 4}, {"TR", 16}, {"RC", 4}, {"VW", 1}, {"CB", 32}},
       {T::f32}},
      {"fused_wgs1_tr4_rc4_vw16_va1_cb4096_cw4",
       Op::kApply,
       "fused",
       {{"WGS", 1}, {"TR", 4}, {"RC", 4}, {"VW", 16}, {"VA", 1}, {"CB", 4096}, {"CW", 4}},
       {T::f16}},
      {"split_defaults", Op::kApply, "split", {}, {T::f32, T::bf16}},
      {"split_wgs256_tr8_rc8_vw2_cb512",
       Op::kApply,
       "split",
       {{"WGS", 256}, {"TR", 8}, {"RC", 8}, {"VW", 2}, {"CB", 512}},
       {T::f32}},
      {"split_wgs4_tr2_rc8_vw8_va1_cb32_cn2_cw4",
       Op::kApply,
       "split",
       {{"WGS", 4}, {"TR", 2}, {"RC", 8}, {"VW", 8}, {"VA", 1}, {"CB", 32}, {"CN", 2}, {"CW", 4}},
       {T::f32}},
      {"split_wgs16_tr1_rc32_vw4_va1_cb64_cn4",
       Op::kApply,
       "split",
       {{"WGS", 16}, {"TR", 1}, {"RC", 32}, {"VW", 4}, {"VA", 1}, {"CB", 64}, {"CN", 4}},
       {T::f16}},
  };
  return all;
}

const ocltk::KernelFamily& family_of(Op op) {
  return op == Op::kShrink   ? ocltk::lora_shrink_family()
         : op == Op::kExpand ? ocltk::lora_expand_family()
                             : ocltk::lora_apply_family();
}

class LoraTest : public ocltk_test::RuntimeTest {
 protected:
  static Choice legal_choice(const Point& point) {
    const ocltk::AlgorithmSpec* algorithm = family_of(point.op).find_algorithm(point.algorithm);
    EXPECT_NE(algorithm, nullptr) << point.algorithm;
    Choice choice;
    choice.kernel = kernel_of(point.op);
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

  static LoraLauncher with(ocltk::Runtime& rt, Op op, const Choice& choice) {
    return [&rt, op, choice](const LoraArgs& args) {
      return op == Op::kShrink   ? ocltk::lora_shrink_with(rt, choice, args)
             : op == Op::kExpand ? ocltk::lora_expand_with(rt, choice, args)
                                 : ocltk::lora_apply_with(rt, choice, args);
    };
  }
};

class LoraPointTest : public LoraTest, public ::testing::WithParamInterface<Point> {};

// One adapter, no segment buffers: odd M, N, K and ranks 1, 3, 7, 33, 65.
TEST_P(LoraPointTest, OneAdapterOddShapes) {
  const Point& point = GetParam();
  const Choice choice = legal_choice(point);
  const LoraProblem shapes[] = {
      {1, 1, 1, 1, 1}, {3, 65, 33, 1, 7}, {7, 33, 127, 1, 3}, {33, 7, 65, 1, 33}, {2, 127, 7, 1, 65}};
  for (const ElementType type : point.types) {
    SCOPED_TRACE(point.name + " " + ocltk::to_string(type));
    for (const LoraProblem& p : shapes) {
      for (const bool accumulate : {false, true}) {
        if (accumulate && point.op == Op::kShrink) continue;
        LoraCase c;
        c.problem = p;
        c.type = type;
        c.accumulate = accumulate;
        EXPECT_TRUE(run_lora_case(runtime(), rng(), point.op, c, with(runtime(), point.op, choice)));
      }
    }
  }
}

// Many adapters in one launch: empty segments, -1 segments (in the middle and at the end), an
// adapter on several segments, ranks below R (1 among them), per-adapter scales, accumulate
// and overwrite, inside larger buffers.
TEST_P(LoraPointTest, ManyAdapters) {
  const Point& point = GetParam();
  const Choice choice = legal_choice(point);
  for (const ElementType type : point.types) {
    SCOPED_TRACE(point.name + " " + ocltk::to_string(type));
    LoraCase c;
    c.problem = {41, 65, 127, 4, 33};
    c.offsets = {0, 5, 5, 14, 17, 17, 30, 41};
    c.adapters = {2, 1, -1, 0, 3, 2, -1};
    c.ranks = {33, 7, 1, 16};
    c.type = type;
    for (const bool accumulate : {false, true}) {
      if (accumulate && point.op == Op::kShrink) continue;
      c.accumulate = accumulate;
      c.per_adapter_scales = accumulate;
      c.pad = accumulate ? 3 : 0;
      EXPECT_TRUE(run_lora_case(runtime(), rng(), point.op, c, with(runtime(), point.op, choice)));
    }
    // Segments of one row each over several adapters (decode): every row its own segment.
    LoraCase d;
    d.problem = {6, 33, 65, 3, 17};
    d.offsets = {0, 1, 2, 3, 4, 5, 6};
    d.adapters = {0, 2, 1, 2, -1, 0};
    d.ranks = {17, 5, 9};
    d.type = type;
    d.per_adapter_scales = true;
    d.accumulate = point.op != Op::kShrink;
    EXPECT_TRUE(run_lora_case(runtime(), rng(), point.op, d, with(runtime(), point.op, choice)));
  }
}

INSTANTIATE_TEST_SUITE_P(Points, LoraPointTest, ::testing::ValuesIn(points()),
                         [](const ::testing::TestParamInfo<Point>& info) { return info.param.name; });

const Point& point_named(const std::string& name) {
  for (const Point& p : points())
    if (p.name == name) return p;
  throw std::logic_error("no test point " + name);
}

// The checker itself: an unwritten Y and a write outside the output must fail.
TEST_F(LoraTest, CheckerCatchesWrongResults) {
  LoraCase c;
  c.problem = {5, 9, 33, 2, 4};
  c.offsets = {0, 2, 5};
  c.adapters = {1, 0};
  c.pad = 2;
  const ::testing::AssertionResult unwritten =
      run_lora_case(runtime(), rng(), Op::kApply, c, [](const LoraArgs&) { return Status(); });
  EXPECT_FALSE(unwritten);
  EXPECT_NE(std::string(unwritten.message()).find("Y(0, 0)"), std::string::npos) << unwritten.message();
  // A launch that writes the right values but also one element past the output.
  const Choice fused = legal_choice(point_named("fused_defaults"));
  const ::testing::AssertionResult spilled = run_lora_case(runtime(), rng(), Op::kApply, c, [&](const LoraArgs& args) {
    Status s = ocltk::lora_apply_with(runtime(), fused, args);
    const float one = 1.0f;
    runtime().queue().enqueue_write_buffer(boost::compute::buffer(args.y.buffer, true), 0, 4, &one);
    return s;
  });
  EXPECT_FALSE(spilled);
  EXPECT_NE(std::string(spilled.message()).find("outside the output"), std::string::npos) << spilled.message();
}

// Grids past the per-dispatch cap in both dimensions are split into dispatches, each with
// its own bases.
TEST_F(LoraTest, SplitOverSeveralDispatches) {
  ocltk::RuntimeOptions options = ocltk_test::test_runtime_options(cache_dir());
  options.max_groups_per_dispatch = 2;
  ocltk::Result<ocltk::Runtime> opened = ocltk::Runtime::open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ocltk::Runtime& capped = opened.value();
  LoraCase c;
  c.problem = {37, 600, 65, 3, 40};  // defaults: 3 column blocks of 256, 5 rank chunks of 8, 10 + 3 row slots
  c.offsets = {0, 9, 20, 37};
  c.adapters = {1, 0, 2};
  c.ranks = {40, 13, 21};
  c.accumulate = true;
  for (const char* name : {"fused_defaults", "split_defaults", "shrink_defaults", "expand_defaults"}) {
    const Point& point = point_named(name);
    const Choice choice = legal_choice(point);
    const ocltk::LoraGeometry g = ocltk::lora_geometry(point.op == Op::kShrink   ? "lora_shrink"
                                                       : point.op == Op::kExpand ? "lora_expand"
                                                                                 : "lora_fused",
                                                       choice.params, c.problem, 3);
    EXPECT_GT(g.groups0, 2) << name;
    EXPECT_GT(g.groups1, 2) << name;
    LoraCase k = c;
    k.accumulate = point.op != Op::kShrink;
    EXPECT_TRUE(run_lora_case(capped, rng(), point.op, k, with(capped, point.op, choice))) << name;
  }
}

// The launches without an explicit choice take the built-in choice of their class; each
// problem's plan (Runtime::find_plan) serves it again in the second round, its segments laid
// out anew on the device.
TEST_F(LoraTest, BuiltInChoicePerShapeClass) {
  struct Case {
    LoraCase c;
    const char* shape_class;
  };
  std::vector<Case> cases;
  LoraCase decode;
  decode.problem = {3, 70, 90, 1, 8};
  cases.push_back({decode, "decode"});
  LoraCase multi;
  multi.problem = {9, 70, 90, 3, 8};
  multi.offsets = {0, 3, 6, 9};
  multi.adapters = {2, 0, 1};
  cases.push_back({multi, "multi_decode"});
  // Neighbours one key field apart: the segments (one segment over the three adapters is
  // decode), the rows (17 are small_batch), the element type (the same class, bf16 served).
  LoraCase one_segment = multi;
  one_segment.offsets = {0, 9};
  one_segment.adapters = {1};
  cases.push_back({one_segment, "decode"});
  LoraCase more_rows = decode;
  more_rows.problem.m = 17;
  cases.push_back({more_rows, "small_batch"});
  LoraCase half = decode;
  half.type = ElementType::bf16;
  cases.push_back({half, "decode"});
  multi.offsets = {0, 1, 7, 9};
  multi.adapters = {1, 2, 0};
  cases.push_back({decode, "decode"});
  cases.push_back({multi, "multi_decode"});
  cases.push_back({one_segment, "decode"});
  cases.push_back({more_rows, "small_batch"});
  for (const Case& k : cases) {
    for (const Op op : {Op::kApply, Op::kShrink, Op::kExpand}) {
      LoraCase c = k.c;
      c.accumulate = op != Op::kShrink;
      const LoraLauncher launch = [&](const LoraArgs& args) {
        return op == Op::kShrink   ? ocltk::lora_shrink(runtime(), args)
               : op == Op::kExpand ? ocltk::lora_expand(runtime(), args)
                                   : ocltk::lora_apply(runtime(), args);
      };
      EXPECT_TRUE(run_lora_case(runtime(), rng(), op, c, launch)) << kernel_of(op);
      const Choice used = runtime().last_choice();
      const ocltk::BuiltinChoice builtin = family_of(op).builtin_for(k.shape_class);
      EXPECT_EQ(used.kernel, kernel_of(op));
      EXPECT_EQ(used.shape_class, k.shape_class);
      EXPECT_EQ(used.algorithm, builtin.algorithm);
      EXPECT_EQ(used.params, family_of(op).find_algorithm(builtin.algorithm)->complete(builtin.params));
    }
  }
  EXPECT_EQ(ocltk::lora_shape_class(16, 0), "decode");
  EXPECT_EQ(ocltk::lora_shape_class(17, 1), "small_batch");
  EXPECT_EQ(ocltk::lora_shape_class(256, 1), "small_batch");
  EXPECT_EQ(ocltk::lora_shape_class(257, 0), "prefill");
  EXPECT_EQ(ocltk::lora_shape_class(16, 8), "multi_decode");
  EXPECT_EQ(ocltk::lora_shape_class(128, 8), "multi_decode");
  EXPECT_EQ(ocltk::lora_shape_class(129, 8), "multi_batch");
}

// Unsorted rows with per-row adapter ids (-1, and ids outside [0, L) as none) grouped on the
// device, X and Y gathered, applied with the grouped segments, Y scattered back: the result
// is the reference computed on the rows in their own order.
TEST_F(LoraTest, SegmentsFromUnsortedRowsOnTheDevice) {
  ocltk::Runtime& rt = runtime();
  const LoraProblem p{23, 45, 77, 4, 12};
  const std::int64_t L = p.adapters;
  std::vector<std::int32_t> ids(std::size_t(p.m));
  std::uniform_int_distribution<int> pick(-1, int(L) - 1);
  for (std::int32_t& id : ids) id = pick(rng());
  ids[3] = int(L) + 3;  // out of range: no adapter
  ids[7] = -7;
  ids[11] = 2;  // adapter 2 has rows, adapter 3 may not
  boost::compute::buffer d_ids = upload_vector(rt, ids);
  boost::compute::buffer d_off = rt.allocate(4 * std::size_t(L + 2)).value();
  boost::compute::buffer d_seg = rt.allocate(4 * std::size_t(L + 1)).value();
  boost::compute::buffer d_index = rt.allocate(4 * std::size_t(p.m)).value();
  ocltk::LoraGroupArgs g;
  g.rows = p.m;
  g.adapters = L;
  g.row_adapters = d_ids.get();
  g.offsets = d_off.get();
  g.segment_adapters = d_seg.get();
  g.row_index = d_index.get();
  Status s = ocltk::lora_group_rows(rt, g);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<std::uint32_t> offsets(std::size_t(L + 2)), index(std::size_t(p.m));
  std::vector<std::int32_t> seg(std::size_t(L + 1));
  rt.queue().enqueue_read_buffer(d_off, 0, offsets.size() * 4, offsets.data());
  rt.queue().enqueue_read_buffer(d_seg, 0, seg.size() * 4, seg.data());
  rt.queue().enqueue_read_buffer(d_index, 0, index.size() * 4, index.data());
  // The grouping on the host: rows of adapter 0, 1, ..., L-1, then the rest, each in order.
  std::vector<std::uint32_t> want_index, want_offsets{0};
  for (std::int64_t a = 0; a <= L; ++a) {
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const bool none = ids[r] < 0 || ids[r] >= L;
      if ((a < L && ids[r] == a) || (a == L && none)) want_index.push_back(std::uint32_t(r));
    }
    want_offsets.push_back(std::uint32_t(want_index.size()));
  }
  EXPECT_EQ(offsets, want_offsets);
  EXPECT_EQ(index, want_index);
  std::vector<std::int32_t> want_seg(std::size_t(L + 1));
  std::iota(want_seg.begin(), want_seg.end(), 0);
  want_seg.back() = -1;
  EXPECT_EQ(seg, want_seg);

  for (const ElementType type : {ElementType::f32, ElementType::bf16}) {
    SCOPED_TRACE(ocltk::to_string(type));
    const std::size_t es = ocltk::element_size(type);
    const Typed x = encode(type, ocltk_test::random_floats(rng(), std::size_t(p.m * p.k)));
    const Typed a = encode(type, ocltk_test::random_floats(rng(), std::size_t(L * p.max_rank * p.k)));
    const Typed b = encode(type, ocltk_test::random_floats(rng(), std::size_t(L * p.n * p.max_rank)));
    const Typed y0 = encode(type, ocltk_test::random_floats(rng(), std::size_t(p.m * p.n)));
    const std::vector<std::int32_t> ranks = {12, 3, 7, 1};
    boost::compute::buffer dx = upload_vector(rt, x.bytes), da = upload_vector(rt, a.bytes),
                           db = upload_vector(rt, b.bytes), dy = upload_vector(rt, y0.bytes),
                           dr = upload_vector(rt, ranks);
    boost::compute::buffer gx = rt.allocate(x.bytes.size()).value(), gy = rt.allocate(y0.bytes.size()).value();
    ocltk::LoraPermuteArgs perm;
    perm.rows = p.m;
    perm.type = type;
    perm.row_index = d_index.get();
    perm.features = p.k;
    perm.input = dx.get();
    perm.output = gx.get();
    ASSERT_TRUE(ocltk::lora_gather_rows(rt, perm).ok());
    perm.features = p.n;
    perm.input = dy.get();
    perm.output = gy.get();
    ASSERT_TRUE(ocltk::lora_gather_rows(rt, perm).ok());
    LoraArgs args;
    args.problem = p;
    args.x = {gx.get(), 0, 0, type};
    args.a = {da.get(), 0, 0, 0, type};
    args.b = {db.get(), 0, 0, 0, type};
    args.y = {gy.get(), 0, 0, type};
    args.ranks = dr.get();
    args.scale = 0.5f;
    args.accumulate = true;
    args.segments = L + 1;
    args.offsets = d_off.get();
    args.segment_adapters = d_seg.get();
    s = ocltk::lora_apply(rt, args);
    ASSERT_TRUE(s.ok()) << s.message();
    perm.input = gy.get();
    perm.output = dy.get();
    ASSERT_TRUE(ocltk::lora_scatter_rows(rt, perm).ok());
    rt.queue().finish();
    const std::vector<float> got = decode(type, download_bytes(rt, dy, y0.bytes.size()));

    // The reference on the caller's order: one segment per row, its id (none as -1).
    ocltk::LoraHostSegments host;
    host.ranks = ranks;
    for (std::size_t r = 0; r < ids.size(); ++r) {
      host.offsets.push_back(std::uint32_t(r));
      host.adapters.push_back(ids[r] >= 0 && ids[r] < L ? ids[r] : -1);
    }
    host.offsets.push_back(std::uint32_t(p.m));
    std::vector<double> y_old(y0.values.begin(), y0.values.end()), t, t_abs, y, y_abs;
    ocltk::lora_reference(p, host, 0.5f, x.values.data(), a.values.data(), b.values.data(), y_old.data(), t, t_abs, y,
                          y_abs);
    const std::vector<std::int32_t> row_adapter = host.row_adapters(p.m);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::int32_t ad = row_adapter[i / std::size_t(p.n)];
      const std::int64_t rank = ad < 0 ? 0 : ranks[ad];
      const double bound = ocltk::lora_error_bound(p.k, rank, y_abs[i], y_old[i], y[i], type);
      ASSERT_LE(std::fabs(double(got[i]) - y[i]), bound)
          << "Y(" << i / p.n << ", " << i % p.n << ") = " << got[i] << ", want " << y[i] << " (adapter " << ad << ")";
    }
    (void)es;
  }
}

// check_* and the launches refuse every bad input before enqueuing anything, naming the
// operand; Y (and T) stay as they were.
TEST_F(LoraTest, BadInputIsRefusedAndWritesNothing) {
  ocltk::Runtime& rt = runtime();
  const LoraProblem p{6, 10, 12, 3, 4};
  const ElementType type = ElementType::bf16;
  const Typed x = encode(type, ocltk_test::random_floats(rng(), 6 * 12));
  const Typed a = encode(type, ocltk_test::random_floats(rng(), 3 * 4 * 12));
  const Typed b = encode(type, ocltk_test::random_floats(rng(), 3 * 10 * 4));
  const Typed y = encode(type, ocltk_test::random_floats(rng(), 6 * 10));
  const std::vector<float> t = ocltk_test::random_floats(rng(), 6 * 4);
  boost::compute::buffer dx = upload_vector(rt, x.bytes), da = upload_vector(rt, a.bytes),
                         db = upload_vector(rt, b.bytes), dy = upload_vector(rt, y.bytes), dt = upload_vector(rt, t);
  const std::vector<std::uint32_t> offsets = {0, 2, 2, 6};
  const std::vector<std::int32_t> seg = {1, -1, 2}, ranks = {4, 1, 3};
  const std::vector<float> scales = {0.5f, -1.0f, 2.0f};
  boost::compute::buffer d_off = upload_vector(rt, offsets), d_seg = upload_vector(rt, seg),
                         d_ranks = upload_vector(rt, ranks), d_scales = upload_vector(rt, scales);
  boost::compute::buffer small = rt.allocate(8).value();
  boost::compute::context other_context(rt.device().handle);
  boost::compute::buffer foreign(other_context, 4096);
  auto device_vector = [&](const auto& v) { return upload_vector(rt, v); };
  boost::compute::buffer bad_off_start = device_vector(std::vector<std::uint32_t>{1, 2, 2, 6});
  boost::compute::buffer bad_off_end = device_vector(std::vector<std::uint32_t>{0, 2, 2, 5});
  boost::compute::buffer bad_off_down = device_vector(std::vector<std::uint32_t>{0, 3, 2, 6});
  boost::compute::buffer bad_seg_low = device_vector(std::vector<std::int32_t>{1, -2, 2});
  boost::compute::buffer bad_seg_high = device_vector(std::vector<std::int32_t>{1, 3, 2});
  boost::compute::buffer bad_rank_zero = device_vector(std::vector<std::int32_t>{4, 0, 3});
  boost::compute::buffer bad_rank_high = device_vector(std::vector<std::int32_t>{4, 5, 3});

  LoraArgs good;
  good.problem = p;
  good.x = {dx.get(), 0, 0, type};
  good.a = {da.get(), 0, 0, 0, type};
  good.b = {db.get(), 0, 0, 0, type};
  good.y = {dy.get(), 0, 0, type};
  good.intermediate = {dt.get(), 0, 0, ElementType::f32};
  good.scales = d_scales.get();
  good.ranks = d_ranks.get();
  good.segments = 3;
  good.offsets = d_off.get();
  good.segment_adapters = d_seg.get();
  for (const Op op : {Op::kShrink, Op::kExpand, Op::kApply}) {
    const Status s = op == Op::kShrink   ? ocltk::check_lora_shrink(rt, good)
                     : op == Op::kExpand ? ocltk::check_lora_expand(rt, good)
                                         : ocltk::check_lora_apply(rt, good);
    ASSERT_TRUE(s.ok()) << kernel_of(op) << ": " << s.message();
  }

  struct Case {
    std::string what;
    std::function<void(LoraArgs&)> spoil;
    std::vector<std::string> named;  // each must appear in the message
    std::vector<Op> ops;             // the operations that read what is spoiled
  };
  const std::vector<Op> all = {Op::kShrink, Op::kExpand, Op::kApply};
  const std::vector<Op> reads_x = {Op::kShrink, Op::kApply}, writes_y = {Op::kExpand, Op::kApply};
  const std::vector<Case> cases = {
      {"adapter below -1",
       [&](LoraArgs& g) { g.segment_adapters = bad_seg_low.get(); },
       {"segment_adapters[1] = -2"},
       all},
      {"adapter not below L",
       [&](LoraArgs& g) { g.segment_adapters = bad_seg_high.get(); },
       {"segment_adapters[1] = 3"},
       all},
      {"rank 0", [&](LoraArgs& g) { g.ranks = bad_rank_zero.get(); }, {"ranks[1] = 0"}, all},
      {"rank above R", [&](LoraArgs& g) { g.ranks = bad_rank_high.get(); }, {"ranks[1] = 5", "R = 4"}, all},
      {"offsets not from 0", [&](LoraArgs& g) { g.offsets = bad_off_start.get(); }, {"offsets[0] = 1"}, all},
      {"offsets not to M", [&](LoraArgs& g) { g.offsets = bad_off_end.get(); }, {"offsets[3] = 5", "M = 6"}, all},
      {"offsets decreasing", [&](LoraArgs& g) { g.offsets = bad_off_down.get(); }, {"offsets decrease"}, all},
      {"offsets too short for S + 1", [&](LoraArgs& g) { g.offsets = small.get(); }, {"offsets", "needs 16"}, all},
      {"segment_adapters too short", [&](LoraArgs& g) { g.segments = 4; }, {"offsets"}, all},
      {"A's K not X's", [&](LoraArgs& g) { g.problem.k = 13; }, {"buffer X"}, reads_x},
      {"A too small for K", [&](LoraArgs& g) { g.a.ld = 13; }, {"buffer A"}, reads_x},
      {"B's rank not A's", [&](LoraArgs& g) { g.b.ld = 5; }, {"buffer B"}, writes_y},
      {"B's adapter count not A's", [&](LoraArgs& g) { g.b.offset = 41; }, {"buffer B"}, writes_y},
      {"A in another type", [&](LoraArgs& g) { g.a.type = ElementType::f16; }, {"A is f16", "X is bf16"}, reads_x},
      {"B in another type", [&](LoraArgs& g) { g.b.type = ElementType::f32; }, {"B is f32"}, {Op::kApply}},
      {"Y in another type", [&](LoraArgs& g) { g.y.type = ElementType::f16; }, {"Y is f16"}, writes_y},
      {"T not f32", [&](LoraArgs& g) { g.intermediate.type = ElementType::bf16; }, {"intermediate", "f32"}, all},
      {"scales too short", [&](LoraArgs& g) { g.scales = small.get(); }, {"scales", "needs 12"}, writes_y},
      {"ranks too short", [&](LoraArgs& g) { g.ranks = small.get(); }, {"ranks", "needs 12"}, all},
      {"Y too small", [&](LoraArgs& g) { g.y.offset = 1; }, {"buffer Y"}, writes_y},
      {"Y leading dimension below N", [&](LoraArgs& g) { g.y.ld = 9; }, {"leading dimension of Y"}, writes_y},
      {"null X", [&](LoraArgs& g) { g.x.buffer = nullptr; }, {"X", "null"}, reads_x},
      {"null T for shrink",
       [&](LoraArgs& g) { g.intermediate.buffer = nullptr; },
       {"T", "null"},
       {Op::kShrink, Op::kExpand}},
      {"X of another context", [&](LoraArgs& g) { g.x.buffer = foreign.get(); }, {"X", "another"}, reads_x},
      {"M = 0", [&](LoraArgs& g) { g.problem.m = 0; }, {"M = 0"}, all},
      {"R = 0", [&](LoraArgs& g) { g.problem.max_rank = 0; }, {"R (max_rank) = 0"}, all},
      {"negative segments", [&](LoraArgs& g) { g.segments = -1; }, {"segments = -1"}, all},
      {"offsets without segments", [&](LoraArgs& g) { g.segments = 0; }, {"segments = 0"}, all},
      {"segments without offsets", [&](LoraArgs& g) { g.offsets = nullptr; }, {"offsets", "null"}, all},
  };
  Choice fused;
  fused.kernel = "lora_apply";
  fused.algorithm = "fused";
  Choice tiled;
  tiled.algorithm = "tiled";
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    LoraArgs args = good;
    k.spoil(args);
    for (const Op op : k.ops) {
      SCOPED_TRACE(kernel_of(op));
      std::vector<Status> statuses;
      if (op == Op::kShrink)
        statuses = {ocltk::check_lora_shrink(rt, args), ocltk::lora_shrink(rt, args),
                    ocltk::lora_shrink_with(rt, tiled, args)};
      else if (op == Op::kExpand)
        statuses = {ocltk::check_lora_expand(rt, args), ocltk::lora_expand(rt, args),
                    ocltk::lora_expand_with(rt, tiled, args)};
      else
        statuses = {ocltk::check_lora_apply(rt, args), ocltk::lora_apply(rt, args),
                    ocltk::lora_apply_with(rt, fused, args)};
      for (const Status& s : statuses) {
        EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
        for (const std::string& word : k.named) EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
      }
    }
  }
  rt.queue().finish();
  EXPECT_EQ(download_bytes(rt, dy, y.bytes.size()), y.bytes) << "a refused launch wrote Y";
  EXPECT_EQ(ocltk_test::download(rt, dt, t.size()), t) << "a refused launch wrote T";
}

}  // namespace

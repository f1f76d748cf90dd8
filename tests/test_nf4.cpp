// NF4 family: quantizer bit-identity (stored bitsandbytes vectors and an independent
// reference of its rule), round trips, and the segmented forward / input-gradient
// products of every algorithm at several parameter points against a double reference on
// dequantized weights, plus routing and every bad input the issue lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "fixture.hpp"
#include "nf4_splits.hpp"
#include "ocltk/nf4.hpp"

using namespace ocltk;
using ocltk_test::RuntimeTest;

namespace {

// An independent statement of bitsandbytes' rule: a linear scan over its 15 thresholds,
// strictly greater moves up, after multiplying by the f32 reciprocal. The thresholds are
// bitsandbytes' decimal constants rounded to f32, which for 4 of the 15 differ by one ulp
// from the f32 rounding of the exact midpoint (e.g. 0.8614784181118011 is almost a tie):
// at those values only the decimal constants give bit-identity.
std::uint8_t reference_code(float x) {
  static const char* const kThresholds[15] = {"-0.8480964004993439",   "-0.6106329262256622",  "-0.4599952697753906",
                                              "-0.33967943489551544",  "-0.23460740596055984", "-0.13791173323988914",
                                              "-0.045525018125772476", "0.03979014977812767",  "0.1202552504837513",
                                              "0.2035212516784668",    "0.2920137718319893",   "0.3893125355243683",
                                              "0.5016634166240692",    "0.6427869200706482",   "0.8614784181118011"};
  std::uint8_t code = 0;
  for (int i = 0; i < 15; ++i)
    if (x > std::strtof(kThresholds[i], nullptr)) code = std::uint8_t(i + 1);
  return code;
}

TEST(Nf4Quantizer, TreeMatchesMidpointRule) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = dist(rng);
    ASSERT_EQ(nf4_code_of(x), reference_code(x)) << "x = " << x;
  }
  for (float level : kNf4Codebook) EXPECT_EQ(kNf4Codebook[nf4_code_of(level)], level);
  EXPECT_EQ(nf4_code_of(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(Nf4Quantizer, AbsmaxPackingAndRoundTrip) {
  std::mt19937 rng(11);
  for (int block : {32, 64, 128, 4096}) {
    for (std::size_t count : {std::size_t(1), std::size_t(63), std::size_t(1000), std::size_t(8193)}) {
      const std::vector<float> w = ocltk_test::random_floats(rng, count);
      const Nf4Packed q = quantize_nf4(w.data(), count, block);
      ASSERT_EQ(q.packed.size(), (count + 1) / 2);
      ASSERT_EQ(q.scales.size(), (count + block - 1) / block);
      std::vector<float> back(count);
      dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, 0, block, count, back.data());
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t b = i / block;
        float absmax = 0;
        for (std::size_t j = b * block; j < std::min(count, (b + 1) * std::size_t(block)); ++j)
          absmax = std::max(absmax, std::fabs(w[j]));
        ASSERT_EQ(q.scales[b], absmax);
        const float inv = 1.0f / absmax;
        const std::uint8_t code = (i % 2 == 0) ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 15;
        ASSERT_EQ(code, reference_code(w[i] * inv)) << "block " << block << " i " << i;
        // Nearest level: the error is at most half the widest gap (0.1519) times absmax.
        ASSERT_LE(std::fabs(back[i] - w[i]), 0.16f * absmax);
      }
      // Quantizing the dequantized weights reproduces the codes (levels are fixed points).
      const Nf4Packed again = quantize_nf4(back.data(), count, block);
      EXPECT_EQ(again.packed, q.packed);
    }
  }
  EXPECT_THROW(quantize_nf4(nullptr, 0, 48), Error);
  EXPECT_THROW(quantize_nf4(nullptr, 0, 8192), Error);
}

TEST(Nf4Quantizer, MidpointsUseTheReciprocal) {
  // A block whose absmax is 3: values at the exact f32 midpoints times 3 land on either
  // side depending on x * (1/3) vs x / 3; the quantizer must follow the reciprocal.
  std::vector<float> w(64, 0.5f);
  w[0] = 3.0f;
  int differ = 0;
  for (int i = 1; i < 64; ++i) {
    // Around each threshold times 3: one ulp below, at, or above.
    const float mid = float((double(kNf4Codebook[i % 15]) + double(kNf4Codebook[i % 15 + 1])) / 2) * 3.0f;
    w[i] = i % 3 == 0 ? mid : std::nextafter(mid, float(i % 3 == 1 ? 10 : -10));
  }
  const Nf4Packed q = quantize_nf4(w.data(), w.size(), 64);
  const float inv = 1.0f / 3.0f;
  for (int i = 0; i < 64; ++i) {
    const std::uint8_t code = (i % 2 == 0) ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 15;
    EXPECT_EQ(code, reference_code(w[i] * inv));
    differ += reference_code(w[i] * inv) != reference_code(w[i] / 3.0f);
  }
  RecordProperty("codes_where_division_differs", differ);
}

TEST(Nf4Quantizer, HalfTypesWidenFirst) {
  std::mt19937 rng(3);
  const std::vector<float> w = ocltk_test::random_floats(rng, 300);
  std::vector<std::uint16_t> h(w.size()), b(w.size());
  std::vector<float> hw(w.size()), bw(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    h[i] = float_to_half(w[i]);
    hw[i] = half_to_float(h[i]);
    b[i] = float_to_bf16(w[i]);
    bw[i] = bf16_to_float(b[i]);
    ASSERT_NEAR(hw[i], w[i], 1e-3);
    ASSERT_NEAR(bw[i], w[i], 1e-2);
  }
  EXPECT_EQ(quantize_nf4(h.data(), ElementType::f16, h.size(), 64).packed,
            quantize_nf4(hw.data(), hw.size(), 64).packed);
  EXPECT_EQ(quantize_nf4(b.data(), ElementType::bf16, b.size(), 64).packed,
            quantize_nf4(bw.data(), bw.size(), 64).packed);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(1e-7f), 0x0002);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
}

// ---- Stored bitsandbytes vectors (tests/data/nf4/make_vectors.py writes them) ----

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Minimal .npy payload reader for the stored vectors (v1 header, C order).
std::vector<char> npy_payload(const std::string& path) {
  std::vector<char> bytes = read_file(path);
  if (bytes.size() < 10) return {};
  const std::size_t header = std::size_t(std::uint8_t(bytes[8])) | std::size_t(std::uint8_t(bytes[9])) << 8;
  return std::vector<char>(bytes.begin() + 10 + header, bytes.end());
}

TEST(Nf4Quantizer, MatchesStoredBitsandbytesVectors) {
  const std::filesystem::path dir = std::filesystem::path(OCLTK_TEST_DATA_DIR) / "nf4";
  std::vector<std::string> cases;
  for (const char* name : {"bs64", "bs128", "bs64_oddk", "bs64_midpoints", "bs4096", "bs32"})
    if (std::filesystem::exists(dir / (std::string(name) + "_w.npy"))) cases.push_back(name);
  if (cases.empty())
    GTEST_SKIP() << "no bitsandbytes vectors in " << dir
                 << "; run tests/data/nf4/make_vectors.py on a CUDA machine with bitsandbytes and torch";
  for (const std::string& c : cases) {
    SCOPED_TRACE(c);
    const std::vector<char> w = npy_payload((dir / (c + "_w.npy")).string());
    const std::vector<char> packed = npy_payload((dir / (c + "_packed.npy")).string());
    const std::vector<char> absmax = npy_payload((dir / (c + "_absmax.npy")).string());
    const std::vector<char> meta = npy_payload((dir / (c + "_blocksize.npy")).string());
    ASSERT_EQ(meta.size(), 8u);
    std::int64_t block;
    std::memcpy(&block, meta.data(), 8);
    const std::size_t count = w.size() / 4;
    const float* wf = reinterpret_cast<const float*>(w.data());
    const Nf4Packed q = quantize_nf4(wf, count, block);
    ASSERT_EQ(q.packed.size(), packed.size());
    ASSERT_EQ(q.scales.size() * 4, absmax.size());
    EXPECT_EQ(0, std::memcmp(q.scales.data(), absmax.data(), absmax.size())) << "absmax differs";
    // Bit for bit, the threshold ties included (the "midpoints" vector sits on them): the
    // quantizer normalises with bitsandbytes' GPU reciprocal, not IEEE division.
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint8_t byte = std::uint8_t(packed[i / 2]);
      const int want = (i % 2 == 0) ? byte >> 4 : byte & 15;
      const int got = (i % 2 == 0) ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 15;
      ASSERT_EQ(got, want) << "coefficient " << i << " = " << reinterpret_cast<const float*>(w.data())[i];
    }
  }
}

TEST(Nf4Quantizer, BitsandbytesReciprocalIsWithinOneUlpOfIeee) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(1e-3f, 1e3f);
  int differing = 0;
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng);
    const float fast = ocltk::bitsandbytes_reciprocal(x), exact = 1.0f / x;
    ASSERT_TRUE(fast == exact || fast == std::nextafter(exact, 0.0f) || fast == std::nextafter(exact, 2 * exact)) << x;
    ASSERT_EQ(ocltk::bitsandbytes_reciprocal(-x), -fast) << x;
    differing += fast != exact;
  }
  // 13 % of mantissas differ on the H200 (results/h200-fast-rcp.txt at 936f2b6).
  EXPECT_GT(differing, 10000);
  EXPECT_LT(differing, 16000);
  // Mantissa 1449 is the first that rounds down (x = 1 + 1449 * 2^-23).
  const float first = 1.0f + 1449.0f * std::ldexp(1.0f, -23);
  EXPECT_EQ(ocltk::bitsandbytes_reciprocal(first), std::nextafter(1.0f / first, 0.0f));
  EXPECT_EQ(ocltk::bitsandbytes_reciprocal(1.0f), 1.0f);
  EXPECT_TRUE(std::isinf(ocltk::bitsandbytes_reciprocal(0.0f)));
  EXPECT_TRUE(std::isinf(ocltk::bitsandbytes_reciprocal(1e-40f)));  // subnormal: flushed to zero
}

// ---- Device products ----

struct Case {
  std::int64_t experts, n, k, block, element_offset;
  std::vector<std::uint32_t> counts;  // rows per expert
  ElementType type = ElementType::f32;
  // Row r of x and of g is scaled by 2^(row_exponent_step · (r % 8) - 3·row_exponent_step):
  // rows of different magnitudes, for kernels that scale or split them per row (tc's f32).
  int row_exponent_step = 0;
  // Whether the runtime reads the offsets back (Nf4ForwardArgs::validate_offsets): it then
  // counts the experts with rows, and a launch with fewer than all is compact on as many
  // slots; without it, compact on min(rows, experts) where that is fewer.
  bool read_back = true;
};

std::uint16_t to_bits(float v, ElementType t) { return t == ElementType::f16 ? float_to_half(v) : float_to_bf16(v); }
float from_bits(std::uint16_t b, ElementType t) { return t == ElementType::f16 ? half_to_float(b) : bf16_to_float(b); }

class Nf4Device : public RuntimeTest {
 protected:
  // The row-sweeping forward (warps) at `points` of `algorithm`: the same cases as
  // stream (their aligned paths need K, element_offset and the byte offset aligned to CW:
  // K = 75 or 101 take the general decode, the 66-expert window at offset 40 is aligned for
  // CW = 8 only; K < 32 chunks leaves warps' lanes without a chunk), plus blocks of 4096
  // holding several W rows, a window 1056 into such a block, zero rows, K = 2112 (two of
  // warps' staged segments at XL 2048), and both half types, at every point the device
  // can hold.
  void run_points(const char* algorithm, const std::vector<Params>& points);  // after stream_cases()

  // Builds a window (the stream has `element_offset` leading coefficients of another
  // holder), runs forward and backward with `choice_*`, checks against the reference.
  // A `bwd` without an algorithm runs the forward only (forward-only algorithms).
  // `on`: another runtime than the shared one (other options).
  void run_case(const Case& c, const Choice& fwd, const Choice& bwd, Runtime* on = nullptr) {
    Runtime& rt = on ? *on : runtime();
    std::mt19937& g = rng();
    Nf4Geometry geo{c.experts, c.n, c.k, c.block, c.element_offset};
    const std::size_t count = std::size_t(geo.coefficients());
    // Quantize a stream that starts element_offset before the window, then keep the
    // window's blocks only (as a shard holder would).
    const std::vector<float> stream = ocltk_test::random_floats(g, count + std::size_t(c.element_offset));
    const Nf4Packed q = quantize_nf4(stream.data(), stream.size(), c.block);
    std::vector<float> w(count);
    dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, c.element_offset, c.block, count, w.data());

    std::vector<std::uint32_t> offsets{0};
    for (std::uint32_t n : c.counts) offsets.push_back(offsets.back() + n);
    const std::int64_t rows = offsets.back();
    const std::size_t es = element_size(c.type);

    std::vector<float> x = ocltk_test::random_floats(g, std::size_t(rows * c.k) + 1);
    if (c.row_exponent_step != 0)
      for (std::size_t i = 0; i + 1 < x.size(); ++i)
        x[i] = std::ldexp(x[i], c.row_exponent_step * (int(i / std::size_t(c.k)) % 8 - 3));
    std::vector<float> gr = ocltk_test::random_floats(g, std::size_t(rows * c.n) + 1);
    if (c.row_exponent_step != 0)
      for (std::size_t i = 0; i + 1 < gr.size(); ++i)
        gr[i] = std::ldexp(gr[i], c.row_exponent_step * (int(i / std::size_t(c.n)) % 8 - 3));
    std::vector<std::uint8_t> xb(x.size() * es), gb(gr.size() * es);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (c.type == ElementType::f32) {
        std::memcpy(&xb[i * 4], &x[i], 4);
      } else {
        const std::uint16_t b = to_bits(x[i], c.type);
        x[i] = from_bits(b, c.type);
        std::memcpy(&xb[i * 2], &b, 2);
      }
    }
    for (std::size_t i = 0; i < gr.size(); ++i) {
      if (c.type == ElementType::f32) {
        std::memcpy(&gb[i * 4], &gr[i], 4);
      } else {
        const std::uint16_t b = to_bits(gr[i], c.type);
        gr[i] = from_bits(b, c.type);
        std::memcpy(&gb[i * 2], &b, 2);
      }
    }
    auto up = [&](const void* data, std::size_t bytes) {
      boost::compute::buffer b = rt.allocate(std::max<std::size_t>(bytes, 4)).value();
      if (bytes) rt.queue().enqueue_write_buffer(b, 0, bytes, data);
      return b;
    };
    auto packed = up(q.packed.data(), q.packed.size());
    auto scales = up(q.scales.data(), q.scales.size() * 4);
    auto codebook = up(kNf4Codebook.data(), 64);
    auto xbuf = up(xb.data(), xb.size()), gbuf = up(gb.data(), gb.size());
    auto obuf = up(offsets.data(), offsets.size() * 4);
    // Poisoned outputs: NaN (0xFF bytes) everywhere so an unwritten element fails. A guard
    // tail of one 64-row tile past the last row catches stray stores inside the buffer
    // (they landed up to a tile past the end) instead of corrupting the driver's heap.
    const std::size_t guard_rows = 64;
    std::vector<std::uint8_t> nan_y(std::size_t((rows + guard_rows) * c.n) * es + 8, 0xFF),
        nan_dx(std::size_t((rows + guard_rows) * c.k) * 4 + 8, 0xFF);
    auto ybuf = up(nan_y.data(), nan_y.size()), dxbuf = up(nan_dx.data(), nan_dx.size());

    Nf4Weights wts{geo, packed.get(), 0, scales.get(), 0, codebook.get()};
    Nf4ForwardArgs fa{wts, xbuf.get(), c.type, rows, obuf.get(), ybuf.get(), c.read_back};
    Nf4BackwardArgs ba{wts, gbuf.get(), c.type, rows, obuf.get(), dxbuf.get(), c.read_back};
    // chosen_: the launches without a choice, whose choice must be `fwd` and `bwd`.
    const auto expect_launched = [&](const Choice& want) {
      if (!chosen_) return;
      const Choice used = rt.last_choice();
      const AlgorithmSpec* a =
          (want.kernel == "nf4_forward" ? nf4_forward_family() : nf4_backward_family()).find_algorithm(want.algorithm);
      ASSERT_NE(a, nullptr) << want.algorithm;
      EXPECT_EQ(used.algorithm, want.algorithm) << want.kernel;
      EXPECT_EQ(used.params, a->complete(want.params)) << want.kernel;
    };
    Status s = chosen_ ? nf4_forward_segmented(rt, fa) : nf4_forward_with(rt, fwd, fa);
    ASSERT_TRUE(s.ok()) << s.message();
    expect_launched(fwd);
    const bool backward = !bwd.algorithm.empty();
    if (backward) {
      s = chosen_ ? nf4_input_backward_segmented(rt, ba) : nf4_backward_with(rt, bwd, ba);
      ASSERT_TRUE(s.ok()) << s.message();
      expect_launched(bwd);
    }
    std::vector<std::uint8_t> yb(nan_y.size()), dxb(nan_dx.size());
    rt.queue().enqueue_read_buffer(ybuf, 0, yb.size(), yb.data());
    rt.queue().enqueue_read_buffer(dxbuf, 0, dxb.size(), dxb.data());

    std::vector<double> want_y(std::size_t(rows * c.n)), want_dx(std::size_t(rows * c.k));
    nf4_forward_reference(geo, w.data(), x.data(), offsets.data(), rows, want_y.data());
    nf4_backward_reference(geo, w.data(), gr.data(), offsets.data(), rows, want_dx.data());
    // Unit roundoff of the half type (f16: 11 significant bits, bf16: 8): of the output, and
    // for tc of the codebook, which it multiplies in the input's type.
    const double u_half = c.type == ElementType::f32 ? 0 : (c.type == ElementType::f16 ? 1.0 / 2048 : 1.0 / 256);
    const std::string where = "E=" + std::to_string(c.experts) + " N=" + std::to_string(c.n) +
                              " K=" + std::to_string(c.k) + " B=" + std::to_string(c.block) +
                              " off=" + std::to_string(c.element_offset) + " " + to_string(c.type);
    for (std::int64_t e = 0; e < c.experts; ++e) {
      for (std::int64_t r = offsets[e]; r < std::int64_t(offsets[e + 1]); ++r) {
        for (std::int64_t n = 0; n < c.n; ++n) {
          double abs_dot = 0;
          for (std::int64_t k = 0; k < c.k; ++k)
            abs_dot += std::fabs(double(x[r * c.k + k]) * w[(e * c.n + n) * c.k + k]);
          const std::size_t i = std::size_t(r * c.n + n);
          float got;
          if (c.type == ElementType::f32) {
            std::memcpy(&got, &yb[i * 4], 4);
          } else {
            std::uint16_t b;
            std::memcpy(&b, &yb[i * 2], 2);
            got = from_bits(b, c.type);
          }
          // tc multiplies half inputs in their own type: the codebook rounded to it; tc_tiled
          // too, the dequantized weight (codebook value times scale) rounded to it.
          const bool half_weights = fwd.algorithm == "tc" || fwd.algorithm == "tc_tiled";
          const double bound = gemm_nt_error_bound(c.k, abs_dot, 1.0, 0) + u_half * std::fabs(want_y[i]) +
                               (half_weights ? u_half * abs_dot : 0) + 1e-6 * u_half;
          ASSERT_LE(std::fabs(got - want_y[i]), bound)
              << where << " forward y(" << r << ", " << n << ") expert " << e << " algorithm " << fwd.algorithm << " "
              << format_params(fwd.params);
        }
        for (std::int64_t k = 0; backward && k < c.k; ++k) {
          double abs_dot = 0;
          for (std::int64_t n = 0; n < c.n; ++n)
            abs_dot += std::fabs(double(gr[r * c.n + n]) * w[(e * c.n + n) * c.k + k]);
          const std::size_t i = std::size_t(r * c.k + k);
          float got;
          std::memcpy(&got, &dxb[i * 4], 4);
          // tc multiplies bf16 grads in bf16: the codebook value and g times the scale each
          // rounded to it (2^-8 each, so 2^-7 of each |g·w|); tc_tiled half grads in their type,
          // the dequantized weight rounded to it.
          const double bound = gemm_nt_error_bound(c.n, abs_dot, 1.0, 0) +
                               (bwd.algorithm == "tc" && c.type == ElementType::bf16 ? abs_dot / 128 : 0) +
                               (bwd.algorithm == "tc_tiled" ? u_half * abs_dot : 0);
          ASSERT_LE(std::fabs(got - want_dx[i]), bound) << where << " backward dx(" << r << ", " << k << ") algorithm "
                                                        << bwd.algorithm << " " << format_params(bwd.params);
        }
      }
    }
    // Nothing written past the rows.
    for (std::size_t i = std::size_t(rows * c.n) * es; i < yb.size(); ++i) ASSERT_EQ(yb[i], 0xFF) << where;
    for (std::size_t i = std::size_t(rows * c.k) * 4; i < dxb.size(); ++i) ASSERT_EQ(dxb[i], 0xFF) << where;
  }

  // The backward alone on fixed inputs (the same for every call with the same case): dx of
  // the case's rows, read back whole. Its inputs are kept for check_backward.
  std::vector<float> backward_of(const Case& c, const Choice& bwd, Runtime& rt) {
    std::mt19937 g(12345);
    Nf4Geometry geo{c.experts, c.n, c.k, c.block, c.element_offset};
    const std::size_t count = std::size_t(geo.coefficients());
    const std::vector<float> stream = ocltk_test::random_floats(g, count + std::size_t(c.element_offset));
    const Nf4Packed q = quantize_nf4(stream.data(), stream.size(), c.block);
    last_w_.assign(count, 0.0f);
    dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, c.element_offset, c.block, count, last_w_.data());
    last_offsets_ = {0};
    for (std::uint32_t n : c.counts) last_offsets_.push_back(last_offsets_.back() + n);
    const std::int64_t rows = last_offsets_.back();
    last_g_ = ocltk_test::random_floats(g, std::size_t(rows * c.n) + 1);
    auto up = [&](const void* data, std::size_t bytes) {
      boost::compute::buffer b = rt.allocate(std::max<std::size_t>(bytes, 4)).value();
      if (bytes) rt.queue().enqueue_write_buffer(b, 0, bytes, data);
      return b;
    };
    auto packed = up(q.packed.data(), q.packed.size());
    auto scales = up(q.scales.data(), q.scales.size() * 4);
    auto codebook = up(kNf4Codebook.data(), 64);
    auto gbuf = up(last_g_.data(), last_g_.size() * 4);
    auto obuf = up(last_offsets_.data(), last_offsets_.size() * 4);
    std::vector<float> dx(std::size_t(rows * c.k) + 16, std::numeric_limits<float>::quiet_NaN());
    auto dxbuf = up(dx.data(), dx.size() * 4);
    const Nf4Weights wts{geo, packed.get(), 0, scales.get(), 0, codebook.get()};
    const Status s = nf4_backward_with(rt, bwd, {wts, gbuf.get(), ElementType::f32, rows, obuf.get(), dxbuf.get()});
    EXPECT_TRUE(s.ok()) << s.message();
    rt.queue().enqueue_read_buffer(dxbuf, 0, dx.size() * 4, dx.data());
    for (std::size_t i = std::size_t(rows * c.k); i < dx.size(); ++i) EXPECT_TRUE(std::isnan(dx[i])) << "past the rows";
    dx.resize(std::size_t(rows * c.k));
    return dx;
  }
  // dx of backward_of's last inputs against the reference in double.
  void check_backward(const Case& c, const std::vector<float>& dx, const char* algorithm) {
    const Nf4Geometry geo{c.experts, c.n, c.k, c.block, c.element_offset};
    const std::int64_t rows = last_offsets_.back();
    std::vector<double> want(std::size_t(rows * c.k));
    nf4_backward_reference(geo, last_w_.data(), last_g_.data(), last_offsets_.data(), rows, want.data());
    for (std::int64_t e = 0; e < c.experts; ++e)
      for (std::int64_t r = last_offsets_[e]; r < std::int64_t(last_offsets_[e + 1]); ++r)
        for (std::int64_t k = 0; k < c.k; ++k) {
          double abs_dot = 0;
          for (std::int64_t n = 0; n < c.n; ++n)
            abs_dot += std::fabs(double(last_g_[r * c.n + n]) * last_w_[(e * c.n + n) * c.k + k]);
          const std::size_t i = std::size_t(r * c.k + k);
          ASSERT_LE(std::fabs(dx[i] - want[i]), gemm_nt_error_bound(c.n, abs_dot, 1.0, 0))
              << algorithm << " dx(" << r << ", " << k << ")";
        }
  }
  std::vector<float> last_w_, last_g_;
  std::vector<std::uint32_t> last_offsets_;
  bool chosen_ = false;  // run_case launches without a choice (nf4_forward_segmented, ...)

  // `profile` written into a new temporary folder `name`: its path.
  static std::string write_temp_profile(const Profile& profile, const std::string& name) {
    const std::string path = ocltk_test::make_temp_dir(name) + "/profile.yaml";
    write_profile_atomically(path, profile);
    return path;
  }
  // A runtime of its own that reads the profile at `path`.
  Result<Runtime> open_with(const std::string& path) {
    RuntimeOptions options = ocltk_test::test_runtime_options(cache_dir());
    options.use_profiles = true;
    options.profile_path = path;
    return Runtime::open(options);
  }

  static Choice choice(const char* family, const char* algorithm, Params params) {
    Choice c;
    c.kernel = family;
    c.algorithm = algorithm;
    c.params = std::move(params);
    return c;
  }
};

// Parameter points per algorithm (one program build each on PoCL; kept few).
// Stream points: row lanes 1 to 8, loads in flight 1 to 8, tile rows 1 to 8 (forward);
// slices 1 to 8, 8- and 16-byte runs, tile rows 1 to 8, one split (dx directly, where the
// grid fills the device's compute units) to 32, codebook and pair-table decodes (backward).
const std::vector<std::pair<Params, Params>> kStreamPoints = {
    {{}, {}},  // defaults
    {{{"WGS", 64}, {"RL", 1}, {"UNROLL", 8}, {"TR", 2}},
     {{"NL", 1}, {"VW", 32}, {"UNROLL", 2}, {"TR", 1}, {"NSPLIT", 1}, {"LUT", 2}}},
    {{{"WGS", 256}, {"RL", 8}, {"UNROLL", 1}, {"TR", 8}},
     {{"NL", 4}, {"VW", 16}, {"UNROLL", 8}, {"TR", 8}, {"NSPLIT", 32}, {"LUT", 2}}},
    {{{"WGS", 64}, {"RL", 4}, {"UNROLL", 2}, {"TR", 1}},
     {{"NL", 8}, {"VW", 32}, {"UNROLL", 4}, {"TR", 4}, {"NSPLIT", 8}}},
};
// Warps points (forward only): the defaults (8-byte chunks, 8 W rows per warp, 4
// batches, x from global memory) but with a tile's one row untested (LT 1, TR 1); 64 work-items (2 warps), 16-byte
// chunks, 4 tile rows, one batch per warp and the next pass loaded ahead (PF), row 0 of a tile untested (LT 1); 256
// work-items, 16 batches per warp
// (the last workgroup's later warps have none) with PF, one tile row staged in local memory
// (XL 4096); 16-byte chunks, 2 tile rows staged (XL 2048: each tile of a longer segment
// staged again, and K = 2112 in segments of 2048 and 64 codes per batch), 4 batches per warp,
// LT 1.
// Each fits NVIDIA's 48 KiB of local memory; the last two need more elsewhere (the
// reduction's partials; run_points skips a point the device cannot hold). The barrier that
// restages x for the next tile matters only without the local-memory reduction's barriers,
// i.e. on NVIDIA (its tests there: results/h200-2026-12-01b/ at 0d64363).
const std::vector<Params> kWarpsPoints = {
    {{"LT", 1}},
    {{"WGS", 64}, {"CW", 32}, {"RB", 4}, {"TR", 4}, {"NB", 1}, {"PF", 1}, {"LT", 1}},
    {{"WGS", 256}, {"CW", 16}, {"RB", 8}, {"TR", 1}, {"NB", 16}, {"PF", 1}, {"XL", 4096}},
    {{"WGS", 128}, {"CW", 32}, {"RB", 8}, {"TR", 2}, {"NB", 4}, {"XL", 2048}, {"LT", 1}},
};
// Tc points (forward only): 64 work-items as one team of 2 warps splitting K, one tile of
// 16 W rows per batch, 4 batches per team, two groups of steps loaded ahead; the defaults (a
// team per warp, 2 tiles, one batch, a group ahead); 256 work-items as 2 teams of 4 warps,
// 4 tiles, 16 batches per team (the last workgroup's later teams have none), nothing loaded
// ahead. Each fits 48 KiB of local memory.
// The first splits f32 x in every warp (XS 0), the others in the pre-pass (nf4_split_x); the
// first and the last take f32 rows 4 a pass (FR 4: a column for each part of x). The first
// issues its loads ahead after the wait for the group multiplied (LW 1): its steady loop
// runs where a part of K has 20 steps or more (the 41-step case below: parts of 21 and 20
// steps, so the emulation's two warps run as many steady rounds, then tails of unequal
// length).
const std::vector<Params> kTcPoints = {
    {{"WGS", 64}, {"RT", 1}, {"NB", 4}, {"PF", 2}, {"LW", 1}, {"KS", 2}, {"XS", 0}, {"FR", 4}},
    {},
    {{"WGS", 256}, {"RT", 4}, {"NB", 16}, {"PF", 0}, {"KS", 4}, {"FR", 4}},
};
// The last two have one row per work-item (MWG == MDIMC): PoCL 3.1 miscompiled the kernels'
// old early return for surplus workgroups there (zeros stored past the last row).
const std::vector<Params> kTiledPoints = {
    {},
    {{"MWG", 16}, {"NWG", 8}, {"KWG", 16}, {"MDIMC", 4}, {"NDIMC", 4}},
    {{"MWG", 8}, {"NWG", 32}, {"KWG", 32}, {"MDIMC", 8}, {"NDIMC", 8}},
    {{"MWG", 16}, {"NWG", 16}, {"KWG", 64}, {"MDIMC", 16}, {"NDIMC", 16}},
};

std::vector<Case> shape_cases() {
  return {
      // Blocks straddling rows and experts (K % block != 0), odd K and N, empty segments.
      {3, 37, 75, 64, 0, {5, 0, 3}},
      // A window: element_offset inside the first block, odd stream alignment.
      {2, 19, 101, 32, 7, {1, 4}},
      // Aligned fast path, one expert, several row tiles.
      {1, 40, 512, 128, 0, {37}},
      // 64+ experts with many empty segments and decode-sized ones.
      {66, 9, 64, 64, 40, {}},
  };
}

TEST_F(Nf4Device, EveryAlgorithmAtSeveralPointsMatchesTheReference) {
  std::vector<Case> cases = shape_cases();
  for (int e = 0; e < 66; ++e) cases.back().counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (const Params& p : kTiledPoints)
    for (const Case& c : cases) run_case(c, choice("nf4_forward", "tiled", p), choice("nf4_backward", "tiled", p));
}

// The stream kernels' 16-byte path needs K % 32 == 0 and a 32-aligned window; these cases
// take it (the shape_cases mostly take the general decode): blocks straddling rows and
// experts (K = 96 with blocks of 64), a window starting 32 into its block, 70 experts with
// empty and decode-sized segments, ragged chunk, k-tile and split counts (K = 1056 = 33
// chunks, N = 45), segments longer than the tile rows, and fewer W rows than splits.
std::vector<Case> stream_cases() {
  std::vector<Case> cases = {
      {70, 13, 96, 64, 32, {}},
      {3, 45, 1056, 64, 0, {17, 0, 3}},
      {2, 5, 64, 32, 0, {2, 9}},
  };
  for (int e = 0; e < 70; ++e) cases[0].counts.push_back(e % 5 == 0 ? 0 : std::uint32_t(e % 7));
  return cases;
}

void Nf4Device::run_points(const char* algorithm, const std::vector<Params>& points) {
  std::vector<Case> cases = shape_cases();
  for (int e = 0; e < 66; ++e) cases.back().counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (const Case& c : stream_cases()) cases.push_back(c);
  cases.push_back({2, 24, 2048, 4096, 0, {3, 1}});
  cases.push_back({1, 7, 1024, 4096, 1056, {5}});
  cases.push_back({4, 16, 64, 64, 0, {0, 0, 0, 0}});
  cases.push_back({1, 8, 2112, 64, 0, {3}});  // K past warps' XL 2048: two staged segments
  const Choice no_backward;
  const AlgorithmSpec* spec = nf4_forward_family().find_algorithm(algorithm);
  ASSERT_NE(spec, nullptr);
  const DeviceLimits limits = DeviceLimits::of(runtime().device());
  std::vector<Params> held;
  for (const Params& p : points) {
    if (const std::optional<std::string> why = spec->violation(spec->complete(p), &limits)) {
      std::cout << "[ SKIPPED  ] " << algorithm << " " << format_params(spec->complete(p)) << ": " << *why << "\n";
      continue;
    }
    held.push_back(p);
  }
  ASSERT_FALSE(held.empty());
  for (const Params& p : held)
    for (const Case& c : cases) run_case(c, choice("nf4_forward", algorithm, p), no_backward);
  for (ElementType t : {ElementType::f16, ElementType::bf16}) {
    for (const Case& base : {Case{3, 24, 160, 64, 32, {2, 0, 5}}, Case{2, 19, 101, 32, 7, {1, 4}}}) {
      Case c = base;
      c.type = t;
      for (const Params& p : held) run_case(c, choice("nf4_forward", algorithm, p), no_backward);
    }
  }
}

TEST_F(Nf4Device, StreamAtSeveralPointsMatchesTheReference) {
  std::vector<Case> cases = shape_cases();
  for (int e = 0; e < 66; ++e) cases.back().counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (const Case& c : stream_cases()) cases.push_back(c);
  for (const auto& [fp, bp] : kStreamPoints)
    for (const Case& c : cases) run_case(c, choice("nf4_forward", "stream", fp), choice("nf4_backward", "stream", bp));
  // Half types on both paths, at the default and the widest point.
  for (ElementType t : {ElementType::f16, ElementType::bf16}) {
    for (const Case& base : {Case{3, 24, 160, 64, 32, {2, 0, 5}}, Case{2, 19, 101, 32, 7, {1, 4}}}) {
      Case c = base;
      c.type = t;
      for (std::size_t i : {std::size_t(0), std::size_t(2)})
        run_case(c, choice("nf4_forward", "stream", kStreamPoints[i].first),
                 choice("nf4_backward", "stream", kStreamPoints[i].second));
    }
  }
}

// Warps: run_points says which cases.

TEST_F(Nf4Device, WarpsAtSeveralPointsMatchesTheReference) { run_points("warps", kWarpsPoints); }

// Tc: its tensor-core path needs K and the window offset aligned to 64, blocks of at least
// 64 that divide K, and 8-byte aligned bytes; run_points' cases mostly take its general
// path, so these take the fast one, in every type (f32 splits into f16 parts; every type
// gets 8 segment rows a pass): N not a multiple of 16 (a ragged last tile), an empty
// segment and segments longer than a pass, a window 64 into a block of 128, 66 experts
// with decode-sized segments, a one-row segment on many batches (N = 200), and K of 10
// steps (whole groups of 4 steps and a partial one); f32 rows of very different magnitudes.
TEST_F(Nf4Device, TcAtSeveralPointsMatchesTheReference) {
  run_points("tc", kTcPoints);
  std::vector<Case> cases = {
      {3, 40, 256, 64, 0, {1, 0, 9}},
      {2, 24, 128, 128, 64, {4, 3}},
      {66, 16, 64, 64, 0, {}},
      {1, 200, 192, 64, 0, {1}},
      // 10 steps of 64: whole groups of 4 steps (their test-free loop) and a partial one,
      // also per part where teams split K, and 9 rows (two tiles of rows, one of 1).
      {2, 24, 640, 128, 64, {9, 2}},
  };
  for (int e = 0; e < 66; ++e) cases[2].counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16}) {
    for (Case c : cases) {
      c.type = t;
      for (const Params& p : kTcPoints) run_case(c, choice("nf4_forward", "tc", p), Choice());
    }
  }
  // 41 steps for the LW 1 point (the first): its steady rounds, then its tails with a partial
  // group, in two parts of uneven length (21 and 20 steps, KS 2). The others' loops are
  // covered by the shorter cases above.
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16}) {
    Case steady = {2, 24, 2624, 64, 0, {9, 2}};
    steady.type = t;
    run_case(steady, choice("nf4_forward", "tc", kTcPoints[0]), Choice());
  }
  // The points above pair the in-warp split (XS 0) with FR 4 only, and three register sets
  // (PF 2) with LW 1 only: f32 at XS 0 with FR 8 and PF 2 with LW 0 too.
  const Params in_warp_split = {{"XS", 0}, {"PF", 2}, {"RT", 1}};
  for (Case c : cases) {
    c.type = ElementType::f32;
    run_case(c, choice("nf4_forward", "tc", in_warp_split), Choice());
  }
  // f32 x is split per segment row and step with its own power of two: rows 2^5 apart in
  // magnitude (2^-15 to 2^20) catch a shift applied to the wrong column.
  Case graded = cases[4];
  graded.row_exponent_step = 5;
  for (const Params& p : kTcPoints) run_case(graded, choice("nf4_forward", "tc", p), Choice());
  run_case(graded, choice("nf4_forward", "tc", in_warp_split), Choice());
}

// Tc_tiled points (both directions): the defaults (128 × 128 tiles of 2 × 2 warps, KCH 4, three
// stages, swizzled rows, ldmatrix); 32 × 64 tiles of 1 × 2 warps, KCH 2 (forward pieces of 16
// codes for the half types, 8 for f32), two stages, padded rows, fragments by word loads,
// cp.async past L1 (several row tiles per segment); 64 × 32 tiles of 2 × 2 warps, KCH 8 (two
// forward pieces of 32 codes per W row and step for the half types), four stages, plain rows:
// fewer pieces than work-items in both directions, so some decode nothing. Each fits 48 KiB of
// local memory.
const std::vector<Params> kTcTiledPoints = {
    {},
    {{"MWG", 32},
     {"NWG", 64},
     {"KCH", 2},
     {"MWARPS", 1},
     {"NWARPS", 2},
     {"STAGES", 2},
     {"SWZ", 2},
     {"LDSM", 0},
     {"CPASYNC", 1}},
    {{"MWG", 64}, {"NWG", 32}, {"KCH", 8}, {"MWARPS", 2}, {"NWARPS", 2}, {"STAGES", 4}, {"SWZ", 0}},
};

// Tc_tiled, both directions at the same points: the shape cases in f32 (mostly its general
// decode: K, the window or the byte offset not aligned to a piece; the backward's sums over
// N = 37, 19, 40 and 9), and in every type two general cases and these on its whole-piece
// path: N and rows not multiples of the tiles, an empty segment, a window 64 into a block of
// 128, 66 experts with decode-sized segments, K of 10 steps of 64 and N = 72 (more steps
// than stages, a ragged last step of the backward's sum), a segment longer than a row tile;
// K = 5 and N = 6 (f32 takes the tiled algorithm there in both directions, as 3×TF32 needs a
// sum of 8 or more).
TEST_F(Nf4Device, TcTiledAtSeveralPointsMatchesTheReference) {
  std::vector<Case> cases = shape_cases();
  for (int e = 0; e < 66; ++e) cases.back().counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (const Params& p : kTcTiledPoints)
    for (const Case& c : cases)
      run_case(c, choice("nf4_forward", "tc_tiled", p), choice("nf4_backward", "tc_tiled", p));
  std::vector<Case> typed = {
      {3, 24, 160, 64, 32, {2, 0, 5}}, {2, 19, 101, 32, 7, {1, 4}}, {3, 40, 256, 64, 0, {1, 0, 9}},
      {2, 24, 128, 128, 64, {4, 3}},   {66, 16, 64, 64, 0, {}},     {2, 72, 640, 128, 64, {37, 2}},
      {2, 6, 5, 32, 0, {3, 2}},
  };
  for (int e = 0; e < 66; ++e) typed[4].counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16}) {
    for (Case c : typed) {
      c.type = t;
      for (const Params& p : kTcTiledPoints)
        run_case(c, choice("nf4_forward", "tc_tiled", p), choice("nf4_backward", "tc_tiled", p));
    }
  }
}

// Launch::first_event and Launch::event: the tc forward with f32 input and the pre-pass (XS
// 1) enqueues two commands, the first event the pre-pass's; with XS 0, one (both events are
// it); zero rows, a marker (both). Every event handed out is the caller's to release.
TEST_F(Nf4Device, LaunchEventsSpanEveryCommand) {
  Runtime& rt = runtime();
  const Nf4Geometry geo{1, 16, 64, 64, 0};
  auto packed = rt.allocate(std::size_t(geo.packed_bytes())).value();
  auto scales = rt.allocate(std::size_t(geo.scale_count()) * 4).value();
  auto cb = rt.allocate(64).value();
  rt.queue().enqueue_write_buffer(cb, 0, 64, kNf4Codebook.data());
  auto x = rt.allocate(64 * 4).value(), y = rt.allocate(16 * 4).value(), offs = rt.allocate(2 * 4).value();
  const std::vector<std::uint32_t> offsets{0, 1};
  rt.queue().enqueue_write_buffer(offs, 0, 8, offsets.data());
  const Nf4Weights w{geo, packed.get(), 0, scales.get(), 0, cb.get()};
  for (const std::int64_t rows : {std::int64_t(1), std::int64_t(0)}) {
    for (const int xs : {1, 0}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", XS " + std::to_string(xs));
      const std::vector<std::uint32_t> bounds{0, std::uint32_t(rows)};
      rt.queue().enqueue_write_buffer(offs, 0, 8, bounds.data());
      cl_event first = nullptr, last = nullptr;
      Launch launch;
      launch.first_event = &first;
      launch.event = &last;
      const Status s =
          nf4_forward_with(rt, choice("nf4_forward", "tc", {{"XS", xs}}),
                           Nf4ForwardArgs{w, x.get(), ElementType::f32, rows, offs.get(), y.get()}, launch);
      ASSERT_TRUE(s.ok()) << s.message();
      ASSERT_NE(first, nullptr);
      ASSERT_NE(last, nullptr);
      EXPECT_EQ(first == last, rows == 0 || xs == 0) << "two commands only for the pre-pass";
      ASSERT_EQ(clWaitForEvents(1, &last), CL_SUCCESS);
      cl_int status = CL_QUEUED;
      clGetEventInfo(first, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
      EXPECT_EQ(status, CL_COMPLETE) << "the first command finished before the last";
      cl_ulong first_start = 0, last_start = 0;
      if (clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof first_start, &first_start, nullptr) ==
              CL_SUCCESS &&
          clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_START, sizeof last_start, &last_start, nullptr) ==
              CL_SUCCESS) {
        EXPECT_LE(first_start, last_start);
      }
      EXPECT_EQ(clReleaseEvent(first), CL_SUCCESS);
      EXPECT_EQ(clReleaseEvent(last), CL_SUCCESS);
    }
  }
}

// Tc backward points: the defaults (4 warps, one group of 64 k, one row tile, two steps
// loaded together, one split); 2 warps, 4 groups (K = 192: a surplus group re-reads the row's
// last one), one step at a time, 4 splits; 8 warps, 2 groups, 2 row tiles, 16 splits (more
// than some problems' steps: warps and splits without rows).
const std::vector<Params> kTcBackwardPoints = {
    {},
    {{"WGS", 64}, {"KG", 4}, {"RT", 1}, {"PF", 1}, {"NSPLIT", 4}},
    {{"WGS", 256}, {"KG", 2}, {"RT", 2}, {"PF", 2}, {"NSPLIT", 16}},
};

// Tc backward: its tensor-core path needs K and the window offset aligned to 64, blocks of at
// least 64 and 4-byte aligned bytes; shape_cases mostly take its general path, these the fast
// one, in every type (bf16 one part, f32 and f16 three): a ragged last step (N = 40) with an
// empty segment and a segment longer than a row tile, a window 64 into a block of 128, blocks
// of 128 straddling rows (K = 192), 66 experts with decode-sized segments, one row on many
// steps (N = 200), and 17 rows (three row tiles of 8).
TEST_F(Nf4Device, TcBackwardAtSeveralPointsMatchesTheReference) {
  const Choice forward = choice("nf4_forward", "stream", {});
  std::vector<Case> cases = shape_cases();
  for (int e = 0; e < 66; ++e) cases.back().counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  for (const Case& c : cases)
    for (const Params& p : kTcBackwardPoints) run_case(c, forward, choice("nf4_backward", "tc", p));
  std::vector<Case> fast = {
      {3, 40, 256, 64, 0, {1, 0, 9}}, {2, 24, 128, 128, 64, {4, 3}}, {2, 21, 192, 128, 0, {3, 5}},
      {66, 16, 64, 64, 0, {}},        {1, 200, 192, 64, 0, {1}},     {1, 33, 128, 64, 0, {17}},
  };
  for (int e = 0; e < 66; ++e) fast[3].counts.push_back(e % 3 == 0 ? 0 : std::uint32_t(e % 4));
  // f16 takes f32's three-part path (its own build): at the defaults only.
  for (ElementType t : {ElementType::f32, ElementType::f16, ElementType::bf16}) {
    for (Case c : fast) {
      c.type = t;
      for (const Params& p : kTcBackwardPoints) {
        if (t == ElementType::f16 && !p.empty()) continue;
        run_case(c, forward, choice("nf4_backward", "tc", p));
      }
    }
  }
  // g rows 2^5 apart in magnitude (2^-15 to 2^20): the three-part split keeps each row's bits.
  Case graded = fast[5];
  graded.row_exponent_step = 5;
  for (const Params& p : kTcBackwardPoints) run_case(graded, forward, choice("nf4_backward", "tc", p));
}

// The splits of the stream and tc backwards meet in a second kernel (SPLIT_SUM 0, every
// device) or in the last split to finish (SPLIT_SUM 1, device-scope atomics): both add the
// planes in split order, so on the same inputs their dx agree bit for bit, and with the
// reference; at several split counts (the device's compute units raise NSPLIT 1 too), on
// the fast and the general paths, compact and dense grids, over several dispatches. Where the
// device lacks the atomics, SPLIT_SUM 1 is illegal (named) and a profile's is run as 0.
TEST_F(Nf4Device, SplitSumsAgreeByTheSecondKernelAndByTheLastSplit) {
  Runtime& rt = runtime();
  RuntimeOptions options = ocltk_test::test_runtime_options(cache_dir());  // the programs built before
  options.max_groups_per_dispatch = 5;
  Result<Runtime> capped = Runtime::open(options);
  ASSERT_TRUE(capped.ok()) << capped.status().message();
  const bool atomics = !limits().device_atomics_std.empty();
  std::vector<Case> cases = stream_cases();
  cases.push_back({3, 40, 256, 64, 0, {1, 0, 9}});  // tc's fast path
  // Points the other tests build too (SPLIT_SUM 0): 8, 32, 4 and 16 splits.
  const std::vector<std::pair<const char*, Params>> points = {
      {"stream", kStreamPoints[3].second},
      {"stream", kStreamPoints[2].second},
      {"tc", kTcBackwardPoints[1]},
      {"tc", kTcBackwardPoints[2]},
  };
  for (const Case& c : cases) {
    for (const auto& [algorithm, params] : points) {
      for (Runtime* on : {&rt, &capped.value()}) {
        Params by_kernel = params, by_last = params;
        by_kernel["SPLIT_SUM"] = 0;
        by_last["SPLIT_SUM"] = 1;
        const std::vector<float> second = backward_of(c, choice("nf4_backward", algorithm, by_kernel), *on);
        check_backward(c, second, algorithm);
        if (!atomics) continue;
        const std::vector<float> last = backward_of(c, choice("nf4_backward", algorithm, by_last), *on);
        ASSERT_EQ(second.size(), last.size());
        for (std::size_t i = 0; i < second.size(); ++i)
          ASSERT_EQ(std::memcmp(&second[i], &last[i], 4), 0)
              << algorithm << " " << format_params(params) << " dx[" << i << "]: " << second[i] << " vs " << last[i];
      }
    }
  }
  // Without the atomics: refused where asked for, dropped where a profile carries it.
  for (const char* algorithm : {"stream", "tc"}) {
    const AlgorithmSpec* a = nf4_backward_family().find_algorithm(algorithm);
    ASSERT_NE(a, nullptr);
    DeviceLimits without = limits();
    without.device_atomics_std.clear();
    const auto why = a->violation(a->complete({{"SPLIT_SUM", 1}}), &without);
    ASSERT_TRUE(why.has_value());
    EXPECT_NE(why->find("SPLIT_SUM = 1 needs device-scope acquire/release atomics"), std::string::npos) << *why;
    EXPECT_FALSE(a->violation(a->complete({{"SPLIT_SUM", 0}}), &without));
    EXPECT_EQ(a->build_options(a->complete({}), &without).rfind("-cl-std=CL1.2 ", 0), 0u);
    DeviceInfo plain = rt.device();
    plain.device_atomics_std.clear();
    Params params = a->complete({{"SPLIT_SUM", 1}});
    EXPECT_NE(adapt_params_to_device(*a, plain, params).find("SPLIT_SUM 1 -> 0"), std::string::npos);
    EXPECT_EQ(params.at("SPLIT_SUM"), 0);
    if (atomics) {
      const DeviceLimits with = limits();
      EXPECT_EQ(a->build_options(a->complete({{"SPLIT_SUM", 1}}), &with).rfind("-cl-std=" + with.device_atomics_std, 0),
                0u);
    }
  }
}

// The splits of N a backward launch makes, as nf4_backward_splits tells the tuner (which
// refines SPLIT_SUM only where there are several): stream_splits over the launch's grid, its
// k tiles (32·VW wide: 2 at VW 16, 1 at 32) and the experts with rows (a compact launch of 2 of 3 experts here);
// none for tiled. Nothing is built.
TEST_F(Nf4Device, BackwardSplitsAreThoseOfTheLaunch) {
  Runtime& rt = runtime();
  const Nf4Geometry geo{3, 40, 1024, 64, 0};
  const std::vector<std::uint32_t> offsets = {0, 2, 2, 5};  // rows on experts 0 and 2
  const std::int64_t rows = 5;
  auto buffer = [&](std::size_t bytes) { return rt.allocate(bytes).value(); };
  auto packed = buffer(std::size_t(geo.packed_bytes())), scales = buffer(std::size_t(geo.scale_count()) * 4),
       codebook = buffer(64), grad = buffer(std::size_t(rows * geo.out_features) * 4),
       dx = buffer(std::size_t(rows * geo.in_features) * 4), obuf = buffer(offsets.size() * 4);
  rt.queue().enqueue_write_buffer(obuf, 0, offsets.size() * 4, offsets.data());
  const Nf4BackwardArgs args{{geo, packed.get(), 0, scales.get(), 0, codebook.get()},
                             grad.get(),
                             ElementType::f32,
                             rows,
                             obuf.get(),
                             dx.get()};
  const std::int64_t units = std::int64_t(rt.device().compute_units);
  const auto splits = [&](const char* algorithm, const Params& p) {
    const Result<std::int64_t> r = nf4_backward_splits(rt, choice("nf4_backward", algorithm, p), args);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : -1;
  };
  using ocltk::detail::stream_splits;
  EXPECT_EQ(splits("stream", {{"NSPLIT", 1}, {"VW", 16}}), stream_splits(1, geo, rows, 2, 2, units));
  EXPECT_EQ(splits("stream", {{"NSPLIT", 8}, {"VW", 16}}), stream_splits(8, geo, rows, 2, 2, units));
  EXPECT_EQ(splits("stream", {{"NSPLIT", 1}, {"VW", 32}}), stream_splits(1, geo, rows, 2, 1, units));
  EXPECT_GE(splits("stream", {{"NSPLIT", 8}, {"VW", 16}}), 8);
  EXPECT_EQ(splits("tiled", {}), 1);
  Nf4BackwardArgs bad = args;
  bad.grad = nullptr;
  EXPECT_FALSE(nf4_backward_splits(rt, choice("nf4_backward", "stream", {}), bad).ok());
}

// A register target (REGS, params.hpp) where program binaries are PTX: tc forward at a
// target that spills (96) with tc backward at one that leaves the assembler more room than
// it takes (255), and warps with the backward stream at 128, in f32 and bf16, on tc's fast
// path (a ragged last tile, an empty segment) and a general one (K = 75); the program the
// runtime builds carries the directive. Elsewhere a launch that asks for a target is
// refused naming REGS and the reason, and writes nothing, and a program asked for one
// directly fails to build, naming the target.
TEST_F(Nf4Device, RegisterTargetsMatchTheReferenceOrAreRefused) {
  Runtime& rt = runtime();
  const AlgorithmSpec* tc = nf4_forward_family().find_algorithm("tc");
  const AlgorithmSpec* warps = nf4_forward_family().find_algorithm("warps");
  ASSERT_TRUE(tc != nullptr && warps != nullptr);
  if (limits().ptx_binaries) {
    const std::vector<unsigned char> binary =
        rt.program_for(*tc, tc->complete({{"REGS", 96}}), tc->tuned_variant).binary();
    EXPECT_NE(std::string(binary.begin(), binary.end()).find("\n.maxnreg 96\n"), std::string::npos);
    for (ElementType t : {ElementType::f32, ElementType::bf16}) {
      for (Case c : {Case{3, 40, 256, 64, 0, {1, 0, 9}}, Case{2, 24, 75, 64, 0, {2, 3}}}) {
        c.type = t;
        run_case(c, choice("nf4_forward", "tc", {{"REGS", 96}}), choice("nf4_backward", "tc", {{"REGS", 255}}));
        run_case(c, choice("nf4_forward", "warps", {{"REGS", 128}}), choice("nf4_backward", "stream", {{"REGS", 128}}));
      }
    }
    return;
  }
  try {
    rt.program_for(*warps, warps->complete({{"REGS", 128}}), warps->tuned_variant);
    ADD_FAILURE() << "a program with a register target built on " << rt.device().platform;
  } catch (const ocltk::BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("register target of 128"), std::string::npos) << e.what();
  }
  const Nf4Geometry geo{1, 16, 64, 64, 0};
  auto packed = rt.allocate(std::size_t(geo.packed_bytes())).value();
  auto scales = rt.allocate(std::size_t(geo.scale_count()) * 4).value();
  auto cb = rt.allocate(64).value();
  auto x = rt.allocate(64 * 4).value(), y = rt.allocate(16 * 4).value(), dx = rt.allocate(64 * 4).value();
  auto offs = rt.allocate(2 * 4).value();
  const std::vector<std::uint32_t> offsets{0, 1};
  rt.queue().enqueue_write_buffer(offs, 0, 8, offsets.data());
  const std::vector<float> poison(64, std::nanf(""));
  rt.queue().enqueue_write_buffer(y, 0, 16 * 4, poison.data());
  rt.queue().enqueue_write_buffer(dx, 0, 64 * 4, poison.data());
  const Nf4Weights w{geo, packed.get(), 0, scales.get(), 0, cb.get()};
  const Status fs = nf4_forward_with(rt, choice("nf4_forward", "warps", {{"REGS", 128}}),
                                     Nf4ForwardArgs{w, x.get(), ElementType::f32, 1, offs.get(), y.get()});
  const Status bs = nf4_backward_with(rt, choice("nf4_backward", "stream", {{"REGS", 168}}),
                                      Nf4BackwardArgs{w, y.get(), ElementType::f32, 1, offs.get(), dx.get()});
  for (const auto& [s, needle] : {std::make_pair(fs, "REGS = 128"), std::make_pair(bs, "REGS = 168")}) {
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("PTX"), std::string::npos) << s.message();
  }
  for (const auto& [buf, count] : {std::make_pair(&y, 16), std::make_pair(&dx, 64)}) {
    std::vector<float> got(std::size_t(count), 0.0f);
    rt.queue().enqueue_read_buffer(*buf, 0, got.size() * 4, got.data());
    for (float v : got) ASSERT_TRUE(std::isnan(v)) << "a refused launch wrote its output";
  }
}

// 70 experts over dispatches of at most 7 workgroups along dimension 1 (compact ones: the
// runtime reads the offsets back and finds 48 experts with rows): each dispatch's
// expert_base must reach the segment bounds, the split counters and the partial sums
// (and the warps forward's segment bounds).
TEST_F(Nf4Device, StreamSplitsOverSeveralDispatches) {
  RuntimeOptions options = ocltk_test::test_runtime_options(ocltk_test::make_temp_dir("nf4_cap_cache"));
  options.max_groups_per_dispatch = 7;
  Result<Runtime> capped = Runtime::open(options);
  ASSERT_TRUE(capped.ok()) << capped.status().message();
  const Case c = stream_cases()[0];
  for (std::size_t i : {std::size_t(0), std::size_t(2)})
    run_case(c, choice("nf4_forward", "stream", kStreamPoints[i].first),
             choice("nf4_backward", "stream", kStreamPoints[i].second), &capped.value());
  run_case(c, choice("nf4_forward", "warps", kWarpsPoints[1]), Choice(), &capped.value());
  run_case({70, 16, 64, 64, 0, c.counts}, choice("nf4_forward", "tc", kTcPoints[0]), Choice(), &capped.value());
  // A compact launch without the read-back: 15 rows on 8 of the 70 experts, 15 slots in
  // dispatches of 7 (each dispatch's base reaches the scan; slots 8 to 14 find no expert).
  Case sparse{70, 13, 96, 64, 32, std::vector<std::uint32_t>(70, 0)};
  for (int e = 0; e < 70; e += 9) sparse.counts[std::size_t(e)] = std::uint32_t(1 + e / 9 % 3);
  sparse.read_back = false;
  run_case(sparse, choice("nf4_forward", "stream", kStreamPoints[2].first),
           choice("nf4_backward", "stream", kStreamPoints[2].second), &capped.value());
  run_case(sparse, choice("nf4_forward", "warps", kWarpsPoints[1]), Choice(), &capped.value());
}

// Compact launches (a grid slot per expert with rows, nf4_slot_expert): rows on 3 of 64
// experts, the first and the last among them, with the offsets read back (3 slots) and not
// (6 slots: min(rows, experts), the last 3 find no expert and return); 10 rows on 2 of 8
// experts, compact only where read back (2 slots; else dense on 8). Every algorithm at a
// point the other tests build, forward and backward (tc, which has no compact form, on its
// dense grid; StreamSplitsOverSeveralDispatches splits compact launches over dispatches).
TEST_F(Nf4Device, CompactLaunchesServeOnlyTheExpertsWithRows) {
  std::vector<std::uint32_t> three(64, 0), two(8, 0);
  three[0] = 2, three[17] = 1, three[63] = 3;
  two[2] = 9, two[6] = 1;
  std::vector<Case> cases;
  for (const bool read_back : {false, true}) {
    Case a{64, 16, 64, 64, 0, three}, b{8, 24, 160, 64, 32, two};
    a.read_back = b.read_back = read_back;
    cases.push_back(a);
    cases.push_back(b);
  }
  const std::vector<std::pair<Choice, Choice>> choices = {
      {choice("nf4_forward", "stream", {}), choice("nf4_backward", "stream", kStreamPoints[2].second)},
      {choice("nf4_forward", "warps", kWarpsPoints[0]), choice("nf4_backward", "tc", kTcBackwardPoints[0])},
      {choice("nf4_forward", "tc", {}), Choice()},
  };
  for (const auto& [fwd, bwd] : choices)
    for (const Case& c : cases) run_case(c, fwd, bwd);
}

TEST_F(Nf4Device, HalfTypesAndBuiltinChoices) {
  for (ElementType t : {ElementType::f16, ElementType::bf16}) {
    Case c{2, 33, 130, 64, 3, {3, 6}, t};
    run_case(c, runtime().choose("nf4_forward", "decode"), runtime().choose("nf4_backward", "decode"));
    run_case(c, runtime().choose("nf4_forward", "prefill"), runtime().choose("nf4_backward", "prefill"));
  }
}

// The launches without a choice keep a plan per problem (Runtime::find_plan): neighbours one
// key field apart, each checked against the reference and for the choice a fresh choose_nf4
// makes: rows per expert across both class bounds (the built-in tiled points past decode); at
// decode N, K, the experts, the input type, the experts with rows and the most rows on one, each
// with a profile entry of its own problem (another stream point); rows with the experts not
// counted (read_back off); and another window offset. The key's tc alignment, which only the tc
// forward's kernel list reads, is not exercised here: PoCL runs no tc.
TEST_F(Nf4Device, ALaunchPlanServesItsProblemAgainAndNoOther) {
  const Case base{3, 33, 130, 64, 0, {2, 0, 3}};
  Case small = base, prefill = base, n34 = base, k194 = base, experts4 = base, half = base, offset = base,
       uncounted = base;
  small.counts = {20, 0, 30};
  prefill.counts = {150, 0, 200};
  n34.n = 34;
  k194.k = 194;
  experts4.experts = 4;
  experts4.counts = {2, 0, 3, 0};
  half.type = ElementType::f16;
  offset.element_offset = 3;
  uncounted.read_back = false;
  // The same rows on more experts, and on one more than before: both with entries of their own.
  Case spread = base, skewed = base, uncounted_small = small;
  spread.counts = {1, 1, 3};
  skewed.counts = {1, 0, 4};
  uncounted_small.read_back = false;  // counted as 3 experts with rows: small_batch by its rows alone
  struct Layout {
    Nf4Geometry geo;
    std::int64_t rows = 0, active = -1, most = -1;
  };
  const auto layout_of = [](const Case& c) {
    Layout l{{c.experts, c.n, c.k, c.block, c.element_offset}};
    std::int64_t active = 0, most = 0;
    for (std::uint32_t n : c.counts) {
      l.rows += n;
      active += n > 0;
      most = std::max<std::int64_t>(most, n);
    }
    if (c.read_back) {
      l.active = active;
      l.most = most;
    }
    return l;
  };
  // Decode entries of both kernels: stream points 0-3, then 1, 2, 3 again.
  Profile profile;
  profile.device = profile_device_of(runtime().device());
  profile.tuner_version = "test";
  profile.date = "2026-12-08";
  const std::pair<const Case*, std::size_t> entries[] = {{&base, 0}, {&n34, 1},    {&k194, 2},  {&experts4, 3},
                                                         {&half, 1}, {&spread, 2}, {&skewed, 3}};
  for (const auto& [c, point] : entries)
    for (const bool forward : {true, false}) {
      const Layout l = layout_of(*c);
      ProfileEntry e;
      e.kernel = forward ? "nf4_forward" : "nf4_backward";
      e.shape_class = "decode";
      e.algorithm = "stream";
      e.params = forward ? kStreamPoints[point].first : kStreamPoints[point].second;
      e.problem = nf4_problem_of(l.rows, l.geo, c->type, l.active, l.most);
      profile.entries.push_back(e);
    }
  const std::string path = write_temp_profile(profile, "nf4_plans");
  Result<Runtime> opened = open_with(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Runtime& rt = opened.value();

  const Case order[] = {base,     small, base,   n34,  base,   prefill, k194,      base,
                        experts4, half,  base,   k194, offset, small,   uncounted, uncounted_small,
                        spread,   base,  skewed, base, spread, prefill, n34};
  std::set<std::string> chosen;  // the stream points chosen: one per entry
  chosen_ = true;
  for (const Case& c : order) {
    const Layout l = layout_of(c);
    const auto expected = [&](const char* kernel) {
      Result<Choice> r = choose_nf4(rt, kernel, l.geo, l.rows, c.type, l.active, l.most);
      EXPECT_TRUE(r.ok()) << r.status().message();
      if (r.ok() && r.value().algorithm == "stream")
        chosen.insert(std::string(kernel) + format_params(r.value().params));
      return r.ok() ? r.value() : Choice{};
    };
    SCOPED_TRACE("E=" + std::to_string(c.experts) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                 " rows=" + std::to_string(l.rows) + " " + to_string(c.type) +
                 " off=" + std::to_string(c.element_offset) + (c.read_back ? "" : " not read back"));
    run_case(c, expected("nf4_forward"), expected("nf4_backward"), &rt);
  }
  chosen_ = false;
  EXPECT_EQ(chosen.size(), 8u) << "each stream point chosen somewhere, in both kernels";
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
}

TEST_F(Nf4Device, ZeroRowsAndEmptyOwner) {
  run_case({4, 16, 64, 64, 0, {0, 0, 0, 0}}, runtime().choose("nf4_forward", "decode"),
           runtime().choose("nf4_backward", "decode"));
  Runtime& rt = runtime();
  std::vector<std::uint32_t> zero{0};
  auto offs = rt.allocate(4).value();
  rt.queue().enqueue_write_buffer(offs, 0, 4, zero.data());
  auto cb = rt.allocate(64).value();
  rt.queue().enqueue_write_buffer(cb, 0, 64, kNf4Codebook.data());
  auto dummy = rt.allocate(64).value();
  Nf4Weights w{{0, 16, 64, 64, 0}, nullptr, 0, nullptr, 0, cb.get()};
  Nf4ForwardArgs a{w, dummy.get(), ElementType::f32, 0, offs.get(), dummy.get()};
  EXPECT_TRUE(nf4_forward_segmented(rt, a).ok());
  a.rows = 1;
  const Status s = nf4_forward_segmented(rt, a);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("empty owner"), std::string::npos) << s.message();
  a.rows = 0;
  a.w.codebook = nullptr;
  EXPECT_EQ(nf4_forward_segmented(rt, a).code(), ErrorCode::kInvalidArgument);
}

TEST_F(Nf4Device, BadInputsAreRejectedNamingTheFault) {
  Runtime& rt = runtime();
  const Nf4Geometry geo{2, 8, 100, 64, 0};
  auto packed = rt.allocate(std::size_t(geo.packed_bytes()) + 64).value();  // spare bytes: scales fail first
  auto scales = rt.allocate(std::size_t(geo.scale_count()) * 4).value();
  auto cb = rt.allocate(64).value();
  auto x = rt.allocate(4 * 100 * 4).value(), y = rt.allocate(4 * 8 * 4).value();
  auto offs = rt.allocate(3 * 4).value();
  auto set_offsets = [&](std::vector<std::uint32_t> v) { rt.queue().enqueue_write_buffer(offs, 0, 12, v.data()); };
  set_offsets({0, 2, 4});
  Nf4ForwardArgs good{
      {geo, packed.get(), 0, scales.get(), 0, cb.get()}, x.get(), ElementType::f32, 4, offs.get(), y.get()};
  ASSERT_TRUE(check_nf4_forward(rt, good).ok()) << check_nf4_forward(rt, good).message();
  // The check names the fault, and the launch refuses the same arguments before it enqueues
  // anything: the poisoned output stays as it was.
  const std::vector<std::uint8_t> poison(4 * 8 * 4, 0xFF);
  auto expect_bad = [&](Nf4ForwardArgs a, const std::string& needle) {
    const Status s = check_nf4_forward(rt, a);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << "'" << s.message() << "' lacks '" << needle << "'";
    rt.queue().enqueue_write_buffer(y, 0, poison.size(), poison.data());
    const Status launched = nf4_forward_segmented(rt, a);
    EXPECT_EQ(launched.code(), ErrorCode::kInvalidArgument) << needle;
    std::vector<std::uint8_t> after(poison.size());
    rt.queue().enqueue_read_buffer(y, 0, after.size(), after.data());
    EXPECT_EQ(after, poison) << needle << ": the refused launch wrote its output";
  };
  Nf4ForwardArgs a = good;
  a.w.geometry.block_size = 48;
  expect_bad(a, "block size 48");
  a = good;
  a.w.geometry.block_size = 8192;
  expect_bad(a, "block size 8192");
  a = good;
  a.w.geometry.element_offset = 64;
  expect_bad(a, "element_offset 64");
  a = good;
  a.w.geometry.in_features = 400;
  expect_bad(a, "packed");  // payload too short for the geometry
  a = good;
  a.w.geometry.element_offset = 60;  // needs one more scale than stored
  expect_bad(a, "scales");
  a = good;
  a.rows = 5;
  expect_bad(a, "input");  // input holds 4 rows of K
  a = good;
  a.w.geometry.out_features = std::int64_t(1) << 31;
  expect_bad(a, "2^30");
  a = good;
  a.w.geometry.experts = std::int64_t(1) << 20;
  a.w.geometry.out_features = std::int64_t(1) << 29;
  a.w.geometry.in_features = std::int64_t(1) << 29;
  expect_bad(a, "2^62");
  set_offsets({1, 2, 4});
  expect_bad(good, "start at 0");
  set_offsets({0, 3, 2});
  expect_bad(good, "decrease");
  set_offsets({0, 2, 3});
  expect_bad(good, "end at rows");
  set_offsets({0, 2, 4});
  // The caller's count of experts with rows: in [1, min(rows, experts)], and as the offsets
  // read back say.
  a = good;
  a.active_experts = 3;
  expect_bad(a, "active_experts = 3 is neither -1 (unknown) nor in [1, 2]");
  a.active_experts = 0;
  expect_bad(a, "active_experts = 0");
  a.active_experts = -2;
  expect_bad(a, "active_experts = -2");
  a.active_experts = 1;
  expect_bad(a, "active_experts = 1 but the offsets give rows to 2 experts");
  a.validate_offsets = false;
  EXPECT_TRUE(check_nf4_forward(rt, a).ok()) << "offsets not read: nothing to contradict";
  a.active_experts = 2;
  a.validate_offsets = true;
  EXPECT_TRUE(check_nf4_forward(rt, a).ok());
  // The caller's most rows on one expert: at least the mean of the experts with rows, at most
  // what the others leave (every one holds a row), and as the offsets read back say ({2, 2}).
  a = good;
  a.max_expert_rows = 1;
  expect_bad(a, "max_expert_rows = 1 is neither -1 (unknown) nor in [2, 4] (4 rows over at most 2 experts with rows)");
  a.max_expert_rows = 5;
  expect_bad(a, "max_expert_rows = 5 is neither");
  a.max_expert_rows = -2;
  expect_bad(a, "max_expert_rows = -2");
  a.active_experts = 2;
  a.max_expert_rows = 4;
  expect_bad(a, "max_expert_rows = 4 is neither -1 (unknown) nor in [2, 3] (4 rows over 2 experts with rows)");
  a.max_expert_rows = 3;
  expect_bad(a, "max_expert_rows = 3 but the offsets give at most 2 rows to one expert");
  a.validate_offsets = false;
  EXPECT_TRUE(check_nf4_forward(rt, a).ok()) << "offsets not read: nothing to contradict";
  a.validate_offsets = true;
  a.max_expert_rows = 2;
  EXPECT_TRUE(check_nf4_forward(rt, a).ok());
  a.rows = 0;
  a.active_experts = 0;
  set_offsets({0, 0, 0});
  expect_bad(a, "max_expert_rows = 2 is neither -1 (unknown) nor in [0, 0]");
  a.max_expert_rows = 0;
  EXPECT_TRUE(check_nf4_forward(rt, a).ok());
  set_offsets({0, 2, 4});
  a = good;
  a.w.geometry.experts = 3;  // offsets buffer has 3 entries, needs 4 (and more payload)
  expect_bad(a, "packed");
  auto small_cb = rt.allocate(32).value();
  a = good;
  a.w.codebook = small_cb.get();
  expect_bad(a, "codebook");
  // Input width: backward reads grad of width N; a buffer sized for K fails for bigger N.
  Nf4BackwardArgs b{good.w, y.get(), ElementType::f32, 4, offs.get(), y.get()};
  EXPECT_EQ(check_nf4_backward(rt, b).code(), ErrorCode::kInvalidArgument);  // dx needs rows × K floats
  b.grad_input = x.get();
  b.max_expert_rows = 3;  // the backward checks the caller's counts alike
  const Status bwd = check_nf4_backward(rt, b);
  EXPECT_NE(bwd.message().find("nf4_backward: max_expert_rows = 3 but the offsets give at most 2"), std::string::npos)
      << bwd.message();
  b.max_expert_rows = 2;
  EXPECT_TRUE(check_nf4_backward(rt, b).ok()) << check_nf4_backward(rt, b).message();
  // Operands from another context.
  boost::compute::context other(rt.device().handle);
  boost::compute::buffer foreign(other, 1024);
  a = good;
  a.input = foreign.get();
  expect_bad(a, "another OpenCL context");
}

// The profile entry of a launch is chosen by its experts with rows, the rows per such expert
// and the most rows on one of them (problem_distance): rows crowded on a few experts (top-k
// routing) take the entry measured at their segments' length, and a launch with one long
// segment the entry measured on such a layout, counted from the offsets read back or given by
// the caller (active_experts, max_expert_rows); without either, the rows count as spread
// evenly. Stream points other tests build, each the entry of one layout of 8 or 16 rows.
TEST_F(Nf4Device, ProfileEntryFollowsTheRowsPerExpertWithRows) {
  const ocltk::AlgorithmSpec* stream = nf4_forward_family().find_algorithm("stream");
  ASSERT_NE(stream, nullptr);
  const Params one_row = stream->complete(kStreamPoints[0].first), two_rows = stream->complete(kStreamPoints[3].first),
               batch = stream->complete(kStreamPoints[1].first);
  const Nf4Geometry geo{8, 16, 64, 64, 0};
  auto entry = [&](const Params& p, std::int64_t rows, const char* shape_class = "decode") {
    ProfileEntry e;
    e.kernel = "nf4_forward";
    e.shape_class = shape_class;
    e.algorithm = "stream";
    e.params = p;
    e.problem = nf4_problem_of(rows, geo);
    e.problem.erase("input_bits");  // as the tuner writes f32 problems
    return e;
  };
  Profile profile;
  profile.device = profile_device_of(runtime().device());
  profile.tuner_version = "test";
  profile.date = "2026-12-01";
  // Measured on 8 rows with 5 on one of 4 experts: the entry of launches with a long segment.
  ProfileEntry skewed = entry(batch, 8);
  skewed.problem["active"] = 4;
  skewed.problem["max_rows"] = 5;
  profile.entries = {entry(one_row, 8), entry(two_rows, 16), skewed, entry(batch, 512, "small_batch")};
  // The backward's two entries, at the same problems: the stream points' backward halves.
  const ocltk::AlgorithmSpec* stream_bwd = nf4_backward_family().find_algorithm("stream");
  ASSERT_NE(stream_bwd, nullptr);
  const Params one_row_bwd = stream_bwd->complete(kStreamPoints[0].second),
               two_rows_bwd = stream_bwd->complete(kStreamPoints[3].second);
  for (const auto& [p, rows] : {std::make_pair(one_row_bwd, 8), std::make_pair(two_rows_bwd, 16)}) {
    ProfileEntry e = entry(p, rows);
    e.kernel = "nf4_backward";
    profile.entries.push_back(e);
  }
  const std::string path = write_temp_profile(profile, "nf4_routing_profile");
  Result<Runtime> opened = open_with(path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Runtime& rt = opened.value();

  auto packed = rt.allocate(std::size_t(geo.packed_bytes())).value();
  auto scales = rt.allocate(std::size_t(geo.scale_count()) * 4).value();
  auto cb = rt.allocate(64).value();
  rt.queue().enqueue_write_buffer(cb, 0, 64, kNf4Codebook.data());
  auto x = rt.allocate(8 * 64 * 4).value(), y = rt.allocate(8 * 16 * 4).value();
  auto offs = rt.allocate(9 * 4).value();
  const std::vector<std::uint32_t> even{0, 1, 2, 3, 4, 5, 6, 7, 8}, crowded{0, 2, 4, 6, 8, 8, 8, 8, 8},
      long_one{0, 0, 5, 5, 6, 7, 7, 8, 8};
  EXPECT_EQ(nf4_active_experts(even.data(), even.size()), 8);
  EXPECT_EQ(nf4_active_experts(crowded.data(), crowded.size()), 4);
  EXPECT_EQ(nf4_active_experts(long_one.data(), long_one.size()), 4);
  EXPECT_EQ(nf4_max_expert_rows(even.data(), even.size()), 1);
  EXPECT_EQ(nf4_max_expert_rows(crowded.data(), crowded.size()), 2);
  EXPECT_EQ(nf4_max_expert_rows(long_one.data(), long_one.size()), 5);
  const Nf4ForwardArgs base{
      {geo, packed.get(), 0, scales.get(), 0, cb.get()}, x.get(), ElementType::f32, 8, offs.get(), y.get()};
  // The entry a launch of `args` through `launch` takes, its offsets set to `offsets`.
  auto chosen = [&](auto args, auto launch, const std::vector<std::uint32_t>& offsets, bool validate,
                    std::int64_t active, std::int64_t longest = -1) {
    rt.queue().enqueue_write_buffer(offs, 0, 9 * 4, offsets.data());
    args.validate_offsets = validate;
    args.active_experts = active;
    args.max_expert_rows = longest;
    const Status s = launch(rt, args, Launch{});
    EXPECT_TRUE(s.ok()) << s.message();
    const Choice c = rt.last_choice();
    EXPECT_EQ(c.source, path) << c.describe();
    return c.params;
  };
  auto params_of = [&](const std::vector<std::uint32_t>& offsets, bool validate, std::int64_t active,
                       std::int64_t longest = -1) {
    return chosen(base, nf4_forward_segmented, offsets, validate, active, longest);
  };
  EXPECT_EQ(params_of(even, true, -1), one_row);
  EXPECT_EQ(params_of(crowded, true, -1), two_rows) << "2 rows on each of 4 experts, read back";
  EXPECT_EQ(params_of(crowded, true, 4), two_rows);
  EXPECT_EQ(params_of(crowded, false, 4), two_rows) << "the caller's count, offsets not read";
  EXPECT_EQ(params_of(crowded, false, -1), one_row) << "neither: taken as an even spread";
  // 4 experts with rows either way; one of them with 5 rows takes the entry measured so.
  EXPECT_EQ(params_of(long_one, true, -1), batch) << "5 rows on one expert, read back";
  EXPECT_EQ(params_of(long_one, false, 4, 5), batch) << "the caller's counts, offsets not read";
  EXPECT_EQ(params_of(long_one, false, 4), two_rows) << "longest segment unknown: as 4 experts' even spread";
  EXPECT_EQ(params_of(crowded, false, 4, 2), two_rows);
  EXPECT_EQ(params_of(long_one, false, -1, 5), batch) << "5 rows on one leave 3 to at most 3 others: 4 with rows";
  EXPECT_EQ(params_of(even, false, -1, 8), two_rows) << "all 8 rows on one expert: 1 with rows, 8 rows per expert";
  // The backward chooses alike (g: rows × N, dx: rows × K, as big as x here).
  const Nf4BackwardArgs bwd{base.w, y.get(), ElementType::f32, 8, offs.get(), x.get()};
  EXPECT_EQ(chosen(bwd, nf4_input_backward_segmented, even, true, -1), one_row_bwd);
  EXPECT_EQ(chosen(bwd, nf4_input_backward_segmented, crowded, true, -1), two_rows_bwd);
  EXPECT_EQ(chosen(bwd, nf4_input_backward_segmented, crowded, false, 4), two_rows_bwd);
  EXPECT_EQ(chosen(bwd, nf4_input_backward_segmented, long_one, true, 4, 5), two_rows_bwd) << "no skewed entry";
  // The shape class follows the rows per expert with rows: 64 rows on one of 8 experts is
  // small_batch, not decode.
  auto big_x = rt.allocate(64 * 64 * 4).value(), big_y = rt.allocate(64 * 16 * 4).value();
  const std::vector<std::uint32_t> one_expert{0, 64, 64, 64, 64, 64, 64, 64, 64};
  rt.queue().enqueue_write_buffer(offs, 0, 9 * 4, one_expert.data());
  Nf4ForwardArgs a = base;
  a.rows = 64;
  a.input = big_x.get();
  a.output = big_y.get();
  ASSERT_TRUE(nf4_forward_segmented(rt, a).ok());
  EXPECT_EQ(rt.last_choice().shape_class, "small_batch") << rt.last_choice().describe();
  EXPECT_EQ(rt.last_choice().params, batch);
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(path).parent_path(), ec);
}

TEST_F(Nf4Device, RoutingGroupsScattersAndFeedsTheForward) {
  Runtime& rt = runtime();
  const std::int64_t tokens = 13, top_k = 2, E = 5, K = 70, N = 24;
  std::mt19937& g = rng();
  std::vector<std::uint32_t> ids(tokens * top_k);
  for (auto& id : ids) id = g() % E;
  ids[3] = 99;  // an out-of-range id is dropped
  std::vector<float> wts = ocltk_test::random_floats(g, ids.size());
  const std::vector<float> x = ocltk_test::random_floats(g, std::size_t(tokens * K));
  auto up = [&](const void* d, std::size_t bytes) {
    auto b = rt.allocate(bytes).value();
    rt.queue().enqueue_write_buffer(b, 0, bytes, d);
    return b;
  };
  auto ids_b = up(ids.data(), ids.size() * 4), x_b = up(x.data(), x.size() * 4), w_b = up(wts.data(), wts.size() * 4);
  auto offs = rt.allocate((E + 1) * 4).value(), pair_row = rt.allocate(ids.size() * 4).value(),
       row_token = rt.allocate(ids.size() * 4).value(), gathered = rt.allocate(ids.size() * K * 4).value();
  RouteArgs ra{
      tokens,          top_k,         E, K, ElementType::f32, ids_b.get(), x_b.get(), offs.get(), pair_row.get(),
      row_token.get(), gathered.get()};
  ASSERT_TRUE(route_tokens(rt, ra).ok());
  std::vector<std::uint32_t> off(E + 1), prow(ids.size());
  rt.queue().enqueue_read_buffer(offs, 0, off.size() * 4, off.data());
  rt.queue().enqueue_read_buffer(pair_row, 0, prow.size() * 4, prow.data());
  EXPECT_EQ(off.back(), ids.size() - 1);
  EXPECT_EQ(prow[3], 0xFFFFFFFFu);
  std::vector<float> gat(ids.size() * K);
  rt.queue().enqueue_read_buffer(gathered, 0, gat.size() * 4, gat.data());
  for (std::size_t p = 0; p < ids.size(); ++p) {
    if (ids[p] >= E) continue;
    ASSERT_GE(prow[p], off[ids[p]]);
    ASSERT_LT(prow[p], off[ids[p] + 1]);
    for (std::int64_t k = 0; k < K; ++k) ASSERT_EQ(gat[prow[p] * K + k], x[(p / top_k) * K + k]);
  }
  // Forward on the grouped rows, then scatter back, against a per-token reference.
  const Nf4Geometry geo{E, N, K, 64, 0};
  const std::vector<float> stream = ocltk_test::random_floats(g, std::size_t(geo.coefficients()));
  const Nf4Packed q = quantize_nf4(stream.data(), stream.size(), 64);
  std::vector<float> w(stream.size());
  dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, 0, 64, w.size(), w.data());
  auto pk = up(q.packed.data(), q.packed.size()), sc = up(q.scales.data(), q.scales.size() * 4),
       cb = up(kNf4Codebook.data(), 64);
  const std::int64_t rows = off.back();
  auto yb = rt.allocate(ids.size() * N * 4).value(), out = rt.allocate(tokens * N * 4).value();
  Nf4ForwardArgs fa{
      {geo, pk.get(), 0, sc.get(), 0, cb.get()}, gathered.get(), ElementType::f32, rows, offs.get(), yb.get()};
  ASSERT_TRUE(nf4_forward_segmented(rt, fa).ok());
  ScatterArgs sa{tokens, top_k, N, ElementType::f32, yb.get(), rows, pair_row.get(), w_b.get(), out.get()};
  ASSERT_TRUE(scatter_rows(rt, sa).ok());
  std::vector<float> got(tokens * N);
  rt.queue().enqueue_read_buffer(out, 0, got.size() * 4, got.data());
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t n = 0; n < N; ++n) {
      double want = 0, mag = 0;
      for (std::int64_t s = 0; s < top_k; ++s) {
        const std::uint32_t e = ids[t * top_k + s];
        if (e >= E) continue;
        double dot = 0, adot = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          dot += double(x[t * K + k]) * w[(e * N + n) * K + k];
          adot += std::fabs(double(x[t * K + k]) * w[(e * N + n) * K + k]);
        }
        want += wts[t * top_k + s] * dot;
        mag += std::fabs(wts[t * top_k + s]) * adot;
      }
      ASSERT_NEAR(got[t * N + n], want, gemm_nt_error_bound(K + 2, mag, 1, 0)) << "token " << t << " n " << n;
    }
}

// The model of a top-k router that the bench (--ocltk_routing) and the tuner (--shapes top_k,
// a model's experts) lay rows out with: every token sends one row to top_k distinct experts,
// so the rows add up, no expert gets more rows than there are tokens, and one seed gives one
// layout; even spreads and bad arguments as documented.
TEST(Nf4Routing, TopKOffsetsModelARouter) {
  for (const auto& [tokens, experts, top_k] : std::vector<std::array<std::int64_t, 3>>{
           {1, 8, 2}, {4, 8, 2}, {16, 8, 2}, {8, 64, 6}, {0, 4, 1}, {5, 3, 3}, {1000, 64, 8}}) {
    SCOPED_TRACE(std::to_string(tokens) + " tokens, top-" + std::to_string(top_k) + " of " + std::to_string(experts));
    const std::vector<std::uint32_t> offsets = ocltk::nf4_topk_offsets(tokens, experts, top_k, 7);
    ASSERT_EQ(offsets.size(), std::size_t(experts + 1));
    EXPECT_EQ(offsets.front(), 0u);
    EXPECT_EQ(std::int64_t(offsets.back()), tokens * top_k);
    for (std::int64_t e = 0; e < experts; ++e) {
      ASSERT_LE(offsets[std::size_t(e)], offsets[std::size_t(e + 1)]);
      EXPECT_LE(std::int64_t(offsets[std::size_t(e + 1)] - offsets[std::size_t(e)]), tokens) << "expert " << e;
    }
    const std::int64_t active = ocltk::nf4_active_experts(offsets.data(), offsets.size());
    EXPECT_LE(active, std::min(experts, tokens * top_k));
    if (tokens > 0) {
      EXPECT_GE(active, top_k);
    }
    EXPECT_EQ(ocltk::nf4_topk_offsets(tokens, experts, top_k, 7), offsets);  // one seed, one layout
  }
  // Another seed, another layout (8 tokens over 64 experts cannot all agree by chance).
  EXPECT_NE(ocltk::nf4_topk_offsets(8, 64, 6, 7), ocltk::nf4_topk_offsets(8, 64, 6, 8));
  // Top-E routing sends every token to every expert.
  EXPECT_EQ(ocltk::nf4_topk_offsets(3, 4, 4, 1), (std::vector<std::uint32_t>{0, 3, 6, 9, 12}));
  for (const auto& [tokens, experts, top_k] :
       std::vector<std::array<std::int64_t, 3>>{{-1, 8, 2}, {4, 8, 0}, {4, 8, 9}, {std::int64_t(1) << 31, 8, 2}})
    EXPECT_THROW(ocltk::nf4_topk_offsets(tokens, experts, top_k, 1), ocltk::Error) << tokens << " " << top_k;

  ocltk::Nf4Problem even;
  even.experts = 8;
  even.rows = 12;
  EXPECT_EQ(ocltk::nf4_problem_offsets(even), (std::vector<std::uint32_t>{0, 1, 3, 4, 6, 7, 9, 10, 12}));
  ocltk::Nf4Problem routed = even;
  routed.rows = 32;
  routed.top_k = 2;
  const std::vector<std::uint32_t> r = ocltk::nf4_problem_offsets(routed);
  EXPECT_EQ(r.back(), 32u);
  EXPECT_EQ(ocltk::nf4_problem_offsets(routed), r);  // every run lays one problem out alike
  routed.rows = 31;                                  // not a whole number of tokens
  EXPECT_THROW(ocltk::nf4_problem_offsets(routed), ocltk::Error);
}

// The stream backward's splits of N: the tuned count where the grid already gives every
// compute unit a workgroup, raised where it would not, within N and the partial sums' cap.
TEST(Nf4Splits, FillTheComputeUnitsWithinNAndTheScratch) {
  using ocltk::detail::stream_splits;
  Nf4Geometry mixtral{8, 14336, 4096, 64, 0}, fine{64, 1408, 2048, 64, 0};
  // Mixtral-like, 8 experts x 8 k tiles = 64 workgroups a split: raised to 3 on 132 units.
  EXPECT_EQ(stream_splits(1, mixtral, 8, 8, 8, 132), 3);
  EXPECT_EQ(stream_splits(8, mixtral, 8, 8, 8, 132), 8);  // tuned above the floor: kept
  EXPECT_EQ(stream_splits(32, mixtral, 64, 8, 8, 132), 32);
  EXPECT_EQ(stream_splits(1, fine, 256, 64, 4, 132), 1);  // 256 workgroups fill 132 units
  EXPECT_EQ(stream_splits(1, fine, 256, 64, 4, 0), 1);    // units unknown: the tuned count
  // A compact launch counts the slots, not the experts: one row of the Mixtral-like shape is
  // 1 x 8 pairs (17 splits on 132 units), 8 rows on the fine-grained one 8 x 4 (5).
  EXPECT_EQ(stream_splits(1, mixtral, 1, 1, 8, 132), 17);
  EXPECT_EQ(stream_splits(1, fine, 8, 8, 4, 132), 5);
  EXPECT_EQ(stream_splits(1, fine, 8, 100, 4, 132), 1);  // slots past the experts count as the experts
  // At most N: one expert of 2 W rows and one k tile, raised towards 132 but capped at 2.
  EXPECT_EQ(stream_splits(1, Nf4Geometry{1, 2, 512, 64, 0}, 1, 1, 1, 132), 2);
  // The partial sums (splits x rows x K x 4 bytes) stay within 256 MiB: 64 MiB a split here.
  EXPECT_EQ(stream_splits(32, mixtral, 4096, 8, 8, 132), 4);
  EXPECT_EQ(ocltk::detail::kMaxSplitScratchBytes, std::int64_t(256) << 20);
  // One split even where its partial sums alone would pass the cap (it writes dx directly).
  EXPECT_EQ(stream_splits(8, mixtral, std::int64_t(1) << 15, 8, 8, 132), 1);
}

TEST(Nf4Family, TablesMatchTheSources) {
  for (const KernelFamily* f : {&nf4_forward_family(), &nf4_backward_family()}) {
    EXPECT_EQ(f->classes.size(), f->builtin.size());
    for (const AlgorithmSpec& a : f->algorithms) {
      const std::string& src = kernel_source(a.source_name);
      for (const ParamSpec& p : a.params) {
        EXPECT_NE(src.find("#ifndef " + p.name + "\n#define " + p.name + " " + std::to_string(p.default_value)),
                  std::string::npos)
            << a.source_name << " " << p.name;
      }
      EXPECT_FALSE(a.violation(a.defaults(), nullptr)) << f->name << "/" << a.name;
      EXPECT_FALSE(a.legal_space(nullptr).empty());
      // The runtime passes `compact` exactly to the kernels that take it (nf4_slot_expert).
      EXPECT_EQ(a.compact_experts, src.find("const int expert_base, const int compact,") != std::string::npos)
          << f->name << "/" << a.name;
    }
    for (std::size_t i = 0; i < f->classes.size(); ++i) {
      const AlgorithmSpec* a = f->find_algorithm(f->builtin[i].algorithm);
      ASSERT_NE(a, nullptr);
      EXPECT_FALSE(a->violation(a->complete(f->builtin[i].params), nullptr));
    }
  }
  EXPECT_EQ(nf4_shape_class(1), "decode");
  EXPECT_EQ(nf4_shape_class(16), "decode");
  EXPECT_EQ(nf4_shape_class(64), "small_batch");
  EXPECT_EQ(nf4_shape_class(4096), "prefill");
}

}  // namespace

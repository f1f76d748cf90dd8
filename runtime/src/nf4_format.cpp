// The nf4 format on the host: geometry of windows, the bitsandbytes-identical quantizer,
// the dequantizer and the CPU reference of the products.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/nf4.hpp"
#include "ocltk/status.hpp"

namespace ocltk {

const std::array<float, 16> kNf4Codebook = {-1.0f,
                                            -0.6961928009986877f,
                                            -0.5250730514526367f,
                                            -0.39491748809814453f,
                                            -0.28444138169288635f,
                                            -0.18477343022823334f,
                                            -0.09105003625154495f,
                                            0.0f,
                                            0.07958029955625534f,
                                            0.16093020141124725f,
                                            0.24611230194568634f,
                                            0.33791524171829224f,
                                            0.44070982933044434f,
                                            0.5626170039176941f,
                                            0.7229568362236023f,
                                            1.0f};

bool nf4_block_size_valid(std::int64_t b) { return b >= 32 && b <= 4096 && (b & (b - 1)) == 0; }

std::int64_t Nf4Geometry::packed_bytes() const {
  const std::int64_t count = coefficients();
  return count == 0 ? 0 : (element_offset + count + 1) / 2;
}

std::int64_t Nf4Geometry::scale_count() const {
  const std::int64_t count = coefficients();
  return count == 0 ? 0 : (element_offset + count + block_size - 1) / block_size;
}

void Nf4Geometry::validate(const std::string& who) const {
  auto fail = [&](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, who + ": " + m); };
  if (!nf4_block_size_valid(block_size))
    fail("block size " + std::to_string(block_size) + " is not a power of two from 32 to 4096");
  if (experts < 0) fail("experts = " + std::to_string(experts) + " is negative");
  if (experts == 0) {
    if (element_offset != 0)
      fail("an empty owner (0 experts) must have element_offset 0, got " + std::to_string(element_offset));
    return;
  }
  if (out_features < 1 || in_features < 1)
    fail("out_features (N) = " + std::to_string(out_features) +
         " and in_features (K) = " + std::to_string(in_features) + " must be at least 1");
  if (out_features >= kNf4MaxDim || in_features >= kNf4MaxDim)
    fail("N = " + std::to_string(out_features) + ", K = " + std::to_string(in_features) +
         ": each must be below 2^30 (32-bit indexing within a row)");
  if (element_offset < 0 || element_offset >= block_size)
    fail("element_offset " + std::to_string(element_offset) + " is not inside the first block [0, " +
         std::to_string(block_size) + ")");
  // experts · N · K + element_offset must stay below 2^62 (64-bit stream positions).
  if (double(experts) * double(out_features) * double(in_features) + double(element_offset) >=
      double(kNf4MaxCoefficients))
    fail("experts · N · K = " + std::to_string(experts) + "·" + std::to_string(out_features) + "·" +
         std::to_string(in_features) + " exceeds the 2^62 coefficient limit");
  if (experts >= (std::int64_t(1) << 31) - 1) fail("experts = " + std::to_string(experts) + " exceeds 2^31 - 2");
}

// bitsandbytes' dQuantizeNF4: a fixed tree of strict comparisons against the midpoints
// of adjacent NF4 levels, as f32 constants. A NaN (0 · inf for an all-zero block) fails
// every comparison and lands on code 0, as on the GPU.
std::uint8_t nf4_code_of(float x) {
  if (x > 0.03979014977812767f) {
    if (x > 0.3893125355243683f) {
      if (x > 0.6427869200706482f) return x > 0.8614784181118011f ? 15 : 14;
      return x > 0.5016634166240692f ? 13 : 12;
    }
    if (x > 0.2035212516784668f) return x > 0.2920137718319893f ? 11 : 10;
    return x > 0.1202552504837513f ? 9 : 8;
  }
  if (x > -0.33967943489551544f) {
    if (x > -0.13791173323988914f) return x > -0.045525018125772476f ? 7 : 6;
    return x > -0.23460740596055984f ? 5 : 4;
  }
  if (x > -0.6106329262256622f) return x > -0.4599952697753906f ? 3 : 2;
  return x > -0.8480964004993439f ? 1 : 0;
}

namespace detail {
extern const unsigned char kFastRcpTable[];  // generated from runtime/data/nvidia-fast-rcp.bin.z
extern const std::size_t kFastRcpTable_size;
}  // namespace detail

namespace {

// Per mantissa of x in [1, 2): how the GPU's fast reciprocal differs from IEEE 1/x
// (0 same, 1 one ulp up, 2 one ulp down), four mantissas per byte. Inflated once.
const std::vector<std::uint8_t>& fast_rcp_table() {
  static const std::vector<std::uint8_t> table = [] {
    std::vector<std::uint8_t> out(std::size_t(1) << 21);
    uLongf size = uLongf(out.size());
    if (uncompress(out.data(), &size, detail::kFastRcpTable, uLong(detail::kFastRcpTable_size)) != Z_OK ||
        size != out.size())
      throw Error(ErrorCode::kIo, "the embedded fast-reciprocal table is damaged");
    return out;
  }();
  return table;
}

}  // namespace

float bitsandbytes_reciprocal(float absmax) {
  // Flush-to-zero, as --use_fast_math compiles it: a subnormal divisor is zero.
  if (!(std::fabs(absmax) >= std::numeric_limits<float>::min())) return std::copysign(INFINITY, absmax);
  volatile float exact = 1.0f / absmax;
  if (!std::isfinite(exact) || std::fabs(exact) < std::numeric_limits<float>::min()) return exact;
  std::uint32_t x, y;
  const float divisor = absmax, result = exact;
  std::memcpy(&x, &divisor, 4);
  std::memcpy(&y, &result, 4);
  const std::uint32_t mantissa = x & 0x7FFFFFu;
  const int code = (fast_rcp_table()[mantissa >> 2] >> (2 * (mantissa & 3))) & 3;
  y += code == 1 ? 1u : code == 2 ? 0xFFFFFFFFu : 0u;  // one ulp in magnitude, sign kept
  float out;
  std::memcpy(&out, &y, 4);
  return out;
}

namespace {

template <class Load>
Nf4Packed quantize_with(std::size_t count, std::int64_t block_size, Load load) {
  if (!nf4_block_size_valid(block_size))
    throw Error(ErrorCode::kInvalidArgument,
                "quantize_nf4: block size " + std::to_string(block_size) + " is not a power of two from 32 to 4096");
  Nf4Packed out;
  const std::size_t bs = std::size_t(block_size);
  out.packed.assign((count + 1) / 2, 0);
  out.scales.resize((count + bs - 1) / bs);
  for (std::size_t b = 0; b < out.scales.size(); ++b) {
    const std::size_t begin = b * bs, end = std::min(count, begin + bs);
    float absmax = 0.0f;  // fmaxf ignores NaN, as bitsandbytes' reduction does
    for (std::size_t i = begin; i < end; ++i) absmax = std::fmax(absmax, std::fabs(load(i)));
    out.scales[b] = absmax;
    // bitsandbytes multiplies by its GPU's f32 reciprocal (not a division, and not the
    // IEEE reciprocal either): both matter at the decision thresholds.
    volatile float inv = bitsandbytes_reciprocal(absmax);
    for (std::size_t i = begin; i < end; ++i) {
      volatile float normalized = load(i) * inv;
      const std::uint8_t code = nf4_code_of(normalized);
      out.packed[i / 2] |= (i % 2 == 0) ? std::uint8_t(code << 4) : code;
    }
    // An odd count pads the last byte's low nibble with the code of 0 · inv, as the GPU
    // kernel's zero-filled load does.
    if (end == count && count % 2 == 1) {
      volatile float pad = 0.0f * inv;
      out.packed[count / 2] |= nf4_code_of(pad);
    }
  }
  return out;
}

}  // namespace

Nf4Packed quantize_nf4(const float* w, std::size_t count, std::int64_t block_size) {
  return quantize_with(count, block_size, [w](std::size_t i) { return w[i]; });
}

Nf4Packed quantize_nf4(const std::uint16_t* w, ElementType type, std::size_t count, std::int64_t block_size) {
  if (type == ElementType::f16)
    return quantize_with(count, block_size, [w](std::size_t i) { return half_to_float(w[i]); });
  if (type == ElementType::bf16)
    return quantize_with(count, block_size, [w](std::size_t i) { return bf16_to_float(w[i]); });
  throw Error(ErrorCode::kInvalidArgument, "quantize_nf4: 16-bit input must be f16 or bf16");
}

void dequantize_nf4(const std::uint8_t* packed, const float* scales, const std::array<float, 16>& codebook,
                    std::int64_t element_offset, std::int64_t block_size, std::size_t count, float* out) {
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint64_t pos = std::uint64_t(element_offset) + j;
    const std::uint8_t byte = packed[pos / 2];
    const int code = (pos % 2 == 0) ? byte >> 4 : byte & 15;
    out[j] = codebook[code] * scales[pos / std::uint64_t(block_size)];
  }
}

void validate_nf4_offsets(const std::uint32_t* offsets, std::size_t count, std::int64_t experts, std::int64_t rows,
                          const std::string& who) {
  auto fail = [&](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, who + ": offsets " + m); };
  if (std::int64_t(count) != experts + 1)
    fail("has " + std::to_string(count) + " entries, expected experts + 1 = " + std::to_string(experts + 1));
  if (offsets[0] != 0) fail("must start at 0, got " + std::to_string(offsets[0]));
  for (std::size_t e = 1; e < count; ++e)
    if (offsets[e] < offsets[e - 1])
      fail("decrease at entry " + std::to_string(e) + " (" + std::to_string(offsets[e - 1]) + " then " +
           std::to_string(offsets[e]) + ")");
  if (std::int64_t(offsets[count - 1]) != rows)
    fail("must end at rows = " + std::to_string(rows) + ", got " + std::to_string(offsets[count - 1]));
}

std::int64_t nf4_active_experts(const std::uint32_t* offsets, std::size_t count) {
  std::int64_t n = 0;
  for (std::size_t e = 0; e + 1 < count; ++e) n += offsets[e + 1] > offsets[e];
  return n;
}

std::int64_t nf4_max_expert_rows(const std::uint32_t* offsets, std::size_t count) {
  std::int64_t most = 0;
  for (std::size_t e = 0; e + 1 < count; ++e)
    if (offsets[e + 1] > offsets[e]) most = std::max<std::int64_t>(most, offsets[e + 1] - offsets[e]);
  return most;
}

std::vector<std::uint32_t> nf4_topk_offsets(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                            std::uint32_t seed) {
  if (tokens < 0 || top_k < 1 || top_k > experts ||
      tokens > std::int64_t(std::numeric_limits<std::uint32_t>::max()) / top_k)
    throw Error(ErrorCode::kInvalidArgument,
                "nf4_topk_offsets: need tokens >= 0, 1 <= top_k <= experts and tokens * "
                "top_k <= 2^32 - 1 (tokens " +
                    std::to_string(tokens) + ", experts " + std::to_string(experts) + ", top_k " +
                    std::to_string(top_k) + ")");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(experts)), count(static_cast<std::size_t>(experts), 0);
  for (std::int64_t e = 0; e < experts; ++e) ids[std::size_t(e)] = e;
  std::mt19937 gen(seed);
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t i = 0; i < top_k; ++i) {
      std::uniform_int_distribution<std::int64_t> pick(i, experts - 1);
      std::swap(ids[std::size_t(i)], ids[std::size_t(pick(gen))]);
      ++count[std::size_t(ids[std::size_t(i)])];
    }
  }
  std::vector<std::uint32_t> offsets(static_cast<std::size_t>(experts + 1), 0);
  for (std::int64_t e = 0; e < experts; ++e)
    offsets[std::size_t(e + 1)] = offsets[std::size_t(e)] + std::uint32_t(count[std::size_t(e)]);
  return offsets;
}

std::vector<std::uint32_t> nf4_problem_offsets(const Nf4Problem& p) {
  if (p.experts < 1 || p.rows < 0)
    throw Error(ErrorCode::kInvalidArgument, "nf4_problem_offsets: need experts >= 1 and rows >= 0");
  if (p.top_k == 0) {
    std::vector<std::uint32_t> offsets(static_cast<std::size_t>(p.experts + 1));
    for (std::int64_t e = 0; e <= p.experts; ++e) offsets[std::size_t(e)] = std::uint32_t(p.rows * e / p.experts);
    return offsets;
  }
  if (p.top_k < 0 || p.rows % p.top_k != 0)
    throw Error(ErrorCode::kInvalidArgument, "nf4_problem_offsets: rows " + std::to_string(p.rows) +
                                                 " are not a whole number of tokens of top_k " +
                                                 std::to_string(p.top_k));
  const std::uint32_t seed = std::uint32_t(std::uint64_t(p.experts) * 73856093u ^ std::uint64_t(p.rows) * 19349663u ^
                                           std::uint64_t(p.top_k) * 83492791u);
  return nf4_topk_offsets(p.rows / p.top_k, p.experts, p.top_k, seed);
}

void nf4_forward_reference(const Nf4Geometry& g, const float* w, const float* x, const std::uint32_t* offsets,
                           std::int64_t rows, double* y) {
  const std::int64_t N = g.out_features, K = g.in_features;
  (void)rows;
  for (std::int64_t e = 0; e < g.experts; ++e)
    for (std::int64_t r = offsets[e]; r < std::int64_t(offsets[e + 1]); ++r)
      for (std::int64_t n = 0; n < N; ++n) {
        const float* wr = w + (e * N + n) * K;
        double sum = 0;
        for (std::int64_t k = 0; k < K; ++k) sum += double(x[r * K + k]) * double(wr[k]);
        y[r * N + n] = sum;
      }
}

void nf4_backward_reference(const Nf4Geometry& g, const float* w, const float* grad, const std::uint32_t* offsets,
                            std::int64_t rows, double* dx) {
  const std::int64_t N = g.out_features, K = g.in_features;
  (void)rows;
  for (std::int64_t e = 0; e < g.experts; ++e)
    for (std::int64_t r = offsets[e]; r < std::int64_t(offsets[e + 1]); ++r) {
      double* out = dx + r * K;
      for (std::int64_t k = 0; k < K; ++k) out[k] = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        const double gv = grad[r * N + n];
        const float* wr = w + (e * N + n) * K;
        for (std::int64_t k = 0; k < K; ++k) out[k] += gv * double(wr[k]);
      }
    }
}

}  // namespace ocltk

// The NF4 family slice: segmented grouped GEMMs over 4-bit NormalFloat expert weights
// (bitsandbytes layout), the host quantizer and dequantizer, the CPU reference, and the
// device routing that groups tokens by expert (docs/nf4.md).
//
// Format. Logical weights W[E, N, K] are flattened c = (e·N + n)·K + k. Two codes per
// byte, coefficient 2j in bits 7..4 and 2j+1 in bits 3..0. One f32 absmax scale per flat
// block of block_size coefficients (blocks straddle rows and experts). W = codebook[code]
// · scale[c / block_size]. A window starts element_offset coefficients into its first
// stored block: window coefficient j sits at stream position element_offset + j.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ocltk/element_type.hpp"
#include "ocltk/family.hpp"
#include "ocltk/runtime.hpp"

namespace ocltk {

// NF4's 16 levels (bitsandbytes' table).
extern const std::array<float, 16> kNf4Codebook;

// Indexing limits of the kernels, named in the errors that enforce them.
constexpr std::int64_t kNf4MaxDim = (std::int64_t(1) << 30);           // K, N and rows each below 2^30
constexpr std::int64_t kNf4MaxCoefficients = (std::int64_t(1) << 62);  // element_offset + E·N·K

// The shape of a window of an NF4 payload: what lies where, independent of buffers.
struct Nf4Geometry {
  std::int64_t experts = 0, out_features = 0 /*N*/, in_features = 0 /*K*/, block_size = 64;
  std::int64_t element_offset = 0;  // stream position of the window's first coefficient

  std::int64_t coefficients() const { return experts * out_features * in_features; }
  // Stored bytes and scales of the window (0 for an empty owner).
  std::int64_t packed_bytes() const;
  std::int64_t scale_count() const;
  // Throws Error(kInvalidArgument) naming the fault: block size, offset, limits.
  void validate(const std::string& who) const;
};

// A window of a packed NF4 payload on the device.
struct Nf4Weights {
  Nf4Geometry geometry;
  cl_mem packed = nullptr;        // u8, at least packed_bytes() from packed_offset
  std::size_t packed_offset = 0;  // bytes into `packed`
  cl_mem scales = nullptr;        // f32, at least scale_count() from scales_offset
  std::size_t scales_offset = 0;  // elements into `scales`
  cl_mem codebook = nullptr;      // 16 f32 (always required, even for an empty owner)
};

// y[r, n] = Σ_k x[r, k] · W[e, n, k] for offsets[e] <= r < offsets[e+1].
struct Nf4ForwardArgs {
  Nf4Weights w;
  cl_mem input = nullptr;  // rows × K of `type`
  ElementType type = ElementType::f32;
  std::int64_t rows = 0;
  cl_mem offsets = nullptr;  // u32, experts + 1 entries: exclusive prefix, 0 .. rows
  cl_mem output = nullptr;   // rows × N of `type`
  // true: check() reads the E+1 offsets back (a tiny blocking read) and validates them.
  // false: no host round trip; the kernels clamp every segment to [0, rows), so bad
  // offsets give wrong rows but never an out-of-bounds access.
  bool validate_offsets = true;
  // The experts with rows (non-empty segments), where the caller knows them: the profile's
  // entry is chosen by them and the rows per such expert (problem_distance). -1: counted
  // from the offsets where they are read back (validate_offsets), else taken as
  // min(rows, experts), rows spread evenly: so without a count, whether the offsets are read
  // back can change the entry chosen for rows crowded on a few experts (route_tokens' offsets
  // stay on the device; an engine that skips the read-back gives the count it has, if any).
  // Errors: a count outside [1, min(rows, experts)] (0 for zero rows) other than -1, and one
  // the offsets read back contradict.
  std::int64_t active_experts = -1;
  // The most rows on one expert (the longest segment), where the caller knows it: entries
  // measured on routed rows name theirs (`max_rows`), and a launch whose rows crowd on a few
  // experts is served by them rather than by an even spread's (problem_distance). -1:
  // counted from the offsets where they are read back, else taken as an even spread's,
  // ceil(rows / experts with rows). Given without active_experts (and no read-back), it bounds
  // the experts with rows the entry is chosen by to rows - max_expert_rows + 1. Errors: a count outside [ceil(rows /
  // A), rows - A + 1] (A the experts with rows; where unknown, A = min(rows, experts) and the bound [ceil(rows / A),
  // rows]; 0 for zero rows) other than -1, and one the offsets read back contradict.
  std::int64_t max_expert_rows = -1;
};

// dx[r, k] = Σ_n g[r, n] · W[e, n, k] (input gradient only; no weight gradient).
struct Nf4BackwardArgs {
  Nf4Weights w;
  cl_mem grad = nullptr;  // rows × N of `type`
  ElementType type = ElementType::f32;
  std::int64_t rows = 0;
  cl_mem offsets = nullptr;
  cl_mem grad_input = nullptr;  // rows × K, always f32
  bool validate_offsets = true;
  std::int64_t active_experts = -1;   // as Nf4ForwardArgs'
  std::int64_t max_expert_rows = -1;  // as Nf4ForwardArgs'
};

const KernelFamily& nf4_forward_family();
const KernelFamily& nf4_backward_family();

// decode (≤ 16 rows per expert with rows, on average), small_batch (≤ 128), prefill (more).
std::string nf4_shape_class(double rows_per_active_expert);
// A launch's problem as profile entries store it: {experts, n, k, rows, block_size,
// input_bits} (input_bits 32 for f32 input, 16 for f16 and bf16: entries that name it serve
// their input width first; the tuner measures f32 and writes no input_bits, unless a --shapes
// problem asks for input_bits: 16, which it measures with bf16 input), `active` where
// `active_experts` >= 0 (a launch that knows its experts with rows; entries measured on even
// spreads have none: see problem_distance), and `max_rows` where `max_expert_rows` >= 0
// (likewise, its most rows on one expert).
std::map<std::string, std::int64_t> nf4_problem_of(std::int64_t rows, const Nf4Geometry& geometry,
                                                   ElementType type = ElementType::f32,
                                                   std::int64_t active_experts = -1, std::int64_t max_expert_rows = -1);
// The problem `tune` measures: a class's representative one, or one from --shapes.
struct Nf4Problem {
  std::int64_t experts = 8, n = 1024, k = 1024, rows = 8, block_size = 64;
  std::int64_t input_bits = 32;  // 32: f32 input; 16: bf16 (x forward, g backward)
  std::int64_t top_k = 0;        // 0: rows spread evenly; k > 0: rows / k tokens routed top-k (nf4_problem_offsets)
};
// The offsets of a problem's rows: spread evenly (offsets[e] = rows·e / experts) for top_k 0,
// else nf4_topk_offsets of rows / top_k tokens with a seed taken from the problem's sizes, so
// that every run lays out one problem alike. Throws Error(kInvalidArgument) where top_k does
// not divide rows or exceeds the experts.
std::vector<std::uint32_t> nf4_problem_offsets(const Nf4Problem& p);
Nf4Problem nf4_class_problem(const std::string& shape_class, bool cpu_device);
// The build options a launch with input `type` adds to `algorithm`'s own: the type's
// variant for algorithms built once per element type (AlgorithmSpec::tuned_variant is the
// f32 one), else none. What the tuner prebuilds for a problem of that input.
std::string nf4_launch_variant(const AlgorithmSpec& algorithm, ElementType type);

// The profile's choice that would serve `kernel` ("nf4_forward" or "nf4_backward") of `rows`
// rows over `geometry` with input `type`, the caller's counts checked as a launch checks them
// (-1: unknown, taken as a launch that does not read its offsets back takes them).
Result<Choice> choose_nf4(Runtime& rt, const std::string& kernel, const Nf4Geometry& geometry, std::int64_t rows,
                          ElementType type = ElementType::f32, std::int64_t active_experts = -1,
                          std::int64_t max_expert_rows = -1);

Status check_nf4_forward(Runtime& rt, const Nf4ForwardArgs& args);
Status check_nf4_backward(Runtime& rt, const Nf4BackwardArgs& args);
// Status-returning boundary; the choice comes from the profile (shape class by rows per
// expert with rows, entry by problem_distance) unless the *_with variants are given one
// (tuner, tests, benches).
Status nf4_forward_segmented(Runtime& rt, const Nf4ForwardArgs& args, const Launch& launch = {});
Status nf4_input_backward_segmented(Runtime& rt, const Nf4BackwardArgs& args, const Launch& launch = {});
Status nf4_forward_with(Runtime& rt, const Choice& choice, const Nf4ForwardArgs& args, const Launch& launch = {});
Status nf4_backward_with(Runtime& rt, const Choice& choice, const Nf4BackwardArgs& args, const Launch& launch = {});
// The splits of N that nf4_backward_with(choice, args, launch) makes: the stream and tc
// backwards divide each (expert, k tile)'s sweep over N into NSPLIT or more (kernels/
// nf4_splits.clh), whose partial sums are added as SPLIT_SUM says only where there are more
// than one; 1 for the algorithms that do not split. The tuner measures SPLIT_SUM only there.
Result<std::int64_t> nf4_backward_splits(Runtime& rt, const Choice& choice, const Nf4BackwardArgs& args,
                                         const Launch& launch = {});

// ---- Host quantizer / dequantizer (bit-identical to bitsandbytes quantize_4bit nf4) ----

struct Nf4Packed {
  std::vector<std::uint8_t> packed;  // (count + 1) / 2 bytes
  std::vector<float> scales;         // ceil(count / block_size) absmax values
};
// 1/absmax as bitsandbytes computes it: its CUDA library is built with --use_fast_math,
// so the reciprocal is the GPU's approximate one, which differs from IEEE division by one
// ulp for 13 % of mantissas. Replayed from a table measured on an NVIDIA H200
// (tests/data/nf4/measure_fast_rcp.py); subnormal divisors flush to zero (+inf).
float bitsandbytes_reciprocal(float absmax);

// bitsandbytes' nearest-code decision tree for a value already normalised by absmax.
std::uint8_t nf4_code_of(float normalized);
bool nf4_block_size_valid(std::int64_t block_size);
// Quantizes `count` coefficients in flat order. Throws Error(kInvalidArgument) for a bad
// block size.
Nf4Packed quantize_nf4(const float* w, std::size_t count, std::int64_t block_size);
// Half-precision inputs are widened to f32 first, exactly as bitsandbytes does.
Nf4Packed quantize_nf4(const std::uint16_t* w, ElementType type, std::size_t count, std::int64_t block_size);
// Dequantizes the window coefficients [0, count) (stream positions element_offset + j).
void dequantize_nf4(const std::uint8_t* packed, const float* scales, const std::array<float, 16>& codebook,
                    std::int64_t element_offset, std::int64_t block_size, std::size_t count, float* out);

// CPU reference in double on dequantized weights (w: E×N×K f32, from dequantize_nf4).
// x: rows × K (already widened to f32); y: rows × N. offsets must be valid.
void nf4_forward_reference(const Nf4Geometry& g, const float* w, const float* x, const std::uint32_t* offsets,
                           std::int64_t rows, double* y);
void nf4_backward_reference(const Nf4Geometry& g, const float* w, const float* grad, const std::uint32_t* offsets,
                            std::int64_t rows, double* dx);
// Validates a host copy of the offsets; throws Error(kInvalidArgument) naming the fault.
void validate_nf4_offsets(const std::uint32_t* offsets, std::size_t count, std::int64_t experts, std::int64_t rows,
                          const std::string& who);
// The experts with rows (non-empty segments) of a prefix of `count` entries: what a launch
// that reads its offsets back counts, and the active_experts a caller that keeps them on the
// host gives.
std::int64_t nf4_active_experts(const std::uint32_t* offsets, std::size_t count);
// The most rows on one expert (the longest segment) of such a prefix: what a launch that
// reads its offsets back counts, and the max_expert_rows a caller that keeps them gives.
std::int64_t nf4_max_expert_rows(const std::uint32_t* offsets, std::size_t count);
// The offsets (experts + 1 entries) a top-k router would hand the products, as a model of one
// for benchmarks and tuning: `tokens` tokens, each sending one row to `top_k` distinct
// experts drawn uniformly at random (a partial Fisher-Yates shuffle per token from
// std::mt19937 seeded with `seed`), rows grouped by expert. Segments are uneven and some
// experts may get none. Throws Error(kInvalidArgument) unless tokens >= 0 and 1 <= top_k <=
// experts, and tokens · top_k fits the u32 offsets.
std::vector<std::uint32_t> nf4_topk_offsets(std::int64_t tokens, std::int64_t experts, std::int64_t top_k,
                                            std::uint32_t seed);

// ---- Routing: group tokens by expert on the device ----

// From top-k choices, builds on the device:
//   offsets[E+1] (u32): exclusive prefix of rows per expert;
//   pair_row[tokens·top_k] (u32): the grouped row of each (token, slot), or 0xFFFFFFFF for
//     an expert id ≥ E (dropped);
//   row_token[tokens·top_k] (u32): the token each grouped row came from;
//   gathered[rows × K] (type): input rows in grouped order (rows = routed pairs).
// Within one expert, rows keep token order, so the permutation is deterministic.
struct RouteArgs {
  std::int64_t tokens = 0, top_k = 1, experts = 0, features = 0 /*K*/;
  ElementType type = ElementType::f32;
  cl_mem expert_ids = nullptr;  // u32, tokens × top_k
  cl_mem input = nullptr;       // tokens × K
  cl_mem offsets = nullptr;     // out: u32, E + 1
  cl_mem pair_row = nullptr;    // out: u32, tokens × top_k
  cl_mem row_token = nullptr;   // out: u32, tokens × top_k
  cl_mem gathered = nullptr;    // out: tokens·top_k × K
};
Status route_tokens(Runtime& rt, const RouteArgs& args, const Launch& launch = {});

// out[t, n] = Σ_s weights[t, s] · y[pair_row[t, s], n] (dropped pairs add nothing),
// accumulated in f32, written in `type`.
struct ScatterArgs {
  std::int64_t tokens = 0, top_k = 1, features = 0 /*N*/;
  ElementType type = ElementType::f32;
  cl_mem y = nullptr;         // grouped rows × N
  std::int64_t y_rows = 0;    // rows of y (tokens·top_k is always enough)
  cl_mem pair_row = nullptr;  // from route_tokens
  cl_mem weights = nullptr;   // f32, tokens × top_k
  cl_mem output = nullptr;    // tokens × N
};
Status scatter_rows(Runtime& rt, const ScatterArgs& args, const Launch& launch = {});

}  // namespace ocltk

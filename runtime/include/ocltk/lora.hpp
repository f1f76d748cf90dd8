// LoRA as engines run it (docs/lora.md): Y (+)= scale · (X · Aᵀ) · Bᵀ with the rank-r
// intermediate in f32 on the device, activations and adapter weights in f32, f16 or bf16,
// and many adapters in one launch: rows grouped in segments, each with its adapter.
//
// Shapes (row-major, offsets and leading dimensions in elements):
//
//   X  M×K          the rows (activations)
//   A  L×R×K        adapter l's down-projection: its row j (j < R) at a.offset + l·a.stride + j·a.ld
//   B  L×N×R        adapter l's up-projection: its row n at b.offset + l·b.stride + n·b.ld
//   T  M×R, f32     the intermediate X · Aᵀ (shrink's output, expand's input)
//   Y  M×N          the output, written or added to
//
// Segments: rows offsets[s] .. offsets[s+1]-1 use adapter segment_adapters[s] (-1: none). An
// adapter l uses the first ranks[l] rows of its A and columns of its B (no work is spent on
// the rest) and the scale scale · scales[l]. Three operations, each in one launch:
//
//   lora_shrink   T[m, j] = Σ_k X[m, k] · A_l[j, k]                for j < ranks[l]
//   lora_expand   Y[m, n] (+)= s_l · Σ_{j < ranks[l]} T[m, j] · B_l[n, j]
//   lora_apply    both, T never leaving the device (one fused launch, or shrink then
//                 expand through a scratch T, whichever the profile measured faster)
//
// Rows of a -1 segment: shrink leaves their T alone; expand and apply leave their Y as it
// is when accumulating and write zeros otherwise. Columns of T at or past an adapter's rank
// are left alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ocltk/element_type.hpp"
#include "ocltk/family.hpp"
#include "ocltk/runtime.hpp"

namespace ocltk {

// A problem size: M rows, N outputs, K inputs, L adapters of rank at most R.
struct LoraProblem {
  std::int64_t m = 0, n = 0, k = 0, adapters = 1, max_rank = 0;
};

// L matrices stacked in one buffer: matrix l's row i at offset + l·stride + i·ld (elements;
// ld 0: packed, the row length; stride 0: packed, rows · ld).
struct MatrixStack {
  cl_mem buffer = nullptr;
  std::size_t offset = 0;
  std::size_t ld = 0;
  std::size_t stride = 0;
  ElementType type = ElementType::f32;
};

// The operands of the three operations; each reads only those it names above.
struct LoraArgs {
  LoraProblem problem;
  Matrix x;       // M×K
  MatrixStack a;  // L×R×K, X's type
  MatrixStack b;  // L×N×R, X's type
  Matrix y;       // M×N, X's type
  // M×R, f32: shrink writes it, expand reads it. lora_apply uses it as its scratch where it
  // runs two launches; null there: a scratch of the runtime's own, one per command queue.
  Matrix intermediate;
  float scale = 1.0f;                 // every adapter's factor
  cl_mem scales = nullptr;            // f32 × L, or null: adapter l's scale is scale · scales[l]
  cl_mem ranks = nullptr;             // i32 × L in [1, R], or null: every adapter of rank R
  std::int64_t segments = 0;          // S; 0: one segment of all rows with adapter 0 (no buffers)
  cl_mem offsets = nullptr;           // u32 × (S + 1): 0 = offsets[0] <= ... <= offsets[S] = M
  cl_mem segment_adapters = nullptr;  // i32 × S in [-1, L)
  bool accumulate = false;            // expand and apply: Y += ... (read first) instead of Y = ...
  // true: the check reads the offsets, segment adapters and ranks back (small blocking reads
  // on the runtime's queue) and refuses bad ones. false: no host round trip; the kernels then
  // clamp rows to [0, M), ranks to [0, R] and treat an adapter outside [0, L) as none, so bad
  // values give wrong rows but never an access outside the operands.
  bool validate = true;
};

const KernelFamily& lora_shrink_family();
const KernelFamily& lora_expand_family();
const KernelFamily& lora_apply_family();

// Classes by rows per segment (M / max(S, 1)) and whether the launch has several segments:
// one segment: decode (<= 16 rows), small_batch (<= 256), prefill; several: multi_decode
// (<= 16 rows per segment), multi_batch.
std::string lora_shape_class(std::int64_t m, std::int64_t segments);
// A launch's problem as profile entries store it: {m, n, k, rank (R), adapters (L), segments
// (max(S, 1)), input_bits 16 for 16-bit X}, without n for shrink (it has no N) and k for
// expand (its K is the rank); `kernel` is the family's name.
std::map<std::string, std::int64_t> lora_problem_of(const std::string& kernel, const LoraProblem& p,
                                                    std::int64_t segments, ElementType type);

// The problem `tune` measures for a class: sizes, segments spread evenly, segment s on
// adapter s % L, and mixed ranks when L > 1 (lora_problem_ranks).
struct LoraTuneProblem {
  LoraProblem problem;
  std::int64_t segments = 1;
  ElementType type = ElementType::bf16;
};
LoraTuneProblem lora_class_problem(const std::string& shape_class, bool cpu_device);
// The ranks of a problem's adapters as the tuner and the benches lay them out: R for one
// adapter; else R, R/2, R/4, R/8 in turn (at least 1), so that several adapters mix ranks.
std::vector<std::int32_t> lora_problem_ranks(const LoraProblem& p);
// Offsets of `segments` segments spreading m rows evenly (segment s from m·s / S).
std::vector<std::uint32_t> lora_even_offsets(std::int64_t m, std::int64_t segments);

// The build options a launch adds for its element type (empty for f32).
std::string lora_launch_variant(ElementType type);

// Launch geometry of one kernel ("lora_shrink", "lora_expand", "lora_fused") with its
// parameters: workgroups along dimension 0 (the shrink's rank chunks of RC, else column
// blocks of CB) and slots along dimension 1 (a slot per row tile of a segment: ceil(M / TR)
// + S bounds them).
struct LoraGeometry {
  std::int64_t groups0 = 0, groups1 = 0;
  std::size_t local = 0;  // work-items per workgroup (dimension 0)
};
LoraGeometry lora_geometry(const std::string& kernel, const Params& params, const LoraProblem& p,
                           std::int64_t segments);

// Checks every operand the operation reads or writes before anything is enqueued; the
// message names the operand at fault. With args.validate, also the device-side offsets,
// segment adapters and ranks (read back).
Status check_lora_shrink(Runtime& rt, const LoraArgs& args);
Status check_lora_expand(Runtime& rt, const LoraArgs& args);
Status check_lora_apply(Runtime& rt, const LoraArgs& args);

// The profile's choice (class by lora_shape_class, entry by problem distance); enqueued on
// the launch's queue with no host round trip unless args.validate.
Status lora_shrink(Runtime& rt, const LoraArgs& args, const Launch& launch = {});
Status lora_expand(Runtime& rt, const LoraArgs& args, const Launch& launch = {});
Status lora_apply(Runtime& rt, const LoraArgs& args, const Launch& launch = {});
// With an explicit choice (tuner, tests, benches); for lora_apply, algorithm "fused" or
// "split".
Status lora_shrink_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch = {});
Status lora_expand_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch = {});
Status lora_apply_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch = {});
// The choice a launch of `kernel` ("lora_shrink", "lora_expand", "lora_apply") gets.
Choice choose_lora(Runtime& rt, const std::string& kernel, const LoraArgs& args);

// ---- CPU reference ----

// The host copy of a launch's segments, adapters, ranks and scales; rows of m without a
// segment (and segments of adapter -1) have adapter -1. Throws Error(kInvalidArgument)
// naming the fault, the same checks as the launches' validation.
struct LoraHostSegments {
  std::vector<std::uint32_t> offsets;                            // S + 1 (empty: one segment, adapter 0)
  std::vector<std::int32_t> adapters;                            // S
  std::vector<std::int32_t> ranks;                               // L (empty: all R)
  std::vector<float> scales;                                     // L (empty: all 1)
  std::vector<std::int32_t> row_adapters(std::int64_t m) const;  // each row's adapter, -1 none
};
void validate_lora_segments(const LoraHostSegments& s, const LoraProblem& p, const std::string& who);

// In double, from inputs already widened to f32 (x: M×K, a: L×R×K, b: L×N×R packed):
//   shrink: t[m·R + j] = Σ_k x·a and t_abs the same of |x·a|, for j below the row's adapter's
//   rank (0 past it and for rows without adapter);
//   expand: y[m·N + n] = s · Σ_j t · b (+ y_old), y_abs = |s| · Σ_j t_abs · |b|: the magnitude
//   the error bound scales with (lora_error_bound). y_old null: overwrite. For a T given in
//   f32 (lora_expand alone), t_abs is |t|.
void lora_shrink_reference(const LoraProblem& p, const LoraHostSegments& s, const float* x, const float* a,
                           std::vector<double>& t, std::vector<double>& t_abs);
void lora_expand_reference(const LoraProblem& p, const LoraHostSegments& s, float scale, const double* t,
                           const double* t_abs, const float* b, const double* y_old, std::vector<double>& y,
                           std::vector<double>& y_abs);
// Both, as lora_apply.
void lora_reference(const LoraProblem& p, const LoraHostSegments& s, float scale, const float* x, const float* a,
                    const float* b, const double* y_old, std::vector<double>& t, std::vector<double>& t_abs,
                    std::vector<double>& y, std::vector<double>& y_abs);
// The bound of one output against lora_reference: the shrink's f32 dot of length K and the
// expand's of length rank, each gamma_n = n u / (1 - n u) of its magnitude (the shrink's error
// carried through |B|), the accumulate add, and one rounding to `output`.
double lora_error_bound(std::int64_t k, std::int64_t rank, double y_abs, double y_old, double y_ref,
                        ElementType output);

// ---- Segments from per-row adapter ids, on the device ----

// Groups rows by adapter, keeping their order within an adapter: L + 1 segments, segment l
// < L holding adapter l's rows and segment L the rows of no adapter (an id outside [0, L),
// such as -1). What lora_apply takes as offsets (S = L + 1) and segment_adapters (0, 1, ...,
// L - 1, -1), and row_index, the permutation: grouped row q is row row_index[q] of the
// caller's order. Gather X (and Y, when accumulating) with lora_gather_rows, apply, then put
// Y back with lora_scatter_rows.
struct LoraGroupArgs {
  std::int64_t rows = 0, adapters = 0;  // M >= 0, L >= 1
  cl_mem row_adapters = nullptr;        // i32 × M
  cl_mem offsets = nullptr;             // out: u32 × (L + 2)
  cl_mem segment_adapters = nullptr;    // out: i32 × (L + 1)
  cl_mem row_index = nullptr;           // out: u32 × M
};
Status lora_group_rows(Runtime& rt, const LoraGroupArgs& args, const Launch& launch = {});

// Moves whole rows of `features` elements of `type` through row_index (from
// lora_group_rows): gather output[q] = input[row_index[q]], scatter output[row_index[q]] =
// input[q], q < rows. Bit for bit; an index at or past `rows` moves nothing.
struct LoraPermuteArgs {
  std::int64_t rows = 0, features = 0;
  ElementType type = ElementType::f32;
  cl_mem row_index = nullptr;  // u32 × rows
  cl_mem input = nullptr;      // rows × features
  cl_mem output = nullptr;     // rows × features
};
Status lora_gather_rows(Runtime& rt, const LoraPermuteArgs& args, const Launch& launch = {});
Status lora_scatter_rows(Runtime& rt, const LoraPermuteArgs& args, const Launch& launch = {});

}  // namespace ocltk

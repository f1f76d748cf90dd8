// gemm_nt: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ, and gemm_nt_accum: C += alpha · A · Bᵀ.
// Row-major, leading dimensions in elements, offsets in elements. A and B are stored as f32,
// f16 or bf16 (both the same), C in their type or in f32; sums are f32, rounded once at the
// store (the accumulate form adds the old C in f32 first).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ocltk/element_type.hpp"
#include "ocltk/family.hpp"

namespace ocltk {

// A problem size (what is computed), as opposed to a tile size (how).
struct GemmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Bytes that must cross memory at least once: A and B read, C written (and read when
  // accumulating).
  // `in_size` and `out_size`: bytes per element of A and B, and of C.
  double min_bytes(bool accumulate, std::size_t in_size = 4, std::size_t out_size = 4) const {
    return double(in_size) * (double(m) * k + double(n) * k) + double(out_size) * double(m) * n * (accumulate ? 2 : 1);
  }
};

const KernelFamily& gemm_nt_family();

// The class a launch belongs to, by the first rule that matches:
// gemv (M = 1), lora_shrink (N <= 64), lora_expand (K <= 64), small_batch (M <= 16),
// large (everything else); with 16-bit A and B (`input` f16 or bf16) the same rules name
// the classes gemv_half, lora_shrink_half, ..., large_half, whose entries are tuned on
// 16-bit input (another code path, other best parameters).
std::string gemm_nt_shape_class(const GemmProblem& p, ElementType input = ElementType::f32);

// A class's representative problem, the one `tune` measures. `cpu_device` picks the
// smaller large-square size that keeps tuning short on a CPU.
GemmProblem gemm_nt_class_problem(const std::string& shape_class, bool cpu_device);
// The input type `tune` measures a class with: bf16 for the *_half classes, else f32.
ElementType gemm_nt_class_input(const std::string& shape_class);

// A launch's problem as profile entries store it: {m, n, k}, and input_bits 16 for 16-bit A
// and B (NF4's convention: entries that name it serve 16-bit launches; f32 names none).
std::map<std::string, std::int64_t> gemm_nt_problem_of(const GemmProblem& p, ElementType input = ElementType::f32);

// The build options a launch adds for its element types: empty for f32 A, B and C (the
// programs of f32 launches are the ones they always were), else the types' IN_TYPE and
// OUT_TYPE (kernels/element_types.clh).
std::string gemm_nt_launch_variant(ElementType input, ElementType output);

// Launch geometry for one dispatch: global and local sizes (dimension 0 runs along N).
struct LaunchGeometry {
  std::array<std::size_t, 2> global{0, 0};
  std::array<std::size_t, 2> local{0, 0};
  // Rows (M) and columns (N) of C one workgroup covers.
  std::int64_t tile_m = 0, tile_n = 0;
};
LaunchGeometry gemm_nt_geometry(const std::string& algorithm, const Params& params, const GemmProblem& p);

// CPU reference in double: C[i*ldc+j] = alpha * sum_k A[i*lda+k] * B[j*ldb+k]
// (+ C_old). Computes only rows [row_begin, row_end).
void gemm_nt_reference(const GemmProblem& p, float alpha, bool accumulate, const float* a, std::size_t lda,
                       const float* b, std::size_t ldb, const double* c_old, std::size_t ldc_old, double* c,
                       std::size_t ldc);

// The error bound every result is checked against (docs/verification.md):
// |C - C_ref| <= gamma_K * |alpha| * sum_k |A_ik B_jk| + u * |C_old| + 1e-30,
// with u = 2^-24 and gamma_K = K u / (1 - K u), the classic forward bound of a float
// dot product of length K, valid for any summation order and for fused multiply-adds.
// Inputs of a 16-bit type are the exact values they hold (widened to f32 for the reference).
double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old);
// The same for a C stored as `output`: plus the one rounding of the store to that type,
// unit_roundoff(output) · |C_ref| (and, for f16, half its smallest subnormal, 2^-25).
double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old, double c_ref,
                           ElementType output);

}  // namespace ocltk

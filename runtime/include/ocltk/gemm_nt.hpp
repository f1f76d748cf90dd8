// gemm_nt: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ, and gemm_nt_accum: C += alpha · A · Bᵀ.
// Row-major f32, leading dimensions in elements, offsets in elements.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ocltk/family.hpp"

namespace ocltk {

// A problem size (what is computed), as opposed to a tile size (how).
struct GemmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Bytes that must cross memory at least once: A and B read, C written (and read when
  // accumulating).
  double min_bytes(bool accumulate) const {
    return 4.0 * (double(m) * k + double(n) * k + double(m) * n * (accumulate ? 2 : 1));
  }
};

const KernelFamily& gemm_nt_family();

// The class a launch belongs to, by the first rule that matches:
// gemv (M = 1), lora_shrink (N <= 64), lora_expand (K <= 64), small_batch (M <= 16),
// large (everything else).
std::string gemm_nt_shape_class(const GemmProblem& p);

// A class's representative problem, the one `tune` measures. `cpu_device` picks the
// smaller large-square size that keeps tuning short on a CPU.
GemmProblem gemm_nt_class_problem(const std::string& shape_class, bool cpu_device);

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
double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old);

}  // namespace ocltk

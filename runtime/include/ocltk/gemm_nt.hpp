// gemm_nt: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ, and gemm_nt_accum: C += alpha · A · Bᵀ.
// Row-major, leading dimensions in elements, offsets in elements. A and B are stored as f32,
// f16 or bf16 (both the same), C in their type or in f32; sums are f32, rounded once at the
// store (the accumulate form adds the old C in f32 first). f32 A and B may be multiplied on
// tensor cores in TF32 or 3×TF32 where the launch allows it (GemmPrecision).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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

// What an f32 launch (f32 A and B) allows the products to be computed in; 16-bit A and B
// ignore it (products of 16-bit values are exact in f32 on every path). The values are
// stable: the C API and Python mirror them.
//   exact   f32 multiplies, the f32 bound of docs/verification.md; never tensor cores.
//   tf32    tensor cores may round A and B to TF32 (10 fraction bits) first: the f32 bound plus
//           2^-10 of sum_k |A_ik B_jk| (gemm_nt_error_bound with GemmPrecision::tf32).
//   tf32x3  tensor cores may split A and B into two TF32 parts and add three products
//           (3×TF32): the f32 bound, as exact; launches with K < kTf32x3MinK, where the split
//           alone could exceed it, run a SIMT algorithm.
// tf32 and tf32x3 allow tensor cores, they do not demand them: where the device, the probe
// (Runtime::probe_tensor_cores) or the profile says otherwise the launch runs exact f32.
enum class GemmPrecision { exact = 0, tf32 = 1, tf32x3 = 2 };
const char* to_string(GemmPrecision precision);  // "exact", "tf32", "tf32x3"
std::optional<GemmPrecision> parse_gemm_precision(const std::string& name);
inline constexpr std::int64_t kTf32x3MinK = 8;

const KernelFamily& gemm_nt_family();

// The class a launch belongs to, by the first rule that matches:
// gemv (M = 1), lora_shrink (N <= 64), lora_expand (K <= 64), small_batch (M <= 16),
// large (everything else); with 16-bit A and B (`input` f16 or bf16) the same rules name
// the classes gemv_half, lora_shrink_half, ..., large_half, whose entries are tuned on
// 16-bit input (another code path, other best parameters). An f32 launch of class large,
// lora_shrink or lora_expand that tc may compute under its precision (gemm_nt_tc_refusal:
// TF32, or 3×TF32 from K = 8) is filed under that class's twin for the precision,
// large_tf32 … lora_expand_tf32x3, so that an entry tuned with tensor cores never serves an
// exact launch; gemv and small_batch keep their exact class whatever the precision.
std::string gemm_nt_shape_class(const GemmProblem& p, ElementType input = ElementType::f32,
                                GemmPrecision precision = GemmPrecision::exact);
// The precision a class is tuned and served with: tf32 and tf32x3 for the classes named
// *_tf32 and *_tf32x3, exact for every other class.
GemmPrecision gemm_nt_class_precision(const std::string& shape_class);
// The class of the same shape and input with exact precision (large for large_tf32x3,
// lora_shrink for lora_shrink_tf32; the class itself otherwise): what serves a TF32 launch
// where its own class has no entry.
std::string gemm_nt_exact_class(const std::string& shape_class);

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
// OUT_TYPE (kernels/element_types.clh). Algorithms tc and tcs always name both, and for f32 input
// its SPLIT from `precision` (1 for tf32, 3 for tf32x3).
std::string gemm_nt_launch_variant(ElementType input, ElementType output, const std::string& algorithm = "",
                                   GemmPrecision precision = GemmPrecision::exact);

// Whether `algorithm` multiplies on tensor cores (tc, tcs: kernels/gemm_nt_tc.cl; tcd:
// kernels/gemm_nt_tcd.cl): what
// gemm_nt_tc_refusal, the probe and the launch variant's SPLIT apply to.
bool gemm_nt_tensor_core_algorithm(const std::string& algorithm);

// Why the tensor-core algorithms (tc, tcs, tcd) may not compute a launch under its precision, or "" when
// it may: f32 input needs precision tf32 or tf32x3, and tf32x3 needs K >= kTf32x3MinK.
std::string gemm_nt_tc_refusal(const GemmProblem& p, ElementType input, GemmPrecision precision);

// Whether algorithm skinny serves a class's launches: gemv, lora_shrink and small_batch, their
// 16-bit twins and lora_shrink's TF32 twins, where one operand has at most 64 rows (what the
// tuner searches it in).
// It computes any shape correctly, but elsewhere it streams the operand with more rows once
// per SR rows of the other.
bool gemm_nt_skinny_class(const std::string& shape_class);

// Launch geometry for one dispatch: global and local sizes (dimension 0 runs along N; tc's
// workgroups, one per tile of C, all lie along dimension 0, which its kernel orders itself).
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
// The same for an f32 launch under `precision`: with tf32 the operands may be rounded to
// TF32 first, each product then off by at most e = 2^-10 + 2^-22 of its magnitude, so
// gamma_(K+2)·(1 + e) + e takes gamma's place; exact and tf32x3 give the f32 bound.
double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old, double c_ref, ElementType output,
                           GemmPrecision precision);

}  // namespace ocltk

// gemm_nt_tc: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating) on NVIDIA tensor cores,
// through the machinery of tc_mma.clh (its comment draws the stages, the local rows and the
// fragments): f32 sums, one rounding at the store.
//
// Memory layout (row-major; element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// Both operands are contiguous along K, the order in which mma.sync's `row.col` form takes
// them (A by rows, B by columns of Bᵀ): tiles are copied to local memory as they lie, rows
// of KCH 16-byte chunks (KWG elements), without a transpose.
//
// Storage and precision are build variants the runtime adds for a launch (runtime/src/gemm_nt.cpp,
// gemm_nt_launch_variant): IN_TYPE, OUT_TYPE and SPLIT (tc_mma.clh). Sums are f32; C gets
// alpha · sum (+ old C) rounded once to its type (round to nearest even).
//
// Work: a workgroup owns an MWG × NWG tile of C (tc_mma.clh). Workgroups walk the tiles of C in
// groups of GM tile rows, column by column inside a group, so that the workgroups running at
// once share A and B tiles in L2.
//
// Launch: a 1-D range of ceil(M / MWG) · ceil(N / NWG) workgroups of WGS = 32 · MWARPS · NWARPS
// work-items; local memory as tc_mma.clh says.
//
// The defaults are the fastest point measured on the H200 for bf16 at 8192³: 128 × 128 tiles of
// 2 × 2 warps, KCH 4, 3 stages (48 KiB), the XOR swizzle, cp.async through L1 (3.54 ms, 310
// TFLOP/s; f16 3.64 ms). What bounds it there is the copy from L2 into local memory, not the
// tensor cores or ldmatrix: without its mma the loop kept 85 % of its time, and only with the
// copies through L1 did a third stage pay off (results/h200-tc-half/README.md has the figures
// and the points tried). For f32 at 4096³ the fastest 3×TF32 point was KCH 2 (KWG 8), STAGES 4,
// SWZ 1, CPASYNC 1 (71 TFLOP/s); TF32 ran at 137 with KCH 4, 2 stages, padded rows.

#define TC_COPY_B 1  // the copy plan stages both operands
#ifndef GM
#define GM 8  // tile rows per group of the workgroups' walk over C (1: row by row)
#endif

#include "tc_mma.clh"

#if GM < 1
#error "GM must be at least 1"
#endif

// ---- the kernel -------------------------------------------------------------------------

inline void gemm_nt_tc_body(const int M, const int N, const int K, const float alpha, const __global elem_t* A,
                            const int lda, const __global elem_t* B, const int ldb, __global out_t* C, const int ldc,
                            const int accumulate, __local uchar* smem, __local uint* scratch) {
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int wm0 = (warp / NWARPS) * MWT, wn0 = (warp % NWARPS) * NWT;

  // The workgroup's tile: groups of GM tile rows, walked column by column inside a group.
  const int tiles_m = (M + MWG - 1) / MWG, tiles_n = (N + NWG - 1) / NWG;
  const int b = get_group_id(0), per_group = GM * tiles_n;
  const int first_m = b / per_group * GM, group_rows = min(tiles_m - first_m, GM);
  const int m0 = (first_m + b % per_group % group_rows) * MWG, n0 = b % per_group / group_rows * NWG;

  // 16-byte chunk loads need 16-byte aligned rows.
  const int aligned = lda % CV == 0 && ldb % CV == 0 && ((ulong)A & 15) == 0 && ((ulong)B & 15) == 0;

  float acc[MI][NI][4];
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int j = 0; j < NI; ++j) {
      TC_UNROLL
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }

  const int steps = (K + KWG - 1) / KWG;
  const copy_plan plan = plan_copies(A, lda, m0, M, B, ldb, n0, N, lid);
#if CPASYNC
  // Step kt lives in stage kt % STAGES. At step kt: wait for this work-item's copies of it,
  // then a barrier publishes everyone's and retires every read of stage (kt - 1) % STAGES,
  // which the copies of step kt + STAGES - 1 then reuse. One commit group a step, empty or
  // not, so that "all but the last STAGES - 2 groups" is always step kt.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) copy_stage(smem + s * STAGEB, plan, A, B, s * KWG, K, aligned);
    CP_COMMIT();
  }
  int read = 0, write = STAGES - 1;
  for (int kt = 0; kt < steps; ++kt) {
    CP_WAIT_STEP();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kt + STAGES - 1 < steps) copy_stage(smem + write * STAGEB, plan, A, B, (kt + STAGES - 1) * KWG, K, aligned);
    CP_COMMIT();
    multiply_stage(acc, smem + read * STAGEB, wm0, wn0, lane, scratch);
    read = read == STAGES - 1 ? 0 : read + 1;
    write = write == STAGES - 1 ? 0 : write + 1;
  }
#else
  // Step kt in stage kt % 2; the next step's chunks are loaded before the multiply and
  // stored after it; the barrier after the store both publishes them and retires the reads
  // of this stage before step kt + 1 refills it.
  uint4 regs[A_COPIES + B_COPIES];
  load_stage(regs, plan, 0, K, aligned);
  store_stage(smem, regs, plan);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int kt = 0; kt < steps; ++kt) {
    const int more = kt + 1 < steps;
    if (more) load_stage(regs, plan, (kt + 1) * KWG, K, aligned);
    multiply_stage(acc, smem + (kt & 1) * STAGEB, wm0, wn0, lane, scratch);
    if (more) store_stage(smem + ((kt + 1) & 1) * STAGEB, regs, plan);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  // Lane (g, t) holds C[g][2t, 2t + 1] and C[g + 8][2t, 2t + 1] of each 16 × 8 tile: rows m,
  // columns n, n + 1. C = alpha · sum (+ old C), the f32 result rounded once to C's type.
  const int g = lane >> 2, t = lane & 3;
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm0 + 16 * i + g + 8 * h;
      if (m >= M) continue;
      TC_UNROLL
      for (int j = 0; j < NI; ++j) {
        const int n = n0 + wn0 + 8 * j + 2 * t;
        if (n >= N) continue;
        __global out_t* p = C + (long)m * ldc + n;
        const float s0 = acc[i][j][2 * h], s1 = acc[i][j][2 * h + 1];
        if (n + 1 < N) {
          const float o0 = accumulate ? from_out(p[0]) : 0.0f, o1 = accumulate ? from_out(p[1]) : 0.0f;
          p[0] = to_out(accumulate ? mad(alpha, s0, o0) : alpha * s0);
          p[1] = to_out(accumulate ? mad(alpha, s1, o1) : alpha * s1);
        } else {
          p[0] = to_out(accumulate ? mad(alpha, s0, from_out(p[0])) : alpha * s0);
        }
      }
    }
  }
}

#ifdef OCLTK_PTX
#define SCRATCH_DECL __local uint* scratch = 0
#else
#define SCRATCH_DECL                                  \
  __local uint scratch_all[MWARPS * NWARPS * SCRATCH_WORDS]; \
  __local uint* scratch = scratch_all + (get_local_id(0) >> 5) * SCRATCH_WORDS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, (__local uchar*)smem,
                  scratch);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, (__local uchar*)smem,
                  scratch);
}

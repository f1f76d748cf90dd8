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
// once share A and B tiles in L2. With KSPLIT > 1 the workgroup is KSPLIT groups of
// MWARPS × NWARPS warps, each with its own stages, group g sweeping the g-th of KSPLIT
// contiguous runs of K steps; at the end the groups' sums go, one group at a time, through
// local memory into group 0's, which stores the tile. That gives shapes with few tiles of C
// (LoRA shrink: N <= 64, a tile row per workgroup) enough warps to keep the loads in flight,
// where one group would leave most SMs idle (the `tcs` algorithm of runtime/src/gemm_nt.cpp).
//
// Store (EPI): 0 stores each lane's two neighbouring elements of every 16 × 8 accumulator tile
// as the mma leaves them (4 or 8 bytes a lane, 8 rows a warp's access); 1 first transposes
// four tiles at a time across the four lanes that share a row (two shuffle exchanges), so
// that a lane reads and writes 8 consecutive elements (16 bytes of a 16-bit C, 32 of f32)
// where C is aligned: the accumulate's read of C and the write become whole sectors, which is
// what bounds short K (LoRA expand).
//
// Launch: a 1-D range of ceil(M / MWG) · ceil(N / NWG) workgroups of WGS = 32 · MWARPS · NWARPS ·
// KSPLIT work-items; local memory as tc_mma.clh says, times KSPLIT.
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

#ifndef EPI
#define EPI 0  // C's stores: 0 two elements a lane as the mma leaves them, 1 16-byte rows after a quad exchange
#endif

#include "tc_mma.clh"

#if GM < 1
#error "GM must be at least 1"
#endif
#if EPI != 0 && EPI != 1
#error "EPI must be 0 or 1"
#endif
#if EPI && NI % 4 != 0
#error "EPI 1 exchanges four 8-column tiles at a time: NWG / NWARPS must be a multiple of 32"
#endif
#if KSPLIT > 1 && MWG * NWG * 4 > KSPLIT * STAGES * STAGEB
#error "KSPLIT > 1 sums the groups' MWG x NWG f32 tiles in the stages' local memory: too small"
#endif

// ---- the store ---------------------------------------------------------------------------

#if EPI
// Lane l's v from lane l ^ mask (mask 1 or 2: within a quad of lanes): a warp shuffle, or,
// emulated, through the warp's scratch words (every work-item of the workgroup calls it alike).
#ifdef OCLTK_PTX
inline float quad_xor(const float v, const int mask, __local uint* s, const int lane) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#else
inline float quad_xor(const float v, const int mask, __local uint* s, const int lane) {
  s[lane] = as_uint(v);
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = as_float(s[lane ^ mask]);
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#endif

// Four 8-column tiles of one row, transposed across the quad of lanes that holds it: lane
// t of the quad holds p[jj] = columns 8·jj + 2t, + 1 of tile jj (jj = 0 .. 3), and gets
// q[s] = lane s's p[t], so that q holds tile t's 8 columns in order. Two exchanges (lanes
// t ^ 2, then t ^ 1), each passing half of what a lane holds.
inline void quad_transpose(float q[4][2], const float p[4][2], const int t, __local uint* s, const int lane) {
  const int b1 = (t >> 1) & 1, b0 = t & 1;
  float r[2][2][2];  // r[m][b]: tile m + 2·b1 from the quad's lane (bit 1 = b, bit 0 = b0)
  TC_UNROLL
  for (int m = 0; m < 2; ++m) {
    TC_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float keep = b1 ? p[m + 2][e] : p[m][e];
      const float got = quad_xor(b1 ? p[m][e] : p[m + 2][e], 2, s, lane);
      r[m][0][e] = b1 ? got : keep;
      r[m][1][e] = b1 ? keep : got;
    }
  }
  TC_UNROLL
  for (int b = 0; b < 2; ++b) {
    TC_UNROLL
    for (int e = 0; e < 2; ++e) {
      const float keep = b0 ? r[1][b][e] : r[0][b][e];
      const float got = quad_xor(b0 ? r[0][b][e] : r[1][b][e], 1, s, lane);
      q[2 * b][e] = b0 ? got : keep;
      q[2 * b + 1][e] = b0 ? keep : got;
    }
  }
}
#endif

// C[m][n] = alpha · sum (+ old C), the f32 result rounded once to C's type.
inline void store_element(__global out_t* p, const float alpha, const float sum, const int accumulate) {
  *p = to_out(accumulate ? mad(alpha, sum, from_out(*p)) : alpha * sum);
}

// The warp's tile of C from its accumulators (rows m0 + wm0 .., columns n0 + wn0 ..); every
// work-item of the workgroup calls it (the emulated exchanges' barriers), `live` says whether
// it stores. Lane (g, t) holds C[g][2t, 2t + 1] and C[g + 8][2t, 2t + 1] of each 16 × 8 tile.
inline void store_tile(float acc[MI][NI][4], const int M, const int N, const float alpha, __global out_t* C,
                       const int ldc, const int accumulate, const int m0, const int n0, const int lane, const int live,
                       __local uint* scratch) {
  const int g = lane >> 2, t = lane & 3;
#if EPI
  // Four tiles at a time, transposed in the quad: lane t stores 8 consecutive columns of its
  // row (16 bytes of a 16-bit C, 32 of f32) where they lie inside C and aligned.
  const int vec = ((ulong)C & 15) == 0 && ldc % (16 / (int)sizeof(out_t)) == 0;
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + 16 * i + g + 8 * h;
      TC_UNROLL
      for (int j0 = 0; j0 < NI; j0 += 4) {
        float p[4][2], q[4][2];
        TC_UNROLL
        for (int jj = 0; jj < 4; ++jj) {
          p[jj][0] = acc[i][j0 + jj][2 * h];
          p[jj][1] = acc[i][j0 + jj][2 * h + 1];
        }
        quad_transpose(q, p, t, scratch, lane);
        const int n = n0 + 8 * (j0 + t);
        if (!live || m >= M || n >= N) continue;
        __global out_t* c = C + (long)m * ldc + n;
        if (vec && n + 8 <= N) {
#if TYPE == TC_F32 || CF32
          float4 o0 = (float4)(0.0f), o1 = (float4)(0.0f);
          if (accumulate) {
            o0 = vload4(0, c);
            o1 = vload4(1, c);
          }
          const float4 s0 = (float4)(q[0][0], q[0][1], q[1][0], q[1][1]);
          const float4 s1 = (float4)(q[2][0], q[2][1], q[3][0], q[3][1]);
          vstore4(accumulate ? mad((float4)(alpha), s0, o0) : alpha * s0, 0, c);
          vstore4(accumulate ? mad((float4)(alpha), s1, o1) : alpha * s1, 1, c);
#else
          const uint4 old = accumulate ? *(const __global uint4*)c : (uint4)(0u);
          const uint ow[4] = {old.s0, old.s1, old.s2, old.s3};
          uint w[4];
          TC_UNROLL
          for (int s = 0; s < 4; ++s) {
            const float v0 = accumulate ? mad(alpha, q[s][0], from_out((out_t)(ow[s] & 0xFFFFu))) : alpha * q[s][0];
            const float v1 = accumulate ? mad(alpha, q[s][1], from_out((out_t)(ow[s] >> 16))) : alpha * q[s][1];
            w[s] = (uint)to_out(v0) | (uint)to_out(v1) << 16;
          }
          *(__global uint4*)c = (uint4)(w[0], w[1], w[2], w[3]);
#endif
        } else {
          TC_UNROLL
          for (int s = 0; s < 4; ++s) {
            TC_UNROLL
            for (int e = 0; e < 2; ++e)
              if (n + 2 * s + e < N) store_element(c + 2 * s + e, alpha, q[s][e], accumulate);
          }
        }
      }
    }
  }
#else
  if (!live) return;
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + 16 * i + g + 8 * h;
      if (m >= M) continue;
      TC_UNROLL
      for (int j = 0; j < NI; ++j) {
        const int n = n0 + 8 * j + 2 * t;
        if (n >= N) continue;
        __global out_t* p = C + (long)m * ldc + n;
        store_element(p, alpha, acc[i][j][2 * h], accumulate);
        if (n + 1 < N) store_element(p + 1, alpha, acc[i][j][2 * h + 1], accumulate);
      }
    }
  }
#endif
}

// ---- the kernel -------------------------------------------------------------------------

inline void gemm_nt_tc_body(const int M, const int N, const int K, const float alpha, const __global elem_t* A,
                            const int lda, const __global elem_t* B, const int ldb, __global out_t* C, const int ldc,
                            const int accumulate, __local uchar* smem_all, __local uint* scratch) {
  // K group kg (KSPLIT of them) sweeps its share of K with its own stages; glid is the
  // work-item's index in its group.
  const int lid = get_local_id(0), kg = lid / GWS, glid = lid % GWS, lane = lid & 31, warp = glid >> 5;
  const int wm0 = (warp / NWARPS) * MWT, wn0 = (warp % NWARPS) * NWT;
  __local uchar* smem = smem_all + kg * (STAGES * STAGEB);

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

  // Group kg takes steps kg·steps .. (kg + 1)·steps - 1 of K; steps past K copy zeros, so
  // that every group runs the same loop (the barriers).
  const int steps = ((K + KWG - 1) / KWG + KSPLIT - 1) / KSPLIT, k_base = kg * steps * KWG;
  const copy_plan plan = plan_copies(A, lda, m0, M, B, ldb, n0, N, glid);
#if CPASYNC
  // Step kt lives in stage kt % STAGES. At step kt: wait for this work-item's copies of it,
  // then a barrier publishes everyone's and retires every read of stage (kt - 1) % STAGES,
  // which the copies of step kt + STAGES - 1 then reuse. One commit group a step, empty or
  // not, so that "all but the last STAGES - 2 groups" is always step kt.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) copy_stage(smem + s * STAGEB, plan, A, B, k_base + s * KWG, K, aligned);
    CP_COMMIT();
  }
  int read = 0, write = STAGES - 1;
  for (int kt = 0; kt < steps; ++kt) {
    CP_WAIT_STEP();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kt + STAGES - 1 < steps)
      copy_stage(smem + write * STAGEB, plan, A, B, k_base + (kt + STAGES - 1) * KWG, K, aligned);
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
  load_stage(regs, plan, k_base, K, aligned);
  store_stage(smem, regs, plan);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int kt = 0; kt < steps; ++kt) {
    const int more = kt + 1 < steps;
    if (more) load_stage(regs, plan, k_base + (kt + 1) * KWG, K, aligned);
    multiply_stage(acc, smem + (kt & 1) * STAGEB, wm0, wn0, lane, scratch);
    if (more) store_stage(smem + ((kt + 1) & 1) * STAGEB, regs, plan);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

#if KSPLIT > 1
  // The groups' sums into group 0's, one group at a time through the (now idle) stages:
  // word ((i·NI + j)·4 + e)·GWS + glid, consecutive across the group's work-items.
  __local float* red = (__local float*)smem_all;
#if CPASYNC
  CP_WAIT_ALL();
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 1
  for (int from = 1; from < KSPLIT; ++from) {
    if (kg == from) {
      TC_UNROLL
      for (int i = 0; i < MI; ++i) {
        TC_UNROLL
        for (int j = 0; j < NI; ++j) {
          TC_UNROLL
          for (int e = 0; e < 4; ++e) red[((i * NI + j) * 4 + e) * GWS + glid] = acc[i][j][e];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kg == 0) {
      TC_UNROLL
      for (int i = 0; i < MI; ++i) {
        TC_UNROLL
        for (int j = 0; j < NI; ++j) {
          TC_UNROLL
          for (int e = 0; e < 4; ++e) acc[i][j][e] += red[((i * NI + j) * 4 + e) * GWS + glid];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  store_tile(acc, M, N, alpha, C, ldc, accumulate, m0 + wm0, n0 + wn0, lane, kg == 0, scratch);
}

#ifdef OCLTK_PTX
#define SCRATCH_DECL __local uint* scratch = 0
#else
#define SCRATCH_DECL                                  \
  __local uint scratch_all[WGS / 32 * SCRATCH_WORDS]; \
  __local uint* scratch = scratch_all + (get_local_id(0) >> 5) * SCRATCH_WORDS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[KSPLIT * STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, (__local uchar*)smem,
                  scratch);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[KSPLIT * STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, (__local uchar*)smem,
                  scratch);
}

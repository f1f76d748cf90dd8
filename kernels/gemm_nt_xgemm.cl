// gemm_nt_xgemm: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating), f32,
// a GPU-oriented 2-D register-tiled kernel with K-major local tiles and vector reads.
//
// Memory layout (all row-major, element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// Both operands are contiguous along K, but the product wants M and N contiguous in
// local memory: each KWG step loads the MWG×KWG tile of A and the NWG×KWG tile of B with
// 4-wide loads along K (consecutive work-items take consecutive rows) and stores them
// transposed, As[k][m] and Bs[k][n], so that the inner loop reads VWM-wide vectors of A
// and VWN-wide vectors of B with consecutive work-items on consecutive vectors (no bank
// conflicts). A workgroup of MDIMC×NDIMC work-items (local id 0 along N) owns an MWG×NWG
// tile of C; work-item (tm, tn) owns the VWM-row groups tm, tm+MDIMC, ... and the
// VWN-column groups tn, tn+NDIMC, ...; every output is a scalar accumulator.

#ifndef MWG
#define MWG 128  // tile rows (M) per workgroup
#endif
#ifndef NWG
#define NWG 128  // tile columns (N) per workgroup
#endif
#ifndef KWG
#define KWG 16  // K columns staged per local-memory step
#endif
#ifndef MDIMC
#define MDIMC 16  // work-items along M in a workgroup
#endif
#ifndef NDIMC
#define NDIMC 16  // work-items along N in a workgroup
#endif
#ifndef VWM
#define VWM 4  // vector width of the local reads along M (1, 2 or 4)
#endif
#ifndef VWN
#define VWN 4  // vector width of the local reads along N (1, 2 or 4)
#endif

#define WGS (MDIMC * NDIMC)
#define MWI (MWG / MDIMC)  // outputs per work-item along M
#define NWI (NWG / NDIMC)  // outputs per work-item along N
#define MVI (MWI / VWM)    // VWM-row groups per work-item
#define NVI (NWI / VWN)    // VWN-column groups per work-item

#if MWG % (MDIMC * VWM) != 0
#error "MWG must be a multiple of MDIMC * VWM"
#endif
#if NWG % (NDIMC * VWN) != 0
#error "NWG must be a multiple of NDIMC * VWN"
#endif
#if KWG % 4 != 0
#error "KWG must be a multiple of 4"
#endif
#if (MWG * KWG / 4) % WGS != 0 || (NWG * KWG / 4) % WGS != 0
#error "the A and B tiles must split evenly into 4-wide loads over the workgroup"
#endif

#if VWM == 1
typedef float realm;
#define LOADM(off, p) ((p)[off])
#elif VWM == 2
typedef float2 realm;
#define LOADM(off, p) vload2(0, (p) + (off))
#else
typedef float4 realm;
#define LOADM(off, p) vload4(0, (p) + (off))
#endif
#if VWN == 1
typedef float realn;
#define LOADN(off, p) ((p)[off])
#elif VWN == 2
typedef float2 realn;
#define LOADN(off, p) vload2(0, (p) + (off))
#else
typedef float4 realn;
#define LOADN(off, p) vload4(0, (p) + (off))
#endif

// Lane v of a VW-wide vector (VW = 1 is a scalar).
#define LANE1(x, v) (x)
#define LANE2(x, v) ((v) == 0 ? (x).s0 : (x).s1)
#define LANE4(x, v) ((v) == 0 ? (x).s0 : (v) == 1 ? (x).s1 : (v) == 2 ? (x).s2 : (x).s3)
#define CAT(a, b) a##b
#define LANE(W, x, v) CAT(LANE, W)(x, v)

// Stages rows [row0, row0+ROWS) × K columns [k0, k0+KWG) of a row-major matrix into the
// K-major local tile dst[k][row], zero outside rows × K.
#define STAGE(ROWS, dst, src, ld, row0, rows, k0, K)                                     \
  for (int idx = lid; idx < (ROWS) * (KWG / 4); idx += WGS) {                           \
    const int r = idx % (ROWS);                                                         \
    const int kq = (idx / (ROWS)) * 4;                                                  \
    const int gr = (row0) + r;                                                          \
    const int gk = (k0) + kq;                                                           \
    float4 v = (float4)(0.0f);                                                          \
    if (gr < (rows)) {                                                                  \
      const __global float* p = src + (long)gr * (ld) + gk;                             \
      if (gk + 3 < (K)) {                                                               \
        /* 16-byte aligned rows (ld and offset multiples of 4) get one vector load */   \
        v = ((ulong)p & 15) == 0 ? *(const __global float4*)p : vload4(0, p);          \
      } else {                                                                          \
        v.s0 = gk < (K) ? p[0] : 0.0f;                                                  \
        v.s1 = gk + 1 < (K) ? p[1] : 0.0f;                                              \
        v.s2 = gk + 2 < (K) ? p[2] : 0.0f;                                              \
      }                                                                                 \
    }                                                                                   \
    dst[(kq + 0) * (ROWS) + r] = v.s0;                                                  \
    dst[(kq + 1) * (ROWS) + r] = v.s1;                                                  \
    dst[(kq + 2) * (ROWS) + r] = v.s2;                                                  \
    dst[(kq + 3) * (ROWS) + r] = v.s3;                                                  \
  }

inline void gemm_nt_xgemm_body(const int M, const int N, const int K, const float alpha,
                               const __global float* restrict A, const int lda,
                               const __global float* restrict B, const int ldb, __global float* C,
                               const int ldc, const int accumulate, __local float* As, __local float* Bs) {
  const int tn = get_local_id(0);
  const int tm = get_local_id(1);
  const int lid = tm * NDIMC + tn;
  const int m0 = get_group_id(1) * MWG;
  const int n0 = get_group_id(0) * NWG;

  float acc[MWI][NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i)
#pragma unroll
    for (int j = 0; j < NWI; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += KWG) {
    STAGE(MWG, As, A, lda, m0, M, k0, K)
    STAGE(NWG, Bs, B, ldb, n0, N, k0, K)
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 4
    for (int k = 0; k < KWG; ++k) {
      realm a[MVI];
      realn b[NVI];
#pragma unroll
      for (int i = 0; i < MVI; ++i) a[i] = LOADM(k * MWG + (i * MDIMC + tm) * VWM, As);
#pragma unroll
      for (int j = 0; j < NVI; ++j) b[j] = LOADN(k * NWG + (j * NDIMC + tn) * VWN, Bs);
#pragma unroll
      for (int i = 0; i < MVI; ++i)
#pragma unroll
        for (int vi = 0; vi < VWM; ++vi)
#pragma unroll
          for (int j = 0; j < NVI; ++j)
#pragma unroll
            for (int vj = 0; vj < VWN; ++vj)
              acc[i * VWM + vi][j * VWN + vj] =
                  mad(LANE(VWM, a[i], vi), LANE(VWN, b[j], vj), acc[i * VWM + vi][j * VWN + vj]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  // Work-item (tm, tn) owns row (i * MDIMC + tm) * VWM + vi and column (j * NDIMC + tn) * VWN + vj
  // of the tile for accumulator [i * VWM + vi][j * VWN + vj].
#define ROW_OF(r) (m0 + ((r) / VWM * MDIMC + tm) * VWM + (r) % VWM)
#define COL_OF(c) (n0 + ((c) / VWN * NDIMC + tn) * VWN + (c) % VWN)
  // Row by row: a row's NWI old C values are loaded together before its stores (the
  // compiler cannot prove C aliases nothing; load-store pairs would serialise), without
  // keeping a second tile of values live in registers.
#pragma unroll
  for (int r = 0; r < MWI; ++r) {
    const int m = ROW_OF(r);
    float old[NWI];
    if (accumulate) {
#pragma unroll
      for (int c = 0; c < NWI; ++c) {
        const int n = COL_OF(c);
        old[c] = (m < M && n < N) ? C[(long)m * ldc + n] : 0.0f;
      }
    }
#pragma unroll
    for (int c = 0; c < NWI; ++c) {
      const int n = COL_OF(c);
      if (m < M && n < N) C[(long)m * ldc + n] = accumulate ? mad(alpha, acc[r][c], old[c]) : alpha * acc[r][c];
    }
  }
#undef ROW_OF
#undef COL_OF
}

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global float* restrict A,
    const long a_offset, const int lda, const __global float* restrict B, const long b_offset,
    const int ldb, __global float* C, const long c_offset, const int ldc) {
  __local float As[KWG * MWG];
  __local float Bs[KWG * NWG];
  gemm_nt_xgemm_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, As, Bs);
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global float* restrict A,
    const long a_offset, const int lda, const __global float* restrict B, const long b_offset,
    const int ldb, __global float* C, const long c_offset, const int ldc) {
  __local float As[KWG * MWG];
  __local float Bs[KWG * NWG];
  gemm_nt_xgemm_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, As, Bs);
}

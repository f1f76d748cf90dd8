// gemm_nt_tiled: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating). A and B are
// stored as IN_TYPE, C as OUT_TYPE (element_types.clh); tiles and sums are f32.
//
// Memory layout (all row-major, element offsets and leading dimensions given at launch):
//
//            K (contiguous)                 K (contiguous)              N (contiguous)
//        +-----------------+           +-----------------+         +---------------+
//   M    | A[m*lda + k]    |      N    | B[n*ldb + k]    |     M   | C[m*ldc + n]  |
//        +-----------------+           +-----------------+         +---------------+
//
// Each output is the dot of an A row with a B row, so K is the contiguous direction of
// both operands. A workgroup owns an MWG×NWG tile of C; its MDIMC×NDIMC work-items
// (local id 0 runs along N, local id 1 along M) each own MWI×NWI outputs, strided by
// MDIMC rows and NDIMC columns so neighbouring work-items write neighbouring columns.
// Accumulators are VW-wide vectors along K: VW=1 is the classic outer-product form
// (GPUs), VW>1 keeps SIMD lanes busy on CPUs; the lanes are summed once at the end.
// With USE_LOCAL the A and B tiles are staged through local memory KWG columns at a
// time; without it each work-item streams its rows straight from global memory.

#ifndef MWG
#define MWG 64  // tile rows (M) per workgroup
#endif
#ifndef NWG
#define NWG 64  // tile columns (N) per workgroup
#endif
#ifndef KWG
#define KWG 16  // K columns staged per local-memory step (only with USE_LOCAL)
#endif
#ifndef MDIMC
#define MDIMC 8  // work-items along M in a workgroup
#endif
#ifndef NDIMC
#define NDIMC 8  // work-items along N in a workgroup
#endif
#ifndef VW
#define VW 1  // accumulator vector width along K (1, 2, 4, 8 or 16)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1  // 1: stage A/B tiles in local memory; 0: read global memory directly
#endif

#define MWI (MWG / MDIMC)  // outputs per work-item along M
#define NWI (NWG / NDIMC)  // outputs per work-item along N
#define WGS (MDIMC * NDIMC)

#if MWG % MDIMC != 0
#error "MWG must be a multiple of MDIMC"
#endif
#if NWG % NDIMC != 0
#error "NWG must be a multiple of NDIMC"
#endif
#if VW != 1 && VW != 2 && VW != 4 && VW != 8 && VW != 16
#error "VW must be 1, 2, 4, 8 or 16"
#endif
#if USE_LOCAL && (KWG % VW != 0)
#error "KWG must be a multiple of VW"
#endif

#include "element_types.clh"
#include "vector_types.clh"

#if USE_LOCAL
// Row stride of the staged tiles; one pad float keeps the VW=1 column walk across
// neighbouring rows off a single local-memory bank.
#define LSTRIDE (KWG + (VW == 1 ? 1 : 0))

// Copies rows [row0, row0+ROWS) × columns [k0, k0+KWG) of a row-major matrix into a
// local tile, zero-filling what lies outside rows × K.
#define STAGE_TILE(ROWS, dst, src, ld, row0, rows, k0, K)                            \
  for (int idx = lid; idx < (ROWS) * KWG; idx += WGS) {                             \
    const int r = idx / KWG;                                                         \
    const int c = idx % KWG;                                                         \
    const int gr = (row0) + r;                                                       \
    const int gk = (k0) + c;                                                         \
    dst[r * LSTRIDE + c] = (gr < (rows) && gk < (K)) ? LOAD_IN(src, (long)gr * (ld) + gk) : 0.0f; \
  }
#endif

inline void gemm_nt_tiled_body(const int M, const int N, const int K, const float alpha,
                               const __global in_t* restrict A, const int lda,
                               const __global in_t* restrict B, const int ldb, __global out_t* C,
                               const int ldc, const int accumulate
#if USE_LOCAL
                               ,
                               __local float* As, __local float* Bs
#endif
) {
  const int tn = get_local_id(0);
  const int tm = get_local_id(1);
  const int m0 = get_group_id(1) * MWG;
  const int n0 = get_group_id(0) * NWG;

  realv acc[MWI][NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i)
#pragma unroll
    for (int j = 0; j < NWI; ++j) acc[i][j] = (realv)(0.0f);

#if USE_LOCAL
  const int lid = tm * NDIMC + tn;
  for (int k0 = 0; k0 < K; k0 += KWG) {
    STAGE_TILE(MWG, As, A, lda, m0, M, k0, K)
    STAGE_TILE(NWG, Bs, B, ldb, n0, N, k0, K)
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < KWG; k += VW) {
      realv a[MWI];
      realv b[NWI];
#pragma unroll
      for (int i = 0; i < MWI; ++i) a[i] = LOADV((tm + i * MDIMC) * LSTRIDE + k, As);
#pragma unroll
      for (int j = 0; j < NWI; ++j) b[j] = LOADV((tn + j * NDIMC) * LSTRIDE + k, Bs);
#pragma unroll
      for (int i = 0; i < MWI; ++i)
#pragma unroll
        for (int j = 0; j < NWI; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  // Rows past the edge of the matrix are clamped to the last valid row: they read real
  // memory, and their results are dropped at the store.
  const __global in_t* arow[MWI];
  const __global in_t* brow[NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i) arow[i] = A + (long)min(m0 + tm + i * MDIMC, M - 1) * lda;
#pragma unroll
  for (int j = 0; j < NWI; ++j) brow[j] = B + (long)min(n0 + tn + j * NDIMC, N - 1) * ldb;
  const int kv = K - K % VW;
  for (int k = 0; k < kv; k += VW) {
    realv a[MWI];
    realv b[NWI];
#pragma unroll
    for (int i = 0; i < MWI; ++i) a[i] = LOADV_IN(k, arow[i]);
#pragma unroll
    for (int j = 0; j < NWI; ++j) b[j] = LOADV_IN(k, brow[j]);
#pragma unroll
    for (int i = 0; i < MWI; ++i)
#pragma unroll
      for (int j = 0; j < NWI; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
  }
#endif

  float sum[MWI][NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i)
#pragma unroll
    for (int j = 0; j < NWI; ++j) sum[i][j] = HSUM(acc[i][j]);

#if !USE_LOCAL
  // The K % VW tail, one scalar at a time.
  for (int k = kv; k < K; ++k) {
#pragma unroll
    for (int i = 0; i < MWI; ++i)
#pragma unroll
      for (int j = 0; j < NWI; ++j) sum[i][j] = mad(LOAD_IN(arow[i], k), LOAD_IN(brow[j], k), sum[i][j]);
  }
#endif

  // Row by row: the NWI old C values of a row are loaded together before its stores
  // (the compiler cannot prove C aliases nothing, and interleaved load-store pairs would
  // each wait a memory round trip), without holding a second MWI×NWI array in registers.
#pragma unroll
  for (int i = 0; i < MWI; ++i) {
    const int m = m0 + tm + i * MDIMC;
    float old[NWI];
    if (accumulate) {
#pragma unroll
      for (int j = 0; j < NWI; ++j) {
        const int n = n0 + tn + j * NDIMC;
        old[j] = (m < M && n < N) ? LOAD_OUT(C, (long)m * ldc + n) : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < NWI; ++j) {
      const int n = n0 + tn + j * NDIMC;
      if (m < M && n < N)
        STORE_OUT(C, (long)m * ldc + n, accumulate ? mad(alpha, sum[i][j], old[j]) : alpha * sum[i][j]);
    }
  }
}

#if USE_LOCAL
#define LOCAL_TILES                 \
  __local float As[MWG * LSTRIDE]; \
  __local float Bs[NWG * LSTRIDE];
#define LOCAL_ARGS , As, Bs
#else
#define LOCAL_TILES
#define LOCAL_ARGS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_tiled_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0 LOCAL_ARGS);
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_tiled_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1 LOCAL_ARGS);
}

// gemm_nt_reduce: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating), for skinny
// and gemv-like shapes (few rows M, or few columns N, with long K). A and B are stored as
// IN_TYPE, C as OUT_TYPE (element_types.clh), sums in f32.
//
// Memory layout (all row-major, element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// RW work-items ("reduction width") share the K reduction of one output column: lane l
// reads K elements l*VW, l*VW + RW*VW, ... so the RW lanes sweep a B row contiguously.
// A workgroup of WGS work-items covers WGS/RW columns (local id 0) and TR rows of A
// (group id 1); each work-item keeps TR partial sums, one per row, so every B element
// it loads is used TR times. The RW partials of a column are summed in local memory.
// With USE_LOCAL the TR rows of A are staged KWG columns at a time in local memory
// (they are shared by every column of the workgroup).

#ifndef WGS
#define WGS 256  // work-items per workgroup
#endif
#ifndef RW
#define RW 32  // reduction width: work-items sharing one output's K reduction
#endif
#ifndef TR
#define TR 1  // tile rows: rows of A (and C) each work-item handles
#endif
#ifndef VW
#define VW 1  // vector width of the loads along K (1, 2, 4, 8 or 16)
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0  // 1: stage the A rows in local memory, KWG columns at a time
#endif
#ifndef KWG
#define KWG 512  // K columns per local-memory stage (only with USE_LOCAL)
#endif

#define CPW (WGS / RW)  // output columns per workgroup

#if WGS % RW != 0
#error "WGS must be a multiple of RW"
#endif
#if (RW & (RW - 1)) != 0
#error "RW must be a power of two"
#endif
#if USE_LOCAL && (KWG % (RW * VW) != 0)
#error "KWG must be a multiple of RW * VW"
#endif
#include "element_types.clh"
#include "vector_types.clh"

inline void gemm_nt_reduce_body(const int M, const int N, const int K, const float alpha,
                                const __global in_t* restrict A, const int lda,
                                const __global in_t* restrict B, const int ldb, __global out_t* C,
                                const int ldc, const int accumulate, __local float* partial
#if USE_LOCAL
                                ,
                                __local float* As
#endif
) {
  const int lid = get_local_id(0);
  const int lane = lid % RW;
  const int n = get_group_id(0) * CPW + lid / RW;
  const int m0 = get_group_id(1) * TR;
  // Out-of-range columns and rows read the last valid one and are dropped at the store,
  // so every work-item reaches every barrier.
  const __global in_t* brow = B + (long)min(n, N - 1) * ldb;

  realv acc[TR];
#pragma unroll
  for (int t = 0; t < TR; ++t) acc[t] = (realv)(0.0f);
  float tail[TR];
#pragma unroll
  for (int t = 0; t < TR; ++t) tail[t] = 0.0f;

#if USE_LOCAL
  for (int k0 = 0; k0 < K; k0 += KWG) {
    for (int idx = lid; idx < TR * KWG; idx += WGS) {
      const int t = idx / KWG;
      const int c = idx % KWG;
      As[idx] = (k0 + c < K) ? LOAD_IN(A, (long)min(m0 + t, M - 1) * lda + k0 + c) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + KWG <= K) {
      for (int k = lane * VW; k < KWG; k += RW * VW) {
        const realv b = LOADV_IN(k0 + k, brow);
#pragma unroll
        for (int t = 0; t < TR; ++t) acc[t] = mad(LOADV(t * KWG + k, As), b, acc[t]);
      }
    } else {
      for (int k = lane; k0 + k < K; k += RW) {
        const float b = LOAD_IN(brow, k0 + k);
#pragma unroll
        for (int t = 0; t < TR; ++t) tail[t] = mad(As[t * KWG + k], b, tail[t]);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  const __global in_t* arow[TR];
#pragma unroll
  for (int t = 0; t < TR; ++t) arow[t] = A + (long)min(m0 + t, M - 1) * lda;
  const int kv = K - K % VW;
  for (int k = lane * VW; k < kv; k += RW * VW) {
    const realv b = LOADV_IN(k, brow);
#pragma unroll
    for (int t = 0; t < TR; ++t) acc[t] = mad(LOADV_IN(k, arow[t]), b, acc[t]);
  }
  for (int k = kv + lane; k < K; k += RW) {
    const float b = LOAD_IN(brow, k);
#pragma unroll
    for (int t = 0; t < TR; ++t) tail[t] = mad(LOAD_IN(arow[t], k), b, tail[t]);
  }
#endif

#pragma unroll
  for (int t = 0; t < TR; ++t) partial[t * WGS + lid] = HSUM(acc[t]) + tail[t];

#if RW > 1
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = RW / 2; s > 0; s >>= 1) {
    if (lane < s) {
#pragma unroll
      for (int t = 0; t < TR; ++t) partial[t * WGS + lid] += partial[t * WGS + lid + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  if (lane == 0 && n < N) {
    // Old C values are all loaded before the first store, so the loads overlap.
    float old[TR];
    if (accumulate) {
#pragma unroll
      for (int t = 0; t < TR; ++t) old[t] = (m0 + t < M) ? LOAD_OUT(C, (long)(m0 + t) * ldc + n) : 0.0f;
    }
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      const int m = m0 + t;
      const float v = partial[t * WGS + lid];
      if (m < M) STORE_OUT(C, (long)m * ldc + n, accumulate ? mad(alpha, v, old[t]) : alpha * v);
    }
  }
}

#if USE_LOCAL
#define LOCAL_TILES            \
  __local float partial[TR * WGS]; \
  __local float As[TR * KWG];
#define LOCAL_ARGS partial, As
#else
#define LOCAL_TILES __local float partial[TR * WGS];
#define LOCAL_ARGS partial
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_reduce_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, LOCAL_ARGS);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_reduce_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, LOCAL_ARGS);
}

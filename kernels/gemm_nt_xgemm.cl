// gemm_nt_xgemm: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating), a
// GPU-oriented 2-D register-tiled kernel with K-major local tiles and vector reads. A and B
// are stored as IN_TYPE, C as OUT_TYPE (element_types.clh); local tiles and sums are f32.
//
// Memory layout (all row-major, element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// Both operands are contiguous along K, but the product wants M and N contiguous in
// local memory: each KWG step loads the MWG×KWG tile of A and the NWG×KWG tile of B with
// 4-wide loads along K and stores them transposed, As[k][m] and Bs[k][n], so that the
// inner loop reads VWM-wide vectors of A and VWN-wide vectors of B with consecutive
// work-items on consecutive vectors (no bank conflicts). A workgroup of MDIMC×NDIMC
// work-items (local id 0 along N) owns an MWG×NWG tile of C; work-item (tm, tn) owns the
// VWM-row groups tm, tm+MDIMC, ... and the VWN-column groups tn, tn+NDIMC, ...; every
// output is a scalar accumulator.
//
// Who loads what (LOADK), for a tile of ROWS rows × KWG columns in float4s q = 0..KWG/4-1:
//   LOADK 0: work-item idx takes row idx % ROWS, float4 idx / ROWS: a warp's 32 loads
//            touch 32 rows, 16 bytes each (the original mapping).
//   LOADK 1: work-item idx takes row idx / (KWG/4), float4 idx % (KWG/4): KWG/4
//            neighbours read one row's KWG*4 contiguous bytes (coalesced). Their four
//            transposed stores would hit one bank each (every k row of the tile starts
//            on bank 0), so the float4 group g of row k lives at g ^ SWZ(k)/4: an XOR
//            inside each aligned 32-float block, which keeps every VWM/VWN vector whole
//            and aligned and leaves the inner loop's read pattern conflict-free.
//
// When the next tile is loaded (PREFETCH):
//   0: load, store, barrier, multiply, barrier (the original loop, unrolled by 4).
//   1: the next tile's global loads are issued into registers before the current
//      tile is multiplied, so their latency hides behind the multiply; stored after it.
//   2: as 1 with two local buffers: the registers go to the other buffer while this one
//      is read, one barrier per step.
//   With PREFETCH > 0 the KWG loop asks for a full unroll, local reads are typed vector
//   loads from 16-byte aligned tiles, and C is written in float4s where a work-item owns
//   4 whole, aligned columns. PREFETCH 0 with LOADK 0 is the kernel as it was before both.

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
#ifndef LOADK
#define LOADK 0  // global loads: 0 work-items along rows, 1 along K within a row (coalesced)
#endif
#ifndef PREFETCH
#define PREFETCH 0  // 0 none, 1 next tile into registers during the multiply, 2 same + two local buffers
#endif

#define WGS (MDIMC * NDIMC)
#define MWI (MWG / MDIMC)  // outputs per work-item along M
#define NWI (NWG / NDIMC)  // outputs per work-item along N
#define MVI (MWI / VWM)    // VWM-row groups per work-item
#define NVI (NWI / VWN)    // VWN-column groups per work-item
#define A_LOADS (MWG * KWG / 4 / WGS)  // float4 global loads per work-item per A tile
#define B_LOADS (NWG * KWG / 4 / WGS)
#define MAX_LOADS (A_LOADS > B_LOADS ? A_LOADS : B_LOADS)
#define NBUF (PREFETCH == 2 ? 2 : 1)  // local buffers per operand

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
#if LOADK != 0 && LOADK != 1
#error "LOADK must be 0 or 1"
#endif
#if PREFETCH < 0 || PREFETCH > 2
#error "PREFETCH must be 0, 1 or 2"
#endif
#if LOADK == 1 && (KWG > 32 || MWG % 32 != 0 || NWG % 32 != 0)
#error "LOADK 1 swizzles float4 groups inside 32-float blocks: it needs KWG <= 32 and MWG, NWG multiples of 32"
#endif

#include "element_types.clh"

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
#if PREFETCH > 0
// The local tiles are 16-byte aligned, and every vector offset is a multiple of its width.
#undef LOADM
#undef LOADN
#define LOADM(off, p) (*(const __local realm*)((p) + (off)))
#define LOADN(off, p) (*(const __local realn*)((p) + (off)))
#define LOCAL_ALIGN __attribute__((aligned(16)))
#else
#define LOCAL_ALIGN
#endif

// Lane v of a VW-wide vector (VW = 1 is a scalar).
#define LANE1(x, v) (x)
#define LANE2(x, v) ((v) == 0 ? (x).s0 : (x).s1)
#define LANE4(x, v) ((v) == 0 ? (x).s0 : (v) == 1 ? (x).s1 : (v) == 2 ? (x).s2 : (x).s3)
#define CAT(a, b) a##b
#define LANE(W, x, v) CAT(LANE, W)(x, v)

// Global-to-local mapping: tile row and first K column of the float4 that staging
// index idx (0 <= idx < ROWS * KWG / 4) loads.
#if LOADK == 1
#define STAGE_ROW(idx, ROWS) ((idx) / (KWG / 4))
#define STAGE_KQ(idx, ROWS) ((idx) % (KWG / 4) * 4)
// XOR applied to the column index in K row k: a multiple of 4 below 32 (bits 2..4 only),
// chosen so that the KWG/4 work-items sharing a row store to distinct banks.
#define SWZ(k) (((k) / 4 * (128 / KWG)) % 32)
#else
#define STAGE_ROW(idx, ROWS) ((idx) % (ROWS))
#define STAGE_KQ(idx, ROWS) ((idx) / (ROWS) * 4)
#define SWZ(k) 0
#endif

// Local-tile offset of work-item (tm, tn)'s vector group i (j) in K row k. When a
// group's stride is a multiple of 32 floats the XOR touches only the work-item's part.
#if (MDIMC * VWM) % 32 == 0
#define A_COL(i, k) ((i) * (MDIMC * VWM) + ((tm * VWM) ^ SWZ(k)))
#else
#define A_COL(i, k) ((((i) * MDIMC + tm) * VWM) ^ SWZ(k))
#endif
#if (NDIMC * VWN) % 32 == 0
#define B_COL(j, k) ((j) * (NDIMC * VWN) + ((tn * VWN) ^ SWZ(k)))
#else
#define B_COL(j, k) ((((j) * NDIMC + tn) * VWN) ^ SWZ(k))
#endif

// Columns [gk, gk+4) of row gr of a row-major matrix, zero outside rows × K.
inline float4 load_row4(const __global in_t* restrict src, const int ld, const int gr, const int rows, const int gk,
                        const int K) {
  float4 v = (float4)(0.0f);
  if (gr < rows) {
    const __global in_t* p = src + (long)gr * ld + gk;
    if (gk + 3 < K) {
#if IN_TYPE == 0
      // 16-byte aligned rows (ld and offset multiples of 4) get one vector load
      v = ((ulong)p & 15) == 0 ? *(const __global float4*)p : vload4(0, p);
#else
      v = LOAD4_IN(p, 0);
#endif
    } else {
      v.s0 = gk < K ? LOAD_IN(p, 0) : 0.0f;
      v.s1 = gk + 1 < K ? LOAD_IN(p, 1) : 0.0f;
      v.s2 = gk + 2 < K ? LOAD_IN(p, 2) : 0.0f;
    }
  }
  return v;
}

// Writes v, columns [kq, kq+4) of tile row r, into the K-major local tile dst[k][row].
inline void store_k4(__local float* dst, const int rows_in_tile, const int r, const int kq, const float4 v) {
  const int col = r ^ SWZ(kq);
  dst[(kq + 0) * rows_in_tile + col] = v.s0;
  dst[(kq + 1) * rows_in_tile + col] = v.s1;
  dst[(kq + 2) * rows_in_tile + col] = v.s2;
  dst[(kq + 3) * rows_in_tile + col] = v.s3;
}

// PREFETCH 0: stages rows [row0, row0+rows_in_tile) × K columns [k0, k0+KWG) of a
// row-major matrix into dst, one float4 at a time (the original loop).
inline void stage_tile(__local float* dst, const int rows_in_tile, const __global in_t* restrict src, const int ld,
                       const int row0, const int rows, const int k0, const int K, const int lid) {
  for (int idx = lid; idx < rows_in_tile * (KWG / 4); idx += WGS) {
    const int r = STAGE_ROW(idx, rows_in_tile);
    const int kq = STAGE_KQ(idx, rows_in_tile);
    store_k4(dst, rows_in_tile, r, kq, load_row4(src, ld, row0 + r, rows, k0 + kq, K));
  }
}

// PREFETCH > 0: the same tile in two halves, global loads into registers and register
// stores into local memory, so that a multiply can run between them. (The loops run to
// a constant bound so that they unroll fully even where a function is compiled alone.)
inline void load_tile(float4* regs, const int nloads, const int rows_in_tile, const __global in_t* restrict src,
                      const int ld, const int row0, const int rows, const int k0, const int K, const int lid) {
#pragma unroll
  for (int t = 0; t < MAX_LOADS; ++t) {
    const int idx = lid + t * WGS;
    if (t < nloads)
      regs[t] = load_row4(src, ld, row0 + STAGE_ROW(idx, rows_in_tile), rows, k0 + STAGE_KQ(idx, rows_in_tile), K);
  }
}
inline void store_tile(__local float* dst, const float4* regs, const int nloads, const int rows_in_tile,
                       const int lid) {
#pragma unroll
  for (int t = 0; t < MAX_LOADS; ++t) {
    const int idx = lid + t * WGS;
    if (t < nloads) store_k4(dst, rows_in_tile, STAGE_ROW(idx, rows_in_tile), STAGE_KQ(idx, rows_in_tile), regs[t]);
  }
}

// acc += the product of the local tiles As[KWG][MWG] and Bs[KWG][NWG].
inline void multiply_tile(float acc[MWI][NWI], const __local float* As, const __local float* Bs, const int tm,
                          const int tn) {
#if PREFETCH == 0
#pragma unroll 4
#else
#pragma unroll
#endif
  for (int k = 0; k < KWG; ++k) {
    realm a[MVI];
    realn b[NVI];
#pragma unroll
    for (int i = 0; i < MVI; ++i) a[i] = LOADM(k * MWG + A_COL(i, k), As);
#pragma unroll
    for (int j = 0; j < NVI; ++j) b[j] = LOADN(k * NWG + B_COL(j, k), Bs);
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
}

inline void gemm_nt_xgemm_body(const int M, const int N, const int K, const float alpha,
                               const __global in_t* restrict A, const int lda,
                               const __global in_t* restrict B, const int ldb, __global out_t* C,
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

#if PREFETCH == 0
  for (int k0 = 0; k0 < K; k0 += KWG) {
    stage_tile(As, MWG, A, lda, m0, M, k0, K, lid);
    stage_tile(Bs, NWG, B, ldb, n0, N, k0, K, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    multiply_tile(acc, As, Bs, tm, tn);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#elif PREFETCH == 1
  float4 ra[A_LOADS], rb[B_LOADS];
  load_tile(ra, A_LOADS, MWG, A, lda, m0, M, 0, K, lid);
  load_tile(rb, B_LOADS, NWG, B, ldb, n0, N, 0, K, lid);
  for (int k0 = 0; k0 < K; k0 += KWG) {
    store_tile(As, ra, A_LOADS, MWG, lid);
    store_tile(Bs, rb, B_LOADS, NWG, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + KWG < K) {
      load_tile(ra, A_LOADS, MWG, A, lda, m0, M, k0 + KWG, K, lid);
      load_tile(rb, B_LOADS, NWG, B, ldb, n0, N, k0 + KWG, K, lid);
    }
    multiply_tile(acc, As, Bs, tm, tn);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  // Step s multiplies buffer s % 2 and fills the other; the one barrier per step both
  // publishes the other buffer and retires every read of this one before step s + 1
  // overwrites it.
  float4 ra[A_LOADS], rb[B_LOADS];
  load_tile(ra, A_LOADS, MWG, A, lda, m0, M, 0, K, lid);
  load_tile(rb, B_LOADS, NWG, B, ldb, n0, N, 0, K, lid);
  store_tile(As, ra, A_LOADS, MWG, lid);
  store_tile(Bs, rb, B_LOADS, NWG, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += KWG) {
    const int more = k0 + KWG < K;
    if (more) {
      load_tile(ra, A_LOADS, MWG, A, lda, m0, M, k0 + KWG, K, lid);
      load_tile(rb, B_LOADS, NWG, B, ldb, n0, N, k0 + KWG, K, lid);
    }
    const __local float* Ac = As + buf * (KWG * MWG);
    const __local float* Bc = Bs + buf * (KWG * NWG);
    multiply_tile(acc, Ac, Bc, tm, tn);
    buf ^= 1;
    if (more) {
      __local float* An = As + buf * (KWG * MWG);
      __local float* Bn = Bs + buf * (KWG * NWG);
      store_tile(An, ra, A_LOADS, MWG, lid);
      store_tile(Bn, rb, B_LOADS, NWG, lid);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  // Work-item (tm, tn) owns row (i * MDIMC + tm) * VWM + vi and column (j * NDIMC + tn) * VWN + vj
  // of the tile for accumulator [i * VWM + vi][j * VWN + vj].
#define ROW_OF(r) (m0 + ((r) / VWM * MDIMC + tm) * VWM + (r) % VWM)
#define COL_OF(c) (n0 + ((c) / VWN * NDIMC + tn) * VWN + (c) % VWN)
#if PREFETCH > 0 && VWN == 4
  // Row by row, in float4s where the 4 columns are whole and 16-byte aligned (ldc and
  // the offset multiples of 4), element by element at the edges; the old values of a row
  // are loaded before its stores, as below.
#pragma unroll
  for (int r = 0; r < MWI; ++r) {
    const int m = ROW_OF(r);
    float4 old[NVI];
    int whole[NVI];
#pragma unroll
    for (int j = 0; j < NVI; ++j) {
      const int n = COL_OF(j * 4);
      const long at = (long)m * ldc + n;
#if OUT_TYPE == 0
      whole[j] = m < M && n + 3 < N && ((ulong)(C + at) & 15) == 0;
#define OLD4(p, i) (*(const __global float4*)((p) + (i)))
#else
      whole[j] = m < M && n + 3 < N;  // 16-bit vector loads and stores need only element alignment
#define OLD4(p, i) LOAD4_OUT(p, i)
#endif
      if (accumulate) {
        if (whole[j]) {
          old[j] = OLD4(C, at);
        } else {
          old[j].s0 = (m < M && n < N) ? LOAD_OUT(C, at) : 0.0f;
          old[j].s1 = (m < M && n + 1 < N) ? LOAD_OUT(C, at + 1) : 0.0f;
          old[j].s2 = (m < M && n + 2 < N) ? LOAD_OUT(C, at + 2) : 0.0f;
          old[j].s3 = (m < M && n + 3 < N) ? LOAD_OUT(C, at + 3) : 0.0f;
        }
#undef OLD4
      }
    }
#pragma unroll
    for (int j = 0; j < NVI; ++j) {
      const int n = COL_OF(j * 4);
      const long at = (long)m * ldc + n;
      const float4 sum = (float4)(acc[r][j * 4], acc[r][j * 4 + 1], acc[r][j * 4 + 2], acc[r][j * 4 + 3]);
      const float4 v = accumulate ? mad((float4)(alpha), sum, old[j]) : alpha * sum;
      if (whole[j]) {
#if OUT_TYPE == 0
        *(__global float4*)(C + at) = v;
#else
        STORE4_OUT(C, at, v);
#endif
      } else if (m < M) {
        if (n < N) STORE_OUT(C, at, v.s0);
        if (n + 1 < N) STORE_OUT(C, at + 1, v.s1);
        if (n + 2 < N) STORE_OUT(C, at + 2, v.s2);
        if (n + 3 < N) STORE_OUT(C, at + 3, v.s3);
      }
    }
  }
#else
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
        old[c] = (m < M && n < N) ? LOAD_OUT(C, (long)m * ldc + n) : 0.0f;
      }
    }
#pragma unroll
    for (int c = 0; c < NWI; ++c) {
      const int n = COL_OF(c);
      if (m < M && n < N)
        STORE_OUT(C, (long)m * ldc + n, accumulate ? mad(alpha, acc[r][c], old[c]) : alpha * acc[r][c]);
    }
  }
#endif
#undef ROW_OF
#undef COL_OF
}

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  __local float As[NBUF * KWG * MWG] LOCAL_ALIGN;
  __local float Bs[NBUF * KWG * NWG] LOCAL_ALIGN;
  gemm_nt_xgemm_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, As, Bs);
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  __local float As[NBUF * KWG * MWG] LOCAL_ALIGN;
  __local float Bs[NBUF * KWG * NWG] LOCAL_ALIGN;
  gemm_nt_xgemm_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, As, Bs);
}

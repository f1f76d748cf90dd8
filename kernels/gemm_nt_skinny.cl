// gemm_nt_skinny: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating) where one operand
// has few rows (gemv and small batches: M small; LoRA shrink: N small) and K is long. A and B
// are stored as IN_TYPE, C as OUT_TYPE (element_types.clh), sums in f32, one rounding at the
// store.
//
// Memory layout (all row-major, element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// The operand with fewer rows is the small one (A where M <= N, else B; decided per launch,
// the same rule as gemm_nt_geometry's), the other the big one; C's element (big row i, small
// row j) lies at C[i*ldc + j] when B is small and at C[j*ldc + i] when A is. The big operand
// is the stream to keep at the memory's rate: each of its elements is loaded once per SR small
// rows and used for all of them from registers.
//
//   big rows                     small rows (SR per workgroup, grid dimension of the small side)
//   +----------------------+     +----------------------+
//   | lane group 0: BR rows|     | y[0 .. SR)           |   read through L1 by every lane group
//   | lane group 1: BR rows|     +----------------------+
//   | ...   (WGS / RW groups)    K (contiguous) ->
//   +----------------------+
//
// A lane group is RW consecutive work-items (inside one warp: RW <= 32) that share the K sweep of
// its BR big rows: lane l loads the VW-wide vectors at l·VW, l·VW + RW·VW, ..., UNROLL vectors
// of every row before it multiplies them (loads in flight), and keeps BR·SR partial sums. The
// RW lanes then sum them by a halving exchange (each step a lane keeps half of its sums and
// adds its partner's half, so BR·SR·(1 - 1/RW) exchanges in all, not BR·SR·log2 RW): on NVIDIA
// (OCLTK_PTX) by warp shuffles, elsewhere through local memory with the same partners and the
// same halves, so PoCL verifies the index logic the GPU runs. Every lane then holds
// max(BR·SR / RW, 1) consecutive totals and stores them.
//
// Where the rows are aligned to VW elements (pointers and leading dimensions) the vectors are
// loaded as typed vectors (one wide load each); elsewhere by vloadn, any element alignment.
// Rows past the end read the last row and are dropped at the store, so every work-item reaches
// every exchange.

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef RW
#define RW 32  // reduction width: lanes sharing the K sweep of a group's big rows
#endif
#ifndef BR
#define BR 2  // big rows per lane group (each loaded element of the small side serves BR rows)
#endif
#ifndef SR
#define SR 16  // small rows per workgroup (each loaded element of the big side serves SR rows)
#endif
#ifndef VW
#define VW 4  // vector width of the loads along K (1, 2, 4 or 8)
#endif
#ifndef UNROLL
#define UNROLL 2  // vectors of every big row a lane loads before it multiplies them
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif

#define NV (BR * SR)                  // partial sums per lane
#define GROUPS (WGS / RW)             // lane groups per workgroup
#define STEP (RW * VW)                // K columns a lane group covers per vector
#define CHUNK (STEP * UNROLL)         // K columns a lane group covers per main-loop trip
#define HELD (NV >= RW ? NV / RW : 1)  // totals a lane holds after the exchange

#if WGS % 32 != 0 || WGS > 256
#error "WGS must be 32, 64, 128 or 256"
#endif
#if RW != 1 && RW != 2 && RW != 4 && RW != 8 && RW != 16 && RW != 32
#error "RW must be a power of two up to 32 (a lane group lies inside one warp)"
#endif
#if (BR & (BR - 1)) != 0 || (SR & (SR - 1)) != 0
#error "BR and SR must be powers of two"
#endif
#if NV > 128
#error "BR * SR must be at most 128 (partial sums in registers)"
#endif
#if VW != 1 && VW != 2 && VW != 4 && VW != 8
#error "VW must be 1, 2, 4 or 8"
#endif

#if RW == 1
#define LOG2_RW 0
#elif RW == 2
#define LOG2_RW 1
#elif RW == 4
#define LOG2_RW 2
#elif RW == 8
#define LOG2_RW 3
#elif RW == 16
#define LOG2_RW 4
#else
#define LOG2_RW 5
#endif

#include "element_types.clh"
#include "vector_types.clh"

#define SK_CAT_(a, b) a##b
#define SK_CAT(a, b) SK_CAT_(a, b)

// LOADA_IN(off, p): VW elements at p + off as realv, p + off aligned to VW elements.
#if VW == 1
#define LOADA_IN(off, p) LOAD_IN(p, off)
#elif IN_TYPE == 0
#define LOADA_IN(off, p) (*(const __global realv*)((p) + (off)))
#elif IN_TYPE == 1
#define LOADA_IN(off, p) SK_CAT(vloada_half, VW)(0, (p) + (off))
#else
#define LOADA_IN(off, p) \
  SK_CAT(as_float, VW)(SK_CAT(convert_uint, VW)(*(const __global SK_CAT(ushort, VW)*)((p) + (off))) << 16)
#endif

// acc + Σ x[i]·y[i] over the VW lanes, as a chain of multiply-adds.
inline float madv(const realv x, const realv y, float acc) {
#if VW == 1
  return mad(x, y, acc);
#else
  acc = mad(x.s0, y.s0, acc);
  acc = mad(x.s1, y.s1, acc);
#if VW >= 4
  acc = mad(x.s2, y.s2, acc);
  acc = mad(x.s3, y.s3, acc);
#endif
#if VW == 8
  acc = mad(x.s4, y.s4, acc);
  acc = mad(x.s5, y.s5, acc);
  acc = mad(x.s6, y.s6, acc);
  acc = mad(x.s7, y.s7, acc);
#endif
  return acc;
#endif
}

// This lane's share of acc[r·SR + s] = Σ_k big[r0 + r, k] · small[s0 + s, k]. `aligned` is a
// constant at each call (the function is inlined twice), so each copy has one kind of load.
inline __attribute__((always_inline)) void skinny_sweep(float acc[NV], const int aligned,
                                                        const __global in_t* big, const int bld,
                                                        const int r0, const int nbig,
                                                        const __global in_t* small, const int sld,
                                                        const int s0, const int nsmall, const int K,
                                                        const int lane) {
  const __global in_t* xr[BR];
#pragma unroll
  for (int r = 0; r < BR; ++r) xr[r] = big + (long)min(r0 + r, nbig - 1) * bld;
  const __global in_t* yr[SR];
#pragma unroll
  for (int s = 0; s < SR; ++s) yr[s] = small + (long)min(s0 + s, nsmall - 1) * sld;

#define SK_LOAD(off, p) (aligned ? LOADA_IN(off, p) : LOADV_IN(off, p))
  const int kchunks = K - K % CHUNK;
  for (int k = lane * VW; k < kchunks; k += CHUNK) {
    realv x[UNROLL][BR];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int r = 0; r < BR; ++r) x[u][r] = SK_LOAD(k + u * STEP, xr[r]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
      for (int s = 0; s < SR; ++s) {
        const realv y = SK_LOAD(k + u * STEP, yr[s]);
#pragma unroll
        for (int r = 0; r < BR; ++r) acc[r * SR + s] = madv(x[u][r], y, acc[r * SR + s]);
      }
    }
  }
  // Whole vectors past the last chunk, one at a time.
  for (int k = kchunks + lane * VW; k + VW <= K; k += STEP) {
    realv x[BR];
#pragma unroll
    for (int r = 0; r < BR; ++r) x[r] = SK_LOAD(k, xr[r]);
#pragma unroll
    for (int s = 0; s < SR; ++s) {
      const realv y = SK_LOAD(k, yr[s]);
#pragma unroll
      for (int r = 0; r < BR; ++r) acc[r * SR + s] = madv(x[r], y, acc[r * SR + s]);
    }
  }
#undef SK_LOAD
  // The last K % VW columns, one per lane.
  for (int k = K - K % VW + lane; k < K; k += RW) {
    float x[BR];
#pragma unroll
    for (int r = 0; r < BR; ++r) x[r] = LOAD_IN(xr[r], k);
#pragma unroll
    for (int s = 0; s < SR; ++s) {
      const float y = LOAD_IN(yr[s], k);
#pragma unroll
      for (int r = 0; r < BR; ++r) acc[r * SR + s] = mad(x[r], y, acc[r * SR + s]);
    }
  }
}

#if RW > 1
#ifdef OCLTK_PTX
// Lane l's value from lane l ^ mask of its warp (all 32 lanes take part: WGS % 32 == 0 and no
// work-item returns early).
inline float skinny_shfl_xor(const float v, const int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#define SK_XCH_FLOATS 1
#else
// The exchange's local buffer: the most values a lane hands over in one step.
#define SK_XCH_FLOATS ((NV >= 2 ? NV / 2 : 1) * WGS)
#endif

// One step of the lane group's exchange, between lanes `o` apart (o = RW/2, RW/4, ..., 1). A
// lane holds v[0 .. held); with held >= 2 the lane whose bit o is set keeps the upper half
// (and `first`, the output index of v[0], moves up by half), its partner the lower, and each
// adds the other's copy of the half it keeps; with one value left both add the partner's and
// only the lane whose bit o is clear stays the owner (the one that stores).
inline __attribute__((always_inline)) void skinny_exchange(float v[NV], const int held, const int o,
                                                           const int lane, int* first, int* owner,
                                                           __local float* xch, const int lid) {
  const int up = (lane & o) != 0;
  const int h = held >= 2 ? held / 2 : 0;
#ifdef OCLTK_PTX
  (void)xch;
  (void)lid;
  if (h == 0) {
    v[0] += skinny_shfl_xor(v[0], o);
  } else {
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = up ? v[i] : v[i + h];
      const float keep = up ? v[i + h] : v[i];
      v[i] = keep + skinny_shfl_xor(send, o);
    }
  }
#else
  if (h == 0) {
    xch[lid] = v[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    v[0] += xch[lid ^ o];
  } else {
#pragma unroll
    for (int i = 0; i < h; ++i) xch[i * WGS + lid] = up ? v[i] : v[i + h];
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int i = 0; i < h; ++i) v[i] = (up ? v[i + h] : v[i]) + xch[i * WGS + (lid ^ o)];
  }
  barrier(CLK_LOCAL_MEM_FENCE);  // xch is free again for the next step
#endif
  if (h == 0) {
    if (up) *owner = 0;
  } else if (up) {
    *first += h;
  }
}
#endif

inline __attribute__((always_inline)) void gemm_nt_skinny_body(
    const int M, const int N, const int K, const float alpha, const __global in_t* A, const int lda,
    const __global in_t* B, const int ldb, __global out_t* C, const int ldc, const int accumulate
#if RW > 1 && !defined(OCLTK_PTX)
    ,
    __local float* xch
#endif
) {
  const int a_small = M <= N;
  // No restrict below the kernel's arguments: inlined, it leaves noalias scope declarations
  // that Oclgrind cannot run.
  const __global in_t* big = a_small ? B : A;
  const __global in_t* small = a_small ? A : B;
  const int bld = a_small ? ldb : lda, sld = a_small ? lda : ldb;
  const int nbig = a_small ? N : M, nsmall = a_small ? M : N;
  const long cbig = a_small ? 1 : ldc, csmall = a_small ? ldc : 1;  // C's strides along big and small rows
  const int lid = get_local_id(0);
  const int lane = lid % RW;
  const int r0 = (a_small ? get_group_id(0) : get_group_id(1)) * (GROUPS * BR) + (lid / RW) * BR;
  const int s0 = (a_small ? get_group_id(1) : get_group_id(0)) * SR;

  float v[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) v[i] = 0.0f;
#if VW > 1
  const int aligned = ((ulong)big % (VW * sizeof(in_t))) == 0 && ((ulong)small % (VW * sizeof(in_t))) == 0 &&
                      bld % VW == 0 && sld % VW == 0;
  if (aligned)
    skinny_sweep(v, 1, big, bld, r0, nbig, small, sld, s0, nsmall, K, lane);
  else
#endif
    skinny_sweep(v, 0, big, bld, r0, nbig, small, sld, s0, nsmall, K, lane);

  int first = 0, owner = 1;
#if RW > 1
#ifdef OCLTK_PTX
  __local float* xch = 0;
#endif
#pragma unroll
  for (int level = 1; level <= LOG2_RW; ++level) {
    const int held = (NV << 1 >> level) > 1 ? (NV << 1 >> level) : 1;  // NV / 2^(level - 1), at least 1
    skinny_exchange(v, held, RW >> level, lane, &first, &owner, xch, lid);
  }
#endif

  if (owner) {
    // Old C values are all loaded before the first store, so the loads overlap.
    float old[HELD];
    long at[HELD];
    int ok[HELD];
#pragma unroll
    for (int i = 0; i < HELD; ++i) {
      const int r = r0 + (first + i) / SR, s = s0 + (first + i) % SR;
      ok[i] = r < nbig && s < nsmall;
      at[i] = r * cbig + s * csmall;
      old[i] = (accumulate && ok[i]) ? LOAD_OUT(C, at[i]) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < HELD; ++i)
      if (ok[i]) STORE_OUT(C, at[i], accumulate ? mad(alpha, v[i], old[i]) : alpha * v[i]);
  }
}

#if RW > 1 && !defined(OCLTK_PTX)
#define LOCAL_TILES __local float xch[SK_XCH_FLOATS];
#define LOCAL_ARGS , xch
#else
#define LOCAL_TILES
#define LOCAL_ARGS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_skinny_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0 LOCAL_ARGS);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global in_t* restrict A,
    const long a_offset, const int lda, const __global in_t* restrict B, const long b_offset,
    const int ldb, __global out_t* C, const long c_offset, const int ldc) {
  LOCAL_TILES
  gemm_nt_skinny_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1 LOCAL_ARGS);
}

// nf4_tiled: the segmented NF4 products for many rows per expert. Each step decodes a
// tile of weights to f32 in local memory once and reuses it for MWG segment rows
// (a dense gemm_nt-style product on the tiles), instead of decoding per row tile.
//
//   nf4_forward_tiled:  y[r, n]  = Σ_k x[r, k] · W[e, n, k]    (output tile MWG × NWG of n)
//   nf4_backward_tiled: dx[r, k] = Σ_n g[r, n] · W[e, n, k]    (output tile MWG × NWG of k)
//
// Memory layout: x, g, y, dx row-major; W is the NF4 stream (nf4_common.clh). In both
// kernels the staged tiles are As[MWG][KWG] (activation rows × reduction index) and
// Bs[NWG][KWG] (output column × reduction index), so the product is the same dot of an
// As row with a Bs row; the backward kernel stages W transposed to get there.
//
// Work split: group id 0 runs along output columns; group id 1 (+ tile_base) numbers the
// (expert, row tile) pairs in expert order, ceil(segment / MWG) tiles per expert. Each
// workgroup finds its expert by walking offsets on the device (no host round trip); the
// launch covers ceil(rows / MWG) + experts ids, an upper bound, and a surplus workgroup
// runs an empty tile (no reduction steps, no stores) rather than returning early: every
// work-item reaches every barrier. PoCL 3.1 miscompiled an early return ahead of the
// barriers: zeros were stored past the last row (seen mostly with MWG == MDIMC).
// MDIMC × NDIMC work-items each own (MWG/MDIMC) × (NWG/NDIMC) outputs.

#ifndef MWG
#define MWG 32  // segment rows per tile
#endif
#ifndef NWG
#define NWG 32  // output columns per tile (weight rows decoded per step, forward)
#endif
#ifndef KWG
#define KWG 32  // reduction steps staged per local-memory step
#endif
#ifndef MDIMC
#define MDIMC 8  // work-items along the rows
#endif
#ifndef NDIMC
#define NDIMC 8  // work-items along the output columns
#endif

#define MWI (MWG / MDIMC)
#define NWI (NWG / NDIMC)
#define WGS (MDIMC * NDIMC)
#define LSTRIDE (KWG + 1)  // one pad float keeps column walks off a single bank

#if MWG % MDIMC != 0
#error "MWG must be a multiple of MDIMC"
#endif
#if NWG % NDIMC != 0
#error "NWG must be a multiple of NDIMC"
#endif

#include "nf4_common.clh"

inline void nf4_tile_product(__local const float* As, __local const float* Bs, float acc[MWI][NWI], const int tm,
                             const int tn) {
  for (int k = 0; k < KWG; ++k) {
    float a[MWI], b[NWI];
#pragma unroll
    for (int i = 0; i < MWI; ++i) a[i] = As[(tm + i * MDIMC) * LSTRIDE + k];
#pragma unroll
    for (int j = 0; j < NWI; ++j) b[j] = Bs[(tn + j * NDIMC) * LSTRIDE + k];
#pragma unroll
    for (int i = 0; i < MWI; ++i)
#pragma unroll
      for (int j = 0; j < NWI; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
  }
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void nf4_forward_tiled(
    const int N, const int K, const int rows, const int experts, const int tile_base, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local float cb[16];
  __local float As[MWG * LSTRIDE];
  __local float Bs[NWG * LSTRIDE];
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int lid = tm * NDIMC + tn;
  nf4_stage_codebook(cb, codebook, lid, WGS);
  int e = 0, r0 = 0, seg_end = 0;
  // Uniform per workgroup; a surplus id keeps r0 == seg_end == 0: no reduction step, no store.
  const bool live = nf4_find_tile(offsets, experts, rows, MWG, tile_base + get_group_id(1), &e, &r0, &seg_end);
  const int reduce_end = live ? K : 0;
  const int n0 = get_group_id(0) * NWG;
  packed += packed_offset;
  scales += scales_offset;
  const long expert_pos = element_offset + (long)e * N * (long)K;

  float acc[MWI][NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i)
#pragma unroll
    for (int j = 0; j < NWI; ++j) acc[i][j] = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);

  for (int k0 = 0; k0 < reduce_end; k0 += KWG) {
    for (int idx = lid; idx < MWG * KWG; idx += WGS) {
      const int r = r0 + idx / KWG, k = k0 + idx % KWG;
      As[(idx / KWG) * LSTRIDE + idx % KWG] = (r < seg_end && k < K) ? nf4_load(x, (long)r * K + k, type) : 0.0f;
    }
    for (int idx = lid; idx < NWG * KWG; idx += WGS) {
      const int n = n0 + idx / KWG, k = k0 + idx % KWG;
      Bs[(idx / KWG) * LSTRIDE + idx % KWG] =
          (n < N && k < K) ? nf4_decode_one(packed, scales, expert_pos + (long)n * K + k, log2_block, cb) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    nf4_tile_product(As, Bs, acc, tm, tn);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

#pragma unroll
  for (int i = 0; i < MWI; ++i) {
    const int r = r0 + tm + i * MDIMC;
#pragma unroll
    for (int j = 0; j < NWI; ++j) {
      const int n = n0 + tn + j * NDIMC;
      if (r < seg_end && r < r0 + MWG && n < N) nf4_store(y, (long)r * N + n, type, acc[i][j]);
    }
  }
}

__kernel __attribute__((reqd_work_group_size(NDIMC, MDIMC, 1))) void nf4_backward_tiled(
    const int N, const int K, const int rows, const int experts, const int tile_base, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* g, const int type,
    const __global uint* offsets, __global float* dx) {
  __local float cb[16];
  __local float As[MWG * LSTRIDE];
  __local float Bs[NWG * LSTRIDE];
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int lid = tm * NDIMC + tn;
  nf4_stage_codebook(cb, codebook, lid, WGS);
  int e = 0, r0 = 0, seg_end = 0;
  // Uniform per workgroup; a surplus id keeps r0 == seg_end == 0: no reduction step, no store.
  const bool live = nf4_find_tile(offsets, experts, rows, MWG, tile_base + get_group_id(1), &e, &r0, &seg_end);
  const int reduce_end = live ? N : 0;
  const int c0 = get_group_id(0) * NWG;  // first output column (k)
  packed += packed_offset;
  scales += scales_offset;
  const long expert_pos = element_offset + (long)e * N * (long)K;

  float acc[MWI][NWI];
#pragma unroll
  for (int i = 0; i < MWI; ++i)
#pragma unroll
    for (int j = 0; j < NWI; ++j) acc[i][j] = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);

  for (int n0 = 0; n0 < reduce_end; n0 += KWG) {
    for (int idx = lid; idx < MWG * KWG; idx += WGS) {
      const int r = r0 + idx / KWG, n = n0 + idx % KWG;
      As[(idx / KWG) * LSTRIDE + idx % KWG] = (r < seg_end && n < N) ? nf4_load(g, (long)r * N + n, type) : 0.0f;
    }
    // Neighbouring work-items decode neighbouring k of one W row.
    for (int idx = lid; idx < NWG * KWG; idx += WGS) {
      const int c = idx % NWG, j = idx / NWG;
      const int k = c0 + c, n = n0 + j;
      Bs[c * LSTRIDE + j] =
          (n < N && k < K) ? nf4_decode_one(packed, scales, expert_pos + (long)n * K + k, log2_block, cb) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    nf4_tile_product(As, Bs, acc, tm, tn);
    barrier(CLK_LOCAL_MEM_FENCE);
  }

#pragma unroll
  for (int i = 0; i < MWI; ++i) {
    const int r = r0 + tm + i * MDIMC;
#pragma unroll
    for (int j = 0; j < NWI; ++j) {
      const int k = c0 + tn + j * NDIMC;
      if (r < seg_end && r < r0 + MWG && k < K) dx[(long)r * K + k] = acc[i][j];
    }
  }
}

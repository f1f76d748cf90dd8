// lora_fused: Y[m, n] (+)= s_a · Σ_{j < rank_a} (Σ_k X[m, k] · A_a[j, k]) · B_a[n, j] in one
// launch, the rank-r intermediate never leaving the workgroup.
//
// A workgroup owns TR rows of one segment and WGS·NB columns of Y (as lora_expand.clh). It
// sweeps the adapter's rank RC columns at a time: the workgroup computes the TR × RC block of
// T = X · Aᵀ as lora_shrink.clh does (its WGS work-items side by side along K, then
// lora_reduce) into local memory, in f32, and every work-item adds that block's share of its
// columns' sums (its B rows' RC elements in vector loads) before the next block is computed.
// Y is read (accumulating) and written once, rounded once. Each column block recomputes T for
// its rows: NB (and WGS) trade that recomputation against parallelism, which the tuner
// weighs per device (decode: few rows, so several blocks per segment keep a GPU busy).

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup
#endif
#ifndef RC
#define RC 8  // rank columns of T computed and used per step
#endif
#ifndef VW
#define VW 4  // vector width of the loads of X and A along K
#endif
#ifndef NB
#define NB 2  // column batches: columns of Y per work-item (WGS · NB per workgroup)
#endif

#include "element_types.clh"
#include "vector_types.clh"
#include "lora_common.clh"
#include "lora_shrink.clh"
#include "lora_expand.clh"

// Grid: dimension 0 the column blocks of WGS·NB, dimension 1 the row tiles (lora_find_tile);
// base0 and base1 are the dispatch's first groups.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void lora_fused(
    const int M, const int N, const int K, const int R, const int L, const int segments,
    const __global uint* offsets, const __global int* seg_adapters, const int have_ranks, const __global int* ranks,
    const int base0, const int base1, const __global in_t* X, const long x_off, const int ldx, const __global in_t* A,
    const long a_off, const int lda, const long a_stride, const __global in_t* B, const long b_off, const int ldb,
    const long b_stride, __global out_t* Y, const long y_off, const int ldy, const float scale, const int have_scales,
    const __global float* scales, const int accumulate) {
  __local float red[LORA_RED_FLOATS];
  __local float tc[TR * RC];
  const int lid = get_local_id(0);
  int row0, rows, adapter;
  if (!lora_find_tile(get_group_id(1) + base1, segments, M, L, offsets, seg_adapters, &row0, &rows, &adapter)) return;
  const int rank = adapter < 0 ? 0 : lora_rank(adapter, have_ranks, ranks, R);
  if (rank == 0 && accumulate) return;  // nothing to add
  const int n0 = (get_group_id(0) + base0) * (WGS * NB);
  float acc[NB * TR];
#pragma unroll
  for (int i = 0; i < NB * TR; ++i) acc[i] = 0.0f;
  const long a_base = a_off + (adapter < 0 ? 0 : adapter) * a_stride;
  const __global in_t* b = B + b_off + (adapter < 0 ? 0 : adapter) * b_stride;
  const __global in_t* x = X + x_off + (long)row0 * ldx;
  for (int j0 = 0; j0 < rank; j0 += RC) {
    const int valid = min(RC, rank - j0);
    float part[TR * RC];
    lora_shrink_part(part, x, ldx, rows, A + a_base + (long)j0 * lda, lda, valid, K, lid);
    const float sum = lora_reduce(part, red, lid);
    if (lid < TR * RC) tc[lid] = lid % RC < valid ? sum : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    lora_expand_part(acc, tc, b + j0, ldb, n0, N, valid, lid);
    barrier(CLK_LOCAL_MEM_FENCE);  // every read of tc and red is done before the next step writes them
  }
  const float s = rank == 0 ? 0.0f : lora_scale(adapter, scale, have_scales, scales);
  lora_store(Y + y_off + (long)row0 * ldy, ldy, rows, n0, N, acc, s, accumulate, lid);
}

// lora_fused: Y[m, n] (+)= s_a · Σ_{j < rank_a} (Σ_k X[m, k] · A_a[j, k]) · B_a[n, j] in one
// launch, the rank-r intermediate never leaving the workgroup.
//
// A workgroup owns TR rows of one segment and CB columns of Y. It first computes the TR rows
// of T = X · Aᵀ up to the adapter's rank into local memory, in f32, as lora_shrink.clh lays
// the shrink out (its work-items side by side along K, RC rank rows at a time, then
// lora_reduce), and then expands them over its columns as lora_expand.clh does, writing Y
// once, rounded once. Each column block recomputes T for its rows: CB and WGS trade that
// recomputation against parallelism, which the tuner weighs per device (a CPU takes few wide
// blocks; a GPU at decode wants many, or the split algorithm).

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup
#endif
#ifndef RC
#define RC 8  // rank columns: rows of A the shrink sums at once
#endif
#ifndef VW
#define VW 4  // vector width of the loads of X and A along K
#endif
#ifndef VA
#define VA 0  // 1: vector accumulators (shrink VW wide, expand 4 wide) summed across once at the end; 0: dots
#endif
#ifndef CB
#define CB 256  // columns of Y per workgroup
#endif
#ifndef CN
#define CN 1  // columns of Y each work-item sums at once (WGS apart), sharing their loads of T
#endif

#ifndef CW
#define CW 1  // 4: a work-item's columns in runs of 4 consecutive ones, Y read and written 4 wide (CPUs)
#endif

#include "element_types.clh"
#include "vector_types.clh"
#include "lora_common.clh"
#include "lora_shrink.clh"
#include "lora_expand.clh"

// Grid: dimension 0 the column blocks of CB, dimension 1 the row tiles (lora_find_tile);
// base0 and base1 are the dispatch's first groups. tl: TR × ldtl floats of local memory,
// ldtl the max rank R rounded up to RC.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void lora_fused(
    const lora_args p, const __global uint* offsets, const __global int* seg_adapters, const __global int* ranks,
    const __global in_t* X, const __global in_t* A, const __global in_t* B, __global out_t* Y,
    const __global float* scales, __local float* tl) {
  const int M = p.M, N = p.N, K = p.K, R = p.R, L = p.L, segments = p.segments, have_ranks = p.have_ranks;
  const int have_scales = p.have_scales, accumulate = p.accumulate, ldx = p.ldx, lda = p.lda, ldb = p.ldb;
  const int ldy = p.ldy, ldtl = p.ldtl, base0 = p.base0, base1 = p.base1;
  const long x_off = p.x_off, a_off = p.a_off, a_stride = p.a_stride, b_off = p.b_off, b_stride = p.b_stride;
  const long y_off = p.y_off;
  const float scale = p.scale;
  __local float red[LORA_RED_FLOATS];
  const int lid = get_local_id(0);
  int row0, rows, adapter;
  if (!lora_find_tile(get_group_id(1) + base1, segments, M, L, offsets, seg_adapters, &row0, &rows, &adapter)) return;
  const int rank = adapter < 0 ? 0 : lora_rank(adapter, have_ranks, ranks, R);
  if (rank == 0 && accumulate) return;  // nothing to add
  const int a = adapter < 0 ? 0 : adapter;
  lora_shrink_tile(tl, ldtl, red, X + x_off + (long)row0 * ldx, ldx, rows, A + a_off + a * a_stride, lda, rank, K,
                   lid);
  const float s = rank == 0 ? 0.0f : lora_scale(adapter, scale, have_scales, scales);
  lora_expand_block(tl, ldtl, rank, B + b_off + a * b_stride, ldb, (get_group_id(0) + base0) * CB, N,
                    Y + y_off + (long)row0 * ldy, ldy, rows, s, accumulate, lid);
}

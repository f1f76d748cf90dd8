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
    const int M, const int N, const int K, const int R, const int L, const int segments,
    const __global uint* offsets, const __global int* seg_adapters, const int have_ranks, const __global int* ranks,
    const int base0, const int base1, const __global in_t* X, const long x_off, const int ldx, const __global in_t* A,
    const long a_off, const int lda, const long a_stride, const __global in_t* B, const long b_off, const int ldb,
    const long b_stride, __global out_t* Y, const long y_off, const int ldy, const float scale, const int have_scales,
    const __global float* scales, const int accumulate, __local float* tl, const int ldtl) {
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

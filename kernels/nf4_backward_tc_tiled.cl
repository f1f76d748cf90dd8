// nf4_backward_tc_tiled: dx[r, k] = Σ_n g[r, n] · W[e, n, k] for the rows r of expert e's
// segment (dx f32), on tensor cores, a decoded (transposed) W tile serving MWG segment rows:
// nf4_tc_tiled.clh draws the layout, the decode and the work split; tc_mma.clh the pipeline of
// the products.

#ifndef NF4_TYPE
#define NF4_TYPE 2  // the grads' type, fixed per build (ElementType: 0 f32, 1 f16, 2 bf16)
#endif
#define NF4_BACKWARD 1
#define IN_TYPE NF4_TYPE
#define OUT_TYPE 0    // dx in f32
#define SPLIT 3       // f32 grads: 3×TF32
#define TC_COPY_B 0   // W's columns are decoded into the stages, not copied

#include "tc_mma.clh"
#include "nf4_common.clh"
#include "nf4_tc_tiled.clh"

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_backward_tiled(
    const int N, const int K, const int rows, const int experts, const int tile_base, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* g, const int type,
    const __global uint* offsets, __global float* dx) {
  __local uint4 smem[STAGES * STAGEB / 16];
  NF4_TC_TILED_LOCALS;
  nf4_tc_tiled_body(N, K, rows, experts, tile_base, element_offset, log2_block, packed, packed_offset, scales,
                    scales_offset, codebook, g, offsets, (__global uchar*)dx, (__local uchar*)smem, scratch, cb_table);
}

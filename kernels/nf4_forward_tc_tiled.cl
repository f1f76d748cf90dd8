// nf4_forward_tc_tiled: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment, on tensor cores, a decoded W tile serving MWG segment rows: nf4_tc_tiled.clh draws
// the layout, the decode and the work split; tc_mma.clh the pipeline of the products.

#ifndef NF4_TYPE
#define NF4_TYPE 2  // the input's type, fixed per build (ElementType: 0 f32, 1 f16, 2 bf16)
#endif
#define NF4_BACKWARD 0
#define IN_TYPE NF4_TYPE
#define OUT_TYPE NF4_TYPE  // y in the input's type
#define SPLIT 3            // f32 input: 3×TF32
#define TC_COPY_B 0        // W's rows are decoded into the stages, not copied

#include "tc_mma.clh"
#include "nf4_common.clh"
#include "nf4_tc_tiled.clh"

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward_tiled(
    const int N, const int K, const int rows, const int experts, const int tile_base, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local uint4 smem[STAGES * STAGEB / 16];
  NF4_TC_TILED_LOCALS;
  nf4_tc_tiled_body(N, K, rows, experts, tile_base, element_offset, log2_block, packed, packed_offset, scales,
                    scales_offset, codebook, x, offsets, y, (__local uchar*)smem, scratch, cb_table);
}

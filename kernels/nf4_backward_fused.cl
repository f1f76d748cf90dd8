// nf4_backward_fused: dx[r, k] = Σ_n g[r, n] · W[e, n, k] for the rows r of expert e's
// segment, with W decoded from 4-bit codes in registers (the input gradient of
// nf4_forward; no weight gradient). dx is f32 whatever the type of g.
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            N (contiguous)                 K (contiguous, 4-bit)          K (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | g[r*N + n]      |   E×N     | W[(e*N + n)*K + k] |   rows   | dx[r*K + k]   |
//        +-----------------+           +--------------------+          +---------------+
//
// The reduction runs down W's columns, across rows. A workgroup serves one expert
// (its slot: group id 1 + expert_base, nf4_slot_expert) and WGS/RW groups of VW consecutive k (group id 0).
// Neighbouring work-items own neighbouring k groups, so a warp reads a W row's bytes
// contiguously; the RW work-items sharing a k group ("reduction width") take the W rows
// n = lane, lane + RW, ... Each keeps TR × VW sums (TR segment rows staged from g in
// local memory, NWG values of n at a time); the RW partials are summed in local memory.

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef RW
#define RW 4  // reduction width: work-items sharing one k group's sweep over N
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows accumulated at once (weight reuse)
#endif
#ifndef VW
#define VW 8  // consecutive k per work-item (8: one u32 of codes, 16: two, 32: four)
#endif
#ifndef NWG
#define NWG 64  // values of n of the gradient rows staged in local memory per step
#endif

#define CPW (WGS / RW)  // k groups per workgroup
#define NF4_DECODE_WIDTH VW

#if WGS % RW != 0
#error "WGS must be a multiple of RW"
#endif
#if VW != 8 && VW != 16 && VW != 32
#error "VW must be 8, 16 or 32"
#endif
#if NWG % RW != 0
#error "NWG must be a multiple of RW"
#endif

#ifndef CBR
#define CBR 1  // codebook copies in local memory (32: one per lane, no bank conflicts)
#endif
#if CBR != 1 && CBR != 32
#error "CBR must be 1 or 32"
#endif
#define NF4_CB_REPLICAS CBR

#include "nf4_common.clh"

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_backward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* g, const int type,
    const __global uint* offsets, __global float* dx) {
  __local float cb[16 * CBR];
  __local float gs[TR * NWG];
  __local float partial[WGS * VW];

  const int lid = get_local_id(0);
  const int col = lid % CPW;
  const int lane = lid / CPW;
  const int k_first = (get_group_id(0) * CPW + col) * VW;
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

  packed += packed_offset;
  scales += scales_offset;
  const long expert_pos = element_offset + (long)e * N * (long)K + k_first;
  const int valid = K - k_first;  // <= 0: a k group past K, which decodes nothing

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    float acc[TR][VW];
#pragma unroll
    for (int t = 0; t < TR; ++t)
#pragma unroll
      for (int i = 0; i < VW; ++i) acc[t][i] = 0.0f;

    // Rows of this tile that exist: a segment shorter than TR stages and multiplies only
    // those, so one TR serves 1 to 16 rows per expert.
    const int live = min(TR, seg_end - r0);
    for (int n0 = 0; n0 < N; n0 += NWG) {
      for (int idx = lid; idx < live * NWG; idx += WGS) {
        const int r = r0 + idx / NWG;
        const int n = n0 + idx % NWG;
        gs[idx] = n < N ? nf4_load(g, (long)r * N + n, type) : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int j = lane; j < NWG && n0 + j < N; j += RW) {
        float w[VW];
        nf4_decode_run(w, packed, packed_offset, scales, expert_pos + (long)(n0 + j) * K, valid, log2_block, cb);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {  // uniform over the workgroup
            const float gv = gs[t * NWG + j];
#pragma unroll
            for (int i = 0; i < VW; ++i) acc[t][i] = mad(gv, w[i], acc[t][i]);
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int t = 0; t < live; ++t) {
#pragma unroll
      for (int i = 0; i < VW; ++i) partial[lid * VW + i] = acc[t][i];
      barrier(CLK_LOCAL_MEM_FENCE);
      // Work-items of lane 0 sum their column's RW partials (stride CPW in lid).
      if (lane == 0 && r0 + t < seg_end) {
        for (int i = 0; i < VW; ++i) {
          float sum = 0.0f;
          for (int l = 0; l < RW; ++l) sum += partial[(l * CPW + col) * VW + i];
          if (i < valid) dx[(long)(r0 + t) * K + k_first + i] = sum;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
}

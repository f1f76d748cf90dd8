// nf4_forward_fused: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment (offsets[e] <= r < offsets[e+1]), with W decoded from 4-bit codes in registers.
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            K (contiguous)                 K (contiguous, 4-bit)          N (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | x[r*K + k]      |   E×N     | W[(e*N + n)*K + k] |   rows   | y[r*N + n]    |
//        +-----------------+           +--------------------+          +---------------+
//
// A workgroup serves one expert (its slot: group id 1 + expert_base, nf4_slot_expert) and WGS/RW output columns
// (group id 0). It reads offsets[e], offsets[e+1] itself, so no host round trip decides
// its rows. RW work-items ("reduction width") sweep one W row: lane l decodes VW codes at
// k = l*VW, l*VW + RW*VW, ... (one u32 per 8 codes) and multiplies them into TR input
// rows staged in local memory (KWG columns at a time, converted to f32), so every weight
// byte is read once per TR rows; segments longer than TR loop. The RW partials of a
// column are summed in local memory. Accumulation is f32; y is written in the input type.

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef RW
#define RW 32  // reduction width: work-items sharing one output column's K sweep
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows accumulated at once (weight reuse)
#endif
#ifndef VW
#define VW 8  // codes decoded per lane step along K (8: one u32, 16: two, 32: four)
#endif
#ifndef KWG
#define KWG 512  // input columns staged in local memory per step
#endif

#define CPW (WGS / RW)  // output columns per workgroup
#define NF4_DECODE_WIDTH VW

#if WGS % RW != 0
#error "WGS must be a multiple of RW"
#endif
#if (RW & (RW - 1)) != 0
#error "RW must be a power of two"
#endif
#if VW != 8 && VW != 16 && VW != 32
#error "VW must be 8, 16 or 32"
#endif
#if KWG % (RW * VW * UNROLL) != 0
#error "KWG must be a multiple of RW * VW * UNROLL"
#endif

#ifndef UNROLL
#define UNROLL 1  // runs of VW codes each lane loads before decoding any (loads in flight)
#endif
#ifndef CBR
#define CBR 1  // codebook copies in local memory (32: one per lane, no bank conflicts)
#endif
#if CBR != 1 && CBR != 32
#error "CBR must be 1 or 32"
#endif
#define NF4_CB_REPLICAS CBR

#include "nf4_common.clh"

// Offsets into the buffers are in bytes (packed) and elements (scales).
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local float cb[16 * CBR];
  __local float xs[TR * KWG];
  __local float partial[TR * WGS];

  const int lid = get_local_id(0);
  const int lane = lid % RW;
  const int n = get_group_id(0) * CPW + lid / RW;
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

  packed += packed_offset;
  scales += scales_offset;
  // Columns past N decode the last valid row; their results are dropped at the store.
  const long row_pos = element_offset + ((long)e * N + min(n, N - 1)) * (long)K;
  // Uniform: whole KWG chunks, and every run of VW codes starts on a VW/2-byte boundary
  // inside one block (blocks hold >= 32 coefficients and runs at most 32).
  const int streamed = (K % KWG == 0) && (element_offset % 32 == 0) && (packed_offset % 16 == 0);

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    float acc[TR];
#pragma unroll
    for (int t = 0; t < TR; ++t) acc[t] = 0.0f;

    // Rows of this tile that exist: a segment shorter than TR (decode: often one row)
    // stages and multiplies only those, so one TR serves 1 to 16 rows per expert.
    const int live = min(TR, seg_end - r0);
    for (int k0 = 0; k0 < K; k0 += KWG) {
      for (int idx = lid; idx < live * KWG; idx += WGS) {
        const int r = r0 + idx / KWG;
        const int k = k0 + idx % KWG;
        xs[idx] = k < K ? nf4_load(x, (long)r * K + k, type) : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (streamed) {
        // Whole chunk, every run aligned and inside one block: UNROLL wide loads are issued
        // before any decoding, so each work-item keeps several in flight.
        for (int kk = lane * VW; kk < KWG; kk += RW * VW * UNROLL) {
          NF4_RUN raw[UNROLL];
          float sc[UNROLL];
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) {
            const long pos = row_pos + k0 + kk + u * RW * VW;
            raw[u] = *(const __global NF4_RUN*)(packed + (pos >> 1));
            sc[u] = scales[pos >> log2_block];
          }
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) {
            float w[VW];
            nf4_decode_words(w, (const uint*)&raw[u], sc[u], cb);
            const int base = kk + u * RW * VW;
#pragma unroll
            for (int t = 0; t < TR; ++t) {
              if (t < live) {
                // x comes in four at a time: a quarter of the local-memory reads.
                float4 sum = (float4)(0.0f);
#pragma unroll
                for (int q = 0; q < VW / 4; ++q)
                  sum = mad((float4)(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]),
                            vload4(0, xs + t * KWG + base + 4 * q), sum);
                acc[t] += (sum.s0 + sum.s1) + (sum.s2 + sum.s3);
              }
            }
          }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        continue;
      }
      for (int kk = lane * VW; kk < KWG && k0 + kk < K; kk += RW * VW) {
        float w[VW];
        nf4_decode_run(w, packed, packed_offset, scales, row_pos + k0 + kk, K - (k0 + kk), log2_block, cb);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {  // uniform over the workgroup
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < VW; ++i) sum = mad(w[i], xs[t * KWG + kk + i], sum);
            acc[t] += sum;
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int t = 0; t < TR; ++t) partial[t * WGS + lid] = acc[t];
#if RW > 1
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RW / 2; s > 0; s >>= 1) {
      if (lane < s) {
#pragma unroll
        for (int t = 0; t < TR; ++t)
          if (t < live) partial[t * WGS + lid] += partial[t * WGS + lid + s];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    if (lane == 0 && n < N) {
#pragma unroll
      for (int t = 0; t < TR; ++t)
        if (r0 + t < seg_end) nf4_store(y, (long)(r0 + t) * N + n, type, partial[t * WGS + lid]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // partial is rewritten by the next row tile
  }
}

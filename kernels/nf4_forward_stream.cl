// nf4_forward_stream: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment, written for memory streaming: no barrier inside the K sweep, several 16-byte
// code loads in flight per work-item, x read straight from global memory (small, cached).
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            K (contiguous)                 K (contiguous, 4-bit)          N (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | x[r*K + k]      |   E×N     | W[(e*N + n)*K + k] |   rows   | y[r*N + n]    |
//        +-----------------+           +--------------------+          +---------------+
//
// A W row is cut into chunks of 32 codes (16 bytes, one uint4). A workgroup serves one
// expert (its slot: group id 1 + expert_base, nf4_slot_expert) and WGS/RL consecutive W rows n (group id 0); RL
// work-items ("row lanes") share a row and take its chunks side by side:
//
//   W row n:  | chunk 0 | chunk 1 | ... | chunk RL-1 | chunk RL | ...      (16 bytes each)
//               lane 0    lane 1          lane RL-1    lane 0
//
// Each lane loads UNROLL chunks (and their scales) before decoding any, decodes each once
// and multiplies it into TR segment rows of x (float4 reads, the same addresses for every
// row of the workgroup, so they hit the cache); the scale multiplies each chunk's dot
// product once. The RL partial sums of a row meet in local memory once per row tile.
// Segments longer than TR loop over row tiles (weights re-read, mostly from cache).
// When K % 32, element_offset % 32 or packed_offset % 16 is not 0, chunks may straddle
// blocks or be misaligned, and every chunk takes the general decode (nf4_decode_run).

#ifndef WGS
#define WGS 128  // work-items per workgroup
#endif
#ifndef RL
#define RL 2  // row lanes: work-items sharing one W row, reading its 16-byte chunks side by side
#endif
#ifndef UNROLL
#define UNROLL 4  // 16-byte chunks each work-item loads before decoding any (loads in flight)
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows multiplied by each decoded chunk
#endif

#define RPG (WGS / RL)  // W rows (output columns) per workgroup
#define CHUNK 32        // codes per 16-byte load
#define NF4_DECODE_WIDTH 32

#if WGS % RL != 0
#error "WGS must be a multiple of RL"
#endif
#if RL != 1 && RL != 2 && RL != 4 && RL != 8
#error "RL must be 1, 2, 4 or 8"
#endif
#if UNROLL < 1 || UNROLL > 8
#error "UNROLL must be 1 to 8"
#endif
#if TR < 1 || TR > 16
#error "TR must be 1 to 16"
#endif
#if TR * UNROLL > 16
#error "TR * UNROLL must be at most 16 (registers)"
#endif

#include "nf4_common.clh"

// The aligned sweep of one W row (stream position row_pos, a multiple of 32) by this
// lane: chunks lane, lane + RL, ... Inlined with a constant `type`, so each element type
// gets its own loop without a branch per load.
inline void nf4_sweep_aligned(float* acc, const __global uchar* packed, const __global float* scales,
                              const long row_pos, const int log2_block, const int lane, const int chunks,
                              const __global uchar* x, const long x_row, const int K, const int live, const int type,
                              __local const float* cb) {
  for (int c0 = lane; c0 < chunks; c0 += RL * UNROLL) {
    uint4 raw[UNROLL];
    float sc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      // Past the row's end: re-read its last chunk (valid memory); skipped below.
      const long pos = row_pos + (long)min(c0 + u * RL, chunks - 1) * CHUNK;
      raw[u] = *(const __global uint4*)(packed + (pos >> 1));
      sc[u] = scales[pos >> log2_block];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + u * RL;
      if (c < chunks) {
        float w[CHUNK];
        const uint words[4] = {raw[u].s0, raw[u].s1, raw[u].s2, raw[u].s3};
        nf4_decode_words(w, words, 1.0f, cb);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {  // uniform over the workgroup
            const long xi = x_row + (long)t * K + c * CHUNK;
            float4 sum = (float4)(0.0f);
#pragma unroll
            for (int q = 0; q < CHUNK / 4; ++q)
              sum = mad((float4)(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]), nf4_load4(x, xi + 4 * q, type),
                        sum);
            acc[t] = mad(sc[u], (sum.s0 + sum.s1) + (sum.s2 + sum.s3), acc[t]);
          }
        }
      }
    }
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local float cb[16 * NF4_CB_REPLICAS];
#if RL > 1
  __local float partial[TR * WGS];
#endif

  const int lid = get_local_id(0);
  const int lane = lid % RL;
  const int n = get_group_id(0) * RPG + lid / RL;
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

  packed += packed_offset;
  scales += scales_offset;
  // Rows past N sweep the last valid row; their results are dropped at the store.
  const long row_pos = element_offset + ((long)e * N + min(n, N - 1)) * (long)K;
  const int chunks = (K + CHUNK - 1) / CHUNK;
  // Uniform: every chunk is 16-byte aligned and inside one block (blocks hold >= 32).
  const int aligned = nf4_chunks_aligned(K, element_offset, packed_offset, CHUNK);

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    float acc[TR];
#pragma unroll
    for (int t = 0; t < TR; ++t) acc[t] = 0.0f;
    // Rows of this tile that exist: one TR serves segments of 1 to 16 rows.
    const int live = min(TR, seg_end - r0);
    const long x_row = (long)r0 * K;

    if (aligned) {
      if (type == NF4_F32)
        nf4_sweep_aligned(acc, packed, scales, row_pos, log2_block, lane, chunks, x, x_row, K, live, NF4_F32, cb);
      else if (type == NF4_F16)
        nf4_sweep_aligned(acc, packed, scales, row_pos, log2_block, lane, chunks, x, x_row, K, live, NF4_F16, cb);
      else
        nf4_sweep_aligned(acc, packed, scales, row_pos, log2_block, lane, chunks, x, x_row, K, live, NF4_BF16, cb);
    } else {
      for (int c = lane; c < chunks; c += RL) {
        const int k0 = c * CHUNK;
        float w[CHUNK];
        nf4_decode_run(w, packed, packed_offset, scales, row_pos + k0, K - k0, log2_block, cb);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {
            float sum = 0.0f;
            for (int i = 0; i < CHUNK && k0 + i < K; ++i)
              sum = mad(w[i], nf4_load(x, x_row + (long)t * K + k0 + i, type), sum);
            acc[t] += sum;
          }
        }
      }
    }

#if RL > 1
#pragma unroll
    for (int t = 0; t < TR; ++t) partial[t * WGS + lid] = acc[t];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && n < N) {
#pragma unroll
      for (int t = 0; t < TR; ++t) {
        if (t < live) {
          float sum = 0.0f;
#pragma unroll
          for (int l = 0; l < RL; ++l) sum += partial[t * WGS + lid + l];
          nf4_store(y, (long)(r0 + t) * N + n, type, sum);
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // partial is rewritten by the next row tile
#else
    if (n < N) {
#pragma unroll
      for (int t = 0; t < TR; ++t)
        if (t < live) nf4_store(y, (long)(r0 + t) * N + n, type, acc[t]);
    }
#endif
  }
}

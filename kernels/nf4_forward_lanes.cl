// nf4_forward_lanes: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment, written for decode on GPUs (1 to a few rows per expert): the workgroup lies
// along K, so x lives in registers, W reads are coalesced across the workgroup, and the
// only per-code local-memory traffic is the codebook lookup.
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            K (contiguous)                 K (contiguous, 4-bit)          N (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | x[r*K + k]      |   E×N     | W[(e*N + n)*K + k] |   rows   | y[r*N + n]    |
//        +-----------------+           +--------------------+          +---------------+
//
// A W row is cut into chunks of CW codes (CW/2 bytes: one uint, uint2 or uint4). A
// workgroup serves one expert (group id 1, + expert_base) and RB consecutive W rows
// n0 .. n0+RB-1 (group id 0, n0 = group · RB). Lane l owns chunk positions
// c = l, l + WGS, l + 2·WGS, ... of all RB rows, so each load of the workgroup reads
// WGS·CW/2 contiguous bytes of one W row:
//
//   W row n:  | chunk 0 | chunk 1 | ... | chunk WGS-1 | chunk WGS | ...    (CW/2 bytes each)
//               lane 0    lane 1          lane WGS-1    lane 0
//
// Per chunk position a lane loads x[r, c·CW ..] of the TR rows of its row tile into
// registers (read once per W row batch, not once per W row), loads its RB code chunks
// and their scales before decoding any, then decodes each chunk once and multiplies it
// into RB × TR partial sums; the scale multiplies each chunk's dot product once. After
// the K sweep (no barrier inside it) the WGS partials of each of the RB × TR outputs
// meet in local memory in two levels. Segments longer than TR loop over row tiles
// (weights re-read, mostly from cache).
// When K % CW, element_offset % CW or packed_offset % (CW/2) is not 0, chunks may straddle
// blocks or be misaligned, and every chunk takes the general decode (nf4_decode_run).

#ifndef WGS
#define WGS 128  // work-items per workgroup, side by side along K
#endif
#ifndef CW
#define CW 32  // codes per lane chunk (8, 16, 32: one 4-, 8- or 16-byte load per W row)
#endif
#ifndef RB
#define RB 4  // W rows (output columns) per workgroup, their chunks loaded before any is decoded
#endif
#ifndef TR
#define TR 2  // tile rows: segment rows whose x chunks each lane keeps in registers
#endif

#define NOUT (RB * TR)  // outputs per row tile, reduced across the workgroup
#define NF4_DECODE_WIDTH CW

#if WGS != 32 && WGS != 64 && WGS != 128 && WGS != 256
#error "WGS must be 32, 64, 128 or 256"
#endif
#if CW != 8 && CW != 16 && CW != 32
#error "CW must be 8, 16 or 32"
#endif
#if RB != 2 && RB != 4 && RB != 8 && RB != 16
#error "RB must be 2, 4, 8 or 16"
#endif
#if TR != 1 && TR != 2 && TR != 4 && TR != 8
#error "TR must be 1, 2, 4 or 8"
#endif
#if CW * TR > 128
#error "CW * TR must be at most 128 (x registers)"
#endif
#if RB * TR > 64
#error "RB * TR must be at most 64 (accumulator registers)"
#endif
#if RB * CW > 256
#error "RB * CW must be at most 256 (code registers: RB * CW / 8 words)"
#endif

#include "nf4_common.clh"

// acc[b·TR + t] += sc · Σ_i w[i] · xv[t·CW + i] for the live rows t.
inline void nf4_lanes_fma(float* acc, const int b, const float* w, const float* xv, const float sc, const int live) {
#pragma unroll
  for (int t = 0; t < TR; ++t) {
    if (t < live) {  // uniform over the workgroup
      float4 sum = (float4)(0.0f);
#pragma unroll
      for (int q = 0; q < CW / 4; ++q)
        sum = mad((float4)(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]),
                  (float4)(xv[t * CW + 4 * q], xv[t * CW + 4 * q + 1], xv[t * CW + 4 * q + 2], xv[t * CW + 4 * q + 3]),
                  sum);
      acc[b * TR + t] = mad(sc, (sum.s0 + sum.s1) + (sum.s2 + sum.s3), acc[b * TR + t]);
    }
  }
}

// The aligned sweep of this lane's chunks of the W rows at stream positions row_pos,
// row_pos + K, ... (nrows of them, each a multiple of CW): every chunk is one CW/2-byte
// load inside one block. Inlined with a constant `type`, so each element type gets its own
// loop without a branch per load.
inline void nf4_lanes_sweep_aligned(float* acc, const __global uchar* packed, const __global float* scales,
                                    const long row_pos, const int K, const int nrows, const int log2_block,
                                    const int lid, const int chunks, const __global uchar* x, const long x_row,
                                    const int live, const int type, __local const float* cb) {
  for (int c = lid; c < chunks; c += WGS) {
    float xv[TR * CW];
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      if (t < live) {
#pragma unroll
        for (int q = 0; q < CW / 4; ++q) {
          const float4 v = nf4_load4(x, x_row + (long)t * K + c * CW + 4 * q, type);
          xv[t * CW + 4 * q] = v.s0;
          xv[t * CW + 4 * q + 1] = v.s1;
          xv[t * CW + 4 * q + 2] = v.s2;
          xv[t * CW + 4 * q + 3] = v.s3;
        }
      }
    }
    NF4_RUN raw[RB];
    float sc[RB];
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      // Rows past N re-read the batch's last row (valid memory); skipped below.
      const long pos = row_pos + (long)min(b, nrows - 1) * K + c * CW;
      raw[b] = *(const __global NF4_RUN*)(packed + (pos >> 1));
      sc[b] = scales[pos >> log2_block];
    }
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      if (b < nrows) {  // uniform over the workgroup
        float w[CW];
#if CW == 8
        const uint words[1] = {raw[b]};
#elif CW == 16
        const uint words[2] = {raw[b].s0, raw[b].s1};
#else
        const uint words[4] = {raw[b].s0, raw[b].s1, raw[b].s2, raw[b].s3};
#endif
        nf4_decode_words(w, words, 1.0f, cb);
        nf4_lanes_fma(acc, b, w, xv, sc[b], live);
      }
    }
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y) {
  __local float cb[16 * NF4_CB_REPLICAS];
  // Lane l's partial of output o at partial[l·(NOUT+1) + o]: the odd stride keeps both the
  // writes (one lane per bank) and the first-level reads on distinct banks.
  __local float partial[WGS * (NOUT + 1)];
#if NOUT < WGS
  __local float part_sums[WGS];  // first-level sums: part p's sum of output o at p·NOUT + o
#endif

  const int lid = get_local_id(0);
  const int n0 = get_group_id(0) * RB;
  const int e = expert_base + get_group_id(1);
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

  packed += packed_offset;
  scales += scales_offset;
  const int nrows = min(RB, N - n0);  // W rows of this batch that exist (>= 1)
  const long row_pos = element_offset + ((long)e * N + n0) * (long)K;
  const int chunks = (K + CW - 1) / CW;
  // Uniform: every chunk is CW/2-byte aligned and inside one block (blocks hold >= 32).
  const int aligned = (K % CW == 0) && (element_offset % CW == 0) && (packed_offset % (CW / 2) == 0);

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    float acc[NOUT];
#pragma unroll
    for (int o = 0; o < NOUT; ++o) acc[o] = 0.0f;
    // Rows of this tile that exist: one TR serves segments of any length.
    const int live = min(TR, seg_end - r0);
    const long x_row = (long)r0 * K;

    if (aligned) {
      if (type == NF4_F32)
        nf4_lanes_sweep_aligned(acc, packed, scales, row_pos, K, nrows, log2_block, lid, chunks, x, x_row, live,
                                NF4_F32, cb);
      else if (type == NF4_F16)
        nf4_lanes_sweep_aligned(acc, packed, scales, row_pos, K, nrows, log2_block, lid, chunks, x, x_row, live,
                                NF4_F16, cb);
      else
        nf4_lanes_sweep_aligned(acc, packed, scales, row_pos, K, nrows, log2_block, lid, chunks, x, x_row, live,
                                NF4_BF16, cb);
    } else {
      for (int c = lid; c < chunks; c += WGS) {
        const int k0 = c * CW;
        float xv[TR * CW];
#pragma unroll
        for (int t = 0; t < TR; ++t)
          for (int i = 0; i < CW; ++i)
            xv[t * CW + i] = (t < live && k0 + i < K) ? nf4_load(x, x_row + (long)t * K + k0 + i, type) : 0.0f;
#pragma unroll
        for (int b = 0; b < RB; ++b) {
          if (b < nrows) {
            float w[CW];
            nf4_decode_run(w, packed, packed_offset, scales, row_pos + (long)b * K + k0, K - k0, log2_block, cb);
            nf4_lanes_fma(acc, b, w, xv, 1.0f, live);
          }
        }
      }
    }

    // Reduction across the workgroup: with NOUT < WGS, WGS / NOUT parts of NOUT lanes
    // each, summed by one work-item per (part, output), then the parts by one work-item
    // per output; with NOUT >= WGS, one work-item sums all WGS lanes of an output.
#pragma unroll
    for (int o = 0; o < NOUT; ++o) partial[lid * (NOUT + 1) + o] = acc[o];
    barrier(CLK_LOCAL_MEM_FENCE);
#if NOUT < WGS
    {
      const int o = lid % NOUT, part = lid / NOUT;
      float sum = 0.0f;
      for (int l = part * NOUT; l < (part + 1) * NOUT; ++l) sum += partial[l * (NOUT + 1) + o];
      part_sums[lid] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < NOUT) {
      const int b = lid / TR, t = lid % TR;
      float sum = 0.0f;
      for (int part = 0; part < WGS / NOUT; ++part) sum += part_sums[part * NOUT + lid];
      if (b < nrows && t < live) nf4_store(y, (long)(r0 + t) * N + n0 + b, type, sum);
    }
#else
    for (int o = lid; o < NOUT; o += WGS) {
      const int b = o / TR, t = o % TR;
      float sum = 0.0f;
      for (int l = 0; l < WGS; ++l) sum += partial[l * (NOUT + 1) + o];
      if (b < nrows && t < live) nf4_store(y, (long)(r0 + t) * N + n0 + b, type, sum);
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);  // partial and part_sums are rewritten by the next row tile
  }
}

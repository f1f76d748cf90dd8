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
// A W row is cut into chunks of CW codes (CW/2 bytes: one uint, uint2 or uint4). W rows
// come in batches of RB consecutive rows (batch i: rows i·RB .. i·RB+RB-1). A workgroup
// serves one expert (its slot: group id 1 + expert_base, nf4_slot_expert) and up to NB batches, strided by the
// number of workgroups G along dimension 0 (G = ceil(ceil(N / RB) / NB)): workgroup g
// takes batches g, g + G, g + 2·G, ... below ceil(N / RB), so workgroups running side by
// side read neighbouring batches. Lane l owns chunk positions c = l, l + WGS, l + 2·WGS,
// ... of all RB rows of a batch, so each load of the workgroup reads WGS·CW/2 contiguous
// bytes of one W row:
//
//   W row n:  | chunk 0 | chunk 1 | ... | chunk WGS-1 | chunk WGS | ...    (CW/2 bytes each)
//               lane 0    lane 1          lane WGS-1    lane 0
//
// Per chunk position a lane loads x[r, c·CW ..] of the TR rows of its row tile into
// registers (read once per W row batch, not once per W row), loads its RB code chunks
// and their scales before decoding any, then decodes each chunk once and multiplies it
// into RB × TR partial sums; the scale multiplies each chunk's dot product once. After
// a batch's K sweep (no barrier inside it) the WGS partials of each of the RB × TR
// outputs meet in local memory in two levels; before that reduction each lane issues the
// loads of its first chunk of the next batch (codes, scales, and x when its x chunk
// changed), so they are in flight during the barriers. Segments longer than TR loop over
// row tiles (weights re-read, mostly from cache), each over the workgroup's batches.
// The codebook is staged once per workgroup, for all its batches.
// When K % CW, element_offset % CW or packed_offset % (CW/2) is not 0, chunks may straddle
// blocks or be misaligned, and every chunk takes the general decode (nf4_decode_run,
// without the cross-batch prefetch).

#ifndef WGS
#define WGS 128  // work-items per workgroup, side by side along K
#endif
#ifndef CW
#define CW 32  // codes per lane chunk (8, 16, 32: one 4-, 8- or 16-byte load per W row)
#endif
#ifndef RB
#define RB 4  // W rows (output columns) per batch, their chunks loaded before any is decoded
#endif
#ifndef TR
#define TR 2  // tile rows: segment rows whose x chunks each lane keeps in registers
#endif
#ifndef NB
#define NB 1  // W row batches (of RB rows) per workgroup, strided over the workgroups along N
#endif
#ifndef LUT
#define LUT 1  // aligned decode: 1 = one codebook lookup per code, 2 = one pair lookup per byte
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
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
#if NB != 1 && NB != 4 && NB != 16
#error "NB must be 1, 4 or 16"
#endif
#if LUT != 1 && LUT != 2
#error "LUT must be 1 or 2"
#endif

#include "nf4_common.clh"
#include "nf4_rows.clh"

// The aligned sweep of this lane's chunks of one batch (W rows at stream positions
// row_pos, row_pos + K, ..., nrows of them, each a multiple of CW): every chunk is one
// CW/2-byte load inside one block. xv, raw and sc carry the lane's first chunk (c = lid)
// between batches: with `first` it is loaded here, otherwise the previous batch's sweep
// loaded it. When has_next, the sweep ends by loading the first chunk of the next batch
// (at next_pos, next_nrows rows), so those loads are in flight during the reduction.
// Inlined with a constant `type`, so each element type gets its own loop without a branch
// per load.
inline void nf4_lanes_sweep_aligned(float* acc, float* xv, NF4_RUN* raw, float* sc, const __global uchar* packed,
                                    const __global float* scales, const long row_pos, const int nrows, const int first,
                                    const int has_next, const long next_pos, const int next_nrows, const int K,
                                    const int log2_block, const int lid, const int chunks, const __global uchar* x,
                                    const long x_row, const int live, const int type, __local const float* cb,
                                    const int row_blocks, __local const float2* pairs, const uint lane_off) {
  for (int c = lid; c < chunks; c += WGS) {
    if (first || c != lid) {
      nf4_rows_load_x(xv, x, x_row, K, c, live, type);
      nf4_rows_load_w(raw, sc, packed, scales, row_pos, K, nrows, c, log2_block, row_blocks);
    }
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      if (b < nrows) {  // uniform over the workgroup
#if LUT == 2
        nf4_rows_pair_fma(acc, b, raw[b], xv, sc[b], live, pairs, lane_off);
#else
        float w[CW];
#if CW == 8
        const uint words[1] = {raw[b]};
#elif CW == 16
        const uint words[2] = {raw[b].s0, raw[b].s1};
#else
        const uint words[4] = {raw[b].s0, raw[b].s1, raw[b].s2, raw[b].s3};
#endif
        nf4_decode_words(w, words, 1.0f, cb);
        nf4_rows_fma(acc, b, w, xv, sc[b], live);
#endif
      }
    }
  }
  if (has_next && lid < chunks) {
    // xv still holds chunk lid's x unless this lane swept more than one chunk.
    if (lid + WGS < chunks) nf4_rows_load_x(xv, x, x_row, K, lid, live, type);
    nf4_rows_load_w(raw, sc, packed, scales, next_pos, K, next_nrows, lid, log2_block, row_blocks);
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local float cb[16 * NF4_CB_REPLICAS];
  // Lane l's partial of output o at partial[l·(NOUT+1) + o]: the odd stride keeps both the
  // writes (one lane per bank) and the first-level reads on distinct banks.
  __local float partial[WGS * (NOUT + 1)];
#if NOUT < WGS
  __local float part_sums[WGS];  // first-level sums: part p's sum of output o at p·NOUT + o
#endif

  const int lid = get_local_id(0);
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

#if LUT == 2
  // The pair table (see nf4_rows_pair_fma).
  __local float2 pairs[256 * 16];
  nf4_fill_pair_table(pairs, codebook, lid, WGS);
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  __local const float2* pairs = 0;
#endif
  const uint lane_off = nf4_pair_lane_off(lid);
  const int row_blocks = nf4_row_blocks(K, log2_block);

  packed += packed_offset;
  scales += scales_offset;
  // This workgroup's batches: g, g + groups, ... below `batches` (at least g itself, as
  // groups = ceil(batches / NB) <= batches), at most NB.
  const int batches = (N + RB - 1) / RB;
  const int groups = get_num_groups(0);
  const int g = get_group_id(0);
  const int my_batches = min(NB, (batches - g + groups - 1) / groups);
  const long expert_pos = element_offset + (long)e * N * (long)K;
  const int chunks = (K + CW - 1) / CW;
  // Uniform: every chunk is CW/2-byte aligned and inside one block (blocks hold >= 32).
  const int aligned = nf4_chunks_aligned(K, element_offset, packed_offset, CW);
  // The aligned sweep's first chunk of a batch, carried across batches (see the sweep).
  float xv[TR * CW];
  NF4_RUN raw[RB];
  float sc[RB];

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    // Rows of this tile that exist: one TR serves segments of any length.
    const int live = min(TR, seg_end - r0);
    const long x_row = (long)r0 * K;

    for (int j = 0; j < my_batches; ++j) {
      const int n0 = (g + j * groups) * RB;
      const int nrows = min(RB, N - n0);  // W rows of this batch that exist (>= 1)
      const long row_pos = expert_pos + (long)n0 * K;
      float acc[NOUT];
#pragma unroll
      for (int o = 0; o < NOUT; ++o) acc[o] = 0.0f;

      if (aligned) {
        const int has_next = j + 1 < my_batches;
        const int next_n0 = n0 + groups * RB;
        const int next_nrows = has_next ? min(RB, N - next_n0) : 1;
        const long next_pos = expert_pos + (long)(has_next ? next_n0 : n0) * K;
        if (type == NF4_F32)
          nf4_lanes_sweep_aligned(acc, xv, raw, sc, packed, scales, row_pos, nrows, j == 0, has_next, next_pos,
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_F32, cb, row_blocks,
                                  pairs, lane_off);
        else if (type == NF4_F16)
          nf4_lanes_sweep_aligned(acc, xv, raw, sc, packed, scales, row_pos, nrows, j == 0, has_next, next_pos,
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_F16, cb, row_blocks,
                                  pairs, lane_off);
        else
          nf4_lanes_sweep_aligned(acc, xv, raw, sc, packed, scales, row_pos, nrows, j == 0, has_next, next_pos,
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_BF16, cb, row_blocks,
                                  pairs, lane_off);
      } else {
        for (int c = lid; c < chunks; c += WGS)
          nf4_rows_general_chunk(acc, x, x_row, K, c * CW, live, type, packed, packed_offset, scales, row_pos, nrows,
                                 log2_block, cb);
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
      barrier(CLK_LOCAL_MEM_FENCE);  // partial and part_sums are rewritten by the next batch
    }
  }
}

// nf4_backward_stream: dx[r, k] = Σ_n g[r, n] · W[e, n, k] for the rows r of expert e's
// segment (the input gradient of nf4_forward), written for memory streaming: W rows are
// read whole and coalesced, several in flight per work-item, no barrier in the N sweep.
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            N (contiguous)                 K (contiguous, 4-bit)          K (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | g[r*N + n]      |   E×N     | W[(e*N + n)*K + k] |   rows   | dx[r*K + k]   |
//        +-----------------+           +--------------------+          +---------------+
//
// A workgroup is NL slices of 32 work-items. Lane l (0..31) of every slice owns VW
// consecutive k of the workgroup's k tile (VW/2 bytes of each W row), so a slice reads
// 16·VW contiguous bytes of a row per load:
//
//   W row n:  | lane 0 | lane 1 | ... | lane 31 |        k tile = 32·VW codes
//
// Slice j sweeps the rows n = n_begin + j, n_begin + j + NL, ... of its split, UNROLL
// rows loaded before any is decoded, and keeps TR × VW sums; g[r, n] (one address per
// slice, cached) times the scale multiplies each decoded code. LUT picks the decode: 1
// looks each code up in the 16-entry codebook, 2 each byte (two codes) in the 32 KiB table
// of code pairs (nf4_fill_pair_table), one 8-byte lookup per byte. After the sweep (outside
// it) slices 1..NL-1 hand their sums to slice 0 through local memory.
// Group id 0 numbers (k tile, split): tile + ktiles · s; group id 1 + expert_base the
// expert's slot (nf4_slot_expert). With one split the sums go to dx. With `splits` > 1 (the host's
// choice: NSPLIT, raised to fill the compute units, capped by N and the scratch), split s
// covers n in [N·s/splits, N·(s+1)/splits) and writes its sums to partials[s][r][k], which
// are added in order s = 0, 1, ... into dx by a second kernel (SPLIT_SUM 0) or by the last
// workgroup of the (expert, k tile) to finish (SPLIT_SUM 1, OpenCL C 2.0 atomics): see
// nf4_splits.clh.
// When K % VW, element_offset % VW or packed_offset % (VW/2) is not 0, runs may straddle
// blocks or be misaligned, and every run takes the general decode (nf4_decode_run).

#ifndef NL
#define NL 2  // slices of 32 work-items per workgroup, each sweeping every NL-th W row
#endif
#ifndef VW
#define VW 16  // consecutive k per work-item (16: one 8-byte load of codes per W row, 32: 16 bytes)
#endif
#ifndef UNROLL
#define UNROLL 4  // W rows each work-item loads before decoding any (loads in flight)
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows accumulated at once (weight reuse)
#endif
#ifndef NSPLIT
#define NSPLIT 8  // workgroups sharing one (expert, k tile)'s sweep over N (the host's choice; see nf4.cpp)
#endif
#ifndef LUT
#define LUT 1  // aligned decode: 1 a codebook lookup per code, 2 a pair-table lookup per byte
#endif
#ifndef SPLIT_SUM
#define SPLIT_SUM 0  // splits added by a second kernel (0) or by the last split, OpenCL C 2.0 atomics (1)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif

#define LANES 32            // work-items per slice, side by side along k
#define WGS (LANES * NL)    // work-items per workgroup
#define KTILE (LANES * VW)  // k per workgroup
#define NF4_DECODE_WIDTH VW

#if NL != 1 && NL != 2 && NL != 4 && NL != 8
#error "NL must be 1, 2, 4 or 8"
#endif
#if VW != 16 && VW != 32
#error "VW must be 16 or 32"
#endif
#if UNROLL < 1 || UNROLL > 8
#error "UNROLL must be 1 to 8"
#endif
#if TR * VW > 128
#error "TR * VW must be at most 128 (accumulator registers)"
#endif
#if UNROLL * VW > 128
#error "UNROLL * VW must be at most 128 (load registers)"
#endif
#if NSPLIT < 1
#error "NSPLIT must be at least 1"
#endif
#if LUT != 1 && LUT != 2
#error "LUT must be 1 or 2"
#endif

#include "nf4_common.clh"
#include "nf4_splits.clh"

// The aligned sweep of rows n_first, n_first + NL, ... below n_end for this lane's run at
// stream position `lane_pos` (row n at lane_pos + n·K). Inlined with a constant `type`.
// `pairs` and `lane_off` serve LUT 2 (the pair table and this work-item's copy in it).
inline void nf4_sweep_rows_aligned(float acc[TR][VW], const __global uchar* packed, const __global float* scales,
                                   const long lane_pos, const int K, const int N, const int n_first, const int n_end,
                                   const int log2_block, const __global uchar* g, const long g_row, const int live,
                                   const int type, __local const float* cb, __local const float2* pairs,
                                   const uint lane_off) {
  for (int n0 = n_first; n0 < n_end; n0 += NL * UNROLL) {
    NF4_RUN raw[UNROLL];
    float sc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      // Past the split's end: re-read its last row (valid memory); skipped below.
      const long pos = lane_pos + (long)min(n0 + u * NL, n_end - 1) * K;
      raw[u] = *(const __global NF4_RUN*)(packed + (pos >> 1));
      sc[u] = scales[pos >> log2_block];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int n = n0 + u * NL;
      if (n < n_end) {
        float w[VW];
#if LUT == 2
        const uint* words = (const uint*)&raw[u];
#pragma unroll
        for (int q = 0; q < VW / 8; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 pair = nf4_pair(pairs, words[q], j, lane_off);
            w[8 * q + 2 * j] = pair.s0;
            w[8 * q + 2 * j + 1] = pair.s1;
          }
#else
        nf4_decode_words(w, (const uint*)&raw[u], 1.0f, cb);
#endif
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {  // uniform over the workgroup
            const float gv = nf4_load(g, g_row + (long)t * N + n, type) * sc[u];
#pragma unroll
            for (int i = 0; i < VW; ++i) acc[t][i] = mad(gv, w[i], acc[t][i]);
          }
        }
      }
    }
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_backward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* g, const int type,
    const __global uint* offsets, __global float* dx, const int splits, __global float* partials,
    __global uint* counters) {
  __local float cb[16 * NF4_CB_REPLICAS];
#if SPLIT_SUM == 1
  __local int last;
#endif
#if NL > 1
  __local float handed[(NL - 1) * LANES * VW];
#endif
#if LUT == 2
  __local float2 pairs[256 * 16];
#else
  __local float2* pairs = 0;  // unused
#endif

  const int lid = get_local_id(0);
  const int lane = lid % LANES;
  const int slice = lid / LANES;
  const int ktiles = (K + KTILE - 1) / KTILE;
  const int tile = get_group_id(0) % ktiles;
  const int s = get_group_id(0) / ktiles;
  const int k_first = tile * KTILE + lane * VW;
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;
#if LUT == 2
  nf4_fill_pair_table(pairs, codebook, lid, WGS);
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
  const uint lane_off = nf4_pair_lane_off(lid);

  packed += packed_offset;
  scales += scales_offset;
  const int n_begin = (int)((long)N * s / splits);
  const int n_end = (int)((long)N * (s + 1) / splits);
  const int valid = K - k_first;  // <= 0: a run past K, which writes nothing
  // Uniform: every run is VW/2-byte aligned and inside one block (blocks hold >= 32).
  const int aligned = nf4_chunks_aligned(K, element_offset, packed_offset, VW);
  // Runs past K read the row's last run (valid memory) and are dropped at the store.
  const long lane_pos = element_offset + (long)e * N * (long)K + (aligned ? min(k_first, K - VW) : k_first);
  __global float* out = splits > 1 ? partials + (long)s * rows * K : dx;

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    float acc[TR][VW];
#pragma unroll
    for (int t = 0; t < TR; ++t)
#pragma unroll
      for (int i = 0; i < VW; ++i) acc[t][i] = 0.0f;
    // Rows of this tile that exist: one TR serves segments of 1 to 16 rows.
    const int live = min(TR, seg_end - r0);
    const long g_row = (long)r0 * N;

    if (aligned) {
      if (type == NF4_F32)
        nf4_sweep_rows_aligned(acc, packed, scales, lane_pos, K, N, n_begin + slice, n_end, log2_block, g, g_row, live,
                               NF4_F32, cb, pairs, lane_off);
      else if (type == NF4_F16)
        nf4_sweep_rows_aligned(acc, packed, scales, lane_pos, K, N, n_begin + slice, n_end, log2_block, g, g_row, live,
                               NF4_F16, cb, pairs, lane_off);
      else
        nf4_sweep_rows_aligned(acc, packed, scales, lane_pos, K, N, n_begin + slice, n_end, log2_block, g, g_row, live,
                               NF4_BF16, cb, pairs, lane_off);
    } else {
      for (int n = n_begin + slice; n < n_end; n += NL) {
        float w[VW];
        nf4_decode_run(w, packed, packed_offset, scales, lane_pos + (long)n * K, valid, log2_block, cb);
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          if (t < live) {
            const float gv = nf4_load(g, g_row + (long)t * N + n, type);
#pragma unroll
            for (int i = 0; i < VW; ++i) acc[t][i] = mad(gv, w[i], acc[t][i]);
          }
        }
      }
    }

#if NL > 1
    // Slices 1..NL-1 hand their sums to slice 0, one row at a time (outside the sweep).
    // The barriers are unconditional: PoCL replicates the code after a barrier inside
    // an if once per such barrier, which explodes with TR of them.
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      if (slice > 0 && t < live) {
#pragma unroll
        for (int i = 0; i < VW; ++i) handed[((slice - 1) * LANES + lane) * VW + i] = acc[t][i];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (slice == 0 && t < live) {
        for (int j = 0; j < NL - 1; ++j)
#pragma unroll
          for (int i = 0; i < VW; ++i) acc[t][i] += handed[(j * LANES + lane) * VW + i];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      if (t < live && slice == 0) {
        __global float* o = out + (long)(r0 + t) * K + k_first;
        if (aligned && valid >= VW) {  // o is 16-byte aligned: K and k_first are multiples of VW
#pragma unroll
          for (int q = 0; q < VW / 4; ++q)
            ((__global float4*)o)[q] = (float4)(acc[t][4 * q], acc[t][4 * q + 1], acc[t][4 * q + 2], acc[t][4 * q + 3]);
        } else {
#pragma unroll
          for (int i = 0; i < VW; ++i)
            if (i < valid) o[i] = acc[t][i];
        }
      }
    }
  }
#if SPLIT_SUM == 1
  // No early return past this point: PoCL 3.1 miscompiles a return after the barriers of
  // the row loop (heap corruption when NL > 1), so the tail nests instead.
  if (splits > 1)  // uniform
    nf4_add_splits_last(dx, partials, counters + (long)e * ktiles + tile, &last, splits, rows, K, tile * KTILE,
                        min(KTILE, K - tile * KTILE), seg_begin, seg_end, lid, WGS);
#endif
}

// nf4_forward_lut: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment, written for decode with one to a few rows per expert: nothing is decoded.
// Per slice of 64 codes (one scale block of every W row) and segment row r, the
// workgroup builds a table of the 32 byte positions' sums over the 256 byte values,
//
//   T[b][p] = x[r, k0 + 2p] · cb[b >> 4] + x[r, k0 + 2p + 1] · cb[b & 15]   (32 KiB, f32)
//
// (the high nibble is the even coefficient, bitsandbytes' packing), and then a byte b of a
// W row at position p adds T[b][p]: one local-memory lookup and one add per two codes; the
// row's block scale multiplies the slice's sum once. T[b][p] sits at word b·32 + p, on
// bank p, and the 32 lanes of a warp always read 32 different positions (below), so no
// lookup meets a bank conflict whatever the codes are.
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            K (contiguous)                 K (contiguous, 4-bit)          N (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | x[r*K + k]      |   E×N     | W[(e*N + n)*K + k] |   rows   | y[r*N + n]    |
//        +-----------------+           +--------------------+          +---------------+
//
// A workgroup (group id 1: expert, + expert_base) owns a tile of NR = 8·WARPS·RPL W rows
// and a part of K (group id 0 = tile + tiles · split; with `splits` parts, part s takes
// slices [S·s/splits, S·(s+1)/splits) of the S = ceil(K / 64)). In a slice, lane l of
// warp u reads 8 bytes (16 codes, one uint2) of W rows tile·NR + (j·WARPS + u)·8 + l / 4,
// j = 0 .. RPL-1, at byte positions 8·(l % 4) .. +7, so a warp's load covers the 32 bytes
// of 8 rows:
//
//   W row n, slice:  | bytes 0-7 | bytes 8-15 | bytes 16-23 | bytes 24-31 |
//                      l % 4 = 0    l % 4 = 1    l % 4 = 2     l % 4 = 3
//
// Lane l handles its bytes in the order q = (s + l / 4) % 8, s = 0..7 (its uint2 rotated
// by l / 4 bytes once), which puts the 32 lanes on the 32 positions at every step s.
// A lane keeps TR × RPL sums (one per segment row of the pass and W row); the codes and
// scales of the next slice are loaded as soon as this slice's are consumed: with PF 1
// right after they are rotated (in flight over the whole slice), with PF 0 after they are
// summed (in flight over the barriers and the next table's build). After the K part the 4 lanes of each W row
// meet in local memory. With one part the sums go to y; with several each part writes
// partials[s][r][n] and the last workgroup of an (expert, tile) to finish (a counter per
// pair, atomic_inc after a global fence) adds the parts in order s = 0, 1, ..., so the
// result does not depend on the order the workgroups ran in, and resets its counter.
// Segments longer than TR rows loop over passes of TR rows (weights re-read).
// When K % 64, element_offset % 64 or packed_offset % 8 is not 0, or blocks hold 32
// codes, slices may straddle blocks or be misaligned, and every code takes the general
// decode (nf4_decode_one, x read per code): correct, slow.

#ifndef WGS
#define WGS 256  // work-items per workgroup: WGS / 32 warps sharing one table
#endif
#ifndef RPL
#define RPL 8  // W rows per lane in a slice (each lane sums a quarter of each), loaded before any is summed
#endif
#ifndef TR
#define TR 1  // tile rows: segment rows per pass, one table each per slice, the codes loaded once for all
#endif
#ifndef KSPLIT
#define KSPLIT 4  // most workgroups sharing one (expert, W row tile)'s sweep over K
#endif
#ifndef PF
#define PF 1  // 1: the next slice's codes are loaded before this slice's table is built (two register sets)
#endif

#define WARPS (WGS / 32)
#define NR (8 * WARPS * RPL)  // W rows per workgroup tile
#define SLICE 64              // codes per slice: one table, one scale of each W row
#define POSITIONS 32          // byte positions per slice, one local-memory bank each

#if WGS != 64 && WGS != 128 && WGS != 256
#error "WGS must be 64, 128 or 256"
#endif
#if RPL != 4 && RPL != 8 && RPL != 16
#error "RPL must be 4, 8 or 16"
#endif
#if TR != 1 && TR != 2 && TR != 4
#error "TR must be 1, 2 or 4"
#endif
#if RPL * TR > 32
#error "RPL * TR must be at most 32 (accumulator registers)"
#endif
#if KSPLIT != 1 && KSPLIT != 2 && KSPLIT != 4 && KSPLIT != 8 && KSPLIT != 16
#error "KSPLIT must be 1, 2, 4, 8 or 16"
#endif

#if PF != 0 && PF != 1
#error "PF must be 0 or 1"
#endif

#include "nf4_common.clh"

// The 8 code bytes of a lane rotated right by `rot` bytes (0..7): byte s of the result is
// byte (s + rot) % 8 of (lo, hi). `sel` holds the byte selectors of both output words.
inline uint2 lut_rotate(const uint2 v, const uint rot, const uint2 sel) {
#ifdef OCLTK_PTX
  uint2 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r.x) : "r"(v.x), "r"(v.y), "r"(sel.x));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r.y) : "r"(v.x), "r"(v.y), "r"(sel.y));
  return r;
#else
  const ulong u = upsample(v.y, v.x);
  return as_uint2(rotate(u, (ulong)((64u - 8u * rot) & 63u)));
#endif
}

// The byte offset in the table of byte `s % 4` of word `w`: (byte · 32 words) · 4 bytes,
// OR the lane's position offset `p4` (position · 4, below 128). On NVIDIA the right shift
// runs as mul.hi on the FMA pipe, leaving one integer instruction per byte.
inline uint lut_offset(const uint w, const int s, const uint p4) {
  const int q = s & 3;
  uint shifted;
  if (q == 0) {
    shifted = w << 7;
  } else {
#ifdef OCLTK_PTX
    // Inline: the compiler turns mul_hi by a power of two back into a shift.
    asm("mul.hi.u32 %0, %1, %2;" : "=r"(shifted) : "r"(w), "r"(1u << (32 - (8 * q - 7))));
#else
    shifted = w >> (8 * q - 7);
#endif
  }
  return (shifted & 0x7F80u) | p4;
}

// The sum of a lane's 8 bytes (already rotated) through the table.
inline float lut_sum8(const uint2 v, __local const float* table, const uint p4[8]) {
  __local const uchar* t = (__local const uchar*)table;
  float even = *(__local const float*)(t + lut_offset(v.x, 0, p4[0]));
  float odd = *(__local const float*)(t + lut_offset(v.x, 1, p4[1]));
#pragma unroll
  for (int s = 2; s < 8; s += 2) {
    even += *(__local const float*)(t + lut_offset(s < 4 ? v.x : v.y, s, p4[s]));
    odd += *(__local const float*)(t + lut_offset(s < 4 ? v.x : v.y, s + 1, p4[s + 1]));
  }
  return even + odd;
}

// Fills the table of slice position k0 for one segment row from its x pair (xh = x[k0 +
// 2p], xl = x[k0 + 2p + 1], p = lane): warp u writes the byte values b = u + WARPS·j, so
// b >> 4 = j / (16 / WARPS) and b & 15 = u + WARPS · (j % (16 / WARPS)).
inline void lut_build(__local float* table, __local const float* cb, const int lane, const int warp, const float xh,
                      const float xl) {
  float lo[16 / WARPS];
#pragma unroll
  for (int m = 0; m < 16 / WARPS; ++m) lo[m] = xl * cb[warp + WARPS * m];
#pragma unroll
  for (int j = 0; j < 256 / WARPS; ++j)
    table[(warp + WARPS * j) * POSITIONS + lane] = mad(cb[j / (16 / WARPS)], xh, lo[j % (16 / WARPS)]);
}

// Loads slice `sl`'s codes and scales of the lane's RPL W rows (their first codes at
// 64-code index q[j]: stream position 64 · q[j] + 16 · quarter) and the x pairs of the
// pass's TR segment rows (rows past the segment re-read its last row).
inline void lut_load_slice(uint2 code[RPL], float sc[RPL], float xh[TR], float xl[TR], const __global uint2* lane_codes,
                           const __global float* scales, const __global uchar* x, const uint q[RPL], const int sl,
                           const int block_shift, const int r0, const int seg_end, const int K, const int lane,
                           const int type) {
#pragma unroll
  for (int j = 0; j < RPL; ++j) {
    code[j] = lane_codes[(size_t)(q[j] + sl) * 4];
    sc[j] = scales[(q[j] + sl) >> block_shift];
  }
#pragma unroll
  for (int t = 0; t < TR; ++t) {
    const long xi = (long)min(r0 + t, seg_end - 1) * K + sl * SLICE + 2 * lane;
    xh[t] = nf4_load(x, xi, type);
    xl[t] = nf4_load(x, xi + 1, type);
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y, const int splits, __global float* partials, __global uint* counters) {
  __local float table[256 * POSITIONS];
  __local float cb[16];
  __local int last;

  const int lid = get_local_id(0);
  const int lane = lid % 32;
  const int warp = lid / 32;
  const int quarter = lane % 4;  // which 8 bytes of the slice
  const int rot = lane / 4;      // the lane's row among the warp's 8, and its byte rotation
  const int tiles = (N + NR - 1) / NR;
  const int tile = get_group_id(0) % tiles;
  const int part = get_group_id(0) / tiles;
  const int e = expert_base + get_group_id(1);
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

  packed += packed_offset;
  scales += scales_offset;
  const int slices = (K + SLICE - 1) / SLICE;
  const int sl_begin = (int)((long)slices * part / splits);
  const int sl_end = (int)((long)slices * (part + 1) / splits);
  // Uniform over the workgroup: every slice is 32 bytes, 8-byte aligned, under one scale,
  // and the expert's slices are numbered in 32 bits (stream positions below 2^37).
  const int aligned = (K % SLICE == 0) && (element_offset % SLICE == 0) && (packed_offset % 8 == 0) &&
                      log2_block >= 6 && element_offset + (long)(e + 1) * N * K < (1L << 37);

  // W rows of this lane (clamped to N - 1 for loads; rows past N write nothing): the stream
  // position of their first code, and (aligned) its index in slices of 64 codes.
  long row_pos[RPL];
  uint q[RPL];
#pragma unroll
  for (int j = 0; j < RPL; ++j) {
    const int n = min(tile * NR + (j * WARPS + warp) * 8 + rot, N - 1);
    row_pos[j] = element_offset + ((long)e * N + n) * (long)K;
    q[j] = (uint)(row_pos[j] / SLICE);
  }
  const __global uint2* lane_codes = (const __global uint2*)packed + quarter;
  const int block_shift = log2_block - 6;
  // Selectors of lut_rotate and the table offsets of the rotated bytes: byte s sits at
  // position 8·quarter + (s + rot) % 8.
  uint2 sel;
  sel.x = ((rot + 0) & 7) | ((rot + 1) & 7) << 4 | ((rot + 2) & 7) << 8 | ((rot + 3) & 7) << 12;
  sel.y = ((rot + 4) & 7) | ((rot + 5) & 7) << 4 | ((rot + 6) & 7) << 8 | ((rot + 7) & 7) << 12;
  uint p4[8];
#pragma unroll
  for (int s = 0; s < 8; ++s) p4[s] = 4u * (uint)(8 * quarter + ((s + rot) & 7));

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    const int live = min(TR, seg_end - r0);  // uniform
    float acc[TR][RPL];
#pragma unroll
    for (int t = 0; t < TR; ++t)
#pragma unroll
      for (int j = 0; j < RPL; ++j) acc[t][j] = 0.0f;

    if (aligned) {
      // The first slice's codes, scales and x pairs; then each slice's are loaded as soon
      // as the previous slice's are consumed (PF 1: rotated; PF 0: summed).
      uint2 code[RPL];
      float sc[RPL], xh[TR], xl[TR];
      if (sl_begin < sl_end)
        lut_load_slice(code, sc, xh, xl, lane_codes, scales, x, q, sl_begin, block_shift, r0, seg_end, K, lane, type);
      for (int sl = sl_begin; sl < sl_end; ++sl) {
        uint2 rotated[RPL];
        float s_now[RPL], xh_now[TR], xl_now[TR];
#pragma unroll
        for (int j = 0; j < RPL; ++j) {
          rotated[j] = lut_rotate(code[j], rot, sel);
          s_now[j] = sc[j];
        }
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          xh_now[t] = xh[t];
          xl_now[t] = xl[t];
        }
#if PF == 1
        if (sl + 1 < sl_end)
          lut_load_slice(code, sc, xh, xl, lane_codes, scales, x, q, sl + 1, block_shift, r0, seg_end, K, lane, type);
#endif
          // The barriers are unconditional (uniform work inside): see nf4_backward_stream.
#pragma unroll
        for (int t = 0; t < TR; ++t) {
          barrier(CLK_LOCAL_MEM_FENCE);  // every warp is done with the previous table
          if (t < live) lut_build(table, cb, lane, warp, xh_now[t], xl_now[t]);
          barrier(CLK_LOCAL_MEM_FENCE);
          if (t < live) {
#pragma unroll
            for (int j = 0; j < RPL; ++j) acc[t][j] = mad(s_now[j], lut_sum8(rotated[j], table, p4), acc[t][j]);
          }
        }
#if PF == 0
        if (sl + 1 < sl_end)
          lut_load_slice(code, sc, xh, xl, lane_codes, scales, x, q, sl + 1, block_shift, r0, seg_end, K, lane, type);
#endif
      }
    } else {
      // General decode: codes 16·quarter .. +15 of each slice, one at a time.
      for (int sl = sl_begin; sl < sl_end; ++sl) {
#pragma unroll
        for (int j = 0; j < RPL; ++j) {
          for (int c = 0; c < 16; ++c) {
            const int k = sl * SLICE + quarter * 16 + c;
            if (k < K) {
              const float w = nf4_decode_one(packed, scales, row_pos[j] + k, log2_block, cb);
#pragma unroll
              for (int t = 0; t < TR; ++t)
                if (t < live) acc[t][j] = mad(nf4_load(x, (long)(r0 + t) * K + k, type), w, acc[t][j]);
            }
          }
        }
      }
    }

    // The 4 lanes of each W row meet in the table's memory; one work-item per W row
    // writes its sum (to y, or to this part's partials).
    __local float* meet = table;
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      barrier(CLK_LOCAL_MEM_FENCE);
      if (t < live) {
#pragma unroll
        for (int j = 0; j < RPL; ++j) meet[(((j * WARPS + warp) * 8 + rot) * 4) + quarter] = acc[t][j];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (t < live) {
        // To y, or to this part's partials (one loop each: PoCL 3.1 merged the two stores
        // of one loop into a store to y at the partials' index).
        const long row_out = (long)(r0 + t) * N + tile * NR;
        const int width = min(NR, N - tile * NR);
        if (splits > 1) {
          __global float* dst = partials + (long)part * rows * N + row_out;
          for (int i = lid; i < width; i += WGS)
            dst[i] = (meet[4 * i] + meet[4 * i + 1]) + (meet[4 * i + 2] + meet[4 * i + 3]);
        } else {
          for (int i = lid; i < width; i += WGS)
            nf4_store(y, row_out + i, type, (meet[4 * i] + meet[4 * i + 1]) + (meet[4 * i + 2] + meet[4 * i + 3]));
        }
      }
    }
  }
  // No early return past this point (PoCL and barriers: see nf4_backward_stream).
  if (splits > 1) {  // uniform
    // Publish this part's sums, then count it; the last part of the pair adds them all.
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0) {
      __global uint* counter = counters + (long)e * tiles + tile;
      last = atomic_inc(counter) == (uint)(splits - 1);
      if (last) atomic_xchg(counter, 0u);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (last) {
      mem_fence(CLK_GLOBAL_MEM_FENCE);
      // Volatile: the other parts' sums must come from memory, not a stale cache line.
      const volatile __global float* sums = partials;
      const int n0 = tile * NR;
      const int width = min(NR, N - n0);
      const long plane = (long)rows * N;
      // Uniform trip counts with the test inside: PoCL 3.1 ran a loop from lid while lid <
      // width here for work-items past width (stores past the segment's rows).
      for (int r = seg_begin; r < seg_end; ++r) {
        for (int i0 = 0; i0 < width; i0 += WGS) {
          const int i = i0 + lid;
          if (i < width) {
            const long o = (long)r * N + n0 + i;
            float sum = 0.0f;
            for (int s = 0; s < splits; ++s) sum += sums[s * plane + o];
            nf4_store(y, o, type, sum);
          }
        }
      }
    }
  }
}

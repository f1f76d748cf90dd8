// nf4_backward_tc: dx[r, k] = Σ_n g[r, n] · W[e, n, k] for the rows r of expert e's segment
// (the input gradient of nf4_forward) on tensor cores: mma.sync m16n8k16 (inline PTX where
// OCLTK_PTX is defined; elsewhere nf4_tc.clh's exact emulation through local memory, so the
// same fragment layout is tested on any device). One decoded code serves up to 8 segment
// rows per mma, where the stream kernel spends one f32 FMA per code and row.
//
// The mma reduces over 16 consecutive W rows n0 .. n0 + 15 (a step):
// - A (16 × 16): A[m][i] = codebook value of W[n0 + i][k(m)]. A register pairs two W rows'
//   codes at one k, so its index into the 256-entry table of code pairs is built from two
//   rows' nibbles: for the words P0, P1 of rows 2t and 2t + 1,
//   (P0 & 0xF0F0F0F0) | (P1 >> 4 & 0x0F0F0F0F) indexes the pairs at the high nibbles and
//   (P0 << 4 & 0xF0F0F0F0) | (P1 & 0x0F0F0F0F) those at the low nibbles: two shifts and two
//   selects for 8 lookups.
// - B (16 × 8): B[i][c] = g[r0 + c, n0 + i] · scale(n0 + i, block of the mma's k). The block
//   scale varies along the reduction, so it goes into B; a mma's 16 k lie in one group of 64
//   k, inside one block (block_size >= 64).
// - D (16 × 8): dx[r0 + c][k(m)], summed over the whole sweep (nothing to rescale per step).
//
// k mapping: the workgroup's k tile is KG groups of 64 k (32 bytes of each W row). In group
// j, lane l = 4·g + t (g = l / 4, t = l % 4) loads the 4 bytes 4g .. 4g + 3 of W rows
// n0 + 2t, + 1, + 8, + 9 (its A columns). Byte 4g + i of a row holds k = 64j + 8g + 2i (high
// nibble) and + 1 (low); mma i of the group takes them as rows m = g and m = g + 8:
//
//   W row n (one group, 32 bytes):  | g=0: 4 bytes | g=1 | ... | g=7 |
//
// so lane (g, t) ends with dx at k = 64j + 8g .. + 7 of segment rows 2t and 2t + 1 of each row
// tile: two 16-byte stores per row.
//
// Work: a workgroup owns one (expert, k tile, split of N); its WGS / 32 warps sweep
// consecutive shares of the split's steps, PF steps' codes, scales and g loaded together and
// the next PF steps' loaded before these are multiplied, RT row tiles of 8 segment rows per
// pass over the weights (longer segments take more passes). The warps' sums meet in local
// memory after the sweep. Splits (the host's choice: NSPLIT, raised to fill the compute
// units) write partial sums, added in split order by a second kernel or by the last split
// to finish (SPLIT_SUM, nf4_splits.clh), as in nf4_backward_stream.cl.
//
// Precision by grad type (NF4_TYPE fixes it at build time, else the run-time argument):
// - bf16: the codebook values rounded to bf16 (A) and g · scale rounded to bf16 (B), f32
//   sums: two roundings of at most 2^-8 each, so each product within 2^-7 of |g · w|, the
//   class of a bf16 GEMM on weights dequantized to bf16 (QLoRA's backward, bitsandbytes' own,
//   whose g and dequantized weight are each rounded to bf16 too).
// - f32 and f16: A and B each as three bf16 parts (hi + mid + lo, 24 bits; bf16 keeps f32's
//   exponent range, so nothing is rescaled), six products (hh, hm, mh, mm, hl, lh) into the
//   same sums: the dropped terms are below 2^-25 of each product.
//
// Unaligned problems (K or the window offset not a multiple of 64, block_size 32, or a byte
// offset not a multiple of 4) take a general path: each lane computes its own outputs of
// the same layout with the element-wise decode and f32 products.

#ifndef WGS
#define WGS 128  // work-items per workgroup: WGS / 32 warps sweeping shares of one split's W rows
#endif
#ifndef KG
#define KG 1  // groups of 64 k per workgroup (its k tile: 64·KG k, 4·KG mma a step)
#endif
#ifndef RT
#define RT 1  // row tiles of 8 segment rows per pass over the weights
#endif
#ifndef PF
#define PF 2  // steps of 16 W rows loaded together, the next PF loaded before these are multiplied
#endif
#ifndef NSPLIT
#define NSPLIT 1  // workgroups sharing one (expert, k tile)'s sweep over N (the host's choice; see nf4.cpp)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif
#ifndef SPLIT_SUM
#define SPLIT_SUM 0  // splits added by a second kernel (0) or by the last split, OpenCL C 2.0 atomics (1)
#endif
#ifndef TC_FMA
#define TC_FMA 1  // the table offsets' right shifts as multiplies, on the FMA pipe (nf4_tc.clh)
#endif

#if WGS != 64 && WGS != 128 && WGS != 256
#error "WGS must be 64, 128 or 256"
#endif
#if KG != 1 && KG != 2 && KG != 4
#error "KG must be 1, 2 or 4"
#endif
#if RT != 1 && RT != 2
#error "RT must be 1 or 2"
#endif
#if PF != 1 && PF != 2 && PF != 4
#error "PF must be 1, 2 or 4"
#endif
#if KG * RT > 4
#error "KG * RT must be at most 4 (accumulator registers)"
#endif
#if PF * KG > 4
#error "PF * KG must be at most 4 (registers of the loads in flight)"
#endif
#if NSPLIT < 1
#error "NSPLIT must be at least 1"
#endif

#define TCB_WARPS (WGS / 32)
#define TCB_KTILE (64 * KG)
#define TCB_ACC (16 * KG * RT)  // sums a lane keeps: per row tile and group, 4 mma × 4
#define TCB_ROUND 8             // sums a lane hands over per round of the warps' reduction

#include "nf4_common.clh"
#include "nf4_splits.clh"
#include "nf4_tc.clh"

// f32 / f16 grads: the three-part path (see the top); bf16: one part.
#if defined(NF4_TYPE) && NF4_TYPE == NF4_BF16
#define TCB_PARTS 1
#elif defined(NF4_TYPE)
#define TCB_PARTS 3
#else
#define TCB_PARTS 0  // chosen at run time
#endif

// Two f32 → one register of bf16 pairs (lo in bits 0..15), round to nearest even.
inline uint tcb_bf16x2(const float lo, const float hi) {
#ifdef OCLTK_PTX
  uint r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return nf4_bf16_bits(lo) | (nf4_bf16_bits(hi) << 16);
#endif
}

// (v0, v1) as three registers of bf16 pairs: hi, then the rounded remainders mid and lo.
inline void tcb_split3(const float v0, const float v1, uint* hi, uint* mid, uint* lo) {
  const uint h = tcb_bf16x2(v0, v1);
  const float r0 = v0 - as_float(h << 16), r1 = v1 - as_float(h & 0xFFFF0000u);
  const uint m = tcb_bf16x2(r0, r1);
  *hi = h;
  *mid = m;
  *lo = tcb_bf16x2(r0 - as_float(m << 16), r1 - as_float(m & 0xFFFF0000u));
}

// The three-part table: entry v (byte value: codes v >> 4, then v & 15), copy c (c = lane %
// 8) at 16-byte slot v·8 + c: the pairs' hi, mid and lo parts and a zero. Entry v for a lane
// lies at byte v·128 + (lane % 8)·16, as in the one-part table (tc_fill_table with the
// bf16 type: 32 copies of 4 bytes), so the lookups' offsets are the same. The caller's
// barrier publishes it.
inline void tcb_fill_table3(__local uint4* table, __local const float* cb, const int lid) {
  for (int v = lid; v < 256; v += WGS) {
    uint h, m, l;
    tcb_split3(cb[v >> 4], cb[v & 15], &h, &m, &l);
    table[8 * v] = (uint4)(h, m, l, 0u);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int i = lid; i < 256 * 8; i += WGS)
    if (i & 7) table[i] = table[i & ~7];
}

// A lane's loads of PF steps: code[u][4j + q] = group j's 4 bytes of its row q (rows 2t,
// 2t + 1, 2t + 8, 2t + 9 of step u), sc[u][4j + q] that row's scale of group j, gv[u][4i' +
// q] = g of row tile i' 's segment row (column g) at row q, zero for rows past the split or
// the segment.
typedef struct {
  uint code[PF][4 * KG];
  float sc[PF][4 * KG];
  float gv[PF][4 * RT];
} TcbBatch;

// Loads steps st .. st + PF - 1 (step s covers W rows n_begin + 16·s ..) of the aligned
// path. Rows past N re-read row N - 1, groups past K the row's last group (valid memory,
// never used: their g is zero, their sums are not stored).
inline void tcb_load(TcbBatch* b, const int st, const __global uchar* packed, const __global float* scales,
                     const long expert_pos, const int N, const int K, const int k0, const int n_begin, const int n_end,
                     const int log2_block, const __global uchar* grad, const int type, const int r0, const int seg_end,
                     const int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int u = 0; u < PF; ++u) {
    const int n0 = n_begin + 16 * (st + u);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int n = n0 + 2 * t + (q & 1) + 8 * (q >> 1);
      const long row_pos = expert_pos + (long)min(n, N - 1) * K;
#pragma unroll
      for (int j = 0; j < KG; ++j) {
        const long pos = row_pos + min(k0 + 64 * j, K - 64);
        b->code[u][4 * j + q] = ((const __global uint*)(packed + (pos >> 1)))[g];
        b->sc[u][4 * j + q] = scales[pos >> log2_block];
      }
#pragma unroll
      for (int i = 0; i < RT; ++i) {
        const int r = r0 + 8 * i + g;
        b->gv[u][4 * i + q] = (n < n_end && r < seg_end) ? nf4_load(grad, (long)r * N + n, type) : 0.0f;
      }
    }
  }
}

// One step into acc (row tile i, group j: acc[16·(i·KG + j) + 4·m + v] for mma m, C element
// v), `parts` (1 or 3) being the precision path.
inline void tcb_step(float* acc, const uint* code, const float* sc, const float* gv, const int parts,
                     __local const uchar* table, const uint lane_off, __local uint* scratch, const int lane) {
  TC_UNROLL
  for (int j = 0; j < KG; ++j) {
    const uint p0 = code[4 * j], p1 = code[4 * j + 1], p2 = code[4 * j + 2], p3 = code[4 * j + 3];
    // Pair indices of rows (2t, 2t + 1) and (2t + 8, 2t + 9): high nibbles, low nibbles.
    const uint h01 = bitselect(p1 >> 4, p0, 0xF0F0F0F0u), l01 = bitselect(p1, p0 << 4, 0xF0F0F0F0u);
    const uint h23 = bitselect(p3 >> 4, p2, 0xF0F0F0F0u), l23 = bitselect(p3, p2 << 4, 0xF0F0F0F0u);
    if (parts == 1) {
      uint b0[RT], b1[RT];
#pragma unroll
      for (int i = 0; i < RT; ++i) {
        b0[i] = tcb_bf16x2(gv[4 * i] * sc[4 * j], gv[4 * i + 1] * sc[4 * j + 1]);
        b1[i] = tcb_bf16x2(gv[4 * i + 2] * sc[4 * j + 2], gv[4 * i + 3] * sc[4 * j + 3]);
      }
      TC_UNROLL
      for (int m = 0; m < 4; ++m) {
        const uint a0 = *(__local const uint*)(table + tc_word_off(h01, m, lane_off));
        const uint a1 = *(__local const uint*)(table + tc_word_off(l01, m, lane_off));
        const uint a2 = *(__local const uint*)(table + tc_word_off(h23, m, lane_off));
        const uint a3 = *(__local const uint*)(table + tc_word_off(l23, m, lane_off));
        TC_UNROLL
        for (int i = 0; i < RT; ++i)
          TC_MMA(acc + 16 * (i * KG + j) + 4 * m, a0, a1, a2, a3, b0[i], b1[i], 1, scratch, lane);
      }
    } else {
      uint bh0[RT], bm0[RT], bl0[RT], bh1[RT], bm1[RT], bl1[RT];
#pragma unroll
      for (int i = 0; i < RT; ++i) {
        tcb_split3(gv[4 * i] * sc[4 * j], gv[4 * i + 1] * sc[4 * j + 1], &bh0[i], &bm0[i], &bl0[i]);
        tcb_split3(gv[4 * i + 2] * sc[4 * j + 2], gv[4 * i + 3] * sc[4 * j + 3], &bh1[i], &bm1[i], &bl1[i]);
      }
      TC_UNROLL
      for (int m = 0; m < 4; ++m) {
        const uint4 a0 = *(__local const uint4*)(table + tc_word_off(h01, m, lane_off));
        const uint4 a1 = *(__local const uint4*)(table + tc_word_off(l01, m, lane_off));
        const uint4 a2 = *(__local const uint4*)(table + tc_word_off(h23, m, lane_off));
        const uint4 a3 = *(__local const uint4*)(table + tc_word_off(l23, m, lane_off));
        TC_UNROLL
        for (int i = 0; i < RT; ++i) {
          float* d = acc + 16 * (i * KG + j) + 4 * m;
          // Smallest terms first: they reach the sums before the large ones round them.
          TC_MMA(d, a0.s2, a1.s2, a2.s2, a3.s2, bh0[i], bh1[i], 1, scratch, lane);  // lo · hi
          TC_MMA(d, a0.s0, a1.s0, a2.s0, a3.s0, bl0[i], bl1[i], 1, scratch, lane);  // hi · lo
          TC_MMA(d, a0.s1, a1.s1, a2.s1, a3.s1, bm0[i], bm1[i], 1, scratch, lane);  // mid · mid
          TC_MMA(d, a0.s1, a1.s1, a2.s1, a3.s1, bh0[i], bh1[i], 1, scratch, lane);  // mid · hi
          TC_MMA(d, a0.s0, a1.s0, a2.s0, a3.s0, bm0[i], bm1[i], 1, scratch, lane);  // hi · mid
          TC_MMA(d, a0.s0, a1.s0, a2.s0, a3.s0, bh0[i], bh1[i], 1, scratch, lane);  // hi · hi
        }
      }
    }
  }
}

// Steps st .. min(st + PF, stop) - 1 of a loaded batch.
inline void tcb_steps(float* acc, const TcbBatch* b, const int st, const int stop, const int parts,
                      __local const uchar* table, const uint lane_off, __local uint* scratch, const int lane) {
  TC_UNROLL
  for (int u = 0; u < PF; ++u)
    if (st + u < stop) tcb_step(acc, b->code[u], b->sc[u], b->gv[u], parts, table, lane_off, scratch, lane);
}

// The aligned sweep of steps [st, stop) into acc: two batches take turns, each loaded
// while the other is multiplied.
inline void tcb_sweep(float* acc, const int st, const int stop, const __global uchar* packed,
                      const __global float* scales, const long expert_pos, const int N, const int K, const int k0,
                      const int n_begin, const int n_end, const int log2_block, const __global uchar* grad,
                      const int type, const int r0, const int seg_end, const int parts, __local const uchar* table,
                      const uint lane_off, __local uint* scratch, const int lane) {
  TcbBatch b0, b1;
  if (st < stop)
    tcb_load(&b0, st, packed, scales, expert_pos, N, K, k0, n_begin, n_end, log2_block, grad, type, r0, seg_end, lane);
#pragma unroll 1
  for (int s = st; s < stop; s += 2 * PF) {
    if (s + PF < stop)
      tcb_load(&b1, s + PF, packed, scales, expert_pos, N, K, k0, n_begin, n_end, log2_block, grad, type, r0, seg_end,
               lane);
    tcb_steps(acc, &b0, s, stop, parts, table, lane_off, scratch, lane);
    if (s + 2 * PF < stop)
      tcb_load(&b0, s + 2 * PF, packed, scales, expert_pos, N, K, k0, n_begin, n_end, log2_block, grad, type, r0,
               seg_end, lane);
    if (s + PF < stop) tcb_steps(acc, &b1, s + PF, stop, parts, table, lane_off, scratch, lane);
  }
}

// The general path: the lane's outputs of the same layout (k = k0 + 64j + 8g + 2m + h, segment
// row r0 + 8i + 2t + c at acc[16·(i·KG + j) + 4m + 2h + c]) over W rows [n_first, n_stop),
// element-wise decode, f32 products.
inline void tcb_general(float* acc, const int n_first, const int n_stop, const __global uchar* packed,
                        const __global float* scales, const long expert_pos, const int N, const int K, const int k0,
                        const int log2_block, const __global uchar* grad, const int type, const int r0,
                        const int seg_end, __local const float* cb, const int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (int n = n_first; n < n_stop; ++n) {
    float gv[2 * RT];
    for (int q = 0; q < 2 * RT; ++q) {
      const int r = r0 + 8 * (q >> 1) + 2 * t + (q & 1);
      gv[q] = r < seg_end ? nf4_load(grad, (long)r * N + n, type) : 0.0f;
    }
    const long row_pos = expert_pos + (long)n * K;
#pragma unroll 1
    for (int j = 0; j < KG; ++j)
#pragma unroll 1
      for (int m = 0; m < 4; ++m)
        for (int h = 0; h < 2; ++h) {
          const int k = k0 + 64 * j + 8 * g + 2 * m + h;
          if (k < K) {
            const float w = nf4_decode_one(packed, scales, row_pos + k, log2_block, cb);
            for (int i = 0; i < RT; ++i)
              for (int c = 0; c < 2; ++c) {
                float* a = acc + 16 * (i * KG + j) + 4 * m + 2 * h + c;
                *a = mad(gv[2 * i + c], w, *a);
              }
          }
        }
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_backward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* grad, const int type_arg, const __global uint* offsets,
    __global float* dx, const int splits, __global float* partials, __global uint* counters) {
  __local float cb[16 * NF4_CB_REPLICAS];
  __local uint4 table4[256 * 8];  // 32 KiB: uint4 for the three-part layout's 16-byte lookups
#if SPLIT_SUM == 1
  __local int last;
#endif
#if TCB_WARPS > 1
  __local float red[(TCB_WARPS - 1) * TCB_ROUND * SG];
#endif
#ifndef OCLTK_PTX
  __local uint scratch_all[WGS * 6];  // per warp: the emulated mma's 6·32 words
#endif

#ifdef NF4_TYPE
  const int type = NF4_TYPE;  // built for one element type: only its path is compiled
#else
  const int type = type_arg;
#endif
#if TCB_PARTS != 0
  const int parts = TCB_PARTS;
#else
  const int parts = type == NF4_BF16 ? 1 : 3;
#endif
  const int lid = get_local_id(0);
  const int lane = lid % SG, warp = lid / SG;
  const int g = lane >> 2, t = lane & 3;
#ifdef OCLTK_PTX
  __local uint* scratch = 0;
#else
  __local uint* scratch = scratch_all + warp * SG * 6;
#endif
  const int ktiles = (K + TCB_KTILE - 1) / TCB_KTILE;
  const int tile = get_group_id(0) % ktiles;
  const int s = get_group_id(0) / ktiles;
  const int k0 = tile * TCB_KTILE;
  const int e = expert_base + get_group_id(1);
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;
  if (parts == 1)
    tc_fill_table((__local uint*)table4, cb, 0, NF4_BF16, lid);
  else
    tcb_fill_table3(table4, cb, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint lane_off = parts == 1 ? (uint)lane * 4u : (uint)(lane & 7) * 16u;
  __local const uchar* table = (__local const uchar*)table4;

  packed += packed_offset;
  scales += scales_offset;
  const long expert_pos = element_offset + (long)e * N * (long)K;
  // Uniform: every group of 64 k starts 64-aligned in the stream (inside one block) and its
  // lanes' 4-byte words are aligned.
  const int aligned = K % 64 == 0 && element_offset % 64 == 0 && packed_offset % 4 == 0 && log2_block >= 6;
  const int n_begin = (int)((long)N * s / splits);
  const int n_end = (int)((long)N * (s + 1) / splits);
  // This warp's share of the split's steps of 16 W rows: [st, st_end).
  const int steps = (n_end - n_begin + 15) / 16, per = (steps + TCB_WARPS - 1) / TCB_WARPS;
  const int st = min(warp * per, steps), st_end = min(st + per, steps);
#ifdef OCLTK_PTX
  const int stop = st_end;
#else
  const int stop = st + per;  // the emulated mma's barriers: every warp runs `per` steps (g is 0 past the split)
#endif
  __global float* out = splits > 1 ? partials + (long)s * rows * K : dx;

  for (int r0 = seg_begin; r0 < seg_end; r0 += 8 * RT) {
    float acc[TCB_ACC];
#pragma unroll
    for (int q = 0; q < TCB_ACC; ++q) acc[q] = 0.0f;
    if (aligned)
      tcb_sweep(acc, st, stop, packed, scales, expert_pos, N, K, k0, n_begin, n_end, log2_block, grad, type, r0,
                seg_end, parts, table, lane_off, scratch, lane);
    else
      tcb_general(acc, n_begin + 16 * st, min(n_begin + 16 * st_end, n_end), packed, scales, expert_pos, N, K, k0,
                  log2_block, grad, type, r0, seg_end, cb, lane);

#if TCB_WARPS > 1
      // Warps 1 .. TCB_WARPS - 1 hand their sums to warp 0, TCB_ROUND a lane at a time.
#pragma unroll
    for (int q0 = 0; q0 < TCB_ACC; q0 += TCB_ROUND) {
      if (warp > 0)
#pragma unroll
        for (int v = 0; v < TCB_ROUND; ++v) red[((warp - 1) * TCB_ROUND + v) * SG + lane] = acc[q0 + v];
      barrier(CLK_LOCAL_MEM_FENCE);
      if (warp == 0)
        for (int w = 1; w < TCB_WARPS; ++w)
#pragma unroll
          for (int v = 0; v < TCB_ROUND; ++v) acc[q0 + v] += red[((w - 1) * TCB_ROUND + v) * SG + lane];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    if (warp == 0) {
#pragma unroll
      for (int i = 0; i < RT; ++i)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int r = r0 + 8 * i + 2 * t + c;
          if (r < seg_end) {
#pragma unroll
            for (int j = 0; j < KG; ++j) {
              const int kb = k0 + 64 * j + 8 * g;
              const float* a = acc + 16 * (i * KG + j) + c;  // k = kb + 2m + h at a[4m + 2h]
              __global float* o = out + (long)r * K + kb;
              if (aligned && kb + 8 <= K) {  // 16-byte aligned: K and kb are multiples of 8
                ((__global float4*)o)[0] = (float4)(a[0], a[2], a[4], a[6]);
                ((__global float4*)o)[1] = (float4)(a[8], a[10], a[12], a[14]);
              } else {
#pragma unroll
                for (int q = 0; q < 8; ++q)
                  if (kb + q < K) o[q] = a[2 * q];
              }
            }
          }
        }
    }
  }
#if SPLIT_SUM == 1
  // No early return past this point (see nf4_backward_stream.cl): the tail nests instead.
  if (splits > 1)  // uniform
    nf4_add_splits_last(dx, partials, counters + (long)e * ktiles + tile, &last, splits, rows, K, tile * TCB_KTILE,
                        min(TCB_KTILE, K - tile * TCB_KTILE), seg_begin, seg_end, lid, WGS);
#endif
}

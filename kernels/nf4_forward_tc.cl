// nf4_forward_tc: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's segment,
// for decode on GPUs with tensor cores: the products run as mma.sync m16n8k16 (inline PTX,
// where OCLTK_PTX is defined; elsewhere an exact emulation through local memory, so that
// the same fragment layout is tested on any device). W is the A operand (16 W rows × 16
// codes), the segment rows' x the B operand (16 codes × 8 columns), so one decoded code
// feeds up to 8 segment rows and no reduction across lanes is left after the sweep.
//
// Work: teams of KS warps own batches of RT tiles of 16 consecutive W rows (teams numbered
// globally and batches strided over them, as in nf4_forward_warps.cl); a team's warps split
// K and meet their sums in local memory. A warp sweeps its part of K in steps of 64 codes,
// a span inside one scale block (block_size >= 64), loading codes and scales in groups of
// 4 steps, PF groups ahead of the products, and half-type x one step ahead. Lane
// l = 4·g + t (g = l / 4, t = l % 4) loads, per tile and step, the 8 bytes at byte 8·t of
// the step in W rows g and g + 8 of the tile:
//
//   W row g (and g + 8), one step:  | t=0: 8 bytes | t=1 | t=2 | t=3 |   (32 bytes, 64 codes)
//
// and turns byte 2s (codes k0 + 16t + 4s, +1) and byte 2s + 1 (+2, +3) of each row into the
// A registers of mma s (s = 0 .. 3), one local-memory lookup per byte in a table of the 256
// byte values' code pairs (32 copies; for f32 input 16 of 8 bytes: no bank conflict). For
// the half types only rows g + 8 use the table: the pairs of rows g come from byte permutes
// of two 16-byte tables in registers (tc_prmt_pairs: more instructions, no lookup). On the
// H200 this split ran up to 20 % faster than all lookups and 10 % faster than all permutes
// at RT 1 and 2 (at RT 4 all lookups would be 3 % faster). The sum over k is free to take
// the codes in any order, so the B registers are the x values of the same k: lane (g, t)
// supplies column g's x[k0 + 16t .. k0 + 16t + 15]. The 4 mma of a step accumulate without
// scales; the step's sums are then scaled by the two rows' block scales into f32 sums. The
// first batch's first groups are loaded before the segment's bounds and the table are set
// up; whole groups run their steps without tests between them (TC_FULL).
//
// Precision by input type (a run-time argument, uniform per launch; NF4_TYPE fixes it at
// build time):
// - f16 / bf16: codes and x in the input's type, the codebook value rounded to it (the scale
//   stays f32), the precision class of cuBLAS on weights dequantized to that type; sums in
//   f32. Columns = up to 8 segment rows.
// - f32: codebook values and x each split into two f16 parts (hi + lo, 22 bits; x scaled
//   per row and step by a power of two into f16's range), so products are accurate to about
//   2^-21; sums in f32. Columns = up to 8 segment rows, as for the half types: each step
//   runs the mma three times into the same sums (codebook hi times x hi, codebook lo times x
//   hi, codebook hi times x lo; lo times lo, at most 2^-22 of a product, is left out since
//   2026-11-30m), so a byte is decoded once for 8 rows. (Until 2026-11-30h a column held one
//   part of a row, 4 rows a pass: 8 rows per expert decoded every byte twice.) With FR 4
//   that layout is back as a choice for few rows per expert: columns 2r and 2r + 1 hold
//   segment row r's x hi and lo parts, 4 rows a pass, and two products a step (codebook hi
//   and lo parts) cover all four terms; the two columns' sums are added at the store. x is
//   split by every warp in each step (XS 0) or once per launch by nf4_split_x (XS 1).
// The codebook is scaled by a power of two so that its largest magnitude lies in [2^14,
// 2^15) (f16's range); the stores undo it.
//
// Unaligned problems (K or the window offset not a multiple of 64, block_size 32, K not a
// multiple of the block, or a byte offset not a multiple of 8) take a general path: each
// lane sweeps whole W rows with the element-wise decode, slow but without barriers.

#ifndef WGS
#define WGS 128  // work-items per workgroup: WGS / 32 warps, in teams of KS with their own W rows
#endif
#ifndef RT
#define RT 2  // tiles of 16 W rows per batch (x of a step is loaded once for all)
#endif
#ifndef NB
#define NB 1  // batches per team of KS warps, strided over all teams
#endif
#ifndef PF
#define PF 1  // groups of 4 steps whose codes and scales are loaded ahead of the group being multiplied
#endif
#ifndef LW
#define LW 0  // 1: loads ahead are issued once the group about to be multiplied is in (tc_batch)
#endif
#ifndef KS
#define KS 1  // warps sharing one batch, each sweeping a part of K (sums met in local memory)
#endif
#ifndef XS
#define XS 1  // f32 x split once per launch by nf4_split_x (1) or by every warp in each step (0)
#endif
#ifndef FR
#define FR 8  // f32 x: segment rows a pass, a column each (8) or two, for x's hi and lo parts (4)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif

#define TC_STEP 64  // codes of a W row per step: 8 bytes per lane, 4 mma

#if WGS != 64 && WGS != 128 && WGS != 256
#error "WGS must be 64, 128 or 256"
#endif
#if RT != 1 && RT != 2 && RT != 4
#error "RT must be 1, 2 or 4"
#endif
#if NB != 1 && NB != 4 && NB != 16
#error "NB must be 1, 4 or 16"
#endif
#if PF != 0 && PF != 1 && PF != 2
#error "PF must be 0, 1 or 2"
#endif
#if RT * (PF + 1) > 4
#error "RT * (PF + 1) must be at most 4 (registers of the loads in flight)"
#endif
#if LW != 0 && LW != 1
#error "LW must be 0 or 1"
#endif
#if LW && PF == 0
#error "LW 1 needs PF >= 1 (loads ahead)"
#endif
#if KS != 1 && KS != 2 && KS != 4 && KS != 8
#error "KS must be 1, 2, 4 or 8"
#endif
#if KS > WGS / 32
#error "KS must be at most WGS / 32 (the warps of a workgroup)"
#endif
#if XS != 0 && XS != 1
#error "XS must be 0 or 1"
#endif
#if FR != 8 && FR != 4
#error "FR must be 8 or 4"
#endif
// f32 x, FR 4: column c holds part c % 2 (hi, lo) of segment row c / 2 of the pass.
#define TC_XROW(c) (FR == 4 ? (c) >> 1 : (c))
// Whole groups run their 4 steps without a test between them (tc_group), so one step's
// lookups overlap the previous step's products; with RT 4 the unrolled group needs more
// registers than it saves (H200 lab: 0.080 against 0.057 ms), so there the steps keep their
// tests.
#define TC_FULL (RT <= 2)
#define TC_SLOTS (PF + 1)  // register sets of codes and scales: PF groups in flight, one multiplied
#define TC_GROUP 4         // steps loaded together: 128 contiguous bytes of each W row (8 a lane a step)
#define TC_GSPAN (TC_GROUP * TC_STEP)
#define TC_TEAMS (WGS / 32 / KS)  // teams of KS warps per workgroup, each with its own batches

#include "nf4_common.clh"

// Two ways to take instructions off the integer pipe, where most of the half-type decode runs
// (docs/nf4-kernels.md): whole groups address their codes and x at constant offsets from one pointer
// per row (TC_ADDR), and right shifts run as the high word of a multiply, on the FMA pipe
// (TC_FMA). For half types with RT 2 and 4 they are 4-8 % faster (H200 lab call 14 of
// h200-2026-11-30f, bench of h200-2026-11-30g); with RT 1 the extra live pointers cost more
// registers than they save, and f32 input (RT 2, PF 0) lost 12 %, so those keep plain
// addressing and shifts. Either can be forced with -D for a lab comparison.
#if defined(NF4_TYPE) && NF4_TYPE != NF4_F32 && RT >= 2
#define TC_SPARE_INT 1
#else
#define TC_SPARE_INT 0
#endif
#ifndef TC_ADDR
#define TC_ADDR TC_SPARE_INT
#endif
#ifndef TC_FMA
#define TC_FMA TC_SPARE_INT
#endif

#include "nf4_tc.clh"

// ---- decoding by byte permutes (half types, rows g) --------------------------------------

// prmt.b32 (default mode): byte i of the result is byte c_i & 7 of the 8 bytes {b, a} (a's
// first), or that byte's sign bit replicated where c_i & 8, c_i being nibble i of c.
inline uint tc_prmt(const uint a, const uint b, const uint c) {
#ifdef OCLTK_PTX
  uint d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  const ulong src = ((ulong)b << 32) | a;
  uint d = 0u;
  for (int i = 0; i < 4; ++i) {
    const uint sel = (c >> (4 * i)) & 15u;
    uint byte = (uint)(src >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
#endif
}

// The 16 codes' 16-bit values (the table's, see tc_fill_table) as two 16-byte tables in
// registers: lo[j] holds the low bytes of codes 4j .. 4j + 3, hi[j] their high bytes.
typedef struct {
  uint lo[4], hi[4];
} TcLut;

inline TcLut tc_make_lut(__local const float* cb, const int shift, const int type) {
  const float m = ldexp(1.0f, shift);
  TcLut l;
  for (int j = 0; j < 4; ++j) {
    l.lo[j] = 0u;
    l.hi[j] = 0u;
    for (int i = 0; i < 4; ++i) {
      const float c = cb[4 * j + i] * m;
      const uint h = tc_half_bits(c, type);
      l.lo[j] |= (h & 0xFFu) << (8 * i);
      l.hi[j] |= (h >> 8) << (8 * i);
    }
  }
  return l;
}

// The table's pairs of bytes 2h and 2h + 1 of w (h = 0, 1) without the table: the four codes'
// low bytes and high bytes are looked up 8 entries at a time and chosen by each code's top
// bit, then interleaved into the two pairs (first code in bits 0..15).
inline void tc_prmt_pairs(const uint w, const int h, const TcLut* l, uint* p0, uint* p1) {
  const uint sel = (h ? tc_shr(w, 16) : w) & 0x7777u;          // nibble i: code i's low 3 bits
  const uint top = tc_prmt(w << 4, w, h ? 0xFBEAu : 0xD9C8u);  // byte i: 0xFF where code i >= 8
  const uint lo = bitselect(tc_prmt(l->lo[0], l->lo[1], sel), tc_prmt(l->lo[2], l->lo[3], sel), top);
  const uint hi = bitselect(tc_prmt(l->hi[0], l->hi[1], sel), tc_prmt(l->hi[2], l->hi[3], sel), top);
  // Byte 2h's codes are nibbles 1 (first) and 0, byte 2h + 1's nibbles 3 and 2.
  *p0 = tc_prmt(lo, hi, 0x4051u);
  *p1 = tc_prmt(lo, hi, 0x6273u);
}

// ---- the aligned sweep -----------------------------------------------------------------

// The lane's W rows of a batch: row q = tile q / 2's row g + 8·(q % 2), rows past N
// re-reading row N - 1 (never stored). One pointer to row 0's 8 bytes at the lane's byte 8t
// and one to its scales, and per row offsets from them in bytes and in scales: K is a
// multiple of the block, so each row's scale of a step is its offset plus one index shared
// by all rows.
typedef struct {
  const __global uchar* codes;   // row 0, the lane's 8 bytes of step 0
  const __global float* scales;  // row 0's scale of its first coefficient
  int code_off[2 * RT], scale_off[2 * RT];
} TcRows;

inline TcRows tc_batch_rows(const __global uchar* packed, const __global float* scales, const long expert_pos,
                            const int n0, const int N, const int K, const int log2_block, const int g, const int t) {
  TcRows r;
  const int first = min(n0 + g, N - 1);
  const long pos0 = expert_pos + (long)first * K;
  r.codes = packed + (pos0 >> 1) + 8 * t;
  r.scales = scales + (pos0 >> log2_block);
#pragma unroll
  for (int q = 0; q < 2 * RT; ++q) {
    const int d = min(n0 + 16 * (q >> 1) + g + 8 * (q & 1), N - 1) - first;
    r.code_off[q] = d * (K >> 1);
    r.scale_off[q] = d * (K >> log2_block);
  }
  return r;
}

// A lane's 8 code bytes (8-byte aligned).
inline uint2 tc_load_codes(const __global uchar* p) { return *(const __global uint2*)p; }

// A group's codes and scales: code[s][q] = step s's 8 bytes of row q (rows g and g + 8 of
// tile i at q = 2i, 2i + 1). With shuffles, lane (g, t) loads the scales of step t for its
// rows, and each step takes them from lane 4g + s (tc_group_scale); without, every lane
// loads every step's.
#ifdef OCLTK_PTX
#define TC_GSCALES 1
#else
#define TC_GSCALES TC_GROUP
#endif
typedef struct {
  uint2 code[TC_GROUP][2 * RT];
  float sc[TC_GSCALES][2 * RT];
} TcGroup;

// `after` is 0 (LW: computed from a code of the group about to be multiplied, tc_after);
// `whole` (a constant after inlining) says that the group lies below ke: no load is tested.
inline void tc_load_group(TcGroup* gp, const TcRows* r, const int kg, const int ke, const int emod,
                          const int log2_block, const int lane, const uint after, const int whole) {
  if (TC_ADDR && (whole || kg + TC_GSPAN <= ke)) {
    // A whole group: one address per row, the steps at constant offsets from it.
    const __global uchar* c = r->codes + (kg >> 1) + after;
#pragma unroll
    for (int q = 0; q < 2 * RT; ++q) {
      const __global uchar* cq = c + r->code_off[q];
#pragma unroll
      for (int s = 0; s < TC_GROUP; ++s) gp->code[s][q] = tc_load_codes(cq + s * (TC_STEP / 2));
    }
  } else {
#pragma unroll
    for (int s = 0; s < TC_GROUP; ++s) {
      const int k = kg + s * TC_STEP;
      if (whole || k < ke) {
        const __global uchar* c = r->codes + (k >> 1) + after;
#pragma unroll
        for (int q = 0; q < 2 * RT; ++q) gp->code[s][q] = tc_load_codes(c + r->code_off[q]);
      }
    }
  }
#ifdef OCLTK_PTX
  const int ks = min(kg + TC_STEP * (lane & 3), ke - TC_STEP);  // this lane's step (one inside K)
  const __global float* sp = r->scales + ((emod + ks) >> log2_block) + after;
#pragma unroll
  for (int q = 0; q < 2 * RT; ++q) gp->sc[0][q] = sp[r->scale_off[q]];
#else
#pragma unroll
  for (int s = 0; s < TC_GROUP; ++s) {
    const int k = kg + s * TC_STEP;
    if (k < ke) {
      const __global float* sp = r->scales + ((emod + k) >> log2_block);
#pragma unroll
      for (int q = 0; q < 2 * RT; ++q) gp->sc[s][q] = sp[r->scale_off[q]];
    }
  }
#endif
}

// 0, computed from a code word of the group gp (LW 1): loads given it as `after` wait for
// gp's codes. `zero` is a run-time 0 that NVIDIA's PTX assembler cannot fold.
inline uint tc_after(const TcGroup* gp, const uint zero) { return gp->code[0][0].s0 & zero; }

// Step s's scales of the group's rows.
inline void tc_group_scales(float* sc, const TcGroup* gp, const int s, const int lane) {
#pragma unroll
  for (int q = 0; q < 2 * RT; ++q) {
#ifdef OCLTK_PTX
    sc[q] = nf4_shfl(gp->sc[0][q], (lane & ~3) | s);
#else
    sc[q] = gp->sc[s][q];
#endif
  }
}

// x of a step for the half types: column g = segment row r0 + g (zero past the live rows),
// x[k0 + 16t .. + 15] as 8 registers of pairs; mma s takes registers 2s and 2s + 1.
inline void tc_load_x_half(uint* xb, const __global uchar* x, const long x_at, const int has_row) {
  if (has_row) {
    const __global uint4* p = (const __global uint4*)(x + 2 * x_at);
    const uint4 v0 = p[0], v1 = p[1];
    xb[0] = v0.s0;
    xb[1] = v0.s1;
    xb[2] = v0.s2;
    xb[3] = v0.s3;
    xb[4] = v1.s0;
    xb[5] = v1.s1;
    xb[6] = v1.s2;
    xb[7] = v1.s3;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) xb[i] = 0u;
  }
}

// Adds a step's C fragment d (rows g, g + 8 × columns 2t, 2t + 1) into a, scaled by the two
// rows' block scales and the two columns' factors (1 for the half types; f32: each row's
// x unscale).
inline void tc_add_fragment(float* a, const float* d, const float scale_g, const float scale_g8, const float col0,
                            const float col1) {
  a[0] = mad(scale_g * col0, d[0], a[0]);
  a[1] = mad(scale_g * col1, d[1], a[1]);
  a[2] = mad(scale_g8 * col0, d[2], a[2]);
  a[3] = mad(scale_g8 * col1, d[3], a[3]);
}

// One step of a batch, half-type input, into acc (tile i's C fragment at acc[4i ..]).
inline void tc_step_half(float* acc, const uint2* code, const float* sc, const uint* xb, const int live_step,
                         const int bf, __local const uchar* table, const TcLut* lut, const uint lane_off,
                         __local uint* scratch, const int lane) {
  TC_UNROLL
  for (int i = 0; i < RT; ++i) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    TC_UNROLL
    for (int s = 0; s < 4; ++s) {
      uint a0, a2;  // rows g: byte permutes; rows g + 8: the table
      tc_prmt_pairs(s < 2 ? code[2 * i].s0 : code[2 * i].s1, s & 1, lut, &a0, &a2);
      const uint a1 = *(__local const uint*)(table + tc_byte_off(code[2 * i + 1], 2 * s, lane_off));
      const uint a3 = *(__local const uint*)(table + tc_byte_off(code[2 * i + 1], 2 * s + 1, lane_off));
      TC_MMA(d, a0, a1, a2, a3, xb[2 * s], xb[2 * s + 1], bf, scratch, lane);
    }
    if (live_step) tc_add_fragment(acc + 4 * i, d, sc[2 * i], sc[2 * i + 1], 1.0f, 1.0f);  // else never loaded
  }
}

// 16 consecutive f32 values at p (16-byte aligned) into v.
inline void tc_load16(float* v, const __global float* p) {
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float4 f = ((const __global float4*)p)[q];
    v[4 * q] = f.s0;
    v[4 * q + 1] = f.s1;
    v[4 * q + 2] = f.s2;
    v[4 * q + 3] = f.s3;
  }
}

// 16 f32 values v times 2^shift, split into f16 hi parts (rounded to 11 bits) and the f16
// lo parts of what is left, as 8 registers of pairs each (first value in bits 0..15).
inline void tc_split16(uint* xh, uint* xl, const float* v, const int shift) {
  const float f = tc_pow2(shift);
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const float x0 = v[2 * q] * f, x1 = v[2 * q + 1] * f;
    const float h0 = tc_round11(x0), h1 = tc_round11(x1);
    xh[q] = tc_f16x2(h0, h1);
    xl[q] = tc_f16x2(x0 - h0, x1 - h1);
  }
}

// x of a step for f32 input: column g = segment row r0 + g (FR 4: row r0 + g / 2, odd g
// taking the lo parts into xh; zero past the live rows),
// x[k0 + 16t .. + 15]·2^shift split into f16 hi parts (xh) and lo parts (xl), 8 registers of
// pairs each as in tc_load_x_half, the shift chosen per row and step from its 64 values'
// largest magnitude. Sets out_shift[0], [1] to the shifts of the lane's output columns 2t and
// 2t + 1 (segment rows r0 + 2t, + 1; FR 4: both row r0 + t's).
inline void tc_load_x_f32(uint* xh, uint* xl, int* out_shift, const __global uchar* x, const long x_row0, const int K,
                          const int k0, const int live, const int lane) {
  const int g = lane >> 2, t = lane & 3, row = TC_XROW(g);
  float v[16];
  if (row < live) {
    tc_load16(v, (const __global float*)x + x_row0 + (long)row * K + k0 + 16 * t);
  } else {
#pragma unroll
    for (int q = 0; q < 16; ++q) v[q] = 0.0f;
  }
  float m = 0.0f;
#pragma unroll
  for (int q = 0; q < 16; ++q) m = fmax(m, fabs(v[q]));
#ifdef OCLTK_PTX
  m = fmax(m, nf4_shfl_xor(m, 1));
  m = fmax(m, nf4_shfl_xor(m, 2));
  const int shift = tc_shift_for(m);
  // Columns 2t and 2t + 1 take the shift of their rows from lanes 4·(2t) and 4·(2t + 1)
  // (FR 4: both columns are row t's, lane 4·(2t)'s).
  out_shift[0] = as_int(nf4_shfl(as_float(shift), 8 * t));
  out_shift[1] = as_int(nf4_shfl(as_float(shift), FR == 4 ? 8 * t : 8 * t + 4));
#else
  // The other lanes' values of the step, read again: the emulation has no shuffles.
  const __global float* xf = (const __global float*)x + x_row0;
  if (row < live)
    for (int q = 0; q < TC_STEP; ++q) m = fmax(m, fabs(xf[(long)row * K + k0 + q]));
  const int shift = tc_shift_for(m);
  for (int c = 0; c < 2; ++c) {
    const int rc = TC_XROW(2 * t + c);
    float mo = 0.0f;
    if (rc < live)
      for (int q = 0; q < TC_STEP; ++q) mo = fmax(mo, fabs(xf[(long)rc * K + k0 + q]));
    out_shift[c] = tc_shift_for(mo);
  }
#endif
  tc_split16(xh, xl, v, shift);
#if FR == 4
  if (g & 1)  // the lo column of its row: its part goes into xh, the one register set the step reads
    for (int q = 0; q < 8; ++q) xh[q] = xl[q];
#endif
}

// x of a step for f32 input as nf4_split_x left it (XS 1): the lane's 8 hi and 8 lo
// registers of its column's x[k .. k + 63] part (words k .. k + 7 and k + 32 .. + 39 from
// xs->row), and the step's shifts: on NVIDIA its own column's, which tc_x_unscale shuffles to
// the lanes of the output columns 2t and 2t + 1; elsewhere those two columns' own. `has`: 0
// leaves zeros (a step past the warp's share, run only by the emulation).
typedef struct {
  uint h[8], l[8];
  int sh[2];
} TcX;
typedef struct {
  const __global uint* row;      // the lane's column's pairs at k = 0: xs + row·K + 8t (FR 4: + 32 for lo)
  const __global int* shift[2];  // shifts at k = 0 (see TcX): row·(K / 64) into the table
} TcXSplit;

inline void tc_load_x_split(TcX* xv, const TcXSplit* xs, const int k, const int has) {
  if (has) {
    const __global uint4* p = (const __global uint4*)(xs->row + k);
    const uint4 h0 = p[0], h1 = p[1];
    xv->h[0] = h0.s0, xv->h[1] = h0.s1, xv->h[2] = h0.s2, xv->h[3] = h0.s3;
    xv->h[4] = h1.s0, xv->h[5] = h1.s1, xv->h[6] = h1.s2, xv->h[7] = h1.s3;
#if FR == 8  // FR 4: xs->row points at the column's part, which h holds
    const uint4 l0 = p[8], l1 = p[9];
    xv->l[0] = l0.s0, xv->l[1] = l0.s1, xv->l[2] = l0.s2, xv->l[3] = l0.s3;
    xv->l[4] = l1.s0, xv->l[5] = l1.s1, xv->l[6] = l1.s2, xv->l[7] = l1.s3;
#endif
    xv->sh[0] = xs->shift[0][k >> 6];
#ifdef OCLTK_PTX
    xv->sh[1] = 0;
#else
    xv->sh[1] = xs->shift[1][k >> 6];
#endif
  } else {
#pragma unroll
    for (int q = 0; q < 8; ++q) xv->h[q] = xv->l[q] = 0u;
    xv->sh[0] = xv->sh[1] = 0;
  }
}

// The unscales of output columns 2t and 2t + 1 for x loaded by tc_load_x_split.
inline void tc_x_unscale(float* unscale, const TcX* xv, const int lane) {
#ifdef OCLTK_PTX
  const int t = lane & 3;
  // As in tc_load_x_f32: from lanes 4·(2t) and 4·(2t + 1) (FR 4: both 4·(2t)).
  unscale[0] = tc_pow2(-as_int(nf4_shfl(as_float(xv->sh[0]), 8 * t)));
  unscale[1] = tc_pow2(-as_int(nf4_shfl(as_float(xv->sh[0]), FR == 4 ? 8 * t : 8 * t + 4)));
#else
  unscale[0] = tc_pow2(-xv->sh[0]);
  unscale[1] = tc_pow2(-xv->sh[1]);
#endif
}

// One step of a batch, f32 input, into acc (tile i's C fragment at acc[4i ..], as for the
// half types): codebook hi · x hi, codebook lo · x hi and codebook hi · x lo, three products
// into one fragment per tile (lo · lo is at most 2^-22 of the product), so a decoded byte
// serves 8 segment rows; each column is unscaled by its row's x shift (unscale[0], [1]:
// columns 2t, 2t + 1).
inline void tc_step_f32(float* acc, const uint2* code, const float* sc, const uint* xh, const uint* xl,
                        const int live_step, const float* unscale, __local const uchar* table, const uint lane_off,
                        __local uint* scratch, const int lane) {
  TC_UNROLL
  for (int i = 0; i < RT; ++i) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    TC_UNROLL
    for (int s = 0; s < 4; ++s) {
      const uint2 a0 = *(__local const uint2*)(table + tc_byte_off(code[2 * i], 2 * s, lane_off));
      const uint2 a1 = *(__local const uint2*)(table + tc_byte_off(code[2 * i + 1], 2 * s, lane_off));
      const uint2 a2 = *(__local const uint2*)(table + tc_byte_off(code[2 * i], 2 * s + 1, lane_off));
      const uint2 a3 = *(__local const uint2*)(table + tc_byte_off(code[2 * i + 1], 2 * s + 1, lane_off));
      TC_MMA(d, a0.s0, a1.s0, a2.s0, a3.s0, xh[2 * s], xh[2 * s + 1], 0, scratch, lane);
      TC_MMA(d, a0.s1, a1.s1, a2.s1, a3.s1, xh[2 * s], xh[2 * s + 1], 0, scratch, lane);
#if FR == 8  // FR 4: xh is the column's part, hi or lo, and the two products above are all
      TC_MMA(d, a0.s0, a1.s0, a2.s0, a3.s0, xl[2 * s], xl[2 * s + 1], 0, scratch, lane);
#endif
    }
    if (live_step) tc_add_fragment(acc + 4 * i, d, sc[2 * i], sc[2 * i + 1], unscale[0], unscale[1]);
  }
}

// The loads of a batch's first PF groups (kb: the warp's first step), into slots 0 .. PF - 1.
inline void tc_prologue(TcGroup* grp, const TcRows* rows, const int kb, const int ke, const int emod,
                        const int log2_block, const int lane) {
#pragma unroll
  for (int u = 0; u < PF; ++u) {
    const int kg = kb + u * TC_GSPAN;
    if (kg < ke) tc_load_group(&grp[u], rows, kg, ke, emod, log2_block, lane, 0u, 0);
  }
}

// The steps of one group (kg: its first) below k_stop into acc, from the register set gp; xn
// carries half-type x a step ahead. With `full` (a constant after inlining) all 4 steps lie
// below ke and the loop has no test: the next x is read at a clamped step, and for columns
// past the live rows from row 0 (their sums are never stored).
inline void tc_group(float* acc, const TcGroup* gp, uint* xn, const TcXSplit* xs, const __global uchar* x,
                     const long x_row0, const long x_at, const int K, const int kg, const int ke, const int k_stop,
                     const int full, const int live, const int type, __local const uchar* table, const TcLut* lut,
                     const uint lane_off, __local uint* scratch, const int lane) {
  const int has_row = (lane >> 2) < live;
  const __global uchar* xg = x + 2 * (x_at + kg);  // half types with TC_ADDR: the group's x, its first step
  TC_UNROLL
  for (int s = 0; s < TC_GROUP; ++s) {
    const int k = kg + s * TC_STEP;
    if (!full && k >= k_stop) break;
    const int live_step = full || k < ke;
    uint xb[8];
    float sc[2 * RT];
    if (type == NF4_F32) {
#if XS
      // Split by nf4_split_x, loaded in the step: loaded a step ahead, as the half types' x,
      // they took 6 more registers and 7-15 % more time at the shipped points (H200,
      // 2026-11-30m, with REGS 168).
      TcX cur;
      tc_load_x_split(&cur, xs, k, live_step);
      float unscale[2];
      tc_x_unscale(unscale, &cur, lane);
      tc_group_scales(sc, gp, s, lane);
      tc_step_f32(acc, gp->code[s], sc, cur.h, cur.l, live_step, unscale, table, lane_off, scratch, lane);
#else
      uint xl[8];
      int shifts[2];
      tc_load_x_f32(xb, xl, shifts, x, x_row0, K, k, live_step ? live : 0, lane);
      const float unscale[2] = {tc_pow2(-shifts[0]), tc_pow2(-shifts[1])};
      tc_group_scales(sc, gp, s, lane);
      tc_step_f32(acc, gp->code[s], sc, xb, xl, live_step, unscale, table, lane_off, scratch, lane);
#endif
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) xb[i] = xn[i];
      if (TC_ADDR && full && s < TC_GROUP - 1)
        tc_load_x_half(xn, xg, TC_STEP * (s + 1), 1);  // inside the group: a constant offset
      else if (full)
        tc_load_x_half(xn, x, x_at + min(k + TC_STEP, ke - TC_STEP), 1);
      else
        tc_load_x_half(xn, x, x_at + k + TC_STEP, has_row && k + TC_STEP < ke);
      tc_group_scales(sc, gp, s, lane);
      tc_step_half(acc, gp->code[s], sc, xb, live_step, type == NF4_BF16, table, lut, lane_off, scratch, lane);
    }
  }
}

// The steps [kb, ke) of one batch (a warp's share of K) into acc: tile i's C fragment at
// acc[4i .. 4i + 3] (rows g, g + 8; columns 2t, 2t + 1 = segment rows r0 + 2t, + 1).
// TC_SLOTS register sets (TcGroup: 4 steps of codes and scales) take turns: a group's loads
// are issued PF groups ahead of its products, in the set the previous group freed (on
// NVIDIA the loops are unrolled, so every set is named at compile time). Half-type x comes
// a step ahead (all warps of the expert read it, so mostly from L1); f32 x in its step,
// where it is split. The emulated product's barriers need every work-item to run the same
// steps: there the loop runs to kb_end (the longest share) and the steps past ke multiply
// zeros and add nothing.
inline void tc_batch(float* acc, TcGroup* grp, const int preloaded, const __global uchar* x, const long x_row0,
                     const __global uint* xs, const __global int* xs_shift, const long r0, const int K, const int kb,
                     const int ke, const int kb_end, const int main_end, const int live, const int type,
                     const TcRows* rows, const int emod, const int log2_block, __local const uchar* table,
                     const TcLut* lut, const uint lane_off, __local uint* scratch, const int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int has_row = g < live;
  const long x_at = x_row0 + (long)(has_row ? g : 0) * K + 16 * t;
  // f32 x split by nf4_split_x (XS 1): columns past the live rows read the pass's first
  // row's x and shift (NVIDIA) or its last live row's shift (elsewhere): their sums are never
  // stored.
  TcXSplit xsp;
#if XS
  if (type == NF4_F32) {
    const int xrow = TC_XROW(g) < live ? TC_XROW(g) : 0;
    xsp.row = xs + x_row0 + (long)xrow * K + 8 * t + (FR == 4 ? 32 * (g & 1) : 0);
#ifdef OCLTK_PTX
    xsp.shift[0] = xsp.shift[1] = xs_shift + (r0 + xrow) * (K / TC_STEP);
#else
    for (int c = 0; c < 2; ++c) xsp.shift[c] = xs_shift + (r0 + min(TC_XROW(2 * t + c), live - 1)) * (K / TC_STEP);
#endif
  }
#endif
#ifdef OCLTK_PTX
  const int k_stop = ke;
#else
  const int k_stop = kb_end;
#endif
  if (!preloaded) tc_prologue(grp, rows, kb, ke, emod, log2_block, lane);
  uint xn[8];  // half types: the next step's x, loaded a step ahead
  if (type != NF4_F32) tc_load_x_half(xn, x, x_at + kb, has_row && kb < ke);
  int k0 = kb;
#if LW && TC_FULL
  // LW 1, the steady state (PF >= 1, so RT <= 2 and TC_FULL): rounds whose groups, and those
  // loaded ahead, lie below main_end (ke; with the emulation the same number of rounds for
  // every warp, for its barriers). NVIDIA's PTX assembler gives all code and scale loads one
  // scoreboard, so in the loop below (LW 0) the first use of a group's codes, after the loads
  // ahead were issued, waits for those loads too: a whole memory latency every group (Nsight
  // Compute: a fifth of the stall samples there, results/h200-2026-12-01 at 0d64363). Here the loads
  // ahead take their addresses from a code of the group about to be multiplied (tc_after), so
  // they are issued after the wait for it, and the loop body has no test, so that the
  // assembler can tell the group's other codes are in. It may still spread the loads ahead
  // among the products on a scoreboard that a later use waits for: on the H200 LW 1 won at
  // one shipped problem and lost or tied at the others tried, so it is a tuned choice.
  const uint zero = (uint)K >> 31;  // K >= 0
#pragma unroll 1
  for (; k0 + (TC_SLOTS + PF) * TC_GSPAN <= main_end; k0 += TC_SLOTS * TC_GSPAN) {
    TC_UNROLL
    for (int u = 0; u < TC_SLOTS; ++u) {
      const int kg = k0 + u * TC_GSPAN;
      tc_load_group(&grp[(u + PF) % TC_SLOTS], rows, kg + PF * TC_GSPAN, ke, emod, log2_block, lane,
                    tc_after(&grp[u], zero), 1);
      tc_group(acc, &grp[u], xn, &xsp, x, x_row0, x_at, K, kg, ke, ke, 1, live, type, table, lut, lane_off, scratch,
               lane);
    }
  }
#endif
#pragma unroll 1
  for (; k0 < k_stop; k0 += TC_SLOTS * TC_GSPAN) {
    TC_UNROLL
    for (int u = 0; u < TC_SLOTS; ++u) {
      const int kg = k0 + u * TC_GSPAN;
      if (kg >= k_stop) break;  // uniform (over the warp; with the emulation, the workgroup)
      const int ahead = kg + PF * TC_GSPAN;
      if (ahead < ke) tc_load_group(&grp[(u + PF) % TC_SLOTS], rows, ahead, ke, emod, log2_block, lane, 0u, 0);
      // A whole group inside the warp's steps runs its 4 steps without a test between them,
      // so that one step's lookups overlap the previous step's products.
      if (TC_FULL && kg + TC_GSPAN <= ke)
        tc_group(acc, &grp[u], xn, &xsp, x, x_row0, x_at, K, kg, ke, ke, 1, live, type, table, lut, lane_off, scratch,
                 lane);
      else
        tc_group(acc, &grp[u], xn, &xsp, x, x_row0, x_at, K, kg, ke, k_stop, 0, live, type, table, lut, lane_off,
                 scratch, lane);
    }
  }
}

// ---- the general path ------------------------------------------------------------------

// Unaligned problems: lane l computes W rows n0 + l, n0 + l + 32, ... of the batch, each for
// the live segment rows one by one over the whole of K, with the element-wise decode and
// f32 products: no sums across lanes, no barriers.
inline void tc_batch_general(const __global uchar* x, const int type, const long x_row0, const int K, const int live,
                             const __global uchar* packed, const __global float* scales, const long expert_pos,
                             const int n0, const int N, const int r0, const int log2_block, __local const float* cb,
                             __global uchar* y, const int lane) {
  for (int b = lane; b < 16 * RT; b += SG) {
    const int n = n0 + b;
    if (n >= N) break;
    const long row_pos = expert_pos + (long)n * K;
#pragma unroll 1
    for (int r = 0; r < live; ++r) {  // one segment row at a time: few registers
      float sum = 0.0f;
#pragma unroll 1
      for (int k = 0; k < K; ++k)
        sum = mad(nf4_load(x, x_row0 + (long)r * K + k, type),
                  nf4_decode_one(packed, scales, row_pos + k, log2_block, cb), sum);
      nf4_store(y, (long)(r0 + r) * N + n, type, sum);
    }
  }
}

// A team's sums of tile i meet in red (KS > 1): every warp writes its C fragment (4 values
// per lane), and the team's first warp adds the others'. Every work-item calls it alike.
inline void tc_team_sum(float* acc, __local float* red, const int lid, const int part) {
#if KS > 1
  for (int q = 0; q < 4; ++q) red[q * WGS + lid] = acc[q];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (part == 0)
    for (int q = 0; q < 4; ++q)
      for (int p = 1; p < KS; ++p) acc[q] += red[q * WGS + lid + p * SG];
  barrier(CLK_LOCAL_MEM_FENCE);  // red is rewritten by the next tile
#endif
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type_arg, const __global uint* offsets,
    __global uchar* y, const __global uint* xs, const __global int* xs_shift) {
  __local float cb[16];
  __local uint2 table2[256 * 16];  // uint2: the f32 layout's 8-byte lookups need the alignment
  __local uint* table = (__local uint*)table2;
#if KS > 1
  __local float red[4 * WGS];  // a tile's C fragments of every warp
#else
  __local float* red = 0;
#endif
#ifndef OCLTK_PTX
  __local uint scratch_all[WGS * 6];  // per warp: the emulated mma's 6·32 words
#endif

#ifdef NF4_TYPE
  const int type = NF4_TYPE;  // built for one element type: only its path is compiled
#else
  const int type = type_arg;
#endif
  const int lid = get_local_id(0);
  const int e = expert_base + get_group_id(1);
  packed += packed_offset;
  scales += scales_offset;
  const int lane = lid % SG;
#ifdef OCLTK_PTX
  __local uint* scratch = 0;
#else
  __local uint* scratch = scratch_all + (lid - lane) * 6;
#endif
  // Teams of KS warps: team u of workgroup G is team G·TC_TEAMS + u of all; it takes
  // batches team, team + teams, ... (at most NB), its warps a part of K each.
  const int part = (lid / SG) % KS;
  const int teams = get_num_groups(0) * TC_TEAMS;
  const int first_team = get_group_id(0) * TC_TEAMS;
  const int team = first_team + lid / SG / KS;
  const int batches = (N + 16 * RT - 1) / (16 * RT);
  const long expert_pos = element_offset + (long)e * N * (long)K;
  // Uniform: every step of 64 codes is inside one block, its 8-byte runs are aligned and K
  // is a multiple of the block (so all rows of a step share one scale index past their own).
  const int aligned = K % TC_STEP == 0 && element_offset % TC_STEP == 0 && packed_offset % 8 == 0 && log2_block >= 6 &&
                      (K & ((1 << log2_block) - 1)) == 0;
  const int emod = (int)(element_offset & ((1 << log2_block) - 1));  // every row's offset into its block
  // Segment rows a pass: the 8 columns of B (f32 with FR 4: two columns a row).
  const int tile_rows = type == NF4_F32 ? FR : 8;
  const uint lane_off = tc_lane_off(lane, type);
  const int g = lane >> 2, t = lane & 3;
  // This warp's part of K: steps [kb, ke); kb_end bounds the longest part.
  const int steps = K / TC_STEP, per = (steps + KS - 1) / KS;
  const int kb = min(part * per, steps) * TC_STEP, ke = min((part + 1) * per, steps) * TC_STEP;
  const int kb_end = kb + per * TC_STEP;
#ifdef OCLTK_PTX
  const int main_end = ke;
#else
  // The emulated product's barriers: every warp runs as many steady rounds of LW 1 (tc_batch),
  // as many as the last part's steps allow.
  const int main_end = kb + min(per, max(steps - (KS - 1) * per, 0)) * TC_STEP;
#endif

  // The register sets of the groups in flight (see tc_batch). The first batch's first
  // groups are loaded before anything else: the segment's bounds, the codebook and the
  // table are read and written while they are on their way (an expert without rows drops
  // them).
  TcGroup grp[TC_SLOTS];
#ifndef OCLTK_PTX
  // The emulation runs the steps past ke too (their products are dropped): no value read
  // there is left undefined.
  for (int u = 0; u < TC_SLOTS; ++u) grp[u] = (TcGroup){{{{0u, 0u}}}, {{0.0f}}};
#endif
  const int hoisted = aligned && first_team < batches;
  if (hoisted) {
    const TcRows first_rows = tc_batch_rows(packed, scales, expert_pos, team * 16 * RT, N, K, log2_block, g, t);
    tc_prologue(grp, &first_rows, kb, ke, emod, log2_block, lane);
  }

  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;
  float cmax = 0.0f;
  for (int i = 0; i < 16; ++i) cmax = fmax(cmax, fabs(cb[i]));
  const int cb_shift = tc_shift_for(cmax);
  const float unscale_cb = ldexp(1.0f, -cb_shift);
  tc_fill_table(table, cb, cb_shift, type, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
  const TcLut lut_v = tc_make_lut(cb, cb_shift, type);  // half types (rows g's pairs)
  const TcLut* lut = &lut_v;

  for (int r0 = seg_begin; r0 < seg_end; r0 += tile_rows) {
    const int live = min(tile_rows, seg_end - r0);
    const long x_row0 = (long)r0 * K;
    // Every warp of the workgroup runs the same iterations (uniform bounds), those past the
    // last batch on clamped rows without storing, so the barriers match.
    for (int j = 0; j < NB && first_team + j * teams < batches; ++j) {
      const int n0 = (team + j * teams) * 16 * RT;
      if (!aligned) {
        // Whole W rows per work-item (no sums to meet): the team's KS warps take turns.
        if (part == 0)
          tc_batch_general(x, type, x_row0, K, live, packed, scales, expert_pos, n0, N, r0, log2_block, cb, y, lane);
        continue;
      }
      const TcRows wrows = tc_batch_rows(packed, scales, expert_pos, n0, N, K, log2_block, g, t);
      // Per tile, the C fragment's 4 sums: rows g, g + 8 × segment rows r0 + 2t, + 1.
      float acc[4 * RT];
#pragma unroll
      for (int q = 0; q < 4 * RT; ++q) acc[q] = 0.0f;
      tc_batch(acc, grp, hoisted && r0 == seg_begin && j == 0, x, x_row0, xs, xs_shift, r0, K, kb, ke, kb_end, main_end,
               live, type, &wrows, emod, log2_block, (__local const uchar*)table, lut, lane_off, scratch, lane);
      TC_UNROLL
      for (int i = 0; i < RT; ++i) {
        tc_team_sum(acc + 4 * i, red, lid, part);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int n = n0 + 16 * i + g + 8 * (v >> 1);
          if (type == NF4_F32 && FR == 4) {  // columns 2t and 2t + 1: row t's hi and lo parts
            if ((v & 1) == 0 && part == 0 && n < N && t < live)
              nf4_store(y, (long)(r0 + t) * N + n, type, (acc[4 * i + v] + acc[4 * i + v + 1]) * unscale_cb);
          } else {
            const int r = 2 * t + (v & 1);
            if (part == 0 && n < N && r < live) nf4_store(y, (long)(r0 + r) * N + n, type, acc[4 * i + v] * unscale_cb);
          }
        }
      }
    }
  }
}

// The pre-pass of f32 input (XS = 1; the runtime runs it before nf4_forward where that takes
// the aligned path): x[rows × K] (K a multiple of 64) split per row and step of 64 values
// exactly as tc_load_x_f32 would split it in every warp (the step's shift from its largest
// magnitude, then f16 hi and lo parts), into xs: words row·K + k0 .. + 31 hold the hi pairs
// of the step at k0, + 32 .. + 63 its lo pairs; and the step's shift into
// shift[row·(K / 64) + k0 / 64]. Work-item 4·q + t splits values 16t .. 16t + 15 of (row, step) q; the four meet
// their maxima in local memory.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_split_x(const int rows, const int K,
                                                                           const __global float* x, __global uint* xs,
                                                                           __global int* shift) {
  __local float part[WGS];
  const int lid = get_local_id(0), t = lid & 3;
  const long q = (long)(get_global_id(0) >> 2);  // row·(K / 64) + step
  const long steps = (long)rows * (K / TC_STEP);
  float v[16];
  float m = 0.0f;
  if (q < steps) {
    tc_load16(v, x + q * TC_STEP + 16 * t);
    for (int i = 0; i < 16; ++i) m = fmax(m, fabs(v[i]));
  }
  part[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int b = lid & ~3;
  m = fmax(fmax(part[b], part[b + 1]), fmax(part[b + 2], part[b + 3]));
  if (q >= steps) return;
  const int step_shift = tc_shift_for(m);
  uint xh[8], xl[8];
  tc_split16(xh, xl, v, step_shift);
  __global uint4* o = (__global uint4*)(xs + q * TC_STEP + 8 * t);
  o[0] = (uint4)(xh[0], xh[1], xh[2], xh[3]);
  o[1] = (uint4)(xh[4], xh[5], xh[6], xh[7]);
  o[8] = (uint4)(xl[0], xl[1], xl[2], xl[3]);
  o[9] = (uint4)(xl[4], xl[5], xl[6], xl[7]);
  if (t == 0) shift[q] = step_shift;
}

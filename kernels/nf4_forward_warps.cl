// nf4_forward_warps: y[r, n] = Σ_k x[r, k] · W[e, n, k] for the rows r of expert e's
// segment, written for decode on GPUs (1 to a few rows per expert). Each warp of 32
// work-items owns whole W rows: it sweeps K on its own and reduces its sums by itself, so
// warps never wait for each other (but at the barriers that stage x, with XL > 0, below).
//
// Memory layout (row-major; W is the NF4 stream, see nf4_common.clh):
//
//            K (contiguous)                 K (contiguous, 4-bit)          N (contiguous)
//        +-----------------+           +--------------------+          +---------------+
//  rows  | x[r*K + k]      |   E×N     | W[(e*N + n)*K + k] |   rows   | y[r*N + n]    |
//        +-----------------+           +--------------------+          +---------------+
//
// A W row is cut into chunks of CW codes (CW/2 bytes). W rows come in batches of RB
// consecutive rows; the workgroup's WGS / 32 warps are numbered globally (warp w of
// workgroup g is warp g·WGS/32 + w of G·WGS/32, G workgroups along dimension 0, expert slots
// along dimension 1: nf4_slot_expert) and warp u takes batches u, u + U, u + 2·U, ... (U
// warps in all, at most NB batches each), so warps running side by side read neighbouring
// batches. For a batch, lane l of a warp owns chunk positions c = l, l + 32, l + 64, ... of
// its RB rows (a pass per 32 chunks):
//
//   W row n:  | chunk 0 | chunk 1 | ... | chunk 31 | chunk 32 | ...      (CW/2 bytes each)
//               lane 0    lane 1          lane 31    lane 0
//
// so each load of the warp reads 16·CW contiguous bytes of one W row. Per pass a lane
// loads the x chunk of the TR rows of its tile, its RB code chunks and their scales, then
// multiplies (codes decoded through the 32 KiB pair table of nf4_rows.clh, one 8-byte
// lookup per byte) into RB × TR sums. With PF = 1 the loads of the next pass are issued
// before the current one is decoded (two register sets, unrolled by two). After the K
// sweep the warp's 32 partials of each output are summed: with OCLTK_PTX (the runtime
// defines it on NVIDIA's platform) by warp shuffles, a reduce-scatter that leaves each
// output's sum in a group of lanes, without barriers; elsewhere through local memory, up to
// 8 outputs a round, with barriers that every warp of the workgroup passes alike. Segments
// longer than TR loop over row tiles. Unaligned K, windows or byte offsets take the general
// decode (nf4_rows_general_chunk) for every chunk, without PF.
//
// With XL > 0 (aligned problems) the workgroup stages the tile's x rows in local memory as
// f32, XL codes at a time, and the lanes read their x chunks from there. Loading x from
// global memory, every warp reads it again in every pass, and a warp's 16-byte load of it
// touches 16 (CW 16) or 32 (CW 32) 128-byte lines, each an L1 wavefront; a 16-byte local
// read of 8 lanes is one. Chunk c of a staged segment has its 16-byte units u at unit
// c·CW/4 + (u ^ s(c)), s(c) = (c·CW/32) % (CW/4), so the 8 lanes of each quarter-warp read 8
// different bank groups:
//
//   x tile row t:  | chunk 0: units 0 1 2 3 | chunk 1: 0 1 2 3 | chunk 2: 1 0 3 2 | ...  (CW 16)
//
// Where K <= XL the rows are staged once per tile; otherwise each batch sweeps K in segments
// of XL codes, each staged between two barriers of the workgroup. The staged rows hold the
// codebook until the first staging (the pair table is filled from global memory), so XL
// 4096 at TR 1 takes 16 KiB beside the 32 KiB table: 48 KiB, NVIDIA's limit.

#ifndef WGS
#define WGS 128  // work-items per workgroup: WGS / 32 warps, each with its own W rows
#endif
#ifndef CW
#define CW 16  // codes per lane chunk (16, 32: one 8- or 16-byte load per W row)
#endif
#ifndef RB
#define RB 8  // W rows (output columns) per batch of a warp
#endif
#ifndef TR
#define TR 1  // tile rows: segment rows whose x chunks each lane keeps in registers
#endif
#ifndef NB
#define NB 4  // batches per warp, strided over all warps
#endif
#ifndef PF
#define PF 0  // 1: the next pass's loads are issued before the current pass is decoded
#endif
#ifndef LT
#define LT 0  // 1: a tile's row 0 multiplied without a test (it always exists; nf4_rows.clh)
#endif
#ifndef XL
#define XL 0  // x of the tile rows staged in local memory as f32, XL codes at a time (0: loaded by each warp)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif

#define SG 32  // work-items per warp (sums are reduced within one)
#define NOUT (RB * TR)
#define NF4_ROUND (NOUT < 8 ? NOUT : 8)  // outputs per round of the local-memory reduction
#define NF4_DECODE_WIDTH CW

#if WGS != 64 && WGS != 128 && WGS != 256
#error "WGS must be 64, 128 or 256"
#endif
#if CW != 16 && CW != 32
#error "CW must be 16 or 32"
#endif
#if RB != 4 && RB != 8 && RB != 16
#error "RB must be 4, 8 or 16"
#endif
#if TR != 1 && TR != 2 && TR != 4
#error "TR must be 1, 2 or 4"
#endif
#if NB != 1 && NB != 4 && NB != 16
#error "NB must be 1, 4 or 16"
#endif
#if PF != 0 && PF != 1
#error "PF must be 0 or 1"
#endif
#if NOUT > 32
#error "RB * TR must be at most 32 (accumulator registers)"
#endif
#if LT != 0 && LT != 1
#error "LT must be 0 or 1"
#endif
#if XL != 0 && XL != 2048 && XL != 4096
#error "XL must be 0, 2048 or 4096"
#endif
#define XU (CW / 4)  // 16-byte units of x per chunk

#include "nf4_common.clh"
#include "nf4_rows.clh"

#ifdef OCLTK_PTX
// Sums acc[o] over the 32 lanes of the warp. Reduce-scatter: at level s (lane mask 16 >> s)
// each lane keeps half of its outputs and adds its partner's partials of them, so after
// LV = log2(min(NOUT, 32)) levels lane l holds NOUT >> LV sums in acc[0 ..], of outputs
// i + Σ_s bit(4 - s of l) · (NOUT >> (s + 1)); butterflies over the lane bits below 5 - LV
// complete them. Returns the index of this lane's first output, or -1 where a lane of the
// same outputs (with those low bits 0) stores them.
#if NOUT >= 32
#define NF4_LV 5
#elif NOUT == 16
#define NF4_LV 4
#elif NOUT == 8
#define NF4_LV 3
#elif NOUT == 4
#define NF4_LV 2
#else
#define NF4_LV 1
#endif
// One level of the reduce-scatter: lanes with `mask` set keep outputs half_outputs ..
// 2·half_outputs - 1 of the current set, the others the lower half.
#define NF4_WARP_LEVEL(mask, half_outputs)                         \
  {                                                                \
    const int upper = (lane & (mask)) != 0;                        \
    _Pragma("unroll") for (int i = 0; i < (half_outputs); ++i) {   \
      const float send = upper ? acc[i] : acc[i + (half_outputs)]; \
      const float keep = upper ? acc[i + (half_outputs)] : acc[i]; \
      acc[i] = keep + nf4_shfl_xor(send, (mask));                  \
    }                                                              \
    if (upper) first += (half_outputs);                            \
  }
inline int nf4_warp_sums(float* acc, const int lane) {
  int first = 0;
  NF4_WARP_LEVEL(16, NOUT >> 1)
#if NF4_LV >= 2
  NF4_WARP_LEVEL(8, NOUT >> 2)
#endif
#if NF4_LV >= 3
  NF4_WARP_LEVEL(4, NOUT >> 3)
#endif
#if NF4_LV >= 4
  NF4_WARP_LEVEL(2, NOUT >> 4)
#endif
#if NF4_LV >= 5
  NF4_WARP_LEVEL(1, NOUT >> 5)
#endif
#pragma unroll
  for (int i = 0; i < (NOUT >> NF4_LV); ++i) {
#if NF4_LV <= 4
    acc[i] += nf4_shfl_xor(acc[i], 1);
#endif
#if NF4_LV <= 3
    acc[i] += nf4_shfl_xor(acc[i], 2);
#endif
#if NF4_LV <= 2
    acc[i] += nf4_shfl_xor(acc[i], 4);
#endif
  }
  return (lane & ((32 >> NF4_LV) - 1)) == 0 ? first : -1;
}
#endif

// One pass of the aligned sweep over chunks c0 .. c0 + n - 1 of the W rows: x of chunk
// c0 + c into xv (TR rows; with `staged`, chunk c of the staged segment), codes and scales of
// the RB rows into raw and sc. A chunk past the last (the first load of a lane with nothing
// to sweep, when there are fewer than 32) reads the first instead, and is never multiplied.
// Each call site passes `staged` and, but for a staged segment, c0 (0) as constants.
inline void nf4_warps_load(float* xv, NF4_RUN* raw, float* sc, const __global uchar* x, const long x_row, const int K,
                           const int c0, const int c, const int n, const int live, const int type,
                           const __global uchar* packed, const __global float* scales, const long row_pos,
                           const int nrows, const int log2_block, const int row_blocks, __local const float4* xs,
                           const int staged) {
  const int cc = c < n ? c : 0;
  if (XL > 0 && staged) {
#pragma unroll
    for (int t = 0; t < TR; ++t) {
      if (NF4_LIVE(t, live)) {  // uniform over the workgroup
        // s(c) of the staged layout (the kernel's comment); c and the lane agree on it.
        const int s = (cc * CW / 32) % XU;
#pragma unroll
        for (int u = 0; u < XU; ++u) {
          const float4 v = xs[t * (XL / 4) + cc * XU + (u ^ s)];
          xv[t * CW + 4 * u] = v.s0;
          xv[t * CW + 4 * u + 1] = v.s1;
          xv[t * CW + 4 * u + 2] = v.s2;
          xv[t * CW + 4 * u + 3] = v.s3;
        }
      }
    }
  } else {
    nf4_rows_load_x(xv, x, x_row, K, c0 + cc, live, type);
  }
  nf4_rows_load_w(raw, sc, packed, scales, row_pos, K, nrows, c0 + cc, log2_block, row_blocks);
}

#if XL
// Codes k0 .. k1 - 1 (at most XL, both multiples of CW) of the tile's rows r0 .. r0 + live - 1
// of x into xs as f32, in the staged layout (chunk c of the segment is chunk k0 / CW + c of
// the row); the caller's barriers fence it.
inline void nf4_warps_stage_x(__local float4* xs, const __global uchar* x, const long x_row, const int K, const int k0,
                              const int k1, const int live, const int type, const int lid) {
  for (int t = 0; t < live; ++t) {
    for (int i = lid; i < (k1 - k0) / 4; i += WGS) {
      const int c = i / XU, u = i % XU;
      xs[t * (XL / 4) + c * XU + (u ^ ((c * CW / 32) % XU))] = nf4_load4(x, x_row + (long)t * K + k0 + 4 * i, type);
    }
  }
}
#endif

// This lane's share of the RB × TR sums of one batch over chunks c0 .. c0 + n - 1, every
// chunk aligned (see the kernel): passes over the chunks c0 + lane, c0 + lane + 32, ... One
// instance for all element types (a uniform branch per x load): three would cost registers.
inline void nf4_warps_sweep_aligned(float* acc, const __global uchar* x, const long x_row, const int K, const int c0,
                                    const int n, const int live, const int type, const __global uchar* packed,
                                    const __global float* scales, const long row_pos, const int nrows,
                                    const int log2_block, const int row_blocks, const int lane,
                                    __local const float2* pairs, const uint lane_off, __local const float4* xs,
                                    const int staged) {
  float xa[TR * CW];
  NF4_RUN ra[RB];
  float sa[RB];
  nf4_warps_load(xa, ra, sa, x, x_row, K, c0, lane, n, live, type, packed, scales, row_pos, nrows, log2_block,
                 row_blocks, xs, staged);
#if PF
  float xb[TR * CW];
  NF4_RUN rb[RB];
  float sb[RB];
#pragma unroll 1
  for (int c = lane; c < n; c += 2 * SG) {
    const int has_b = c + SG < n;  // uniform but for the last pass
    if (has_b)
      nf4_warps_load(xb, rb, sb, x, x_row, K, c0, c + SG, n, live, type, packed, scales, row_pos, nrows, log2_block,
                     row_blocks, xs, staged);
#pragma unroll
    for (int b = 0; b < RB; ++b) nf4_rows_pair_fma(acc, b, ra[b], xa, sa[b], live, pairs, lane_off);
    if (!has_b) break;
    if (c + 2 * SG < n)
      nf4_warps_load(xa, ra, sa, x, x_row, K, c0, c + 2 * SG, n, live, type, packed, scales, row_pos, nrows, log2_block,
                     row_blocks, xs, staged);
#pragma unroll
    for (int b = 0; b < RB; ++b) nf4_rows_pair_fma(acc, b, rb[b], xb, sb[b], live, pairs, lane_off);
  }
#else
#pragma unroll 1
  for (int c = lane; c < n; c += SG) {
    if (c != lane)
      nf4_warps_load(xa, ra, sa, x, x_row, K, c0, c, n, live, type, packed, scales, row_pos, nrows, log2_block,
                     row_blocks, xs, staged);
#pragma unroll
    for (int b = 0; b < RB; ++b) nf4_rows_pair_fma(acc, b, ra[b], xa, sa[b], live, pairs, lane_off);
  }
#endif
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const int compact, const long element_offset,
    const int log2_block, const __global uchar* packed, const long packed_offset, const __global float* scales,
    const long scales_offset, const __global float* codebook, const __global uchar* x, const int type,
    const __global uint* offsets, __global uchar* y) {
  __local float2 pairs[256 * 16];
#if XL
  // The staged x rows; until the first tile is staged, the codebook (general decode).
  __local float4 xs[XL / 4 * TR];
  __local float* cb = (__local float*)xs;
#else
  __local float cb[16 * NF4_CB_REPLICAS];
  __local const float4* xs = 0;  // not read: nothing is staged
#endif
#ifndef OCLTK_PTX
  // Outputs o0 .. o0 + NF4_ROUND - 1 meet per round: lane l of warp w's partial of output
  // o0 + i at partial[(w·32 + l)·(NF4_ROUND + 1) + i]. Rounds of at most 8 outputs keep the
  // buffer (and the local memory every build is counted with) small.
  __local float partial[WGS * (NF4_ROUND + 1)];
#endif

  const int lid = get_local_id(0);
  const int e = nf4_slot_expert(offsets, compact, rows, expert_base + get_group_id(1));
  if (e < 0) return;  // a compact launch's slot past the experts with rows (nf4_common.clh)
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;
  nf4_fill_pair_table(pairs, codebook, lid, WGS);  // not from cb, which staged x overwrites (XL)
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint lane_off = nf4_pair_lane_off(lid);

  packed += packed_offset;
  scales += scales_offset;
  const int lane = lid % SG;
  const int warps = get_num_groups(0) * (WGS / SG);
  const int warp = get_group_id(0) * (WGS / SG) + lid / SG;
  const int first_warp = get_group_id(0) * (WGS / SG);
  const int batches = (N + RB - 1) / RB;
  const long expert_pos = element_offset + (long)e * N * (long)K;
  const int chunks = (K + CW - 1) / CW;
  // Uniform: every chunk is CW/2-byte aligned and inside one block (blocks hold >= 32).
  const int aligned = nf4_chunks_aligned(K, element_offset, packed_offset, CW);
  const int row_blocks = nf4_row_blocks(K, log2_block);
  // Uniform: x staged in segments of XL codes; once per tile where K fits one (whole).
  const int staged = XL > 0 && aligned;
  const int whole = staged && K <= XL;

  for (int r0 = seg_begin; r0 < seg_end; r0 += TR) {
    const int live = min(TR, seg_end - r0);
    const long x_row = (long)r0 * K;
#if XL
    if (whole) {
      if (r0 != seg_begin) barrier(CLK_LOCAL_MEM_FENCE);  // every warp is done with the last tile's x
      nf4_warps_stage_x(xs, x, x_row, K, 0, K, live, type, lid);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    // Every warp of the workgroup runs the same iterations (uniform bound), those past the
    // last batch without work, so the barriers of the local-memory reduction match.
    for (int j = 0; j < NB && first_warp + j * warps < batches; ++j) {
      const int batch = warp + j * warps;
      const int n0 = batch * RB;
      const int nrows = batch < batches ? min(RB, N - n0) : 0;  // uniform over the warp
      float acc[NOUT];
#pragma unroll
      for (int o = 0; o < NOUT; ++o) acc[o] = 0.0f;
      const long row_pos = expert_pos + (long)n0 * K;
      if (staged) {
#if XL
        // Where K > XL, segments of XL codes, each staged by the whole workgroup between
        // barriers (every warp is done with the last one); else the tile's rows staged above.
        for (int k0 = 0; k0 < K; k0 += XL) {
          const int k1 = min(K, k0 + XL);
          if (!whole) {
            barrier(CLK_LOCAL_MEM_FENCE);
            nf4_warps_stage_x(xs, x, x_row, K, k0, k1, live, type, lid);
            barrier(CLK_LOCAL_MEM_FENCE);
          }
          if (nrows > 0) {
            if (whole)
              nf4_warps_sweep_aligned(acc, x, x_row, K, 0, chunks, live, type, packed, scales, row_pos, nrows,
                                      log2_block, row_blocks, lane, pairs, lane_off, xs, 1);
            else
              nf4_warps_sweep_aligned(acc, x, x_row, K, k0 / CW, (k1 - k0) / CW, live, type, packed, scales, row_pos,
                                      nrows, log2_block, row_blocks, lane, pairs, lane_off, xs, 1);
          }
        }
#endif
      } else if (nrows > 0) {
        if (aligned) {
          nf4_warps_sweep_aligned(acc, x, x_row, K, 0, chunks, live, type, packed, scales, row_pos, nrows, log2_block,
                                  row_blocks, lane, pairs, lane_off, xs, 0);
        } else {
          for (int c = lane; c < chunks; c += SG)
            nf4_rows_general_chunk(acc, x, x_row, K, c * CW, live, type, packed, packed_offset, scales, row_pos, nrows,
                                   log2_block, cb);
        }
      }
#ifdef OCLTK_PTX
      if (nrows > 0) {
        const int first = nf4_warp_sums(acc, lane);
        if (first >= 0) {
#pragma unroll
          for (int i = 0; i < (NOUT >> NF4_LV); ++i) {
            const int o = first + i, b = o / TR, t = o % TR;
            if (b < nrows && t < live) nf4_store(y, (long)(r0 + t) * N + n0 + b, type, acc[i]);
          }
        }
      }
#else
#pragma unroll
      for (int o0 = 0; o0 < NOUT; o0 += NF4_ROUND) {
#pragma unroll
        for (int i = 0; i < NF4_ROUND; ++i) partial[lid * (NF4_ROUND + 1) + i] = acc[o0 + i];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane < NF4_ROUND) {
          const int o = o0 + lane, b = o / TR, t = o % TR;
          float sum = 0.0f;
          for (int l = lid - lane; l < lid - lane + SG; ++l) sum += partial[l * (NF4_ROUND + 1) + lane];
          if (b < nrows && t < live) nf4_store(y, (long)(r0 + t) * N + n0 + b, type, sum);
        }
        barrier(CLK_LOCAL_MEM_FENCE);  // partial is rewritten by the next round
      }
#endif
    }
  }
}

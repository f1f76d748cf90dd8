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
// serves one expert (group id 1, + expert_base) and up to NB batches, strided by the
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

#include "nf4_common.clh"
// Lab: the codebook entry at byte offset off (a multiple of 4) of cb, and byte j of u.
#ifdef FAKELUT
#define LAB_LUT(cb, off) as_float((uint)(off) | 0x3f800000u)
#else
#define LAB_LUT(cb, off) (*(__local const float*)((__local const uchar*)(cb) + (off)))
#endif
#ifdef PRMT
inline uint lab_prmt(const uint u, const uint zero, const int j) {
  uint r;
  if (j == 0) asm("prmt.b32 %0, %1, %2, 0x4440;" : "=r"(r) : "r"(u), "r"(zero));
  else if (j == 1) asm("prmt.b32 %0, %1, %2, 0x4441;" : "=r"(r) : "r"(u), "r"(zero));
  else if (j == 2) asm("prmt.b32 %0, %1, %2, 0x4442;" : "=r"(r) : "r"(u), "r"(zero));
  else asm("prmt.b32 %0, %1, %2, 0x4443;" : "=r"(r) : "r"(u), "r"(zero));
  return r;
}
#define LAB_BYTE0(u) lab_prmt(u, 0u, 0)
#define LAB_BYTE1(u) lab_prmt(u, 0u, 1)
#define LAB_BYTE2(u) lab_prmt(u, 0u, 2)
#else
#define LAB_BYTE0(u) ((u) & 255u)
#define LAB_BYTE1(u) (((u) >> 8) & 255u)
#define LAB_BYTE2(u) (((u) >> 16) & 255u)
#endif
#define LAB_BYTE3(u) ((u) >> 24)
#if NOUT >= 32
#define RS_LEVELS 5
#elif NOUT == 16
#define RS_LEVELS 4
#elif NOUT == 8
#define RS_LEVELS 3
#elif NOUT == 4
#define RS_LEVELS 2
#else
#define RS_LEVELS 1
#endif
#ifdef SHFL
inline float lab_shfl_xor(const float v, const int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#endif

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

// x[r, c·CW ..] of the live rows of the tile starting at x_row, into registers.
inline void nf4_lanes_load_x(float* xv, const __global uchar* x, const long x_row, const int K, const int c,
                             const int live, const int type) {
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
}

// Chunk c of the RB W rows at stream positions row_pos, row_pos + K, ... (nrows of them):
// codes and scales.
inline void nf4_lanes_load_w(NF4_RUN* raw, float* sc, const __global uchar* packed, const __global float* scales,
                             const long row_pos, const int K, const int nrows, const int c, const int log2_block) {
#pragma unroll
  for (int b = 0; b < RB; ++b) {
    // Rows past N re-read the batch's last row (valid memory); skipped when decoding.
    const long pos = row_pos + (long)min(b, nrows - 1) * K + c * CW;
    raw[b] = *(const __global NF4_RUN*)(packed + (pos >> 1));
    sc[b] = scales[pos >> log2_block];
  }
}

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
                                    const long x_row, const int live, const int type, __local const float* cb, __local const half* pairh, __local const float2* pairf_lane) {
  for (int c = lid; c < chunks; c += WGS) {
    if (first || c != lid) {
      nf4_lanes_load_x(xv, x, x_row, K, c, live, type);
      nf4_lanes_load_w(raw, sc, packed, scales, row_pos, K, nrows, c, log2_block);
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
#if defined(NOLUT)
#pragma unroll
        for (int q = 0; q < CW / 8; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            w[q * 8 + 2 * j] = (float)((words[q] >> (8 * j + 4)) & 15u);
            w[q * 8 + 2 * j + 1] = (float)((words[q] >> (8 * j)) & 15u);
          }
#elif defined(PAIRH)
#pragma unroll
        for (int q = 0; q < CW / 8; ++q)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 v = vload_half2(((words[q] >> (8 * j)) & 255u) * 32 + (get_local_id(0) & 31), pairh);
            w[q * 8 + 2 * j] = v.s0;
            w[q * 8 + 2 * j + 1] = v.s1;
          }
#elif defined(PAIRF)
#pragma unroll
        for (int q = 0; q < CW / 8; ++q) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint byte = j == 0 ? LAB_BYTE0(words[q]) : j == 1 ? LAB_BYTE1(words[q]) : j == 2 ? LAB_BYTE2(words[q]) : LAB_BYTE3(words[q]);
            const float2 v = pairf_lane[byte << 4];
            w[q * 8 + 2 * j] = v.s0;
            w[q * 8 + 2 * j + 1] = v.s1;
          }
        }
#elif defined(ADDR4)
#pragma unroll
        for (int q = 0; q < CW / 8; ++q) {
          const uint hi = (words[q] >> 2) & 0x3C3C3C3Cu, lo = (words[q] << 2) & 0x3C3C3C3Cu;
          w[q * 8 + 0] = LAB_LUT(cb, LAB_BYTE0(hi));
          w[q * 8 + 1] = LAB_LUT(cb, LAB_BYTE0(lo));
          w[q * 8 + 2] = LAB_LUT(cb, LAB_BYTE1(hi));
          w[q * 8 + 3] = LAB_LUT(cb, LAB_BYTE1(lo));
          w[q * 8 + 4] = LAB_LUT(cb, LAB_BYTE2(hi));
          w[q * 8 + 5] = LAB_LUT(cb, LAB_BYTE2(lo));
          w[q * 8 + 6] = LAB_LUT(cb, LAB_BYTE3(hi));
          w[q * 8 + 7] = LAB_LUT(cb, LAB_BYTE3(lo));
        }
#elif !defined(LOADONLY)
        nf4_decode_words(w, words, 1.0f, cb);
#endif
#if defined(LOADONLY)
        uint xo = 0;
#pragma unroll
        for (int q = 0; q < CW / 8; ++q) xo ^= words[q];
        acc[b * TR] = mad(sc[b], as_float(xo & 0x3fffffffu), acc[b * TR]);
#else
        nf4_lanes_fma(acc, b, w, xv, sc[b], live);
#endif
      }
    }
  }
  if (has_next && lid < chunks) {
    // xv still holds chunk lid's x unless this lane swept more than one chunk.
    if (lid + WGS < chunks) nf4_lanes_load_x(xv, x, x_row, K, lid, live, type);
    nf4_lanes_load_w(raw, sc, packed, scales, next_pos, K, next_nrows, lid, log2_block);
  }
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y) {
  __local float cb[16 * NF4_CB_REPLICAS];
#ifdef PAIRH
  __local uint pairh_store[256 * 32];
  __local half* pairh = (__local half*)pairh_store;
  for (int i = get_local_id(0); i < 256 * 32; i += WGS) {
    const int byte = i / 32;
    vstore_half_rte(codebook[byte >> 4], 2 * i, pairh);
    vstore_half_rte(codebook[byte & 15], 2 * i + 1, pairh);
  }
#else
  __local const half* pairh = 0;
#endif
#ifdef PAIRF
  __local float2 pairf[256 * 16];
  for (int i = get_local_id(0); i < 256 * 16; i += WGS) pairf[i] = (float2)(codebook[i >> 8], codebook[(i >> 4) & 15]);
  __local const float2* pairf_lane = pairf + (get_local_id(0) & 15);
#else
  __local const float2* pairf_lane = 0;
#endif
  // Lane l's partial of output o at partial[l·(NOUT+1) + o]: the odd stride keeps both the
  // writes (one lane per bank) and the first-level reads on distinct banks.
#ifdef SHFL
  __local float wsum[(WGS / 32) * NOUT];
#else
  __local float partial[WGS * (NOUT + 1)];
#endif
#if NOUT < WGS && !defined(SHFL)
  __local float part_sums[WGS];  // first-level sums: part p's sum of output o at p·NOUT + o
#endif

  const int lid = get_local_id(0);
  const int e = expert_base + get_group_id(1);
  int seg_begin, seg_end;
  if (!nf4_open_segment(cb, codebook, lid, WGS, offsets, e, rows, &seg_begin, &seg_end)) return;

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
  const int aligned = (K % CW == 0) && (element_offset % CW == 0) && (packed_offset % (CW / 2) == 0);
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
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_F32, cb, pairh, pairf_lane);
        else if (type == NF4_F16)
          nf4_lanes_sweep_aligned(acc, xv, raw, sc, packed, scales, row_pos, nrows, j == 0, has_next, next_pos,
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_F16, cb, pairh, pairf_lane);
        else
          nf4_lanes_sweep_aligned(acc, xv, raw, sc, packed, scales, row_pos, nrows, j == 0, has_next, next_pos,
                                  next_nrows, K, log2_block, lid, chunks, x, x_row, live, NF4_BF16, cb, pairh, pairf_lane);
      } else {
        for (int c = lid; c < chunks; c += WGS) {
          const int k0 = c * CW;
          float xg[TR * CW];
#pragma unroll
          for (int t = 0; t < TR; ++t)
            for (int i = 0; i < CW; ++i)
              xg[t * CW + i] = (t < live && k0 + i < K) ? nf4_load(x, x_row + (long)t * K + k0 + i, type) : 0.0f;
#pragma unroll
          for (int b = 0; b < RB; ++b) {
            if (b < nrows) {
              float w[CW];
              nf4_decode_run(w, packed, packed_offset, scales, row_pos + (long)b * K + k0, K - k0, log2_block, cb);
              nf4_lanes_fma(acc, b, w, xg, 1.0f, live);
            }
          }
        }
      }

#if defined(NORED)
      {
        float sum = 0.0f;
        for (int o = 0; o < NOUT; ++o) sum += acc[o];
        if (sum == 1234.5f) nf4_store(y, (long)r0 * N + n0, type, sum);
      }
#elif defined(SHFL)
      {
        const int lane = lid & 31;
#pragma unroll
        for (int lev = 0; lev < RS_LEVELS; ++lev) {
          const int m = 16 >> lev;
          const int hn = NOUT >> (lev + 1);
          const int upper = (lane & m) != 0;
#pragma unroll
          for (int i = 0; i < hn; ++i) {
            const float send = upper ? acc[i] : acc[i + hn];
            const float keep = upper ? acc[i + hn] : acc[i];
            acc[i] = keep + lab_shfl_xor(send, m);
          }
        }
#pragma unroll
        for (int m = 16 >> RS_LEVELS; m >= 1; m >>= 1) acc[0] += lab_shfl_xor(acc[0], m);
        if ((lane & ((1 << (5 - RS_LEVELS)) - 1)) == 0) {
#pragma unroll
          for (int i = 0; i < (NOUT >> RS_LEVELS); ++i)
            wsum[(lid >> 5) * NOUT + (lane >> (5 - RS_LEVELS)) * (NOUT >> RS_LEVELS) + i] = acc[i];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int o = lid; o < NOUT; o += WGS) {
          const int b = o / TR, t = o % TR;
          float sum = 0.0f;
#pragma unroll
          for (int wp = 0; wp < WGS / 32; ++wp) sum += wsum[wp * NOUT + o];
          if (b < nrows && t < live) nf4_store(y, (long)(r0 + t) * N + n0 + b, type, sum);
        }
      }
#else
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
#endif
      barrier(CLK_LOCAL_MEM_FENCE);  // partial and part_sums are rewritten by the next batch
    }
  }
}

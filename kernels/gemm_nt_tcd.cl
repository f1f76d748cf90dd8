// gemm_nt_tcd: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating) on NVIDIA tensor cores
// with the fragments loaded from global memory straight into registers (algorithm tcd): no local
// tiles, no copies, no barriers (but a K split's sums). For the shapes that stream one big
// operand past a small one, where tc's staging costs more instructions than its reuse saves: the
// LoRA expand (K 16 to 64: C read and written, A and B tiny), the shrink, small batches and gemv
// (one side at most 64 rows: the other operand read once).
//
// Storage and precision as tc's (tc_mma.clh: IN_TYPE, OUT_TYPE, SPLIT; the mma and its exact
// emulation where OCLTK_PTX is not defined); f32 sums, one rounding at the store.
//
// Work: a workgroup of KSPLIT groups of MWARPS × NWARPS warps owns MREP tiles of MWG × NWG, one
// below the other (workgroups row by row over C's tiles), and computes them one after the other;
// warp (wm, wn) of a group the MWT × NWT sub-tile at rows wm·MWT, columns wn·NWT of each, as MI ×
// NI accumulator tiles of 16 × 8. Where K fits one step of the loop (K <= KWD, the LoRA expand)
// the B pieces loaded for the first tile serve the others, so that B's bytes are read once per
// MREP tiles. Group kg sweeps the kg-th of KSPLIT runs of K; at the end the groups' sums go
// through local memory into group 0's, which stores the tile (tc's scheme, gemm_nt_tc.cl).
//
// Loads: the order of K inside an mma does not change the sum as long as A and B take the same
// order, so a lane loads 8·KV contiguous bytes of a row (LE elements) and feeds them to KV mma
// steps: lane 4·g + t reads columns k + LE·t .. of its rows, so that the quad of lanes with the
// same g covers KR = 4·LE columns, and word 2q of the piece is the lane's first fragment word of
// step q (16-bit: logical columns 2t, 2t + 1; tf32: t), word 2q + 1 its second (2t + 8, + 9; t +
// 4). A's rows g and g + 8 of each 16-row tile are A's fragment rows; B's row for column g of an
// 8-column tile is the lane's B fragment. UNR rounds of these loads are issued before their mma
// steps. Pieces past K or past the operand's rows are zeros; where rows are not aligned to the
// piece (lda, ldb or a base off 8·KV bytes) or a piece crosses K, it is assembled from element
// loads.
//
// Columns: with NI a multiple of 4 the warp's B rows are permuted so that lane t's accumulators
// of four 8-column tiles 4·q .. 4·q + 3 are the 8 consecutive columns 32·q + 8·t .. of C (tile
// 4·q + jj, accumulator column c is C column 32·q + 8·(c / 2) + 2·jj + c % 2): a lane reads and
// writes 16 bytes of a 16-bit C (32 of f32) at a time, without exchanges, and PRE 1 reads the old
// C of an accumulate into registers before the product, so that those reads are in flight during
// it (what the LoRA expand waits on). With NI 1 or 2 the columns are the mma's own, C stored two
// elements a lane.
//
// Launch: a 1-D range of ceil(M / (MWG · MREP)) · ceil(N / NWG) workgroups of WGS = 32 · MWARPS
// · NWARPS · KSPLIT work-items. Local memory: 4 · MWG · NWG bytes with KSPLIT > 1, plus the
// emulation's fragment words (tc_mma.clh) where there is no OCLTK_PTX.
//
// The defaults are a rank-16 LoRA expand point (0.021 ms for bf16 4096 × 4096 × 16 in the
// H200's first tune of tcd, results/h200-lora-half/README.md, call 6); the H200's entries
// (configs/nvidia-h200.yaml) are its tuned points.

#ifndef MWG
#define MWG 32  // tile rows (M) per workgroup
#endif
#ifndef NWG
#define NWG 128  // tile columns (N) per workgroup
#endif
#ifndef MWARPS
#define MWARPS 1  // warps along M in a K group
#endif
#ifndef NWARPS
#define NWARPS 2  // warps along N in a K group
#endif
#ifndef KSPLIT
#define KSPLIT 1  // K groups: warp groups each sweeping a run of K, summed at the end
#endif
#ifndef MREP
#define MREP 1  // MWG × NWG tiles a workgroup computes, one below the other
#endif
#ifndef KV
#define KV 1  // mma steps per load: a lane loads 8·KV bytes of a row
#endif
#ifndef UNR
#define UNR 1  // rounds of loads issued before their mma steps
#endif
#ifndef PRE
#define PRE 1  // 1: an accumulate's old C read before the product (NI a multiple of 4)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime; not read here
#endif
// tc_mma.clh's staging parameters, which this kernel does not use (no local tiles).
#define KCH 2
#define STAGES 2
#define CPASYNC 0
#define LDSM 0
#define SWZ 0
#define TC_COPY_B 1

#include "tc_mma.clh"

#define LB (8 * KV)          // bytes of a row a lane loads per round
#define LE (LB / ESIZE)      // elements of those
#define KR (4 * LE)          // K columns of a round (the four lanes of a quad)
#define KWD (UNR * KR)       // K columns of a step of the loop
#define QUADN (NI % 4 == 0)  // lane t owns 8 consecutive columns of four tiles

#if KV != 1 && KV != 2
#error "KV must be 1 or 2"
#endif
#if UNR != 1 && UNR != 2 && UNR != 4
#error "UNR must be 1, 2 or 4"
#endif
#if MREP != 1 && MREP != 2 && MREP != 4 && MREP != 8
#error "MREP must be 1, 2, 4 or 8"
#endif
#if PRE != 0 && PRE != 1
#error "PRE must be 0 or 1"
#endif
#if PRE && !QUADN
#error "PRE 1 needs NWG / NWARPS a multiple of 32 (lanes owning 8 consecutive columns)"
#endif

// The old C of a vector store: prefetched (PRE 1), else read by store_c8.
#if PRE
#define OLD_C(i, h, q) old[i][h][q]
#else
#define OLD_C(i, h, q) CVEC_ZERO
#endif

// Column (from the warp's first) of accumulator column c of 8-column tile j.
inline int tile_col(const int j, const int c) {
#if QUADN
  return 32 * (j >> 2) + 8 * (c >> 1) + 2 * (j & 3) + (c & 1);
#else
  return 8 * j + c;
#endif
}

// The lane's piece of row `row` of X (`rows` rows) from column k: LE elements (words 0 .. 2·KV
// - 1 of the result), zeros past K and past the rows; one vector load where `vec` (rows and base
// aligned to the piece) and the piece lies inside K.
inline uint4 load_piece(const __global elem_t* X, const int ldx, const int row, const int rows, const int k,
                        const int K, const int vec) {
  if (row >= rows) return (uint4)(0u);
  const __global elem_t* p = X + (long)row * ldx + k;
  if (vec && k + LE <= K) {
#if KV == 2
    return *(const __global uint4*)p;
#else
    const uint2 w = *(const __global uint2*)p;
    return (uint4)(w.x, w.y, 0u, 0u);
#endif
  }
  return load_chunk_elements(p, clamp(K - k, 0, LE));
}

inline uint piece_word(const uint4 v, const int w) { return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w; }

inline void gemm_nt_tcd_body(const int M, const int N, const int K, const float alpha, const __global elem_t* A,
                             const int lda, const __global elem_t* B, const int ldb, __global out_t* C, const int ldc,
                             const int accumulate, __local float* red, __local uint* scratch) {
  const int lid = get_local_id(0), kg = lid / GWS, glid = lid % GWS, lane = lid & 31, warp = glid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tiles_n = (N + NWG - 1) / NWG, b = get_group_id(0);
  const int n0 = b % tiles_n * NWG + (warp % NWARPS) * NWT;
  const int vec = lda % LE == 0 && ldb % LE == 0 && ((ulong)A % LB) == 0 && ((ulong)B % LB) == 0;
  const int live = kg == 0;
  // C's rows aligned for 16-byte (32 for f32: 8 elements) accesses where a lane owns 8 columns.
  const int cvec = ((ulong)C & 15) == 0 && ldc % (16 / (int)sizeof(out_t)) == 0;

  // Group kg takes steps kg·steps .. (kg + 1)·steps - 1; steps past K load zeros, so that every
  // work-item runs the same loops (the emulation's barriers).
  const int steps = ((K + KWD - 1) / KWD + KSPLIT - 1) / KSPLIT, k_base = kg * steps * KWD;
  uint4 pb[UNR][NI];  // B's pieces, kept from tile to tile where steps == 1
#pragma unroll 1
  for (int rep = 0; rep < MREP; ++rep) {
    const int m0 = (b / tiles_n * MREP + rep) * MWG + (warp / NWARPS) * MWT;
    float acc[MI][NI][4];
    TC_UNROLL
    for (int i = 0; i < MI; ++i) {
      TC_UNROLL
      for (int j = 0; j < NI; ++j) {
        TC_UNROLL
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
      }
    }

#if PRE
    cvec_t old[MI][2][NI / 4];  // the old C of the lane's vector stores (OLD_C)
    prefetch_c(old, M, N, C, ldc, accumulate, m0, n0, lane, live, cvec);
#endif

#pragma unroll 1
    for (int s = 0; s < steps; ++s) {
      uint4 pa[UNR][MI][2];
      const int load_b = rep == 0 || steps > 1;
      TC_UNROLL
      for (int u = 0; u < UNR; ++u) {
        const int k = k_base + s * KWD + u * KR + LE * t;
        TC_UNROLL
        for (int i = 0; i < MI; ++i) {
          pa[u][i][0] = load_piece(A, lda, m0 + 16 * i + g, M, k, K, vec);
          pa[u][i][1] = load_piece(A, lda, m0 + 16 * i + g + 8, M, k, K, vec);
        }
        if (load_b) {
          TC_UNROLL
          for (int j = 0; j < NI; ++j) pb[u][j] = load_piece(B, ldb, n0 + tile_col(j, g), N, k, K, vec);
        }
      }
      TC_UNROLL
      for (int u = 0; u < UNR; ++u) {
        TC_UNROLL
        for (int q = 0; q < KV; ++q) {
          uint a[MI][4], bf[NI][2];
          TC_UNROLL
          for (int i = 0; i < MI; ++i) {
            a[i][0] = piece_word(pa[u][i][0], 2 * q);
            a[i][1] = piece_word(pa[u][i][1], 2 * q);
            a[i][2] = piece_word(pa[u][i][0], 2 * q + 1);
            a[i][3] = piece_word(pa[u][i][1], 2 * q + 1);
          }
          TC_UNROLL
          for (int j = 0; j < NI; ++j) {
            bf[j][0] = piece_word(pb[u][j], 2 * q);
            bf[j][1] = piece_word(pb[u][j], 2 * q + 1);
          }
          mma_product(acc, a, bf, scratch, lane);
        }
      }
    }

#if KSPLIT > 1
    sum_k_groups(acc, red, kg, glid);  // the groups' sums into group 0's
#endif

    if (!live) continue;
    TC_UNROLL
    for (int i = 0; i < MI; ++i) {
      TC_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + 16 * i + g + 8 * h;
        if (m >= M) continue;
#if QUADN
        TC_UNROLL
        for (int q = 0; q < NI / 4; ++q) {
          const int n = n0 + 32 * q + 8 * t;
          if (n >= N) continue;
          float v[8];
          TC_UNROLL
          for (int e = 0; e < 8; ++e) v[e] = acc[i][4 * q + (e >> 1)][2 * h + (e & 1)];
          store_c8(C + (long)m * ldc + n, n, N, cvec_inside(m, n, M, N, cvec), alpha, v, accumulate, PRE,
                   OLD_C(i, h, q));
        }
#else
        TC_UNROLL
        for (int j = 0; j < NI; ++j) {
          const int n = n0 + 8 * j + 2 * t;
          if (n >= N) continue;
          __global out_t* c = C + (long)m * ldc + n;
          store_element(c, alpha, acc[i][j][2 * h], accumulate);
          if (n + 1 < N) store_element(c + 1, alpha, acc[i][j][2 * h + 1], accumulate);
        }
#endif
      }
    }
  }
}

#if KSPLIT > 1
#define RED_DECL __local float red[MWG * NWG]
#else
#define RED_DECL __local float* red = 0
#endif
#ifdef OCLTK_PTX
#define SCRATCH_DECL __local uint* scratch = 0
#else
#define SCRATCH_DECL                                  \
  __local uint scratch_all[WGS / 32 * SCRATCH_WORDS]; \
  __local uint* scratch = scratch_all + (get_local_id(0) >> 5) * SCRATCH_WORDS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  RED_DECL;
  SCRATCH_DECL;
  gemm_nt_tcd_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, red, scratch);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  RED_DECL;
  SCRATCH_DECL;
  gemm_nt_tcd_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, red, scratch);
}

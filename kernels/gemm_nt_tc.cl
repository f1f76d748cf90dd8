// gemm_nt_tc: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating) on NVIDIA tensor cores:
// mma.sync (inline PTX where OCLTK_PTX is defined; elsewhere an exact emulation with the same
// fragment layouts, so that any OpenCL device, PoCL in CI, verifies them), f32 sums, one
// rounding at the store.
//
// Memory layout (row-major; element offsets and leading dimensions given at launch):
//
//        A: M×K, A[m*lda + k]      B: N×K, B[n*ldb + k]      C: M×N, C[m*ldc + n]
//
// Both operands are contiguous along K, the order in which mma.sync's `row.col` form takes
// them (A by rows, B by columns of Bᵀ): tiles are copied to local memory as they lie, rows
// of KCH 16-byte chunks (KWG elements), without a transpose.
//
// Storage and precision are build variants the runtime adds for a launch (runtime/src/gemm_nt.cpp,
// gemm_nt_launch_variant), not tunable parameters, hence no #ifndef blocks: IN_TYPE, the type of A
// and B, and OUT_TYPE, C's (ElementType's values as in element_types.clh: 0 f32, 1 f16, 2 bf16; C
// is A's type or f32), and SPLIT, read for f32 storage only.
// f16 or bf16 are held as ushort bits (NVIDIA's OpenCL has no cl_khr_fp16) and multiplied by
// m16n8k16 as they are; f32 is multiplied by m16n8k8 in tf32: SPLIT 1 rounds each operand to tf32
// (11 significant bits), SPLIT 3 splits each into a tf32 big part and the f32 remainder and adds
// big·big + big·small + small·big (3×TF32; small·small, at most 2^-22 of a product, is left out).
// Operands are rounded to nearest, ties away (the rounding of cvt.rna.tf32.f32), by integer
// operations that PoCL and the GPU run alike; the remainder is passed as it is and mma.sync reads
// a word's top 19 bits (its tf32 truncation, which the emulation does too): two integer operations
// an element fewer than rounding it, 1.92 → 1.84 ms at 4096³ on the H200, for twice the split's
// error. Sums are f32; C gets alpha · sum (+ old C) rounded once to its type (round to nearest even).
//
// Work: a workgroup of MWARPS × NWARPS warps owns an MWG × NWG tile of C; warp (wm, wn) the
// MWT × NWT sub-tile at rows wm·MWT, columns wn·NWT (MWT = MWG / MWARPS, NWT = NWG / NWARPS),
// held as MI × NI accumulator tiles of 16 × 8 (4 f32 per lane each). Workgroups walk the tiles
// of C in groups of GM tile rows, column by column inside a group, so that the workgroups
// running at once share A and B tiles in L2.
//
// K is swept in steps of KWG = KCH · 16 / (bytes per element) columns (8·KCH for f16 and bf16,
// 4·KCH for f32): each step's A tile (MWG × KWG) and B tile (NWG × KWG) go to one
// of STAGES local buffers. CPASYNC 1 and 2: cp.async copies the tile STAGES − 1 steps ahead of
// the one being multiplied, without passing through registers (emulated: plain copies at the
// same point), past L1 (.cg, 1) or through it (.ca, 2); CPASYNC 0: the next step's chunks are
// loaded into registers before the multiply and stored after it (two buffers). One barrier per
// step. Rows past M or N and columns past K are zero-filled (cp.async's source size), so edge
// tiles need no tests in the multiply; where a row or the base is not 16-byte aligned (lda,
// ldb or an offset not a multiple of 16 bytes) chunks are assembled from element loads instead.
//
// Local memory of a stage: MWG + NWG rows (A's, then B's) of CH = KCH chunks:
//   SWZ 0: chunk c of row r at byte 16·(r·CH + c);
//   SWZ 1: at 16·((r·CH + c) ^ x(r)), x(r) the index of the row's 128-byte line (CH < 8) or r
//          (CH >= 8), mod 8: the 8 rows an ldmatrix (or a fragment's word loads) reads land in
//          8 distinct 16-byte bank groups;
//   SWZ 2: rows padded to 16·(CH + 1) bytes: the same effect, at 16 bytes a row.
//
// Fragments, lane l = 4·g + t (g = l / 4, t = l % 4), PTX ISA's layouts, as 32-bit words; an
// mma reads chunks kc and kc + 1 of its rows (16 halves or 8 floats of K), and "row r, chunk c"
// means word t of that chunk: a0 = (A row g, kc), a1 = (A row g + 8, kc), a2 = (A row g, kc + 1),
// a3 = (A row g + 8, kc + 1); b0 = (B row g, kc), b1 = (B row g, kc + 1); the accumulator tile
// c0, c1 = C[g][2t, 2t + 1], c2, c3 = C[g + 8][2t, 2t + 1]. A word holds two halves (the lower
// k in bits 0..15) or one f32. LDSM 1 loads them with ldmatrix .x4 (A: one per 16-row tile; B:
// one per two 8-row tiles), LDSM 0 with one local load per word.
//
// Launch: a 1-D range of ceil(M / MWG) · ceil(N / NWG) workgroups of WGS = 32 · MWARPS · NWARPS
// work-items; local memory STAGES · (MWG + NWG) · ROWB bytes (ROWB = 16 · KCH, + 16 with SWZ 2;
// NVIDIA's OpenCL allows 48 KiB a workgroup), plus, without OCLTK_PTX, the emulation's
// MWARPS · NWARPS · (4 · MI + 2 · NI) · 128 bytes. Needs sm_80 or newer where OCLTK_PTX is
// defined (mma.sync m16n8k16 / m16n8k8 tf32, ldmatrix, cp.async). Accuracy: products are exact
// and sums f32 for the 16-bit types; 3×TF32 stays within the f32 bound of docs/verification.md
// from K = 8 on (H200: at most 0.67 of it for K = 8 .. 4096, at K = 9; 0.31 with the remainder
// rounded), but the split's own error per product (up to about 20 units of f32 rounding) can
// exceed the bound's γ(K + 2) at tiny K (with the remainder rounded, H200: up to 1.9× it at K = 1,
// 1.3× at K = 2): problems with K < 8 belong to a SIMT kernel. Non-finite f32 inputs give NaN
// under 3×TF32 (inf − inf in the split).
//
// The defaults are the fastest point measured on the H200 for bf16 at 8192³: 128 × 128 tiles of
// 2 × 2 warps, KCH 4, 3 stages (48 KiB), the XOR swizzle, cp.async through L1 (3.54 ms, 310
// TFLOP/s; f16 3.64 ms). What bounds it there is the copy from L2 into local memory, not the
// tensor cores or ldmatrix: without its mma the loop kept 85 % of its time, and only with the
// copies through L1 did a third stage pay off (results/h200-tc-half/README.md has the figures
// and the points tried). For f32 at 4096³ the fastest 3×TF32 point was KCH 2 (KWG 8), STAGES 4,
// SWZ 1, CPASYNC 1 (71 TFLOP/s); TF32 ran at 137 with KCH 4, 2 stages, padded rows.

#if !defined(IN_TYPE)
#define IN_TYPE 2
#endif
#if !defined(OUT_TYPE)
#define OUT_TYPE IN_TYPE
#endif
#if !defined(SPLIT)
#define SPLIT 3
#endif
#ifndef MWG
#define MWG 128  // tile rows (M) per workgroup
#endif
#ifndef NWG
#define NWG 128  // tile columns (N) per workgroup
#endif
#ifndef KCH
#define KCH 4  // 16-byte chunks of K per local row and stage (KWG: 8 KCH for f16 and bf16, 4 KCH for f32)
#endif
#ifndef MWARPS
#define MWARPS 2  // warps along M in a workgroup
#endif
#ifndef NWARPS
#define NWARPS 2  // warps along N in a workgroup
#endif
#ifndef STAGES
#define STAGES 3  // local buffers of A and B tiles (copies run STAGES - 1 steps ahead)
#endif
#ifndef CPASYNC
#define CPASYNC 2  // copies to local memory: 1 cp.async past L1 (.cg), 2 cp.async through L1 (.ca), 0 via registers
#endif
#ifndef LDSM
#define LDSM 1  // 1 fragments by ldmatrix, 0 by one local load per word
#endif
#ifndef SWZ
#define SWZ 1  // local rows: 0 plain, 1 XOR-swizzled chunks, 2 padded by 16 bytes
#endif
#ifndef GM
#define GM 8  // tile rows per group of the workgroups' walk over C (1: row by row)
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime (params.hpp); not read here
#endif

#define TYPE IN_TYPE                            // storage of A and B
#define CF32 (IN_TYPE != 0 && OUT_TYPE == 0)  // 16-bit A and B, C in f32
#define TC_F32 0
#define TC_F16 1
#define TC_BF16 2

#define ESIZE (TYPE == TC_F32 ? 4 : 2)      // bytes per stored element
#define CV (16 / ESIZE)                     // elements per 16-byte chunk
#define KSTEP (TYPE == TC_F32 ? 8 : 16)     // K of one mma: two chunks
#define CH KCH                              // chunks per local row
#define KWG (KCH * CV)                      // K columns per stage
#define KSTEPS (KWG / KSTEP)                // mma steps per stage
#define WGS (32 * MWARPS * NWARPS)          // work-items per workgroup
#define MWT (MWG / MWARPS)                  // warp tile rows
#define NWT (NWG / NWARPS)                  // warp tile columns
#define MI (MWT / 16)                       // 16-row mma tiles per warp
#define NI (NWT / 8)                        // 8-column mma tiles per warp
#define ROWB (16 * CH + (SWZ == 2 ? 16 : 0))  // bytes per local row
#define STAGEB ((MWG + NWG) * ROWB)         // bytes per stage
#define A_COPIES ((MWG * CH + WGS - 1) / WGS)  // chunks of the A tile per work-item and stage (at most)
#define B_COPIES ((NWG * CH + WGS - 1) / WGS)
#define RPR (WGS / CH)                      // tile rows one round of copies covers

#if TYPE != TC_F32 && TYPE != TC_F16 && TYPE != TC_BF16
#error "IN_TYPE must be 0 (f32), 1 (f16) or 2 (bf16)"
#endif
#if OUT_TYPE != IN_TYPE && OUT_TYPE != TC_F32
#error "OUT_TYPE must be IN_TYPE or 0 (f32)"
#endif
#if SPLIT != 1 && SPLIT != 3
#error "SPLIT must be 1 or 3"
#endif
#if MWARPS < 1 || NWARPS < 1 || MWARPS * NWARPS > 16
#error "MWARPS and NWARPS must be at least 1, with at most 16 warps a workgroup"
#endif
#if MWG % (16 * MWARPS) != 0
#error "MWG must be a multiple of 16 * MWARPS (whole 16-row mma tiles per warp)"
#endif
#if NWG % (8 * NWARPS) != 0
#error "NWG must be a multiple of 8 * NWARPS (whole 8-column mma tiles per warp)"
#endif
#if LDSM && NI % 2 != 0
#error "LDSM 1 loads B fragments of two 8-column tiles at once: NWG / NWARPS must be a multiple of 16"
#endif
#if KCH != 2 && KCH != 4 && KCH != 8 && KCH != 16
#error "KCH must be 2, 4, 8 or 16 (chunk pairs feed the mma's K)"
#endif
#if A_COPIES + B_COPIES > 32
#error "at most 32 chunks per work-item and stage (a bit each in copy_plan.rows_ok): use more warps or smaller tiles"
#endif
#if STAGES < 2 || STAGES > 4
#error "STAGES must be 2, 3 or 4"
#endif
#if CPASYNC < 0 || CPASYNC > 2
#error "CPASYNC must be 0, 1 or 2"
#endif
#if CPASYNC == 0 && STAGES != 2
#error "CPASYNC 0 (copies through registers) uses exactly two buffers: STAGES must be 2"
#endif
#if LDSM != 0 && LDSM != 1
#error "LDSM must be 0 or 1"
#endif
#if SWZ < 0 || SWZ > 2
#error "SWZ must be 0, 1 or 2"
#endif
#if GM < 1
#error "GM must be at least 1"
#endif

#if TYPE == TC_F32
typedef float elem_t;
#else
typedef ushort elem_t;
#endif
#if TYPE == TC_F32 || CF32
typedef float out_t;
#else
typedef ushort out_t;
#endif

// Loops over fragments and tiles: unrolled on NVIDIA (register arrays indexed by constants);
// kept rolled where the product is emulated, whose barriers would multiply with every copy.
#ifdef OCLTK_PTX
#define TC_UNROLL _Pragma("unroll")
#else
#define TC_UNROLL _Pragma("unroll 1")
#endif

// ---- numbers ----------------------------------------------------------------------------

// f32 bits rounded to tf32 (10 fraction bits), to nearest with ties away from zero, low 13
// bits cleared: cvt.rna.tf32.f32. Overflow gives infinity; NaN stays NaN.
inline uint tf32_rna(const uint u) { return (u + 0x1000u) & 0xFFFFE000u; }

// f32 → f16 bits, round to nearest even (overflow to infinity, NaN to a quiet NaN).
inline uint f16_bits(const float v) {
  const uint u = as_uint(v), s = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a >= 0x47800000u) return s | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (a < 0x38800000u) return s | (uint)rint(as_float(a) * 16777216.0f);  // subnormal: units of 2^-24
  return s | ((a + 0xFFFu + ((a >> 13) & 1u) - 0x38000000u) >> 13);
}

// f32 → bf16 bits, round to nearest even (NaN to a quiet NaN).
inline uint bf16_bits(const float v) {
  const uint u = as_uint(v);
  return (v != v) ? 0x7FC0u : (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

#if TYPE != TC_F32 && !CF32
inline out_t to_out(const float v) { return (out_t)(TYPE == TC_BF16 ? bf16_bits(v) : f16_bits(v)); }
#else
inline out_t to_out(const float v) { return v; }
#endif

#if TYPE != TC_F32
// 16-bit bits (low 16 of h) of the storage type → f32, exactly.
inline float half_value(const uint h) {
#if TYPE == TC_BF16
  return as_float((h & 0xFFFFu) << 16);
#else
  const uint em = h & 0x7FFFu;
  const float mag = em >= 0x7C00u   ? as_float(0x7F800000u | ((em & 0x3FFu) << 13))
                    : em >= 0x0400u ? as_float((em << 13) + 0x38000000u)
                                    : (float)em * 5.9604645e-8f;
  return (h & 0x8000u) ? -mag : mag;
#endif
}
#endif

#if TYPE == TC_F32 || CF32
inline float from_out(const out_t v) { return v; }
#else
inline float from_out(const out_t v) { return half_value(v); }
#endif

// ---- local tiles ------------------------------------------------------------------------

// Byte offset in a stage of chunk c of local row r (A rows 0 .. MWG - 1, B rows after them).
inline uint chunk_offset(const int r, const int c) {
#if SWZ == 1
  const uint q = (uint)(r * CH + c);
  return 16u * (q ^ (uint)((CH >= 8 ? r : (r * CH) >> 3) & 7));
#else
  return (uint)(r * ROWB + 16 * c);
#endif
}

// A chunk from n (0 .. CV) elements at p, zeros after them, by element loads (any alignment).
inline uint4 load_chunk_elements(const __global elem_t* p, const int n) {
  uint w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#if TYPE == TC_F32
    w[i] = i < n ? as_uint(p[i]) : 0u;
#else
    w[i] = (2 * i < n ? (uint)p[2 * i] : 0u) | (2 * i + 1 < n ? (uint)p[2 * i + 1] << 16 : 0u);
#endif
  }
  return (uint4)(w[0], w[1], w[2], w[3]);
}

#if defined(OCLTK_PTX) && CPASYNC
// 16 bytes to local memory at dst from p, of which the first `bytes` are read and the rest
// zero-filled (cp.async's source size); p must be 16-byte aligned.
// CPASYNC 2 keeps the line in L1 (.ca), 1 bypasses it (.cg).
#if CPASYNC == 2
#define CP_CACHE "ca"
#else
#define CP_CACHE "cg"
#endif
inline void cp_async16(__local uchar* dst, const __global elem_t* p, const int bytes) {
  asm volatile("cp.async." CP_CACHE ".shared.global [%0], [%1], 16, %2;" ::"r"((uint)(ulong)dst), "l"(p), "r"(bytes)
               : "memory");
}
#define CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
// Waits until at most STAGES - 2 commit groups (the steps after the next one) are in flight.
#if STAGES == 2
#define CP_WAIT_STEP() asm volatile("cp.async.wait_group 0;" ::: "memory")
#elif STAGES == 3
#define CP_WAIT_STEP() asm volatile("cp.async.wait_group 1;" ::: "memory")
#else
#define CP_WAIT_STEP() asm volatile("cp.async.wait_group 2;" ::: "memory")
#endif
#else
#define CP_COMMIT()
#define CP_WAIT_STEP()
#endif

// A work-item's share of every step's copies: chunk column cc (the same in every round, since
// WGS is a multiple of CH) of tile rows cr, cr + RPR, ...: A_COPIES rounds of A's tile, then
// B_COPIES of B's. What changes from step to step is only K.
typedef struct {
  const __global elem_t* a;  // A's round-0 row, column cc·CV
  const __global elem_t* b;
  long a_step, b_step;       // elements from one round's row to the next (RPR rows)
  uint rows_ok;              // bit i: round i's row lies in its tile and in its operand
  int cr, cc;
} copy_plan;

inline copy_plan plan_copies(const __global elem_t* A, const int lda, const int m0, const int M,
                             const __global elem_t* B, const int ldb, const int n0, const int N, const int lid) {
  copy_plan p;
  p.cr = lid / CH;
  p.cc = lid % CH;
  p.a = A + (long)(m0 + p.cr) * lda + p.cc * CV;
  p.b = B + (long)(n0 + p.cr) * ldb + p.cc * CV;
  p.a_step = (long)RPR * lda;
  p.b_step = (long)RPR * ldb;
  p.rows_ok = 0u;
#pragma unroll
  for (int i = 0; i < A_COPIES + B_COPIES; ++i) {
    const int a = i < A_COPIES, row = p.cr + (a ? i : i - A_COPIES) * RPR;
    if (row < (a ? MWG : NWG) && (a ? m0 : n0) + row < (a ? M : N)) p.rows_ok |= 1u << i;
  }
  return p;
}

// The local row and the first element of round i's chunk at column k0 + cc·CV.
#define ROUND_LOCAL_ROW(p, i) ((i) < A_COPIES ? (p).cr + (i)*RPR : MWG + (p).cr + ((i)-A_COPIES) * RPR)
#define ROUND_SRC(p, i, k0) ((i) < A_COPIES ? (p).a + (i) * (p).a_step + (k0) : (p).b + ((i)-A_COPIES) * (p).b_step + (k0))
// Rounds past a tile's chunks exist only where MWG·CH or NWG·CH is not a multiple of WGS.
#define ROUND_IN_TILE(p, i) \
  ((i) < A_COPIES ? (MWG * CH) % WGS == 0 || (p).cr + (i)*RPR < MWG : (NWG * CH) % WGS == 0 || (p).cr + ((i)-A_COPIES) * RPR < NWG)

// Round i's chunk at step column k0 by element loads: any alignment, zeros past K and past
// the operand's rows.
inline uint4 load_round_elements(const copy_plan p, const int i, const int k0, const int K) {
  const int n = (p.rows_ok >> i) & 1u ? clamp(K - k0 - p.cc * CV, 0, CV) : 0;
  return load_chunk_elements(ROUND_SRC(p, i, k0), n);
}

// The A and B tiles of the step at column k0 into stage buffer `stage`.
inline void copy_stage(__local uchar* stage, const copy_plan p, const __global elem_t* A, const __global elem_t* B,
                       const int k0, const int K, const int aligned) {
#if defined(OCLTK_PTX) && CPASYNC
  if (aligned) {
    const int bytes = clamp(K - k0 - p.cc * CV, 0, CV) * ESIZE;  // the same for every round
#pragma unroll
    for (int i = 0; i < A_COPIES + B_COPIES; ++i) {
      if (!ROUND_IN_TILE(p, i)) continue;
      const int ok = ((p.rows_ok >> i) & 1u) && bytes > 0;
      cp_async16(stage + chunk_offset(ROUND_LOCAL_ROW(p, i), p.cc), ok ? ROUND_SRC(p, i, k0) : (i < A_COPIES ? A : B),
                 ok ? bytes : 0);
    }
    return;
  }
#endif
#pragma unroll
  for (int i = 0; i < A_COPIES + B_COPIES; ++i) {
    if (!ROUND_IN_TILE(p, i)) continue;
    *(__local uint4*)(stage + chunk_offset(ROUND_LOCAL_ROW(p, i), p.cc)) = load_round_elements(p, i, k0, K);
  }
}

#if !CPASYNC
// CPASYNC 0: the same chunks in two halves, loads into registers (16-byte loads where aligned
// and whole) and stores into a stage, so that a multiply runs between them.
inline void load_stage(uint4* regs, const copy_plan p, const int k0, const int K, const int aligned) {
  const int whole = aligned && K - k0 - p.cc * CV >= CV;
#pragma unroll
  for (int i = 0; i < A_COPIES + B_COPIES; ++i) {
    if (!ROUND_IN_TILE(p, i)) continue;
    regs[i] = whole && ((p.rows_ok >> i) & 1u) ? *(const __global uint4*)ROUND_SRC(p, i, k0)
                                                : load_round_elements(p, i, k0, K);
  }
}
inline void store_stage(__local uchar* stage, const uint4* regs, const copy_plan p) {
#pragma unroll
  for (int i = 0; i < A_COPIES + B_COPIES; ++i) {
    if (!ROUND_IN_TILE(p, i)) continue;
    *(__local uint4*)(stage + chunk_offset(ROUND_LOCAL_ROW(p, i), p.cc)) = regs[i];
  }
}
#endif

// ---- fragments --------------------------------------------------------------------------

// The row piece lane l names for ldmatrix .x4 (matrix l / 8, its row l % 8):
// A, a 16-row tile from local row row0: matrices (rows 0-7, kc), (8-15, kc), (0-7, kc + 1),
// (8-15, kc + 1) = a0 .. a3; B, two 8-row tiles: (tile 0, kc), (tile 0, kc + 1), (tile 1, kc),
// (tile 1, kc + 1) = b0, b1 of the first, b0, b1 of the second.
inline uint ldsm_a_offset(const int l, const int row0, const int kc) {
  return chunk_offset(row0 + (l & 15), kc + (l >> 4));
}
inline uint ldsm_b_offset(const int l, const int row0, const int kc) {
  return chunk_offset(row0 + (l & 7) + ((l >> 4) << 3), kc + ((l >> 3) & 1));
}

// ldmatrix .x4: register i of lane l is word l % 4 of the row piece lane 8·i + l / 4 names.
#if defined(OCLTK_PTX) && LDSM
#define LDSM_X4(r0, r1, r2, r3, stage, OFFSET, row0, kc, lane)                                                 \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"                                \
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)                                                        \
               : "r"((uint)(ulong)(stage) + OFFSET(lane, row0, kc)))
#else
#define LDSM_WORD(stage, OFFSET, row0, kc, lane, i) \
  (*(const __local uint*)((stage) + OFFSET(8 * (i) + ((lane) >> 2), row0, kc) + 4 * ((lane)&3)))
#define LDSM_X4(r0, r1, r2, r3, stage, OFFSET, row0, kc, lane) \
  do {                                                           \
    r0 = LDSM_WORD(stage, OFFSET, row0, kc, lane, 0);            \
    r1 = LDSM_WORD(stage, OFFSET, row0, kc, lane, 1);            \
    r2 = LDSM_WORD(stage, OFFSET, row0, kc, lane, 2);            \
    r3 = LDSM_WORD(stage, OFFSET, row0, kc, lane, 3);            \
  } while (0)
#endif

// Word t of chunk kc of local row r.
#define FRAG_WORD(stage, r, kc, t) (*(const __local uint*)((stage) + chunk_offset(r, kc) + 4 * (t)))

// The A fragments of the warp's MI tiles (local rows wm0 ..) and the B fragments of its NI
// tiles (local rows MWG + wn0 ..) for the mma step reading chunks kc, kc + 1.
inline void load_fragments(uint a[MI][4], uint b[NI][2], const __local uchar* stage, const int wm0, const int wn0,
                           const int kc, const int lane) {
#if LDSM
  TC_UNROLL
  for (int i = 0; i < MI; ++i) LDSM_X4(a[i][0], a[i][1], a[i][2], a[i][3], stage, ldsm_a_offset, wm0 + 16 * i, kc, lane);
  TC_UNROLL
  for (int j = 0; j < NI; j += 2)
    LDSM_X4(b[j][0], b[j][1], b[j + 1][0], b[j + 1][1], stage, ldsm_b_offset, MWG + wn0 + 8 * j, kc, lane);
#else
  const int g = lane >> 2, t = lane & 3;
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    const int r = wm0 + 16 * i + g;
    a[i][0] = FRAG_WORD(stage, r, kc, t);
    a[i][1] = FRAG_WORD(stage, r + 8, kc, t);
    a[i][2] = FRAG_WORD(stage, r, kc + 1, t);
    a[i][3] = FRAG_WORD(stage, r + 8, kc + 1, t);
  }
  TC_UNROLL
  for (int j = 0; j < NI; ++j) {
    const int r = MWG + wn0 + 8 * j + g;
    b[j][0] = FRAG_WORD(stage, r, kc, t);
    b[j][1] = FRAG_WORD(stage, r, kc + 1, t);
  }
#endif
}

// ---- mma --------------------------------------------------------------------------------

#ifdef OCLTK_PTX
#if TYPE == TC_F32
#define MMA_SHAPE "m16n8k8.row.col.f32.tf32.tf32.f32"
#elif TYPE == TC_F16
#define MMA_SHAPE "m16n8k16.row.col.f32.f16.f16.f32"
#else
#define MMA_SHAPE "m16n8k16.row.col.f32.bf16.bf16.f32"
#endif
// acc[i][j] += A tile i · B tile j for all MI × NI pairs of the warp.
inline void warp_mma(float acc[MI][NI][4], const uint a[MI][4], const uint b[NI][2]) {
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int j = 0; j < NI; ++j)
      asm("mma.sync.aligned." MMA_SHAPE " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
          : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
  }
}
#define WARP_MMA(acc, a, b, scratch, lane) warp_mma(acc, a, b)
#else
#define SCRATCH_WORDS ((4 * MI + 2 * NI) * 32)  // a warp's fragments, word-major: [register][lane]

// The operand value of half h (0, 1) of a fragment word: the 16-bit value, or the tf32 word.
#if TYPE == TC_F32
#define OPERAND(w, h) as_float((w) & 0xFFFFE000u)  // mma.sync reads a tf32 word's top 19 bits
#else
#define OPERAND(w, h) half_value((w) >> (16 * (h)))
#endif

// The same product through the warp's SCRATCH_WORDS words of local memory: every work-item
// of the workgroup calls it alike (its barriers). Products of two 16-bit or tf32 values are
// exact in f32; a tile's products are summed in f32 in k order and added to the accumulator
// (the hardware's order and rounding of the sum may differ).
inline void warp_mma_emulated(float acc[MI][NI][4], const uint a[MI][4], const uint b[NI][2], __local uint* s,
                              const int lane) {
#pragma unroll 1
  for (int i = 0; i < MI; ++i)
#pragma unroll 1
    for (int r = 0; r < 4; ++r) s[(4 * i + r) * 32 + lane] = a[i][r];
#pragma unroll 1
  for (int j = 0; j < NI; ++j)
#pragma unroll 1
    for (int r = 0; r < 2; ++r) s[(4 * MI + 2 * j + r) * 32 + lane] = b[j][r];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (int i = 0; i < MI; ++i)
#pragma unroll 1
    for (int j = 0; j < NI; ++j)
#pragma unroll 1
      for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float sum = 0.0f;
#pragma unroll 1
        for (int k = 0; k < KSTEP; ++k) {
          // Word index within a chunk pair: k / 2 for 16-bit values (two a word), k for f32.
          const int kw = TYPE == TC_F32 ? k : k >> 1, h = TYPE == TC_F32 ? 0 : k & 1;
          // A(row, k): register (row >= 8) + 2·(kw >= 4) of lane (row % 8)·4 + kw % 4;
          // B(k, col): register (kw >= 4) of lane col·4 + kw % 4.
          const uint aw = s[(4 * i + (row >> 3) + 2 * (kw >> 2)) * 32 + (row & 7) * 4 + (kw & 3)];
          const uint bw = s[(4 * MI + 2 * j + (kw >> 2)) * 32 + col * 4 + (kw & 3)];
          sum += OPERAND(aw, h) * OPERAND(bw, h);
        }
        acc[i][j][e] += sum;
      }
  barrier(CLK_LOCAL_MEM_FENCE);  // s is rewritten by the next product
}
#define WARP_MMA(acc, a, b, scratch, lane) warp_mma_emulated(acc, a, b, scratch, lane)
#endif

// acc += the product of one stage's tiles, KSTEPS mma steps.
inline void multiply_stage(float acc[MI][NI][4], const __local uchar* stage, const int wm0, const int wn0,
                           const int lane, __local uint* scratch) {
  TC_UNROLL
  for (int s = 0; s < KSTEPS; ++s) {
    uint a[MI][4], b[NI][2];
    load_fragments(a, b, stage, wm0, wn0, 2 * s, lane);
#if TYPE == TC_F32 && SPLIT == 3
    uint as[MI][4], bs[NI][2];  // the remainders
    TC_UNROLL
    for (int i = 0; i < MI; ++i) {
      TC_UNROLL
      for (int r = 0; r < 4; ++r) {
        const uint big = tf32_rna(a[i][r]);
        as[i][r] = as_uint(as_float(a[i][r]) - as_float(big));  // exact; the mma reads its tf32 truncation
        a[i][r] = big;
      }
    }
    TC_UNROLL
    for (int j = 0; j < NI; ++j) {
      TC_UNROLL
      for (int r = 0; r < 2; ++r) {
        const uint big = tf32_rna(b[j][r]);
        bs[j][r] = as_uint(as_float(b[j][r]) - as_float(big));
        b[j][r] = big;
      }
    }
    // The small terms first: the accumulator is rounded after each mma.
    WARP_MMA(acc, as, b, scratch, lane);
    WARP_MMA(acc, a, bs, scratch, lane);
    WARP_MMA(acc, a, b, scratch, lane);
#else
#if TYPE == TC_F32
    TC_UNROLL
    for (int i = 0; i < MI; ++i) {
      TC_UNROLL
      for (int r = 0; r < 4; ++r) a[i][r] = tf32_rna(a[i][r]);
    }
    TC_UNROLL
    for (int j = 0; j < NI; ++j) {
      TC_UNROLL
      for (int r = 0; r < 2; ++r) b[j][r] = tf32_rna(b[j][r]);
    }
#endif
    WARP_MMA(acc, a, b, scratch, lane);
#endif
  }
}

// ---- the kernel -------------------------------------------------------------------------

inline void gemm_nt_tc_body(const int M, const int N, const int K, const float alpha, const __global elem_t* A,
                            const int lda, const __global elem_t* B, const int ldb, __global out_t* C, const int ldc,
                            const int accumulate, __local uchar* smem, __local uint* scratch) {
  const int lid = get_local_id(0), lane = lid & 31, warp = lid >> 5;
  const int wm0 = (warp / NWARPS) * MWT, wn0 = (warp % NWARPS) * NWT;

  // The workgroup's tile: groups of GM tile rows, walked column by column inside a group.
  const int tiles_m = (M + MWG - 1) / MWG, tiles_n = (N + NWG - 1) / NWG;
  const int b = get_group_id(0), per_group = GM * tiles_n;
  const int first_m = b / per_group * GM, group_rows = min(tiles_m - first_m, GM);
  const int m0 = (first_m + b % per_group % group_rows) * MWG, n0 = b % per_group / group_rows * NWG;

  // 16-byte chunk loads need 16-byte aligned rows.
  const int aligned = lda % CV == 0 && ldb % CV == 0 && ((ulong)A & 15) == 0 && ((ulong)B & 15) == 0;

  float acc[MI][NI][4];
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int j = 0; j < NI; ++j) {
      TC_UNROLL
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }

  const int steps = (K + KWG - 1) / KWG;
  const copy_plan plan = plan_copies(A, lda, m0, M, B, ldb, n0, N, lid);
#if CPASYNC
  // Step kt lives in stage kt % STAGES. At step kt: wait for this work-item's copies of it,
  // then a barrier publishes everyone's and retires every read of stage (kt - 1) % STAGES,
  // which the copies of step kt + STAGES - 1 then reuse. One commit group a step, empty or
  // not, so that "all but the last STAGES - 2 groups" is always step kt.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) copy_stage(smem + s * STAGEB, plan, A, B, s * KWG, K, aligned);
    CP_COMMIT();
  }
  int read = 0, write = STAGES - 1;
  for (int kt = 0; kt < steps; ++kt) {
    CP_WAIT_STEP();
    barrier(CLK_LOCAL_MEM_FENCE);
    if (kt + STAGES - 1 < steps) copy_stage(smem + write * STAGEB, plan, A, B, (kt + STAGES - 1) * KWG, K, aligned);
    CP_COMMIT();
    multiply_stage(acc, smem + read * STAGEB, wm0, wn0, lane, scratch);
    read = read == STAGES - 1 ? 0 : read + 1;
    write = write == STAGES - 1 ? 0 : write + 1;
  }
#else
  // Step kt in stage kt % 2; the next step's chunks are loaded before the multiply and
  // stored after it; the barrier after the store both publishes them and retires the reads
  // of this stage before step kt + 1 refills it.
  uint4 regs[A_COPIES + B_COPIES];
  load_stage(regs, plan, 0, K, aligned);
  store_stage(smem, regs, plan);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int kt = 0; kt < steps; ++kt) {
    const int more = kt + 1 < steps;
    if (more) load_stage(regs, plan, (kt + 1) * KWG, K, aligned);
    multiply_stage(acc, smem + (kt & 1) * STAGEB, wm0, wn0, lane, scratch);
    if (more) store_stage(smem + ((kt + 1) & 1) * STAGEB, regs, plan);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  // Lane (g, t) holds C[g][2t, 2t + 1] and C[g + 8][2t, 2t + 1] of each 16 × 8 tile: rows m,
  // columns n, n + 1. C = alpha · sum (+ old C), the f32 result rounded once to C's type.
  const int g = lane >> 2, t = lane & 3;
  TC_UNROLL
  for (int i = 0; i < MI; ++i) {
    TC_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm0 + 16 * i + g + 8 * h;
      if (m >= M) continue;
      TC_UNROLL
      for (int j = 0; j < NI; ++j) {
        const int n = n0 + wn0 + 8 * j + 2 * t;
        if (n >= N) continue;
        __global out_t* p = C + (long)m * ldc + n;
        const float s0 = acc[i][j][2 * h], s1 = acc[i][j][2 * h + 1];
        if (n + 1 < N) {
          const float o0 = accumulate ? from_out(p[0]) : 0.0f, o1 = accumulate ? from_out(p[1]) : 0.0f;
          p[0] = to_out(accumulate ? mad(alpha, s0, o0) : alpha * s0);
          p[1] = to_out(accumulate ? mad(alpha, s1, o1) : alpha * s1);
        } else {
          p[0] = to_out(accumulate ? mad(alpha, s0, from_out(p[0])) : alpha * s0);
        }
      }
    }
  }
}

#ifdef OCLTK_PTX
#define SCRATCH_DECL __local uint* scratch = 0
#else
#define SCRATCH_DECL                                  \
  __local uint scratch_all[MWARPS * NWARPS * SCRATCH_WORDS]; \
  __local uint* scratch = scratch_all + (get_local_id(0) >> 5) * SCRATCH_WORDS
#endif

// Offsets are in elements; they let a launch address a slice of a larger buffer.
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 0, (__local uchar*)smem,
                  scratch);
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void gemm_nt_accum(
    const int M, const int N, const int K, const float alpha, const __global elem_t* restrict A, const long a_offset,
    const int lda, const __global elem_t* restrict B, const long b_offset, const int ldb, __global out_t* C,
    const long c_offset, const int ldc) {
  __local uint4 smem[STAGES * STAGEB / 16];
  SCRATCH_DECL;
  gemm_nt_tc_body(M, N, K, alpha, A + a_offset, lda, B + b_offset, ldb, C + c_offset, ldc, 1, (__local uchar*)smem,
                  scratch);
}

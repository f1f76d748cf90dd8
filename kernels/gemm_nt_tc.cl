// gemm_nt_tc: C[M×N] = alpha · A[M×K] · B[N×K]ᵀ (+ C when accumulating) on NVIDIA tensor cores,
// through the machinery of tc_mma.clh (its comment draws the stages, the local rows and the
// fragments): f32 sums, one rounding at the store.
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
// gemm_nt_launch_variant): IN_TYPE, OUT_TYPE and SPLIT (tc_mma.clh). Sums are f32; C gets
// alpha · sum (+ old C) rounded once to its type (round to nearest even).
//
// Work: a workgroup owns an MWG × NWG tile of C (tc_mma.clh). Workgroups walk the tiles of C in
// groups of GM tile rows, column by column inside a group, so that the workgroups running at
// once share A and B tiles in L2. With KSPLIT > 1 the workgroup is KSPLIT groups of
// MWARPS × NWARPS warps, each with its own stages, group g sweeping the g-th of KSPLIT
// contiguous runs of K steps; at the end the groups' sums go, one group at a time, through
// local memory into group 0's, which stores the tile. That gives shapes with few tiles of C
// (LoRA shrink: N <= 64, a tile row per workgroup) enough warps to keep the loads in flight,
// where one group would leave most SMs idle (the `tcs` algorithm of runtime/src/gemm_nt.cpp).
//
// Store (EPI): 0 stores each lane's two neighbouring elements of every 16 × 8 accumulator tile
// as the mma leaves them (4 or 8 bytes a lane, 8 rows a warp's access); 1 first transposes
// four tiles at a time across the four lanes that share a row (two shuffle exchanges), so
// that a lane reads and writes 8 consecutive elements (16 bytes of a 16-bit C, 32 of f32)
// where C is aligned: the accumulate's read of C and the write become whole sectors, which is
// what bounds short K (LoRA expand). 2 stores as 1 does, but reads the old C of those stores
// into registers before the product, so that with short K the reads are in flight together
// rather than one per lane at a time after it (each read waits for the store before it, which
// may alias it).
//
// Launch: a 1-D range of ceil(M / MWG) · ceil(N / NWG) workgroups of WGS = 32 · MWARPS · NWARPS ·
// KSPLIT work-items; local memory as tc_mma.clh says, times KSPLIT.
//
// The defaults are the fastest point measured on the H200 for bf16 at 8192³: 128 × 128 tiles of
// 2 × 2 warps, KCH 4, 3 stages (48 KiB), the XOR swizzle, cp.async through L1 (3.54 ms, 310
// TFLOP/s; f16 3.64 ms). What bounds it there is the copy from L2 into local memory, not the
// tensor cores or ldmatrix: without its mma the loop kept 85 % of its time, and only with the
// copies through L1 did a third stage pay off (results/h200-tc-half/README.md has the figures
// and the points tried). For f32 at 4096³ the fastest 3×TF32 point was KCH 2 (KWG 8), STAGES 4,
// SWZ 1, CPASYNC 1 (71 TFLOP/s); TF32 ran at 137 with KCH 4, 2 stages, padded rows.

#define TC_COPY_B 1  // the copy plan stages both operands
#ifndef GM
#define GM 8  // tile rows per group of the workgroups' walk over C (1: row by row)
#endif

#ifndef EPI
#define EPI 0  // C's stores: 0 as the mma leaves them, 1 16-byte rows after a quad exchange, 2 1 with old C read first
#endif
#define KSPLIT 1  // one warp group sweeps all of K (tcs splits it: gemm_nt_tcs.cl)

#include "tc_mma.clh"
#include "gemm_nt_tc.clh"

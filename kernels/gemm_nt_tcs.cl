// gemm_nt_tcs: gemm_nt_tc.cl's product for skinny shapes (algorithm tcs): one side of C has at
// most 64 rows (LoRA shrink, small batches, gemv), so C has few tiles. Small tiles, and KSPLIT
// warp groups sharing each tile's K (gemm_nt_tc.cl, "Work"), give the few workgroups enough
// warps and loads in flight. The same kernels as tc's with these defaults (the fastest point
// of the H200's tune of the LoRA shrink class: results/h200/README.md), ldmatrix fragments,
// C stored as the mma leaves it (C is small) and the walk over C row by row in groups of 8.

#ifndef MWG
#define MWG 32  // tile rows (M) per workgroup
#endif
#ifndef NWG
#define NWG 16  // tile columns (N) per workgroup
#endif
#ifndef KCH
#define KCH 8  // 16-byte chunks of K per local row and stage
#endif
#ifndef MWARPS
#define MWARPS 2  // warps along M in a K group
#endif
#ifndef NWARPS
#define NWARPS 1  // warps along N in a K group
#endif
#ifndef KSPLIT
#define KSPLIT 2  // K groups: warp groups each sweeping a run of K, summed at the end
#endif
#ifndef STAGES
#define STAGES 3  // local buffers of A and B tiles per K group
#endif
#ifndef CPASYNC
#define CPASYNC 2  // 1 cp.async past L1 (.cg), 2 through L1 (.ca)
#endif
#ifndef SWZ
#define SWZ 2  // local rows: 1 XOR-swizzled chunks, 2 padded by 16 bytes
#endif
#ifndef REGS
#define REGS 0  // register target of NVIDIA's PTX assembler, applied by the runtime; not read here
#endif
#define LDSM 1
#define EPI 0
#define GM 8
#define TC_COPY_B 1  // the copy plan stages both operands

#include "tc_mma.clh"
#include "gemm_nt_tc.clh"

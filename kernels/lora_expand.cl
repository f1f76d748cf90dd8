// lora_expand: Y[m, n] (+)= s_a · Σ_{j < rank_a} T[m, j] · B_a[n, j] for the rows m of each
// segment, a its adapter; T in f32, B and Y in IN_TYPE. The work is laid out in
// lora_expand.clh; segments, ranks and scales in lora_common.clh.

#ifndef WGS
#define WGS 128  // work-items per workgroup, on consecutive columns of Y
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup
#endif
#ifndef CB
#define CB 256  // columns of Y per workgroup
#endif
#ifndef VA
#define VA 0  // 1: 4-wide accumulators over the rank, summed across once at the end; 0: a dot product per 4
#endif
#ifndef CN
#define CN 1  // columns of Y each work-item sums at once (WGS apart), sharing their loads of T
#endif

#ifndef CW
#define CW 1  // 4: a work-item's columns in runs of 4 consecutive ones, Y read and written 4 wide (CPUs)
#endif

#include "element_types.clh"
#include "lora_common.clh"
#include "lora_expand.clh"

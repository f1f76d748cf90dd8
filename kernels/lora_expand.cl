// lora_expand: Y[m, n] (+)= s_a · Σ_{j < rank_a} T[m, j] · B_a[n, j] for the rows m of each
// segment, a its adapter; T in f32, B and Y in IN_TYPE. The work is laid out in
// lora_expand.clh; segments, ranks and scales in lora_common.clh.

#ifndef WGS
#define WGS 128  // work-items per workgroup, on consecutive columns of Y
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows each workgroup multiplies by every B row it reads
#endif
#ifndef RC
#define RC 8  // rank columns of T staged in local memory per step
#endif
#ifndef NB
#define NB 2  // column batches: columns of Y per work-item (WGS · NB per workgroup)
#endif

#include "element_types.clh"
#include "lora_common.clh"
#include "lora_expand.clh"

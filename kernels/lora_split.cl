// lora_split: the one-call LoRA apply in two dispatches of one program, lora_shrink into an
// f32 intermediate T and then lora_expand from it (lora_shrink.clh, lora_expand.clh), with
// one set of parameters for both: the path for many rows, where the fused kernel's
// recomputation of T per column block costs more than T's round trip through global memory,
// and for GPUs at decode, where the shrink's rank chunks spread over more workgroups.

#ifndef WGS
#define WGS 128  // work-items per workgroup (both kernels)
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup
#endif
#ifndef RC
#define RC 8  // rank columns: rows of A per shrink workgroup
#endif
#ifndef VW
#define VW 4  // vector width of the loads of X and A along K
#endif
#ifndef VA
#define VA 0  // 1: vector accumulators (shrink VW wide, expand 4 wide) summed across once at the end; 0: dots
#endif
#ifndef CB
#define CB 256  // columns of Y per expand workgroup
#endif
#ifndef CN
#define CN 1  // columns of Y each work-item sums at once (WGS apart), sharing their loads of T
#endif

#ifndef CW
#define CW 1  // 4: a work-item's columns in runs of 4 consecutive ones, Y read and written 4 wide (CPUs)
#endif

#include "element_types.clh"
#include "vector_types.clh"
#include "lora_common.clh"
#include "lora_shrink.clh"
#include "lora_expand.clh"

// lora_split: the one-call LoRA apply in two dispatches of one program, lora_shrink into an
// f32 intermediate T and then lora_expand from it (lora_shrink.clh, lora_expand.clh), with
// one set of parameters for both: the large-M path, where the fused kernel's recomputation
// of T per column block costs more than T's round trip through global memory.

#ifndef WGS
#define WGS 128  // work-items per workgroup (both kernels)
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup (both kernels)
#endif
#ifndef RC
#define RC 8  // rank columns: A rows per shrink workgroup, T columns per expand step
#endif
#ifndef VW
#define VW 4  // vector width of the shrink's loads along K
#endif
#ifndef NB
#define NB 2  // column batches: columns of Y per expand work-item
#endif

#include "element_types.clh"
#include "vector_types.clh"
#include "lora_common.clh"
#include "lora_shrink.clh"
#include "lora_expand.clh"

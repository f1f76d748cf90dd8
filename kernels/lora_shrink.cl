// lora_shrink: T[m, j] = Σ_k X[m, k] · A_a[j, k] for the rows m of each segment, a its
// adapter, j below a's rank; X and A in IN_TYPE, T in f32. The work is laid out in
// lora_shrink.clh; segments, ranks and scales in lora_common.clh.

#ifndef WGS
#define WGS 128  // work-items per workgroup, side by side along K
#endif
#ifndef TR
#define TR 4  // tile rows: segment rows per workgroup
#endif
#ifndef RC
#define RC 8  // rank columns: rows of A (of the adapter's rank) per workgroup
#endif
#ifndef VW
#define VW 4  // vector width of the loads of X and A along K
#endif
#ifndef VA
#define VA 0  // 1: VW-wide accumulators, summed across lanes once at the end; 0: a dot product per step
#endif

#include "element_types.clh"
#include "vector_types.clh"
#include "lora_common.clh"
#include "lora_shrink.clh"

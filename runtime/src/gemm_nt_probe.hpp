// Internal to the runtime: the tensor-core probe behind Runtime::probe_tensor_cores.
#pragma once

#include "ocltk/runtime.hpp"

namespace ocltk::detail {

// Builds the tc algorithm at a small legal point for `input` and `precision` and runs a
// product that spans two tiles each way, several K steps and partial edges, then compares
// every element with the double-precision reference within the launch's bound
// (gemm_nt_error_bound under `precision`). Its answer is read from, and written to, a file
// beside the probe program's entry in the program cache, keyed as that program is (source,
// options, device, driver); nowhere when the cache has no folder. `force_failure` compares
// against a reference of the opposite sign, so the probe fails as a broken device would;
// such answers never touch the disk.
TensorCoreProbe probe_gemm_nt_tc(Runtime& rt, ElementType input, GemmPrecision precision, bool force_failure);

}  // namespace ocltk::detail

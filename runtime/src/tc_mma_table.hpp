// The parameter-table pieces shared by the algorithms built on kernels/tc_mma.clh (gemm_nt's
// tc, nf4's tc_tiled): the warp-tile constraints, the H200's pruning and the local memory.
#pragma once

#include <cstdint>
#include <vector>

#include "ocltk/params.hpp"

namespace ocltk::detail {

inline std::int64_t tc_warp_rows(const Params& p) { return param(p, "MWG") / param(p, "MWARPS"); }
inline std::int64_t tc_warp_cols(const Params& p) { return param(p, "NWG") / param(p, "NWARPS"); }

// A value the table may fix instead of exposing (gemm_nt's tcs: KSPLIT exposed, LDSM fixed at
// 1; the others: KSPLIT fixed at 1): the point's value, else the kernel's.
inline std::int64_t tc_param_or(const Params& p, const char* name, int fixed) {
  const auto it = p.find(name);
  return it == p.end() ? fixed : it->second;
}

// Work-items of one K group: MWARPS × NWARPS warps (the kernels' GWS).
inline std::int64_t tc_group_size(const Params& p) { return 32ll * param(p, "MWARPS") * param(p, "NWARPS"); }

// Work-items of a workgroup: KSPLIT groups of MWARPS × NWARPS warps.
inline std::int64_t tc_work_group_size(const Params& p) { return tc_group_size(p) * tc_param_or(p, "KSPLIT", 1); }

// 16 × 8 mma tiles per warp: MI along M, NI along N.
inline std::int64_t tc_warp_mi(const Params& p) { return tc_warp_rows(p) / 16; }
inline std::int64_t tc_warp_ni(const Params& p) { return tc_warp_cols(p) / 8; }

// Whole mma tiles per warp, and ldmatrix's two 8-column tiles at once. `fixed_ldsm`: LDSM where
// the table does not expose it (tcs loads fragments by ldmatrix, tcd by neither).
inline std::vector<Constraint> tc_mma_tile_constraints(int fixed_ldsm = 1) {
  return {
      constraint("MWG % (16 * MWARPS) == 0 (whole 16-row mma tiles per warp)",
                 [](const Params& p) { return param(p, "MWG") % (16 * param(p, "MWARPS")) == 0; }),
      constraint("NWG % (8 * NWARPS) == 0 (whole 8-column mma tiles per warp)",
                 [](const Params& p) { return param(p, "NWG") % (8 * param(p, "NWARPS")) == 0; }),
      constraint("LDSM == 1 implies (NWG / NWARPS) % 16 == 0 (ldmatrix loads two 8-column tiles at once)",
                 [fixed_ldsm](const Params& p) {
                   return tc_param_or(p, "LDSM", fixed_ldsm) == 0 || tc_warp_cols(p) % 16 == 0;
                 }),
  };
}

inline Constraint tc_mma_accumulator_constraint() {
  return constraint("(MWG / MWARPS) * (NWG / NWARPS) / 32 <= 128 (accumulator registers per work-item)",
                    [](const Params& p) { return tc_warp_rows(p) * tc_warp_cols(p) / 32 <= 128; });
}

// Regions the H200 measurements rule out (bf16 8192³, kernels/gemm_nt_tc.cl's header):
// fragments by word loads ran at 209 TFLOP/s against 255 by ldmatrix, plain local rows at
// 191 (bank conflicts); those points stay legal.
inline std::vector<Constraint> tc_mma_search_pruning() {
  return {
      constraint("LDSM == 1", [](const Params& p) { return param(p, "LDSM") == 1; }),
      constraint("SWZ != 0", [](const Params& p) { return param(p, "SWZ") != 0; }),
      constraint("MWARPS * NWARPS >= 4 (fewer warps leave the SM's four schedulers idle)",
                 [](const Params& p) { return param(p, "MWARPS") * param(p, "NWARPS") >= 4; }),
      constraint("(MWG / MWARPS) * (NWG / NWARPS) >= 32 * 32 (smaller warp tiles load a fragment per mma)",
                 [](const Params& p) { return tc_warp_rows(p) * tc_warp_cols(p) >= 32 * 32; }),
  };
}

// Bytes of one stage: MWG + NWG local rows of KCH chunks (+ 16 where padded).
inline std::uint64_t tc_mma_stage_bytes(const Params& p) {
  const std::uint64_t row_bytes = 16ull * param(p, "KCH") + (param(p, "SWZ") == 2 ? 16 : 0);
  return std::uint64_t(param(p, "MWG") + param(p, "NWG")) * row_bytes;
}

// The emulation's fragment words, declared without OCLTK_PTX (not where binaries are PTX): per
// warp 4·MI + 2·NI registers of 32 lanes.
inline std::uint64_t tc_mma_emulation_bytes(const Params& p, const DeviceLimits& limits) {
  if (limits.ptx_binaries) return 0;
  return 4ull * tc_work_group_size(p) * (4 * tc_warp_mi(p) + 2 * tc_warp_ni(p));
}

// The stages (each K group's), and without OCLTK_PTX the emulation's words plus
// `emulation_extra` bytes.
inline std::uint64_t tc_mma_local_mem_bytes(const Params& p, const DeviceLimits& limits,
                                            std::uint64_t emulation_extra = 0) {
  const std::uint64_t tiles = std::uint64_t(tc_param_or(p, "KSPLIT", 1)) * param(p, "STAGES") * tc_mma_stage_bytes(p);
  if (limits.ptx_binaries) return tiles;
  return tiles + emulation_extra + tc_mma_emulation_bytes(p, limits);
}

}  // namespace ocltk::detail

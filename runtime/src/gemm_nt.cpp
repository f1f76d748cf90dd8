// The gemm_nt family slice: parameter tables of its five algorithms, shape classes (f32,
// f32 with TF32 allowed, and 16-bit input), launch geometry and CPU reference.
// kernels/gemm_nt_{reduce,skinny,tiled,xgemm}.cl are the SIMT sources, with kernels/element_types.clh
// for the storage types; kernels/gemm_nt_tc.cl the tensor-core one (runtime/src/gemm_nt_probe.cpp
// decides where it runs).
#include "ocltk/gemm_nt.hpp"

#include <algorithm>
#include <cmath>

#include "ocltk/status.hpp"
#include "tc_mma_table.hpp"

namespace ocltk {
namespace {

AlgorithmSpec tiled_algorithm() {
  AlgorithmSpec a;
  a.name = "tiled";
  a.source_name = "gemm_nt_tiled.cl";
  a.params = {
      {"MWG", 64, {4, 8, 16, 32, 64, 128}, "tile rows (M) per workgroup"},
      {"NWG", 64, {4, 8, 16, 32, 64, 128}, "tile columns (N) per workgroup"},
      {"KWG", 16, {16, 32}, "K columns staged per local-memory step (USE_LOCAL only)"},
      {"MDIMC", 8, {1, 2, 4, 8, 16}, "work-items along M in a workgroup"},
      {"NDIMC", 8, {1, 2, 4, 8, 16}, "work-items along N in a workgroup"},
      {"VW", 1, {1, 4, 8, 16}, "accumulator vector width along K"},
      {"USE_LOCAL", 1, {0, 1}, "stage A and B tiles through local memory"},
  };
  a.constraints = {
      constraint("MWG % MDIMC == 0", [](const Params& p) { return param(p, "MWG") % param(p, "MDIMC") == 0; }),
      constraint("NWG % NDIMC == 0", [](const Params& p) { return param(p, "NWG") % param(p, "NDIMC") == 0; }),
      constraint("MWG / MDIMC <= 8 (outputs per work-item along M)",
                 [](const Params& p) { return param(p, "MWG") / param(p, "MDIMC") <= 8; }),
      constraint("NWG / NDIMC <= 8 (outputs per work-item along N)",
                 [](const Params& p) { return param(p, "NWG") / param(p, "NDIMC") <= 8; }),
      constraint("MWG / MDIMC * NWG / NDIMC * VW <= 256 (accumulator registers)",
                 [](const Params& p) {
                   return (param(p, "MWG") / param(p, "MDIMC")) * (param(p, "NWG") / param(p, "NDIMC")) *
                              param(p, "VW") <=
                          256;
                 }),
      constraint("USE_LOCAL == 0 implies KWG == 16 (KWG is unused without local memory)",
                 [](const Params& p) { return param(p, "USE_LOCAL") == 1 || param(p, "KWG") == 16; }),
      constraint("KWG % VW == 0", [](const Params& p) { return param(p, "KWG") % param(p, "VW") == 0; }),
  };
  a.search_pruning = {
      constraint("MWG <= 64 and NWG <= 64",
                 [](const Params& p) { return param(p, "MWG") <= 64 && param(p, "NWG") <= 64; }),
      constraint("MDIMC * NDIMC <= 64", [](const Params& p) { return param(p, "MDIMC") * param(p, "NDIMC") <= 64; }),
      constraint("at least 4 outputs per work-item",
                 [](const Params& p) {
                   return (param(p, "MWG") / param(p, "MDIMC")) * (param(p, "NWG") / param(p, "NDIMC")) >= 4;
                 }),
      constraint("VW is 1, 4 or 16", [](const Params& p) { return param(p, "VW") != 8; }),
      constraint("USE_LOCAL == 1 implies KWG == 32",
                 [](const Params& p) { return param(p, "USE_LOCAL") == 0 || param(p, "KWG") == 32; }),
  };
  a.gpu_search_pruning = {
      constraint("MDIMC * NDIMC >= 32 (a warp or wavefront)",
                 [](const Params& p) { return param(p, "MDIMC") * param(p, "NDIMC") >= 32; }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    if (!param(p, "USE_LOCAL")) return 0;
    const int stride = param(p, "KWG") + (param(p, "VW") == 1 ? 1 : 0);
    return 4ull * stride * (param(p, "MWG") + param(p, "NWG"));
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(param(p, "NDIMC")), std::size_t(param(p, "MDIMC"))};
  };
  return a;
}

AlgorithmSpec reduce_algorithm() {
  AlgorithmSpec a;
  a.name = "reduce";
  a.source_name = "gemm_nt_reduce.cl";
  a.params = {
      {"WGS", 256, {4, 16, 32, 64, 128, 256}, "work-items per workgroup"},
      {"RW", 32, {1, 2, 4, 8, 16, 32}, "reduction width: work-items sharing one output's K reduction"},
      {"TR", 1, {1, 2, 4, 8, 16}, "tile rows: rows of A each work-item handles"},
      {"VW", 1, {1, 4, 8, 16}, "vector width of the loads along K"},
      {"USE_LOCAL", 0, {0, 1}, "stage the A rows through local memory"},
      {"KWG", 512, {128, 512}, "K columns per local-memory stage (USE_LOCAL only)"},
  };
  a.constraints = {
      constraint("WGS % RW == 0", [](const Params& p) { return param(p, "WGS") % param(p, "RW") == 0; }),
      constraint("TR * VW <= 64 (accumulator registers)",
                 [](const Params& p) { return param(p, "TR") * param(p, "VW") <= 64; }),
      constraint("USE_LOCAL == 0 implies KWG == 512 (KWG is unused without local memory)",
                 [](const Params& p) { return param(p, "USE_LOCAL") == 1 || param(p, "KWG") == 512; }),
      constraint("KWG % (RW * VW) == 0",
                 [](const Params& p) { return param(p, "KWG") % (param(p, "RW") * param(p, "VW")) == 0; }),
  };
  a.search_pruning = {
      constraint("WGS >= 64", [](const Params& p) { return param(p, "WGS") >= 64; }),
      constraint("RW is 1, 4, 8 or 32", [](const Params& p) { return param(p, "RW") != 2 && param(p, "RW") != 16; }),
      constraint("TR <= 8 and VW <= 8", [](const Params& p) { return param(p, "TR") <= 8 && param(p, "VW") <= 8; }),
      constraint("KWG == 512", [](const Params& p) { return param(p, "KWG") == 512; }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    return 4ull * param(p, "TR") * (param(p, "WGS") + (param(p, "USE_LOCAL") ? param(p, "KWG") : 0));
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> { return {std::size_t(param(p, "WGS")), 1}; };
  return a;
}

// Rows of the big operand one workgroup of skinny covers: BR per lane group of RW work-items.
int skinny_big_rows(const Params& p) { return param(p, "WGS") / param(p, "RW") * param(p, "BR"); }

// Skinny shapes (kernels/gemm_nt_skinny.cl): the operand with fewer rows (A where M <= N, else
// B) is the small one, SR of its rows per workgroup; the other streams once per SR small rows.
AlgorithmSpec skinny_algorithm() {
  AlgorithmSpec a;
  a.name = "skinny";
  a.source_name = "gemm_nt_skinny.cl";
  a.params = {
      {"WGS", 128, {32, 64, 128, 256}, "work-items per workgroup"},
      {"RW", 32, {1, 2, 4, 8, 16, 32}, "reduction width: lanes sharing the K sweep of a group's big rows"},
      {"BR", 2, {1, 2, 4, 8}, "big-operand rows per lane group"},
      {"SR", 16, {1, 2, 4, 8, 16, 32, 64}, "small-operand rows per workgroup"},
      {"VW", 4, {1, 2, 4, 8}, "vector width of the loads along K"},
      {"UNROLL", 2, {1, 2, 4}, "vectors of every big row a lane loads before it multiplies them"},
      register_target_param(),
  };
  a.constraints = {
      constraint("BR * SR <= 128 (partial sums in registers)",
                 [](const Params& p) { return param(p, "BR") * param(p, "SR") <= 128; }),
      constraint("UNROLL * BR * VW <= 64 (big-operand values in flight per work-item)",
                 [](const Params& p) { return param(p, "UNROLL") * param(p, "BR") * param(p, "VW") <= 64; }),
  };
  a.gpu_search_pruning = {
      constraint("RW >= 4 (fewer lanes on a row read it in pieces under 64 bytes)",
                 [](const Params& p) { return param(p, "RW") >= 4; }),
  };
  // The lanes' exchange goes through local memory only where warp shuffles are not used.
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) -> std::uint64_t {
    if (limits.ptx_binaries || param(p, "RW") == 1) return 0;
    return 4ull * std::max(param(p, "BR") * param(p, "SR") / 2, 1) * param(p, "WGS");
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> { return {std::size_t(param(p, "WGS")), 1}; };
  return a;
}

// Registers a work-item holds for the next tile while it multiplies the current one
// (PREFETCH > 0): the A and B tiles' floats split over the workgroup.
int xgemm_prefetch_registers(const Params& p) {
  if (param(p, "PREFETCH") == 0) return 0;
  return (param(p, "MWG") + param(p, "NWG")) * param(p, "KWG") / (param(p, "MDIMC") * param(p, "NDIMC"));
}

AlgorithmSpec xgemm_algorithm() {
  AlgorithmSpec a;
  a.name = "xgemm";
  a.source_name = "gemm_nt_xgemm.cl";
  a.params = {
      {"MWG", 128, {32, 64, 128}, "tile rows (M) per workgroup"},
      {"NWG", 128, {32, 64, 128}, "tile columns (N) per workgroup"},
      {"KWG", 16, {8, 16, 32}, "K columns staged per local-memory step"},
      {"MDIMC", 16, {8, 16, 32}, "work-items along M in a workgroup"},
      {"NDIMC", 16, {8, 16, 32}, "work-items along N in a workgroup"},
      {"VWM", 4, {1, 2, 4}, "vector width of the local reads along M"},
      {"VWN", 4, {1, 2, 4}, "vector width of the local reads along N"},
      {"LOADK", 0, {0, 1}, "global loads: 0 consecutive work-items on rows, 1 along K within a row (coalesced)"},
      {"PREFETCH",
       0,
       {0, 1, 2},
       "next K tile: 0 loaded after the barrier, 1 into registers during the multiply, 2 as 1 with two local "
       "buffers"},
  };
  auto mwi = [](const Params& p) { return param(p, "MWG") / param(p, "MDIMC"); };
  auto nwi = [](const Params& p) { return param(p, "NWG") / param(p, "NDIMC"); };
  auto wgs = [](const Params& p) { return param(p, "MDIMC") * param(p, "NDIMC"); };
  a.constraints = {
      constraint("MWG % (MDIMC * VWM) == 0",
                 [](const Params& p) { return param(p, "MWG") % (param(p, "MDIMC") * param(p, "VWM")) == 0; }),
      constraint("NWG % (NDIMC * VWN) == 0",
                 [](const Params& p) { return param(p, "NWG") % (param(p, "NDIMC") * param(p, "VWN")) == 0; }),
      constraint("MWG / MDIMC * NWG / NDIMC + prefetch registers <= 160 (accumulators and the next tile in "
                 "registers, under the 255 a work-item may have)",
                 [mwi, nwi](const Params& p) { return mwi(p) * nwi(p) + xgemm_prefetch_registers(p) <= 160; }),
      constraint("MDIMC * NDIMC >= 64 (enough work-items to stage the tiles)",
                 [wgs](const Params& p) { return wgs(p) >= 64; }),
      constraint("tiles split evenly into 4-wide loads: (MWG * KWG / 4) % (MDIMC * NDIMC) == 0, same for NWG",
                 [wgs](const Params& p) {
                   return (param(p, "MWG") * param(p, "KWG") / 4) % wgs(p) == 0 &&
                          (param(p, "NWG") * param(p, "KWG") / 4) % wgs(p) == 0;
                 }),
  };
  // Regions that are certainly slow on a GPU (on a CPU the shipped profiles choose xgemm only for LoRA expand).
  a.search_pruning = {
      constraint("VWM and VWN are 1 or 4 (a 2-wide local read moves half a 4-wide one's bytes for the same "
                 "instruction; 1 keeps C's stores coalesced along N)",
                 [](const Params& p) { return param(p, "VWM") != 2 && param(p, "VWN") != 2; }),
      constraint("VWM == 4 unless MWG / MDIMC < 4 (A is read in float4s wherever a work-item owns 4 rows)",
                 [mwi](const Params& p) { return param(p, "VWM") == 4 || mwi(p) < 4; }),
      constraint("MDIMC * NDIMC <= 256 (more leave one workgroup per SM, idle at every barrier)",
                 [wgs](const Params& p) { return wgs(p) <= 256; }),
      constraint("MWG / MDIMC * NWG / NDIMC >= 16 (fewer outputs per local read make the loop local-memory bound)",
                 [mwi, nwi](const Params& p) { return mwi(p) * nwi(p) >= 16; }),
      constraint("MWG / MDIMC * NWG / NDIMC <= 64 unless PREFETCH > 0 (with more accumulators too few workgroups "
                 "fit an SM to hide loads that are not prefetched)",
                 [mwi, nwi](const Params& p) { return mwi(p) * nwi(p) <= 64 || param(p, "PREFETCH") > 0; }),
      constraint("KWG == 8 only with PREFETCH == 2 (two barriers per 8 K columns leave too little work between)",
                 [](const Params& p) { return param(p, "KWG") != 8 || param(p, "PREFETCH") == 2; }),
      constraint("PREFETCH > 0 only with LOADK == 1 (the prefetch loops are for long K, where the row-wise "
                 "loads' split 64-byte segments are the next limit)",
                 [](const Params& p) { return param(p, "PREFETCH") == 0 || param(p, "LOADK") == 1; }),
      constraint(
          "PREFETCH > 0 only with VWM == VWN == 4 (long K: 4-wide local reads and float4 C stores win; "
          "VWN = 1's coalesced scalar stores matter only for short K)",
          [](const Params& p) { return param(p, "PREFETCH") == 0 || (param(p, "VWM") == 4 && param(p, "VWN") == 4); }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    const int buffers = param(p, "PREFETCH") == 2 ? 2 : 1;
    return 4ull * buffers * param(p, "KWG") * (param(p, "MWG") + param(p, "NWG"));
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(param(p, "NDIMC")), std::size_t(param(p, "MDIMC"))};
  };
  return a;
}

// Chunks of the A and B tiles each work-item copies per stage (the kernel's A_COPIES + B_COPIES).
int tc_copies_per_work_item(const Params& p) {
  const int wgs = int(detail::tc_group_size(p));
  const auto chunks = [&](const char* rows) { return (param(p, rows) * param(p, "KCH") + wgs - 1) / wgs; };
  return chunks("MWG") + chunks("NWG");
}

// The tensor-core product (kernels/gemm_nt_tc.cl): mma.sync through inline PTX on NVIDIA
// sm_80+, an exact emulation elsewhere (correct but slow: only the tuner on such a GPU
// searches it, and the runtime runs it from a profile only where the probe passed). The
// element types and, for f32, TF32 or 3×TF32 are the launch's build variant, not searched.
AlgorithmSpec tc_algorithm() {
  AlgorithmSpec a;
  a.name = "tc";
  a.source_name = "gemm_nt_tc.cl";
  a.params = {
      {"MWG", 128, {32, 64, 128, 256}, "tile rows (M) per workgroup"},
      {"NWG", 128, {32, 64, 128, 256}, "tile columns (N) per workgroup"},
      {"KCH",
       4,
       {2, 4, 8, 16},
       "16-byte chunks of K per local row and stage (K columns: 8 KCH for f16/bf16, 4 KCH f32)"},
      {"MWARPS", 2, {1, 2, 4}, "warps along M in a workgroup"},
      {"NWARPS", 2, {1, 2, 4}, "warps along N in a workgroup"},
      {"STAGES", 3, {2, 3, 4}, "local buffers of A and B tiles (copies run STAGES - 1 steps ahead)"},
      {"CPASYNC",
       2,
       {1, 2, 0},
       "global-to-local copies: 1 by cp.async past L1 (.cg), 2 by cp.async through L1 (.ca), 0 through registers "
       "(two buffers)"},
      {"LDSM", 1, {1, 0}, "fragments: 1 by ldmatrix, 0 by one local load per word"},
      {"SWZ", 1, {2, 1, 0}, "local rows: 0 plain, 1 XOR-swizzled chunks, 2 padded by 16 bytes"},
      {"EPI",
       0,
       {0, 1, 2},
       "C's stores: 0 two elements a lane as the mma leaves them, 1 16-byte rows a lane after a quad exchange, 2 as "
       "1 with the old C of an accumulate read before the product"},
      // Refined last: the group of the walk over C shifts a point's time through L2 reuse,
      // not which tile shape wins.
      {"GM", 8, {8, 1, 4, 16}, "tile rows per group of the workgroups' walk over C (1: row by row)", true},
      register_target_param(),
  };
  a.constraints = detail::tc_mma_tile_constraints();
  a.constraints.push_back(
      constraint("CPASYNC == 0 implies STAGES == 2 (copies through registers use two buffers)",
                 [](const Params& p) { return param(p, "CPASYNC") != 0 || param(p, "STAGES") == 2; }));
  a.constraints.push_back(
      constraint("ceil(MWG * KCH / WGS) + ceil(NWG * KCH / WGS) <= 32 (chunks a work-item copies per stage, "
                 "WGS = 32 * MWARPS * NWARPS)",
                 [](const Params& p) { return tc_copies_per_work_item(p) <= 32; }));
  a.constraints.push_back(detail::tc_mma_accumulator_constraint());
  a.constraints.push_back(
      constraint("EPI >= 1 implies (NWG / NWARPS) % 32 == 0 (four 8-column tiles a quad exchange)",
                 [](const Params& p) { return param(p, "EPI") == 0 || detail::tc_warp_cols(p) % 32 == 0; }));
  a.search_pruning = detail::tc_mma_search_pruning();
  // EPI 2 pays only where the product is short (LoRA expand: K 16 to 64, one to four steps of
  // KCH 2 to 4), and it holds a 16-byte piece of old C for every four 16 × 8 tiles, half as
  // many registers again as the accumulators: searched with short K steps and few accumulators.
  a.search_pruning.push_back(
      constraint("EPI == 2 implies KCH <= 4 and (MWG / MWARPS) * (NWG / NWARPS) <= 32 * 64 (at most 64 accumulators a "
                 "work-item)",
                 [](const Params& p) {
                   return param(p, "EPI") != 2 ||
                          (param(p, "KCH") <= 4 && detail::tc_warp_rows(p) * detail::tc_warp_cols(p) <= 32 * 64);
                 }));
  a.search_needs_tensor_mma = true;
  a.tuned_variant = gemm_nt_launch_variant(ElementType::bf16, ElementType::bf16, "tc");
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) {
    return detail::tc_mma_local_mem_bytes(p, limits);
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(detail::tc_work_group_size(p)), 1};
  };
  return a;
}

// The tensor-core product for skinny shapes (gemm_nt_tcs.cl: tc's kernel with KSPLIT): one side has at most
// 64 rows (LoRA shrink, small batches, gemv), so C has few tiles; KSPLIT warp groups share
// each tile's K, so that the few workgroups still keep enough loads in flight. Small tiles
// and warp tiles, which tc's search leaves out, are what it searches; the stores are tc's
// EPI 0 (C is small). Searched only in the skinny classes tc may serve (the 16-bit ones,
// lora_shrink's TF32 twins: gemm_nt_searches), where the probe passes; it shares tc's
// precision rules (gemm_nt_tensor_core_algorithm).
AlgorithmSpec tcs_algorithm() {
  AlgorithmSpec a;
  a.name = "tcs";
  a.source_name = "gemm_nt_tcs.cl";
  a.params = {
      {"MWG", 32, {16, 32, 64, 128}, "tile rows (M) per workgroup"},
      {"NWG", 16, {16, 32, 64}, "tile columns (N) per workgroup"},
      {"KCH", 8, {2, 4, 8}, "16-byte chunks of K per local row and stage (K columns: 8 KCH for f16/bf16, 4 KCH f32)"},
      {"MWARPS", 2, {1, 2}, "warps along M in a K group"},
      {"NWARPS", 1, {1, 2}, "warps along N in a K group"},
      {"KSPLIT", 2, {1, 2, 4, 8}, "K groups: warp groups each sweeping a run of K, summed at the end"},
      {"STAGES", 3, {2, 3, 4}, "local buffers of A and B tiles per K group (copies run STAGES - 1 steps ahead)"},
      {"CPASYNC", 2, {1, 2}, "global-to-local copies: 1 by cp.async past L1 (.cg), 2 through L1 (.ca)"},
      {"SWZ", 2, {1, 2}, "local rows: 1 XOR-swizzled chunks, 2 padded by 16 bytes"},
      register_target_param(),
  };
  // tc's tile constraints with LDSM fixed at 1 (tc_param_or).
  a.constraints = detail::tc_mma_tile_constraints();
  a.constraints.insert(
      a.constraints.end(),
      {
          detail::tc_mma_accumulator_constraint(),
          // 16 warps would need at most 128 registers a work-item, which NVIDIA's compiler does not
          // keep to at REGS 0 (the H200 refused such builds' 512-wide workgroups).
          constraint("MWARPS * NWARPS * KSPLIT <= 8 (warps a workgroup)",
                     [](const Params& p) { return detail::tc_work_group_size(p) <= 256; }),
          constraint("ceil(MWG * KCH / GWS) + ceil(NWG * KCH / GWS) <= 32 (chunks a work-item copies per stage, "
                     "GWS = 32 * MWARPS * NWARPS)",
                     [](const Params& p) { return tc_copies_per_work_item(p) <= 32; }),
          constraint("KSPLIT == 1 or MWG * NWG * 4 <= KSPLIT * STAGES * (MWG + NWG) * row bytes (the groups' sums "
                     "pass through the stages' local memory)",
                     [](const Params& p) {
                       return param(p, "KSPLIT") == 1 || 4ull * param(p, "MWG") * param(p, "NWG") <=
                                                             std::uint64_t(param(p, "KSPLIT")) * param(p, "STAGES") *
                                                                 detail::tc_mma_stage_bytes(p);
                     }),
      });
  // Fewer than four warps a workgroup leave the SM's schedulers idle (tc's measurement).
  a.search_pruning = {constraint("MWARPS * NWARPS * KSPLIT >= 4",
                                 [](const Params& p) { return detail::tc_work_group_size(p) >= 128; })};
  a.search_needs_tensor_mma = true;
  a.tuned_variant = gemm_nt_launch_variant(ElementType::bf16, ElementType::bf16, "tcs");
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) {
    return detail::tc_mma_local_mem_bytes(p, limits);
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(detail::tc_work_group_size(p)), 1};
  };
  return a;
}

// Registers a work-item of tcd holds for its tile (bf16, the tuned variant): the accumulators
// (4 a 16 × 8 tile), UNR rounds of loaded pieces (2·KV words for each of 2·MI A rows and NI B
// rows) and with PRE the old C (4 words for each 8 columns of 2·MI rows).
std::int64_t tcd_registers(const Params& p) {
  const std::int64_t mi = detail::tc_warp_mi(p), ni = detail::tc_warp_ni(p);
  return 4 * mi * ni + param(p, "UNR") * (2 * mi + ni) * 2 * param(p, "KV") + param(p, "PRE") * 2 * mi * ni;
}

// The tensor-core product with fragments loaded straight from global memory
// (gemm_nt_tcd.cl): no local tiles or barriers, for the shapes that stream one big operand
// past a small one (LoRA expand and shrink, small batches, gemv), where tc's staging costs
// more instructions than it saves. Searched in the 16-bit classes but large_half and in the
// LoRA classes' TF32 twins (gemm_nt_searches), where the probe passes; tc's precision rules.
AlgorithmSpec tcd_algorithm() {
  AlgorithmSpec a;
  a.name = "tcd";
  a.source_name = "gemm_nt_tcd.cl";
  a.params = {
      {"MWG", 32, {16, 32, 64, 128}, "tile rows (M) per workgroup"},
      {"NWG", 128, {16, 32, 64, 128, 256}, "tile columns (N) per workgroup"},
      {"MWARPS", 1, {1, 2, 4}, "warps along M in a K group"},
      {"NWARPS", 2, {1, 2, 4}, "warps along N in a K group"},
      {"KSPLIT", 1, {1, 2, 4, 8}, "K groups: warp groups each sweeping a run of K, summed at the end"},
      {"MREP",
       1,
       {1, 2, 4, 8},
       "MWG x NWG tiles a workgroup computes one below the other (B's pieces kept where K fits a step)"},
      {"KV", 1, {1, 2}, "mma steps per load: a lane loads 8 KV bytes of a row"},
      {"UNR", 1, {1, 2, 4}, "rounds of loads issued before their mma steps"},
      {"PRE", 1, {1, 0}, "1: an accumulate reads its old C before the product (NWG / NWARPS a multiple of 32)"},
      register_target_param(),
  };
  // tc's tile constraints; no ldmatrix (fragments come from global memory).
  a.constraints = detail::tc_mma_tile_constraints(/*fixed_ldsm=*/0);
  a.constraints.insert(
      a.constraints.end(),
      {
          constraint("PRE == 1 implies (NWG / NWARPS) % 32 == 0 (lanes owning 8 consecutive columns)",
                     [](const Params& p) { return param(p, "PRE") == 0 || detail::tc_warp_cols(p) % 32 == 0; }),
          constraint("MWARPS * NWARPS * KSPLIT <= 8 (warps a workgroup)",
                     [](const Params& p) { return detail::tc_work_group_size(p) <= 256; }),
          constraint("4·MI·NI + UNR·(2·MI + NI)·2·KV + PRE·2·MI·NI <= 160 (registers for the tile, the loads in "
                     "flight and the old C; MI = MWG / MWARPS / 16, NI = NWG / NWARPS / 8)",
                     [](const Params& p) { return tcd_registers(p) <= 160; }),
      });
  a.search_needs_tensor_mma = true;
  a.tuned_variant = gemm_nt_launch_variant(ElementType::bf16, ElementType::bf16, "tcd");
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) -> std::uint64_t {
    const std::uint64_t sums = param(p, "KSPLIT") > 1 ? 4ull * param(p, "MWG") * param(p, "NWG") : 0;
    return sums + detail::tc_mma_emulation_bytes(p, limits);
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(detail::tc_work_group_size(p)), 1};
  };
  return a;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

const KernelFamily& gemm_nt_family() {
  static const KernelFamily family = [] {
    KernelFamily f;
    f.name = "gemm_nt";
    f.algorithms = {reduce_algorithm(), tiled_algorithm(), xgemm_algorithm(), tc_algorithm(),
                    skinny_algorithm(), tcs_algorithm(),   tcd_algorithm()};
    f.classes = {
        {"gemv", "M = 1"},
        {"lora_shrink", "N <= 64 (and M > 1)"},
        {"lora_expand", "K <= 64 (and M > 1, N > 64)"},
        {"small_batch", "M <= 16 (and N > 64, K > 64)"},
        {"large", "everything else"},
    };
    f.builtin = {
        {"reduce", {}}, {"reduce", {{"TR", 4}}}, {"tiled", {}}, {"reduce", {{"TR", 4}}}, {"tiled", {}},
    };
    // The same rules for 16-bit A and B, tuned on bf16 (built-ins as f32's until measured).
    const std::size_t f32_classes = f.classes.size();
    for (std::size_t i = 0; i < f32_classes; ++i) {
      f.classes.push_back({f.classes[i].name + "_half", f.classes[i].rule + ", A and B f16 or bf16"});
      f.builtin.push_back(f.builtin[i]);
    }
    // f32 large launches that allow tensor cores: built-ins as large's (SIMT; the runtime
    // serves these classes from large's entry where a profile has none of their own).
    f.classes.push_back({"large_tf32", "large, A and B f32, precision tf32"});
    f.builtin.push_back(f.builtin[4]);
    f.classes.push_back({"large_tf32x3", "large, A and B f32, precision tf32x3"});
    f.builtin.push_back(f.builtin[4]);
    // The same for f32 LoRA launches (lora_shrink, lora_expand), where tc's K-split and
    // direct-fragment kernels (tcs, tcd) stream the big operand at 16-bit LoRA's rates.
    for (const std::size_t i : {std::size_t(1), std::size_t(2)})
      for (const char* precision : {"tf32", "tf32x3"}) {
        f.classes.push_back(
            {f.classes[i].name + "_" + precision, f.classes[i].name + ", A and B f32, precision " + precision});
        f.builtin.push_back(f.builtin[i]);
      }
    return f;
  }();
  return family;
}

const char* to_string(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::exact:
      return "exact";
    case GemmPrecision::tf32:
      return "tf32";
    case GemmPrecision::tf32x3:
      return "tf32x3";
  }
  return "?";
}

std::optional<GemmPrecision> parse_gemm_precision(const std::string& name) {
  for (GemmPrecision p : {GemmPrecision::exact, GemmPrecision::tf32, GemmPrecision::tf32x3})
    if (name == to_string(p)) return p;
  return std::nullopt;
}

namespace {
constexpr const char kHalfSuffix[] = "_half";

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() > end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

bool is_half_class(const std::string& shape_class) { return ends_with(shape_class, kHalfSuffix); }

// Whether tc may compute an f32 launch under `precision` (what gemm_nt_tc_refusal says in
// words where not): TF32, or 3×TF32 from K = kTf32x3MinK.
bool tc_computes_f32(const GemmProblem& p, GemmPrecision precision) {
  return precision == GemmPrecision::tf32 || (precision == GemmPrecision::tf32x3 && p.k >= kTf32x3MinK);
}
}  // namespace

std::string gemm_nt_shape_class(const GemmProblem& p, ElementType input, GemmPrecision precision) {
  const char* suffix = input == ElementType::f32 ? "" : kHalfSuffix;
  // f32 launches that tc may compute under their precision (not 3×TF32 below K = 8).
  const std::string tf32 =
      input == ElementType::f32 && tc_computes_f32(p, precision) ? std::string("_") + to_string(precision) : "";
  if (p.m == 1) return std::string("gemv") + suffix;
  if (p.n <= 64) return std::string("lora_shrink") + suffix + tf32;
  if (p.k <= 64) return std::string("lora_expand") + suffix + tf32;
  if (p.m <= 16) return std::string("small_batch") + suffix;
  return std::string("large") + suffix + tf32;
}

GemmPrecision gemm_nt_class_precision(const std::string& shape_class) {
  if (ends_with(shape_class, "_tf32")) return GemmPrecision::tf32;
  if (ends_with(shape_class, "_tf32x3")) return GemmPrecision::tf32x3;
  return GemmPrecision::exact;
}

std::string gemm_nt_exact_class(const std::string& shape_class) {
  const GemmPrecision precision = gemm_nt_class_precision(shape_class);
  if (precision == GemmPrecision::exact) return shape_class;
  return shape_class.substr(0, shape_class.size() - 1 - std::string(to_string(precision)).size());
}

namespace {
// The f32 class a 16-bit class twins (the class itself where it is not one).
std::string f32_class_of(const std::string& shape_class) {
  return is_half_class(shape_class) ? shape_class.substr(0, shape_class.size() - (sizeof kHalfSuffix - 1))
                                    : shape_class;
}
}  // namespace

ElementType gemm_nt_class_input(const std::string& shape_class) {
  return is_half_class(shape_class) ? ElementType::bf16 : ElementType::f32;
}

std::map<std::string, std::int64_t> gemm_nt_problem_of(const GemmProblem& p, ElementType input) {
  std::map<std::string, std::int64_t> problem{{"m", p.m}, {"n", p.n}, {"k", p.k}};
  if (input != ElementType::f32) problem["input_bits"] = 16;
  return problem;
}

std::string gemm_nt_launch_variant(ElementType input, ElementType output, const std::string& algorithm,
                                   GemmPrecision precision) {
  const bool tc = gemm_nt_tensor_core_algorithm(algorithm);
  if (input == ElementType::f32 && output == ElementType::f32 && !tc) return "";
  std::string v = " -DIN_TYPE=" + std::to_string(int(input)) + " -DOUT_TYPE=" + std::to_string(int(output));
  // exact never reaches a tc build (gemm_nt_tc_refusal); it names 3×TF32, the closer one.
  if (tc && input == ElementType::f32) v += precision == GemmPrecision::tf32 ? " -DSPLIT=1" : " -DSPLIT=3";
  return v;
}

std::string gemm_nt_tc_refusal(const GemmProblem& p, ElementType input, GemmPrecision precision) {
  if (input != ElementType::f32 || tc_computes_f32(p, precision)) return "";
  if (precision == GemmPrecision::exact)
    return "f32 A and B with precision exact never run on tensor cores (tc multiplies them in TF32; "
           "GemmNtArgs::precision tf32 or tf32x3 allows it)";
  return "3×TF32 can exceed the f32 bound below K = " + std::to_string(kTf32x3MinK) + " (K = " + std::to_string(p.k) +
         "): such launches belong to a SIMT algorithm";
}

bool gemm_nt_tensor_core_algorithm(const std::string& algorithm) {
  return algorithm == "tc" || algorithm == "tcs" || algorithm == "tcd";
}

bool gemm_nt_skinny_class(const std::string& shape_class) {
  const std::string f32 = f32_class_of(gemm_nt_exact_class(shape_class));
  return f32 == "gemv" || f32 == "lora_shrink" || f32 == "small_batch";
}

GemmProblem gemm_nt_class_problem(const std::string& shape_class, bool cpu_device) {
  if (is_half_class(shape_class)) return gemm_nt_class_problem(f32_class_of(shape_class), cpu_device);
  if (gemm_nt_class_precision(shape_class) != GemmPrecision::exact)
    return gemm_nt_class_problem(gemm_nt_exact_class(shape_class), cpu_device);
  if (shape_class == "gemv") return {1, 4096, 4096};
  if (shape_class == "lora_shrink") return {4096, 16, 4096};
  if (shape_class == "lora_expand") return {4096, 4096, 16};
  if (shape_class == "small_batch") return {16, 4096, 4096};
  if (shape_class == "large") return cpu_device ? GemmProblem{1024, 1024, 1024} : GemmProblem{4096, 4096, 4096};
  throw Error(ErrorCode::kNotFound, "gemm_nt has no shape class '" + shape_class + "'");
}

LaunchGeometry gemm_nt_geometry(const std::string& algorithm, const Params& p, const GemmProblem& problem) {
  LaunchGeometry g;
  if (gemm_nt_tensor_core_algorithm(algorithm)) {
    // One dimension: the kernel orders its workgroups itself (groups of GM tile rows).
    // MREP (tcd): tiles one below the other a workgroup.
    g.tile_m = param(p, "MWG") * detail::tc_param_or(p, "MREP", 1);
    g.tile_n = param(p, "NWG");
    g.local = {std::size_t(detail::tc_work_group_size(p)), 1};
    g.global = {std::size_t(ceil_div(problem.m, g.tile_m) * ceil_div(problem.n, g.tile_n)) * g.local[0], 1};
    return g;
  }
  if (algorithm == "tiled" || algorithm == "xgemm") {
    g.tile_m = param(p, "MWG");
    g.tile_n = param(p, "NWG");
    g.local = {std::size_t(param(p, "NDIMC")), std::size_t(param(p, "MDIMC"))};
  } else if (algorithm == "reduce") {
    g.tile_m = param(p, "TR");
    g.tile_n = param(p, "WGS") / param(p, "RW");
    g.local = {std::size_t(param(p, "WGS")), 1};
  } else if (algorithm == "skinny") {
    // Dimension 0 runs along N as for the others: big rows when A is the small operand,
    // small rows when B is (the kernel reads its group ids by the same M <= N rule).
    const bool a_small = problem.m <= problem.n;
    g.tile_m = a_small ? param(p, "SR") : skinny_big_rows(p);
    g.tile_n = a_small ? skinny_big_rows(p) : param(p, "SR");
    g.local = {std::size_t(param(p, "WGS")), 1};
  } else {
    throw Error(ErrorCode::kNotFound, "gemm_nt has no algorithm '" + algorithm + "'");
  }
  g.global = {std::size_t(ceil_div(problem.n, g.tile_n)) * g.local[0],
              std::size_t(ceil_div(problem.m, g.tile_m)) * g.local[1]};
  return g;
}

void gemm_nt_reference(const GemmProblem& p, float alpha, bool accumulate, const float* a, std::size_t lda,
                       const float* b, std::size_t ldb, const double* c_old, std::size_t ldc_old, double* c,
                       std::size_t ldc) {
  for (std::int64_t i = 0; i < p.m; ++i) {
    const float* ai = a + i * lda;
    for (std::int64_t j = 0; j < p.n; ++j) {
      const float* bj = b + j * ldb;
      double sum = 0;
      for (std::int64_t k = 0; k < p.k; ++k) sum += double(ai[k]) * double(bj[k]);
      double v = double(alpha) * sum;
      if (accumulate) v += c_old[i * ldc_old + j];
      c[i * ldc + j] = v;
    }
  }
}

double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old) {
  constexpr double u = 1.0 / (1 << 24);
  const double ku = double(k + 2) * u;  // + 2: the alpha product and the accumulate add
  const double gamma = ku / (1.0 - ku);
  return gamma * std::fabs(alpha) * abs_dot + 2 * u * std::fabs(c_old) + 1e-30;
}

double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old, double c_ref,
                           ElementType output) {
  const double f32 = gemm_nt_error_bound(k, abs_dot, alpha, c_old);
  if (output == ElementType::f32) return f32;
  // The f32 result is within `f32` of c_ref; the store rounds it once more, relative to the
  // value it rounds (at most |c_ref| + f32).
  const double subnormal = output == ElementType::f16 ? std::ldexp(1.0, -25) : 0.0;
  return f32 + unit_roundoff(output) * (std::fabs(c_ref) + f32) + subnormal;
}

double gemm_nt_error_bound(std::int64_t k, double abs_dot, double alpha, double c_old, double c_ref, ElementType output,
                           GemmPrecision precision) {
  const double bound = gemm_nt_error_bound(k, abs_dot, alpha, c_old, c_ref, output);
  if (precision != GemmPrecision::tf32) return bound;
  // Each operand rounded to TF32 moves by at most 2^-11 of itself: a product by e.
  constexpr double e = 1.0 / (1 << 10) + 1.0 / (1 << 22);
  const double product_error = e * std::fabs(alpha) * abs_dot;
  const double u = 1.0 / (1 << 24), ku = double(k + 2) * u;
  return bound + product_error * (1 + ku / (1.0 - ku));
}

}  // namespace ocltk

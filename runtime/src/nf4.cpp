// The nf4 family slice on the device: parameter tables of the tiled and stream algorithms
// (forward and input-gradient backward), the forward-only warps algorithm and the
// tensor-core tc and tc_tiled algorithms of both directions, shape classes, argument checks and
// launches. Sources: kernels/nf4_{forward,backward}_{stream,tc}.cl, nf4_forward_warps.cl,
// nf4_{forward,backward}_tc_tiled.cl, nf4_tiled.cl, nf4_common.clh, nf4_rows.clh,
// nf4_splits.clh, nf4_tc.clh, nf4_tc_tiled.clh and tc_mma.clh.
#include "ocltk/nf4.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>

#include "dispatch.hpp"
#include "nf4_splits.hpp"
#include "ocltk/gemm_nt.hpp"
#include "ocltk/status.hpp"
#include "tc_mma_table.hpp"

namespace ocltk {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The workgroup shape of the algorithms whose workgroup is WGS work-items along dimension 0.
std::array<std::size_t, 2> wgs_local_size(const Params& p) { return {std::size_t(param(p, "WGS")), 1}; }

AlgorithmSpec forward_stream_algorithm() {
  AlgorithmSpec a;
  a.name = "stream";
  a.compact_experts = true;
  a.source_name = "nf4_forward_stream.cl";
  a.params = {
      {"WGS", 128, {64, 128, 256}, "work-items per workgroup"},
      {"RL", 2, {1, 2, 4, 8}, "row lanes: work-items sharing one W row, reading its 16-byte chunks side by side"},
      {"UNROLL", 4, {1, 2, 4, 8}, "16-byte chunks each work-item loads before decoding any (loads in flight)"},
      {"TR", 4, {1, 2, 4, 8}, "tile rows: segment rows multiplied by each decoded chunk"},
  };
  a.constraints = {
      constraint("TR * UNROLL <= 16 (registers)",
                 [](const Params& p) { return param(p, "TR") * param(p, "UNROLL") <= 16; }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    return 4ull * (16 + (param(p, "RL") > 1 ? param(p, "TR") * param(p, "WGS") : 0));
  };
  a.local_size = wgs_local_size;
  return a;
}

// Decode on GPUs without barriers between warps (but those that stage x, XL): each 32-wide
// warp owns whole W rows, sweeps K by itself and reduces its own sums (warp shuffles where
// OCLTK_PTX is defined), codes decoded through the pair table (docs/nf4-kernels.md).
AlgorithmSpec forward_warps_algorithm() {
  AlgorithmSpec a;
  a.name = "warps";
  a.compact_experts = true;
  a.source_name = "nf4_forward_warps.cl";
  a.params = {
      {"WGS", 128, {64, 128, 256}, "work-items per workgroup: WGS / 32 warps sharing one pair table"},
      {"CW", 16, {16, 32}, "codes per lane chunk (16, 32: one 8- or 16-byte load per W row)"},
      {"RB", 8, {4, 8, 16}, "W rows (output columns) per batch of a warp"},
      {"TR", 1, {1, 2, 4}, "tile rows: segment rows whose x chunks each lane keeps in registers"},
      {"NB", 4, {1, 4, 16}, "W row batches per warp, strided over all warps"},
      {"PF", 0, {0, 1}, "1: each pass's loads issued before the previous pass is decoded (two register sets)"},
      {"LT", 0, {0, 1}, "1: a tile's row 0 multiplied without a test (it always exists)"},
      {"XL",
       0,
       {0, 2048, 4096},
       "x of the tile rows staged in local memory as f32, XL codes at a time (0: every warp loads x in every pass)"},
      register_target_param(),
  };
  a.constraints = {
      constraint("RB * TR <= 32 (accumulator registers)",
                 [](const Params& p) { return param(p, "RB") * param(p, "TR") <= 32; }),
      constraint("RB * CW <= 256 (code registers)",
                 [](const Params& p) { return param(p, "RB") * param(p, "CW") <= 256; }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) -> std::uint64_t {
    // Pair table; the staged x (XL codes of each tile row), which holds the codebook too,
    // or else the codebook; and the partials of the reduction, declared only without warp
    // shuffles (NVIDIA's platform reduces by shuffles: ptx_binaries), in rounds of up to 8
    // outputs.
    const std::uint64_t round = std::min<std::int64_t>(8, param(p, "RB") * param(p, "TR"));
    const std::uint64_t staged = param(p, "XL") > 0 ? 4ull * param(p, "XL") * param(p, "TR") : 4ull * 16;
    const std::uint64_t partials = limits.ptx_binaries ? 0 : 4ull * param(p, "WGS") * (round + 1);
    return 256 * 16 * 8 + staged + partials;
  };
  a.local_size = wgs_local_size;
  return a;
}

// Decode on GPUs with tensor cores: W tiles of 16 rows as the A operand of mma.sync
// m16n8k16, up to 8 segment rows as B; codes decoded through a 32 KiB table of byte pairs.
// Half inputs multiply in their own type, f32 inputs in two f16 parts each (docs/nf4.md).
// Without OCLTK_PTX the product is emulated through local memory: correct everywhere, fast
// only on NVIDIA, so the tuner searches it only where mma.sync exists (sm_80 and newer).
std::string type_variant(ElementType type) { return " -DNF4_TYPE=" + std::to_string(int(type)); }

// A parameter read only on the f32 path (ParamSpec::only_input_bits).
ParamSpec f32_only(ParamSpec spec) {
  spec.only_input_bits = 32;
  return spec;
}

// How the split backwards (stream, tc) add their splits' partial sums (kernels/nf4_splits.clh):
// a second kernel everywhere, or OpenCL C 2.0 device-scope atomics where the device has them.
// Refined last: it shifts a point's time by about a launch, not where the best point lies.
ParamSpec split_sum_param() {
  ParamSpec spec{"SPLIT_SUM",
                 0,
                 {0, 1},
                 "splits of N added by a second kernel (0: any device) or by the last split to finish (1: OpenCL C "
                 "2.0 device-scope atomics, where the device reports them)",
                 /*refined_last=*/true};
  spec.needs_device_atomics = true;
  return spec;
}

AlgorithmSpec forward_tc_algorithm() {
  AlgorithmSpec a;
  a.name = "tc";
  a.source_name = "nf4_forward_tc.cl";
  a.params = {
      {"WGS", 128, {64, 128, 256}, "work-items per workgroup: WGS / 32 warps sharing one pair table"},
      {"RT", 2, {1, 2, 4}, "tiles of 16 W rows per batch (x of a step loaded once for all)"},
      {"NB", 1, {1, 4, 16}, "W row batches per team of KS warps, strided over all teams"},
      {"PF", 1, {0, 1, 2}, "groups of 4 steps whose codes and scales are loaded ahead of the group being multiplied"},
      {"KS", 1, {1, 2, 4, 8}, "warps sharing one batch, each sweeping a part of K (sums met in local memory)"},
      {"LW",
       0,
       {0, 1},
       "1: the loads PF groups ahead are issued once the codes of the group about to be multiplied are in (a "
       "steady loop without tests); 0: before them"},
      f32_only({"XS",
                1,
                {1, 0},
                "f32 input split into f16 hi and lo parts once per launch by a pre-pass (nf4_split_x: 1) or by every "
                "warp in each step (0)"}),
      f32_only({"FR",
                8,
                {8, 4},
                "f32 input: segment rows a pass, a column each with three products a step (8), or two columns each "
                "(x's hi and lo parts) with two products a step (4)"}),
      register_target_param(),
  };
  a.constraints = {
      constraint("RT * (PF + 1) <= 4 (registers of the loads in flight)",
                 [](const Params& p) { return param(p, "RT") * (param(p, "PF") + 1) <= 4; }),
      constraint("KS <= WGS / 32 (warps of a workgroup)",
                 [](const Params& p) { return param(p, "KS") <= param(p, "WGS") / 32; }),
      constraint("LW 1 needs PF >= 1 (loads ahead)",
                 [](const Params& p) { return param(p, "LW") == 0 || param(p, "PF") >= 1; }),
  };
  a.search_needs_tensor_mma = true;
  // One program per element type (NF4_TYPE = ElementType's value): only that type's path is
  // compiled, which saves registers. The tuner measures f32.
  a.tuned_variant = type_variant(ElementType::f32);
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    // Codebook, pair table, the sums of a tile (KS > 1), and the emulated product's words
    // (declared only without OCLTK_PTX, so on NVIDIA this overcounts).
    return 4ull * 16 + 256 * 32 * 4 + (param(p, "KS") > 1 ? 16ull * param(p, "WGS") : 0) + 4ull * 6 * param(p, "WGS");
  };
  a.local_size = wgs_local_size;
  return a;
}

// Many rows per expert on GPUs with tensor cores: the tiled algorithm's grid (a workgroup per
// (segment row tile, tile of output columns)) with gemm_nt's tc pipeline (kernels/tc_mma.clh);
// each step's W tile is decoded into local memory once for MWG segment rows, the activations
// copied beside it, both multiplied by mma.sync (f32 input by 3×TF32). Emulated without
// OCLTK_PTX, as tc. The backward decodes W transposed (kernels/nf4_tc_tiled.clh).
AlgorithmSpec tc_tiled_algorithm(bool forward) {
  AlgorithmSpec a;
  a.name = "tc_tiled";
  a.source_name = forward ? "nf4_forward_tc_tiled.cl" : "nf4_backward_tc_tiled.cl";
  a.params = {
      {"MWG", 128, {32, 64, 128, 256}, "segment rows per tile (activation rows multiplied by each decoded W tile)"},
      {"NWG", 128, {32, 64, 128, 256}, "output columns per tile (W rows forward, W columns backward)"},
      {"KCH",
       4,
       {2, 4, 8, 16},
       "16-byte chunks of K per local row and stage (K columns: 8 KCH for f16/bf16, 4 KCH for f32)"},
      {"MWARPS", 2, {1, 2, 4}, "warps along the segment rows in a workgroup"},
      {"NWARPS", 2, {1, 2, 4}, "warps along N in a workgroup"},
      {"STAGES", 3, {2, 3, 4}, "local buffers of activation and W tiles (copied and decoded STAGES - 1 steps ahead)"},
      {"CPASYNC", 2, {2, 1}, "activation copies to local memory: 1 by cp.async past L1 (.cg), 2 through L1 (.ca)"},
      {"LDSM", 1, {1, 0}, "fragments: 1 by ldmatrix, 0 by one local load per word"},
      {"SWZ", 1, {2, 1, 0}, "local rows: 0 plain, 1 XOR-swizzled chunks, 2 padded by 16 bytes"},
      register_target_param(),
  };
  const auto wgs = [](const Params& p) { return detail::tc_group_size(p); };
  a.constraints = detail::tc_mma_tile_constraints();
  a.constraints.push_back(constraint(
      "ceil(MWG * KCH / WGS) <= 32 (activation chunks a work-item copies per stage, WGS = 32 * MWARPS * NWARPS)",
      [wgs](const Params& p) { return ceil_div(param(p, "MWG") * param(p, "KCH"), wgs(p)) <= 32; }));
  a.constraints.push_back(
      constraint("ceil(NWG * KCH / WGS) <= 16 (words of codes a work-item holds per stage)",
                 [wgs](const Params& p) { return ceil_div(param(p, "NWG") * param(p, "KCH"), wgs(p)) <= 16; }));
  a.constraints.push_back(detail::tc_mma_accumulator_constraint());
  // gemm_nt tc's pruning, from the same pipeline's measurements on the H200.
  a.search_pruning = detail::tc_mma_search_pruning();
  a.search_needs_tensor_mma = true;
  // On the H200 the shipped prefill entries are large_tf32x3's tile (MWG, NWG 128, two by two
  // warps, KCH 4, STAGES 2) but for CPASYNC and REGS.
  a.tiles_like = {"gemm_nt/tc"};
  a.tuned_variant = type_variant(ElementType::bf16);
  // Without OCLTK_PTX the codebook (64 bytes) beside the emulation's words.
  a.local_mem_bytes = [](const Params& p, const DeviceLimits& limits) {
    return detail::tc_mma_local_mem_bytes(p, limits, 64);
  };
  a.local_size = [wgs](const Params& p) -> std::array<std::size_t, 2> { return {std::size_t(wgs(p)), 1}; };
  return a;
}

// The input gradient on tensor cores: mma.sync m16n8k16 reduces over 16 W rows at a time
// (A: code pairs of two W rows at one k, from the pair table; B: g times the rows' block
// scales), up to 8 segment rows per mma; bf16 grads multiply in bf16, f32 and f16 grads in
// three bf16 parts each (docs/nf4.md). Emulated without OCLTK_PTX, as the forward's tc.
AlgorithmSpec backward_tc_algorithm() {
  AlgorithmSpec a;
  a.name = "tc";
  a.source_name = "nf4_backward_tc.cl";
  a.params = {
      {"WGS", 128, {64, 128, 256}, "work-items per workgroup: WGS / 32 warps sweeping shares of one split's W rows"},
      {"KG", 1, {1, 2, 4}, "groups of 64 k per workgroup (its k tile; 4 mma per group and step of 16 W rows)"},
      {"RT", 1, {1, 2}, "row tiles of 8 segment rows per pass over the weights"},
      {"PF", 2, {1, 2, 4}, "steps of 16 W rows loaded together, the next PF loaded before these are multiplied"},
      {"NSPLIT", 1, {1, 4, 16}, "workgroups sharing one (expert, k tile)'s sweep over N (raised to fill the device)"},
      register_target_param(),
      split_sum_param(),
  };
  a.constraints = {
      constraint("KG * RT <= 4 (accumulator registers)",
                 [](const Params& p) { return param(p, "KG") * param(p, "RT") <= 4; }),
      constraint("PF * KG <= 4 (registers of the loads in flight)",
                 [](const Params& p) { return param(p, "PF") * param(p, "KG") <= 4; }),
  };
  a.search_needs_tensor_mma = true;
  a.tuned_variant = type_variant(ElementType::f32);
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    // Codebook, pair table, the split flag, the warps' reduction rounds (8 sums a lane),
    // and the emulated product's words (declared only without OCLTK_PTX).
    const std::uint64_t wgs = param(p, "WGS");
    return 4ull * 16 + 256 * 8 * 16 + 4 + 4ull * (wgs / 32 - 1) * 8 * 32 + 4ull * 6 * wgs;
  };
  a.local_size = wgs_local_size;
  return a;
}

AlgorithmSpec backward_stream_algorithm() {
  AlgorithmSpec a;
  a.name = "stream";
  a.compact_experts = true;
  a.source_name = "nf4_backward_stream.cl";
  a.params = {
      {"NL", 2, {1, 2, 4, 8}, "slices of 32 work-items per workgroup, each sweeping every NL-th W row"},
      {"VW", 16, {16, 32}, "consecutive k per work-item (16: one 8-byte load of codes per W row, 32: 16 bytes)"},
      {"UNROLL", 4, {2, 4, 8}, "W rows each work-item loads before decoding any (loads in flight)"},
      {"TR", 4, {1, 2, 4, 8}, "tile rows: segment rows accumulated at once (weight reuse)"},
      {"NSPLIT", 8, {1, 8, 32}, "workgroups sharing one (expert, k tile)'s sweep over N (raised to fill the device)"},
      {"LUT", 1, {1, 2}, "aligned decode: 1 a codebook lookup per code, 2 a 32 KiB pair table, one lookup per byte"},
      register_target_param(),
      split_sum_param(),
  };
  a.constraints = {
      constraint("TR * VW <= 128 (accumulator registers)",
                 [](const Params& p) { return param(p, "TR") * param(p, "VW") <= 128; }),
      constraint("UNROLL * VW <= 128 (load registers)",
                 [](const Params& p) { return param(p, "UNROLL") * param(p, "VW") <= 128; }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    return 4ull * (16 + 1 + (param(p, "NL") - 1) * 32 * param(p, "VW")) + (param(p, "LUT") == 2 ? 256 * 16 * 8 : 0);
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> { return {std::size_t(32 * param(p, "NL")), 1}; };
  return a;
}

AlgorithmSpec tiled_algorithm() {
  AlgorithmSpec a;
  a.name = "tiled";
  a.source_name = "nf4_tiled.cl";
  a.params = {
      {"MWG", 32, {8, 16, 32, 64}, "segment rows per tile"},
      {"NWG", 32, {8, 16, 32, 64}, "output columns per tile (weight rows or columns decoded per step)"},
      {"KWG", 32, {16, 32, 64}, "reduction steps staged per local-memory step"},
      {"MDIMC", 8, {4, 8, 16}, "work-items along the rows"},
      {"NDIMC", 8, {4, 8, 16}, "work-items along the output columns"},
  };
  a.constraints = {
      constraint("MWG % MDIMC == 0", [](const Params& p) { return param(p, "MWG") % param(p, "MDIMC") == 0; }),
      constraint("NWG % NDIMC == 0", [](const Params& p) { return param(p, "NWG") % param(p, "NDIMC") == 0; }),
      constraint("MWG / MDIMC * NWG / NDIMC <= 64 (accumulator registers)",
                 [](const Params& p) {
                   return (param(p, "MWG") / param(p, "MDIMC")) * (param(p, "NWG") / param(p, "NDIMC")) <= 64;
                 }),
  };
  a.local_mem_bytes = [](const Params& p, const DeviceLimits&) -> std::uint64_t {
    return 4ull * (16 + (param(p, "MWG") + param(p, "NWG")) * (param(p, "KWG") + 1));
  };
  a.local_size = [](const Params& p) -> std::array<std::size_t, 2> {
    return {std::size_t(param(p, "NDIMC")), std::size_t(param(p, "MDIMC"))};
  };
  return a;
}

const std::vector<ShapeClassSpec>& nf4_classes() {
  static const std::vector<ShapeClassSpec> classes = {
      {"decode", "rows per expert with rows <= 16"},
      {"small_batch", "16 < rows per expert with rows <= 128"},
      {"prefill", "rows per expert with rows > 128"},
  };
  return classes;
}

// Workgroups along dimension 0 when each serves up to `per_group` batches of `batch_rows`
// W rows (warps and tc stride their batches over the workgroups).
std::size_t batch_groups(std::int64_t n, std::int64_t batch_rows, std::int64_t per_group) {
  return std::size_t(ceil_div(ceil_div(n, batch_rows), per_group));
}

Error invalid(const std::string& message) { return Error(ErrorCode::kInvalidArgument, message); }

// Throws unless `buffer` is a valid buffer of this runtime's context holding `needed`
// bytes. A null buffer passes only when nothing is needed from it (an empty owner).
void check_buffer(Runtime& rt, const std::string& who, const char* name, cl_mem buffer, double needed) {
  if (buffer == nullptr) {
    if (needed <= 0) return;
    throw invalid(who + ": buffer " + name + " is null");
  }
  cl_context ctx = nullptr;
  std::size_t bytes = 0;
  if (clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS ||
      clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof bytes, &bytes, nullptr) != CL_SUCCESS)
    throw invalid(who + ": buffer " + name + " is not a valid OpenCL buffer");
  if (ctx != rt.context().get()) throw invalid(who + ": buffer " + name + " belongs to another OpenCL context");
  if (needed > double(bytes))
    throw invalid(who + ": buffer " + name + " holds " + std::to_string(bytes) + " bytes but the geometry needs " +
                  std::to_string(std::uint64_t(needed)));
}

void check_weights(Runtime& rt, const std::string& who, const Nf4Weights& w) {
  w.geometry.validate(who);
  check_buffer(rt, who, "packed", w.packed,
               w.geometry.packed_bytes() ? double(w.packed_offset) + w.geometry.packed_bytes() : 0);
  check_buffer(rt, who, "scales", w.scales,
               w.geometry.scale_count() ? 4.0 * (double(w.scales_offset) + w.geometry.scale_count()) : 0);
  if (w.codebook == nullptr) throw invalid(who + ": buffer codebook is null (16 f32 values are always required)");
  check_buffer(rt, who, "codebook", w.codebook, 64);
}

// The experts with rows of a checked launch: `choose`, the count the profile's entry is chosen
// by (counted from the offsets where they are read back, else the caller's, else `most`, an
// even spread); `counted`, the count read back (-1 without a read-back); `most`, min(rows,
// experts), which no offsets that never decrease exceed. The grid makes room for `counted`
// or `most` (slots_for; the caller's count is not trusted with that); fewer slots than
// experts make the launch compact (nf4_slot_expert in kernels/nf4_common.clh).
// `max_rows`, the most rows on one expert the entry is chosen by: read back, else the
// caller's, else -1 (an even spread's: max_expert_rows_of).
struct ActiveExperts {
  std::int64_t choose, counted, most, max_rows;

  // The slots of a launch: the count read back only where the read-back (a blocking read on
  // the runtime's queue) saw what the launch will, i.e. it runs on that queue and waits for
  // nothing else; else `most`, so that offsets written behind a wait list are all served.
  std::int64_t slots_for(Runtime& rt, const Launch& launch) const {
    const bool ordered = (launch.queue == nullptr || launch.queue == rt.queue().get()) && launch.wait_for.empty();
    return ordered && counted >= 0 ? counted : most;
  }
};

// The caller's counts of a launch of `rows` rows checked against them and the experts, and
// what a launch that does not read its offsets back chooses its entry by (`counted` -1).
ActiveExperts expected_active(const std::string& who, const Nf4Geometry& g, std::int64_t rows, std::int64_t active,
                              std::int64_t max_rows) {
  if (rows < 0) throw invalid(who + ": rows = " + std::to_string(rows) + " is negative");
  if (rows >= kNf4MaxDim)
    throw invalid(who + ": rows = " + std::to_string(rows) + " exceeds the kernel limit of 2^30 - 1 rows");
  if (g.experts == 0 && rows > 0)
    throw invalid(who + ": " + std::to_string(rows) + " rows given to an empty owner (0 experts)");
  const std::int64_t most = std::min(rows, g.experts), least = rows > 0 ? 1 : 0;
  if (active != -1 && (active < least || active > most))
    throw invalid(who + ": active_experts = " + std::to_string(active) + " is neither -1 (unknown) nor in [" +
                  std::to_string(least) + ", " + std::to_string(most) + "] (" + std::to_string(rows) + " rows over " +
                  std::to_string(g.experts) + " experts)");
  if (max_rows != -1) {
    // Where the experts with rows are unknown, the loosest of their possible counts at each
    // end: as many as can be (the lowest least), and one (the highest most).
    const std::int64_t lo = max_expert_rows_range(rows, active >= 0 ? active : most).first;
    const std::int64_t hi = max_expert_rows_range(rows, active >= 0 ? active : std::min<std::int64_t>(rows, 1)).second;
    if (max_rows < lo || max_rows > hi)
      throw invalid(who + ": max_expert_rows = " + std::to_string(max_rows) + " is neither -1 (unknown) nor in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "] (" + std::to_string(rows) + " rows over " +
                    (active >= 0 ? std::to_string(active) : "at most " + std::to_string(most)) + " experts with rows)");
  }
  // Without a count of the experts with rows, the longest segment given bounds them: it
  // leaves rows - max_rows to the others, at most one expert a row.
  const std::int64_t choose = active >= 0 ? active : max_rows >= 0 ? std::min(most, rows - max_rows + 1) : most;
  return {choose, -1, most, max_rows};
}

// Shared by both directions: rows, activations in (width in_width), out (width out_width),
// the offsets, the caller's count of experts with rows (`active`) and of the most rows on one
// of them (`max_rows`), each -1 where unknown.
ActiveExperts check_segmented(Runtime& rt, const std::string& who, const Nf4Weights& w, std::int64_t rows, cl_mem in,
                              const char* in_name, std::size_t in_esize, std::int64_t in_width, cl_mem out,
                              const char* out_name, std::size_t out_esize, std::int64_t out_width, cl_mem offsets,
                              bool validate_offsets, std::int64_t active, std::int64_t max_rows) {
  check_weights(rt, who, w);
  const Nf4Geometry& g = w.geometry;
  const ActiveExperts expected = expected_active(who, g, rows, active, max_rows);
  if (offsets == nullptr) throw invalid(who + ": buffer offsets is null");
  check_buffer(rt, who, "offsets", offsets, 4.0 * double(g.experts + 1));
  check_buffer(rt, who, in_name, in, double(rows) * in_width * in_esize);
  check_buffer(rt, who, out_name, out, double(rows) * out_width * out_esize);
  if (!validate_offsets) return expected;
  std::vector<std::uint32_t> host(std::size_t(g.experts + 1));
  detail::check_cl(
      clEnqueueReadBuffer(rt.queue().get(), offsets, CL_TRUE, 0, host.size() * 4, host.data(), 0, nullptr, nullptr),
      who + ": reading the offsets back");
  validate_nf4_offsets(host.data(), host.size(), g.experts, rows, who);
  const std::int64_t counted = nf4_active_experts(host.data(), host.size());
  if (active >= 0 && active != counted)
    throw invalid(who + ": active_experts = " + std::to_string(active) + " but the offsets give rows to " +
                  std::to_string(counted) + " experts");
  const std::int64_t longest = nf4_max_expert_rows(host.data(), host.size());
  if (max_rows >= 0 && max_rows != longest)
    throw invalid(who + ": max_expert_rows = " + std::to_string(max_rows) + " but the offsets give at most " +
                  std::to_string(longest) + " rows to one expert");
  return {counted, counted, expected.most, longest};
}

// Scratch of the launches on one command queue: the split backwards' partial sums and one
// counter per (expert, k tile), and the forward tc's split f32 x (XS) with its shifts.
// Launches on an in-order queue run one after the other, so they share it safely. Grown,
// never shrunk, kept for the life of the process (the map is never destroyed, so no OpenCL
// object is released after the driver has unloaded). Counters are created zeroed and every
// launch leaves them at zero.
struct QueueScratch {
  boost::compute::buffer partials, counters, x_pairs, x_shifts;
};

std::mutex& queue_scratch_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The queue's scratch; the caller holds queue_scratch_mutex().
QueueScratch& queue_scratch(cl_command_queue queue) {
  static auto* by_queue = new std::map<cl_command_queue, QueueScratch>();
  return (*by_queue)[queue];
}

// Grows b to at least `bytes`, in 4 MiB steps.
void grow_scratch(Runtime& rt, boost::compute::buffer& b, std::size_t bytes) {
  constexpr std::size_t kGrain = std::size_t(1) << 22;
  if (b.get() == nullptr || b.size() < bytes)
    b = boost::compute::buffer(rt.context(), (bytes + kGrain - 1) / kGrain * kGrain);
}

struct SplitScratch {
  boost::compute::buffer partials, counters;
};

// counter_bytes 0: no counters (SPLIT_SUM 0 adds the splits in a second kernel).
SplitScratch split_scratch(Runtime& rt, cl_command_queue queue, std::size_t partial_bytes, std::size_t counter_bytes) {
  std::lock_guard<std::mutex> lock(queue_scratch_mutex());
  QueueScratch& s = queue_scratch(queue);
  grow_scratch(rt, s.partials, partial_bytes);
  if (counter_bytes > 0 && (s.counters.get() == nullptr || s.counters.size() < counter_bytes)) {
    const std::size_t bytes = (counter_bytes + 4095) / 4096 * 4096;
    std::vector<std::uint32_t> zeros(bytes / 4, 0);
    s.counters = boost::compute::buffer(rt.context(), bytes, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.data());
  }
  return {s.partials, s.counters};
}

// The forward tc's split f32 x of `rows` × K: the f16 pairs (as many bytes as x) and one
// shift per 64 values.
struct XSplitScratch {
  boost::compute::buffer pairs, shifts;
};

XSplitScratch x_split_scratch(Runtime& rt, cl_command_queue queue, std::int64_t rows, std::int64_t k) {
  std::lock_guard<std::mutex> lock(queue_scratch_mutex());
  QueueScratch& s = queue_scratch(queue);
  grow_scratch(rt, s.x_pairs, std::size_t(rows * k * 4));
  grow_scratch(rt, s.x_shifts, std::size_t(rows * (k / 64) * 4));
  return {s.x_pairs, s.x_shifts};
}

// Whether nf4_forward_tc.cl takes its aligned path (its `aligned`): every step of 64 codes
// inside one block, 8-byte aligned, K a multiple of the block.
bool tc_forward_aligned(const Nf4Weights& w) {
  const Nf4Geometry& g = w.geometry;
  return g.in_features % 64 == 0 && g.element_offset % 64 == 0 && w.packed_offset % 8 == 0 && g.block_size >= 64 &&
         g.in_features % g.block_size == 0;
}

// The splits of N of a backward launch of `algorithm` at `p` over `slots` experts with rows
// (ActiveExperts::slots_for): the stream and tc backwards divide each (expert, k tile)'s sweep
// over N into stream_splits; the others do not split (1).
std::int64_t backward_splits(Runtime& rt, const AlgorithmSpec& algorithm, const Params& p, const Nf4Geometry& g,
                             std::int64_t rows, std::int64_t slots) {
  const bool stream = algorithm.name == "stream";
  if (!stream && algorithm.name != "tc") return 1;
  // One workgroup per (k tile, split of N): stream's tile is 32·VW k, tc's 64·KG.
  const std::int64_t ktiles = ceil_div(g.in_features, stream ? 32 * param(p, "VW") : 64 * param(p, "KG"));
  const bool compact = algorithm.compact_experts && slots < g.experts;
  return detail::stream_splits(param(p, "NSPLIT"), g, rows, compact ? slots : g.experts, ktiles,
                               std::int64_t(rt.device().compute_units));
}

struct Direction {
  const char* who;
  bool forward;
  cl_mem in, out;
  ElementType type;
};

// What a launch of `choice` runs, resolved before its arguments: its algorithm (tiled's, at its
// defaults, for a tc_tiled f32 launch whose sum is too short for 3xTF32), its parameters
// completed, its kernels in order and its build variant.
struct Nf4Launch {
  const AlgorithmSpec* algorithm;
  Choice used;
  std::vector<std::string> kernel_names;
  std::string variant;
};

// Which paths a launch of `algorithm` at `p` takes, and its kernels. Per launch, so no strings
// are built here: the kernels' names only where a plan is made (names()).
struct Nf4Kernels {
  bool tiled, stream, warps, tc;
  bool split_x;                             // the forward tc with f32 input and XS 1: nf4_split_x splits x first
  bool split_backward;                      // the stream and tc backwards: splits of N
  bool add_pass;                            // with SPLIT_SUM 0: nf4_add_splits adds the splits after the product
  const std::string* product;               // the product's kernel
  std::vector<std::string> names() const {  // in the order they run
    std::vector<std::string> out;
    if (split_x) out.push_back("nf4_split_x");
    out.push_back(*product);
    if (add_pass) out.push_back("nf4_add_splits");
    return out;
  }
};

Nf4Kernels nf4_kernels(const AlgorithmSpec& algorithm, const Params& p, const Nf4Weights& w, const Direction& d) {
  static const std::string products[2][2] = {{"nf4_backward", "nf4_forward"},
                                             {"nf4_backward_tiled", "nf4_forward_tiled"}};
  Nf4Kernels k;
  // tc_tiled shares tiled's kernel names, arguments and grid (kernels/nf4_tc_tiled.clh).
  k.tiled = algorithm.name == "tiled" || algorithm.name == "tc_tiled";
  k.stream = algorithm.name == "stream";
  k.warps = algorithm.name == "warps";
  k.tc = algorithm.name == "tc";
  k.product = &products[k.tiled ? 1 : 0][d.forward ? 1 : 0];
  // The x split runs in the same chain; the add pass too (kernels/nf4_splits.clh).
  k.split_x = k.tc && d.forward && d.type == ElementType::f32 && param(p, "XS") == 1 && tc_forward_aligned(w);
  k.split_backward = (k.stream || k.tc) && !d.forward;
  k.add_pass = k.split_backward && param(p, "SPLIT_SUM") == 0;
  return k;
}

Nf4Launch resolve_nf4(const KernelFamily& family, const Choice& choice, const Nf4Weights& w, const Direction& d) {
  const AlgorithmSpec* algorithm = family.find_algorithm(choice.algorithm);
  if (algorithm == nullptr) throw invalid(family.name + " has no algorithm '" + choice.algorithm + "'");
  Choice used = choice;
  used.kernel = family.name;
  used.params = algorithm->complete(choice.params);
  const Nf4Geometry& g = w.geometry;
  if (algorithm->name == "tc_tiled" && d.type == ElementType::f32 &&
      (d.forward ? g.in_features : g.out_features) < kTf32x3MinK) {
    // 3×TF32 holds the f32 bound from sums of kTf32x3MinK on (kernels/tc_mma.clh): a shorter
    // sum (K forward, N backward) takes the tiled algorithm, which shares the launch, at its
    // defaults.
    algorithm = family.find_algorithm("tiled");
    used.algorithm = algorithm->name;
    used.params = algorithm->defaults();
  }
  std::vector<std::string> names = nf4_kernels(*algorithm, used.params, w, d).names();
  return {algorithm, std::move(used), std::move(names), nf4_launch_variant(*algorithm, d.type)};
}

// A launch with nothing to compute still honours the event contract with a marker (both events).
void enqueue_nothing(Runtime& rt, const Launch& launch_options) {
  if (!launch_options.event && !launch_options.first_event) return;
  cl_command_queue queue = launch_options.queue ? launch_options.queue : rt.queue().get();
  cl_event marker = nullptr;
  detail::check_cl(
      clEnqueueMarkerWithWaitList(queue, cl_uint(launch_options.wait_for.size()),
                                  launch_options.wait_for.empty() ? nullptr : launch_options.wait_for.data(), &marker),
      "clEnqueueMarkerWithWaitList");
  if (launch_options.event && launch_options.first_event) clRetainEvent(marker);
  if (launch_options.first_event) *launch_options.first_event = marker;
  if (launch_options.event) *launch_options.event = marker;
}

// Enqueues one segmented product of a plan (resolve_nf4's launch), on a grid of `slots` experts
// with rows (ActiveExperts): compact where that is fewer than the experts. Problems are split
// into dispatches of at most max_groups_per_dispatch workgroups along dimension 1.
void enqueue_nf4(Runtime& rt, const Runtime::LaunchPlan& plan, const Nf4Weights& w, std::int64_t rows,
                 std::int64_t slots, cl_mem offsets, const Direction& d, const Launch& launch_options) {
  const AlgorithmSpec* algorithm = plan.algorithm;
  const Params& p = plan.choice->params;
  const Nf4Geometry& g = w.geometry;
  const Nf4Kernels paths = nf4_kernels(*algorithm, p, w, d);
  const bool tiled = paths.tiled, warps = paths.warps, tc = paths.tc, stream = paths.stream;
  const bool split_x = paths.split_x, split_backward = paths.split_backward, add_pass = paths.add_pass;
  const std::string& kernel_name = *paths.product;
  const std::int64_t cap =
      rt.options().max_groups_per_dispatch > 0 ? rt.options().max_groups_per_dispatch : std::int64_t(65535);
  rt.launch(plan, [&](const std::vector<cl_kernel>& kernels) {
    // The product, and the pre-pass and the add pass where there are (else the product).
    cl_kernel kernel = kernels[split_x ? 1 : 0], split_kernel = kernels.front(), add_kernel = kernels.back();
    const cl_int N = cl_int(g.out_features), K = cl_int(g.in_features), R = cl_int(rows), E = cl_int(g.experts);
    const cl_long eoff = g.element_offset, poff = cl_long(w.packed_offset), soff = cl_long(w.scales_offset);
    int lb = 0;
    while ((std::int64_t(1) << lb) < g.block_size) ++lb;
    const cl_int log2_block = lb;
    const cl_int type = cl_int(d.type);
    cl_mem packed = w.packed, scales = w.scales, codebook = w.codebook, in = d.in, out = d.out, offs = offsets;
    // A window with coefficients always has bytes and scales (checked); never null here.
    // The workgroup's shape comes from the table (local_size); dimension 1 numbers the
    // experts, or in a compact launch the experts with rows (nf4_slot_expert), but for tiled.
    const std::array<std::size_t, 2> ls = algorithm->local_size(p);
    const std::size_t local[2] = {ls[0], ls[1]};
    const cl_int compact = algorithm->compact_experts && slots < g.experts ? E : 0;
    std::size_t groups0;
    std::int64_t groups1 = compact ? slots : g.experts;
    // The stream and tc backwards only: splits of N, and their scratch when there are several.
    cl_int splits = 1;
    SplitScratch scratch;
    cl_mem partials = nullptr, counters = nullptr;
    if (tiled) {
      const std::int64_t cols = d.forward ? g.out_features : g.in_features;
      groups0 = std::size_t(ceil_div(cols, param(p, "NWG")));
      groups1 = ceil_div(rows, param(p, "MWG")) + g.experts;  // upper bound on (expert, row tile) pairs
    } else if (warps) {
      // WGS / 32 warps per workgroup, each serving up to NB batches of RB W rows.
      groups0 = batch_groups(g.out_features, param(p, "RB"), (param(p, "WGS") / 32) * param(p, "NB"));
    } else if (split_backward) {
      // One workgroup per (k tile, split of N).
      splits = cl_int(backward_splits(rt, *algorithm, p, g, rows, slots));
      groups0 = std::size_t(ceil_div(g.in_features, stream ? 32 * param(p, "VW") : 64 * param(p, "KG")) * splits);
    } else if (tc) {
      // WGS / 32 / KS teams of KS warps per workgroup, each serving up to NB batches of RT
      // tiles of 16 W rows.
      groups0 =
          batch_groups(g.out_features, 16 * param(p, "RT"), (param(p, "WGS") / 32 / param(p, "KS")) * param(p, "NB"));
    } else {  // the stream forward (the backward is above)
      groups0 = std::size_t(ceil_div(g.out_features, param(p, "WGS") / param(p, "RL")));
    }
    if (splits > 1) {
      // Partial sums of every split, and for SPLIT_SUM 1 a counter per (expert, k tile):
      // groups0 / splits.
      cl_command_queue queue = launch_options.queue ? launch_options.queue : rt.queue().get();
      scratch = split_scratch(rt, queue, std::size_t(splits * rows * g.in_features * 4),
                              add_pass ? 0 : std::size_t(g.experts * std::int64_t(groups0 / std::size_t(splits)) * 4));
      partials = scratch.partials.get();
      counters = scratch.counters.get();
    }
    detail::DispatchChain chain(rt.queue().get(), rt.queue_out_of_order(), launch_options);
    // tc forward: the split x (XS) or, where it is not used, any buffer.
    cl_mem x_pairs = in, x_shifts = in;
    XSplitScratch x_split;
    if (split_x) {
      cl_command_queue queue = launch_options.queue ? launch_options.queue : rt.queue().get();
      x_split = x_split_scratch(rt, queue, rows, g.in_features);
      x_pairs = x_split.pairs.get();
      x_shifts = x_split.shifts.get();
      detail::set_kernel_args(
          split_kernel,
          {{sizeof R, &R}, {sizeof K, &K}, {sizeof in, &in}, {sizeof x_pairs, &x_pairs}, {sizeof x_shifts, &x_shifts}},
          "nf4_split_x");
      // Four work-items per row and step of 64 values.
      const std::size_t items = std::size_t(rows * (g.in_features / 64) * 4);
      const std::size_t split_global = (items + local[0] - 1) / local[0] * local[0];
      chain.enqueue(split_kernel, 1, &split_global, local, "nf4_split_x");
    }
    for (std::int64_t base = 0; base < groups1; base += cap) {
      const cl_int base_i = cl_int(base);
      detail::KernelArgs kargs = {{sizeof N, &N}, {sizeof K, &K}, {sizeof R, &R}};
      if (tiled) kargs.push_back({sizeof E, &E});
      kargs.push_back({sizeof base_i, &base_i});
      if (algorithm->compact_experts) kargs.push_back({sizeof compact, &compact});
      kargs.insert(kargs.end(), {{sizeof eoff, &eoff},
                                 {sizeof log2_block, &log2_block},
                                 {sizeof packed, &packed},
                                 {sizeof poff, &poff},
                                 {sizeof scales, &scales},
                                 {sizeof soff, &soff},
                                 {sizeof codebook, &codebook},
                                 {sizeof in, &in},
                                 {sizeof type, &type},
                                 {sizeof offs, &offs},
                                 {sizeof out, &out}});
      if (split_backward)
        kargs.insert(kargs.end(),
                     {{sizeof splits, &splits}, {sizeof partials, &partials}, {sizeof counters, &counters}});
      if (tc && d.forward) kargs.insert(kargs.end(), {{sizeof x_pairs, &x_pairs}, {sizeof x_shifts, &x_shifts}});
      detail::set_kernel_args(kernel, kargs, kernel_name);
      const std::size_t dispatch_groups1 = std::size_t(std::min(cap, groups1 - base));
      const std::size_t global[2] = {groups0 * local[0], dispatch_groups1 * local[1]};
      chain.enqueue(kernel, 2, global, local, kernel_name);
      if (add_pass && splits > 1) {
        // The same expert slots, one k per work-item.
        detail::set_kernel_args(add_kernel,
                                {{sizeof offs, &offs},
                                 {sizeof compact, &compact},
                                 {sizeof R, &R},
                                 {sizeof base_i, &base_i},
                                 {sizeof K, &K},
                                 {sizeof splits, &splits},
                                 {sizeof partials, &partials},
                                 {sizeof out, &out}},
                                "nf4_add_splits");
        const std::size_t add_global[2] = {std::size_t(ceil_div(g.in_features, std::int64_t(local[0]))) * local[0],
                                           dispatch_groups1};
        const std::size_t add_local[2] = {local[0], 1};
        chain.enqueue(add_kernel, 2, add_global, add_local, "nf4_add_splits");
      }
    }
    chain.finish();
  });
}

// A launch with an explicit choice (the *_with launches).
void enqueue_segmented(Runtime& rt, const KernelFamily& family, const Choice& choice, const Nf4Weights& w,
                       std::int64_t rows, std::int64_t slots, cl_mem offsets, const Direction& d,
                       const Launch& launch_options) {
  const Nf4Launch l = resolve_nf4(family, choice, w, d);
  if (rows == 0 || w.geometry.experts == 0) return enqueue_nothing(rt, launch_options);
  enqueue_nf4(rt, rt.make_plan(l.used, *l.algorithm, l.kernel_names, l.variant), w, rows, slots, offsets, d,
              launch_options);
}

double rows_per_active(std::int64_t rows, std::int64_t active) {
  return active > 0 ? double(rows) / double(active) : 0.0;
}

}  // namespace

namespace {

// Forward and backward share the classes, the tiled algorithm and the built-in choices;
// `more` are algorithms of one direction only, tuned but never a built-in choice.
KernelFamily nf4_family(const char* name, AlgorithmSpec stream, std::vector<AlgorithmSpec> more = {}) {
  KernelFamily f;
  f.name = name;
  f.algorithms = {tiled_algorithm(), std::move(stream)};
  for (AlgorithmSpec& a : more) f.algorithms.push_back(std::move(a));
  f.classes = nf4_classes();
  // From the recorded spaces (tests/data/spaces/, PoCL and the H200, both directions): stream
  // is the best algorithm for decode on PoCL and in the H200's backward; for small_batch this
  // tiled point is the one nearest every recording's best (geometric mean of the time ratios,
  // over the points all four recorded); prefill keeps its point, as near as any.
  f.builtin = {
      {"stream", {}},
      {"tiled", {{"MWG", 64}, {"NWG", 64}, {"KWG", 16}}},
      {"tiled", {{"MWG", 64}, {"NWG", 64}}},
  };
  return f;
}

}  // namespace

const KernelFamily& nf4_forward_family() {
  static const KernelFamily family =
      nf4_family("nf4_forward", forward_stream_algorithm(),
                 {forward_warps_algorithm(), forward_tc_algorithm(), tc_tiled_algorithm(true)});
  return family;
}

const KernelFamily& nf4_backward_family() {
  static const KernelFamily family =
      nf4_family("nf4_backward", backward_stream_algorithm(), {backward_tc_algorithm(), tc_tiled_algorithm(false)});
  return family;
}

std::string nf4_launch_variant(const AlgorithmSpec& algorithm, ElementType type) {
  return algorithm.tuned_variant.empty() ? std::string() : type_variant(type);
}

std::string nf4_shape_class(double rpe) {
  if (rpe <= 16) return "decode";
  if (rpe <= 128) return "small_batch";
  return "prefill";
}

std::map<std::string, std::int64_t> nf4_problem_of(std::int64_t rows, const Nf4Geometry& g, ElementType type,
                                                   std::int64_t active_experts, std::int64_t max_expert_rows) {
  std::map<std::string, std::int64_t> p{
      {"experts", g.experts}, {"n", g.out_features},        {"k", g.in_features},
      {"rows", rows},         {"block_size", g.block_size}, {"input_bits", type == ElementType::f32 ? 32 : 16}};
  if (active_experts >= 0) p["active"] = active_experts;
  if (max_expert_rows >= 0) p["max_rows"] = max_expert_rows;
  return p;
}

Nf4Problem nf4_class_problem(const std::string& shape_class, bool cpu_device) {
  // Fine-grained MoE geometry (64 experts, N=1408, K=2048) on GPUs; smaller on a CPU.
  Nf4Problem p = cpu_device ? Nf4Problem{8, 512, 1024, 8, 64} : Nf4Problem{64, 1408, 2048, 64, 64};
  if (shape_class == "decode") {
    // 4 rows per expert: the middle of the class (1 to 16), so the tuned tile rows
    // serve both ends (a tile skips the rows a segment does not have).
    p.rows = p.experts * 4;
    return p;
  }
  if (shape_class == "small_batch") {
    p.rows = p.experts * 64;
    return p;
  }
  if (shape_class == "prefill") {
    p.rows = p.experts * (cpu_device ? 256 : 512);
    return p;
  }
  throw Error(ErrorCode::kNotFound, "nf4 has no shape class '" + shape_class + "'");
}

namespace {

ActiveExperts check_forward(Runtime& rt, const Nf4ForwardArgs& a) {
  return check_segmented(rt, "nf4_forward", a.w, a.rows, a.input, "input", element_size(a.type),
                         a.w.geometry.in_features, a.output, "output", element_size(a.type), a.w.geometry.out_features,
                         a.offsets, a.validate_offsets, a.active_experts, a.max_expert_rows);
}

ActiveExperts check_backward(Runtime& rt, const Nf4BackwardArgs& a) {
  return check_segmented(rt, "nf4_backward", a.w, a.rows, a.grad, "grad", element_size(a.type),
                         a.w.geometry.out_features, a.grad_input, "grad_input", 4, a.w.geometry.in_features, a.offsets,
                         a.validate_offsets, a.active_experts, a.max_expert_rows);
}

Direction forward_direction(const Nf4ForwardArgs& a) { return {"nf4_forward", true, a.input, a.output, a.type}; }
Direction backward_direction(const Nf4BackwardArgs& a) { return {"nf4_backward", false, a.grad, a.grad_input, a.type}; }

void enqueue_forward(Runtime& rt, const Choice& choice, const Nf4ForwardArgs& a, std::int64_t slots,
                     const Launch& launch) {
  enqueue_segmented(rt, nf4_forward_family(), choice, a.w, a.rows, slots, a.offsets, forward_direction(a), launch);
}

void enqueue_backward(Runtime& rt, const Choice& choice, const Nf4BackwardArgs& a, std::int64_t slots,
                      const Launch& launch) {
  enqueue_segmented(rt, nf4_backward_family(), choice, a.w, a.rows, slots, a.offsets, backward_direction(a), launch);
}

// The profile's choice for a checked launch of `rows`.
Choice choose_segmented(Runtime& rt, const char* kernel, const Nf4Weights& w, std::int64_t rows, ElementType type,
                        const ActiveExperts& active) {
  return rt.choose(kernel, nf4_shape_class(rows_per_active(rows, active.choose)),
                   nf4_problem_of(rows, w.geometry, type, active.choose, active.max_rows));
}

// A launch with the profile's choice: its plan found by everything the choice
// (nf4_problem_of), tc_tiled's fall-back and the kernels depend on (made once, by
// choose_segmented and resolve_nf4), then enqueued.
void enqueue_chosen(Runtime& rt, Runtime::PlanFamily plan_family, const KernelFamily& family, const Nf4Weights& w,
                    std::int64_t rows, const ActiveExperts& active, std::int64_t slots, cl_mem offsets,
                    const Direction& d, const Launch& launch_options) {
  const Nf4Geometry& g = w.geometry;
  if (rows == 0 || g.experts == 0) {
    resolve_nf4(family, choose_segmented(rt, d.who, w, rows, d.type, active), w, d);
    return enqueue_nothing(rt, launch_options);
  }
  Runtime::PlanKey key;
  key.values = {std::int64_t(plan_family),
                rows,
                g.experts,
                g.out_features,
                g.in_features,
                g.block_size,
                std::int64_t(d.type),
                active.choose,
                active.max_rows,
                tc_forward_aligned(w) ? 1 : 0};
  std::shared_ptr<const Runtime::LaunchPlan> plan = rt.find_plan(key);
  if (!plan) {
    const Nf4Launch l = resolve_nf4(family, choose_segmented(rt, d.who, w, rows, d.type, active), w, d);
    plan = rt.keep_plan(key, rt.make_plan(l.used, *l.algorithm, l.kernel_names, l.variant));
  }
  enqueue_nf4(rt, *plan, w, rows, slots, offsets, d, launch_options);
}

}  // namespace

Result<Choice> choose_nf4(Runtime& rt, const std::string& kernel, const Nf4Geometry& geometry, std::int64_t rows,
                          ElementType type, std::int64_t active_experts, std::int64_t max_expert_rows) {
  try {
    if (kernel != "nf4_forward" && kernel != "nf4_backward")
      throw invalid("choose_nf4: kernel '" + kernel + "' is neither nf4_forward nor nf4_backward");
    geometry.validate(kernel);
    const ActiveExperts active = expected_active(kernel, geometry, rows, active_experts, max_expert_rows);
    Nf4Weights w;
    w.geometry = geometry;
    return choose_segmented(rt, kernel.c_str(), w, rows, type, active);
  } catch (const Error& e) {
    return Status::from(e);
  }
}

Status check_nf4_forward(Runtime& rt, const Nf4ForwardArgs& a) {
  return guard([&] { check_forward(rt, a); });
}

Status check_nf4_backward(Runtime& rt, const Nf4BackwardArgs& a) {
  return guard([&] { check_backward(rt, a); });
}

Status nf4_forward_with(Runtime& rt, const Choice& choice, const Nf4ForwardArgs& a, const Launch& launch) {
  return guard([&] { enqueue_forward(rt, choice, a, check_forward(rt, a).slots_for(rt, launch), launch); });
}

Status nf4_backward_with(Runtime& rt, const Choice& choice, const Nf4BackwardArgs& a, const Launch& launch) {
  return guard([&] { enqueue_backward(rt, choice, a, check_backward(rt, a).slots_for(rt, launch), launch); });
}

Result<std::int64_t> nf4_backward_splits(Runtime& rt, const Choice& choice, const Nf4BackwardArgs& a,
                                         const Launch& launch) {
  try {
    const ActiveExperts active = check_backward(rt, a);
    const AlgorithmSpec* algorithm = nf4_backward_family().find_algorithm(choice.algorithm);
    if (algorithm == nullptr) throw invalid("nf4_backward has no algorithm '" + choice.algorithm + "'");
    return backward_splits(rt, *algorithm, algorithm->complete(choice.params), a.w.geometry, a.rows,
                           active.slots_for(rt, launch));
  } catch (const Error& e) {
    return Status::from(e);
  }
}

Status nf4_forward_segmented(Runtime& rt, const Nf4ForwardArgs& a, const Launch& launch) {
  return guard([&] {
    const ActiveExperts active = check_forward(rt, a);
    enqueue_chosen(rt, Runtime::PlanFamily::kNf4Forward, nf4_forward_family(), a.w, a.rows, active,
                   active.slots_for(rt, launch), a.offsets, forward_direction(a), launch);
  });
}

Status nf4_input_backward_segmented(Runtime& rt, const Nf4BackwardArgs& a, const Launch& launch) {
  return guard([&] {
    const ActiveExperts active = check_backward(rt, a);
    enqueue_chosen(rt, Runtime::PlanFamily::kNf4Backward, nf4_backward_family(), a.w, a.rows, active,
                   active.slots_for(rt, launch), a.offsets, backward_direction(a), launch);
  });
}

namespace detail {

std::int64_t stream_splits(std::int64_t nsplit, const Nf4Geometry& g, std::int64_t rows, std::int64_t slots,
                           std::int64_t ktiles, std::int64_t compute_units) {
  const std::int64_t pairs = std::max<std::int64_t>(std::min(slots, g.experts) * ktiles, 1);
  std::int64_t splits = std::max<std::int64_t>(nsplit, ceil_div(compute_units, pairs));
  splits = std::min<std::int64_t>(splits, g.out_features);
  const std::int64_t per_split = rows * g.in_features * 4;
  if (per_split > 0) splits = std::min(splits, kMaxSplitScratchBytes / per_split);
  return std::max<std::int64_t>(splits, 1);
}

}  // namespace detail

}  // namespace ocltk

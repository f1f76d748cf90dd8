// Parameter tables: the single source of truth for what a kernel can be built with.
// The launcher, the profile decoder, the tuner's search space and the tests all read
// these tables; nothing else lists a kernel's parameters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ocltk {

struct DeviceInfo;

// Parameter values by name (ordered, so build options and hashes are deterministic).
using Params = std::map<std::string, int>;

struct ParamSpec {
  std::string name;          // the -D define in the kernel source
  int default_value;         // must equal the #define default in the .cl file
  std::vector<int> allowed;  // the legal values, in search order
  std::string meaning;       // one line, shown by `ocltk profile show` and in docs
  // Searched only around the best point: the tuner's strategy sees the default value alone,
  // then measures the class's best at each other legal value (AlgorithmSpec::refinements).
  // For a knob that shifts a point's time more than it moves the optimum (REGS).
  bool refined_last = false;
  // When not 0: the parameter changes the program only for problems whose input has this
  // many bits (a problem's `input_bits`, 32 where it has none; e.g. XS and FR of the NF4
  // forward's tc, read only on its f32 path). The tuner searches other problems at the
  // default alone (AlgorithmSpec::search_space with input bits), so that it does not measure
  // one program under several names.
  int only_input_bits = 0;
  // Values other than the default need device-scope acquire/release atomics and fences
  // (DeviceLimits::device_atomics_std): legal only where the device's compiler offers them,
  // and the program is then built under that -cl-std instead of CL1.2.
  bool needs_device_atomics = false;
};

// What a constraint may look at besides the parameters.
struct DeviceLimits {
  std::size_t max_work_group_size = 1024;
  std::vector<std::size_t> max_work_item_sizes{1024, 1024, 64};
  std::uint64_t local_mem_bytes = 32768;
  bool gpu = false;  // CL_DEVICE_TYPE_GPU: the tuner's search also drops gpu_search_pruning regions
  bool cpu = false;  // CL_DEVICE_TYPE_CPU: the tuner's search also drops cpu_search_pruning regions
  // NVIDIA's platform at sm_80 or newer: the runtime builds with OCLTK_PTX and mma.sync
  // m16n8k16 exists (AlgorithmSpec::search_needs_tensor_mma).
  bool tensor_mma = false;
  // NVIDIA's platform: program binaries are PTX, which the runtime can rebuild with a
  // register target (the REGS parameter, register_target_param). The same test as
  // device_build_options' (runtime.hpp), so it also says that kernels build with OCLTK_PTX
  // (warp shuffles instead of local-memory reductions: AlgorithmSpec::local_mem_bytes).
  bool ptx_binaries = false;
  // DeviceInfo::device_atomics_std: "CL2.0" or "CL3.0" where OpenCL C's device-scope
  // acquire/release atomics exist (ParamSpec::needs_device_atomics), else "".
  std::string device_atomics_std;
  static DeviceLimits of(const DeviceInfo& device);
};

// The register target, a parameter any algorithm may list: the registers per work-item
// that NVIDIA's PTX assembler may use (`.maxnreg` added to the program's PTX, the OpenCL
// counterpart of CUDA's -maxrregcount, which NVIDIA's OpenCL ignores as a build option).
// Fewer registers let more warps share an SM; more let the assembler keep more loads in
// flight. 0, the default, leaves the choice to the compiler. A value other than 0 is
// legal only where DeviceLimits::ptx_binaries holds. The tuner refines it around the best
// point (ParamSpec::refined_last). The tables that list it also need an `#ifndef REGS`
// block in their source (the kernel does not read it).
inline constexpr const char* kRegisterTarget = "REGS";
ParamSpec register_target_param();

// A named predicate over parameter names, e.g. "MWG % MDIMC == 0". The device limits
// (workgroup shape, local memory) are not constraints of a table: every algorithm is
// checked against them from its local_size and local_mem_bytes functions.
struct Constraint {
  std::string name;  // human-readable, shown in rejections
  std::function<bool(const Params&)> holds;
};

inline Constraint constraint(std::string name, std::function<bool(const Params&)> holds) {
  return {std::move(name), std::move(holds)};
}

// The value of a parameter by name, for writing constraints and geometry.
inline int param(const Params& p, const char* name) { return p.at(name); }

// One algorithm of a kernel family: one .cl file, its parameters and constraints.
struct AlgorithmSpec {
  std::string name;         // "tiled", "reduce"
  std::string source_name;  // embedded kernel file, e.g. "gemm_nt_tiled.cl"
  std::vector<ParamSpec> params;
  std::vector<Constraint> constraints;
  // Named predicates that keep a legal point out of the tuner's search (a region that is
  // never the best on any device measured, or that only repeats another point's code).
  // Such points stay legal: a profile or an engine may still ask for them.
  std::vector<Constraint> search_pruning;
  // The same, on GPUs only (e.g. workgroups narrower than a warp or wavefront).
  std::vector<Constraint> gpu_search_pruning;
  // The same, on CPUs only (e.g. LoRA's scalar accumulators, which SIMD lanes do not want).
  std::vector<Constraint> cpu_search_pruning;
  // The tuner searches this algorithm only where DeviceLimits::tensor_mma holds: elsewhere
  // it still runs (an emulation of the product), slowly, or does not build.
  bool search_needs_tensor_mma = false;
  // "KERNEL/ALGORITHM" of each algorithm whose tile pipeline this one runs (the same kernel
  // code: nf4's tc_tiled runs gemm_nt's tc, kernels/tc_mma.clh; lora_apply's fused and split
  // run lora_shrink's tiled and then lora_expand's, kernels/lora_split.cl): its parameters of
  // the same names mean the same, so on a device nobody tuned the tuner measures those
  // algorithms' best tiles of the run here too, several composed into one point, the first
  // named setting the parameters they share in the first point (docs/tuning.md, "Kin
  // algorithms"). Empty: none.
  std::vector<std::string> tiles_like;
  // An nf4 segment kernel that takes `compact` after `expert_base` and finds its expert with
  // nf4_slot_expert (kernels/nf4_common.clh): the runtime may then launch a grid slot per
  // expert with rows instead of per expert. The tensor-core kernels do not: built with the
  // scan, two of their shipped points ran 12 and 37 % slower on the H200 in launches that
  // were not even compact (results/h200-2026-12-01d/ at 0d64363, call 3; the compiled code was not
  // examined).
  bool compact_experts = false;
  // Local memory of the build for a device: a kernel may declare some buffers only on some
  // platforms (e.g. a reduction's partials only where warp shuffles are not used, see
  // DeviceLimits::ptx_binaries).
  std::function<std::uint64_t(const Params&, const DeviceLimits&)> local_mem_bytes;
  // Build options a launch adds for what it runs on (Runtime::launch's `variant`, e.g. an
  // element type that selects the only code path compiled); the tuner builds and measures
  // with this one. Empty for algorithms built once for every launch.
  std::string tuned_variant;
  // Workgroup shape: dimension 0 first; the product is the workgroup size.
  std::function<std::array<std::size_t, 2>(const Params&)> local_size;

  std::size_t work_group_size(const Params& params) const;
  const ParamSpec* find(const std::string& param) const;
  Params defaults() const;
  // Fills parameters missing from `partial` with defaults; throws Error(kProfile) for
  // an unknown name or a value outside the allowed list, naming the parameter.
  Params complete(const Params& partial) const;
  // The first violated constraint, or nullopt when all hold. With `limits`, also the
  // device's: workgroup size and shape, and local memory.
  std::optional<std::string> violation(const Params& params, const DeviceLimits* limits) const;
  // "-cl-std=CL1.2 -cl-mad-enable -DNAME=value ..." in table order; where a
  // needs_device_atomics parameter is off its default, `limits`' device_atomics_std instead
  // of CL1.2.
  std::string build_options(const Params& params, const DeviceLimits* limits = nullptr) const;
  // Whether a needs_device_atomics parameter of `params` is off its default.
  bool uses_device_atomics(const Params& params) const;
  // Every legal point (allowed-value product filtered by the constraints).
  std::vector<Params> legal_space(const DeviceLimits* limits) const;
  // The legal points the tuner searches: legal_space without the search_pruning regions
  // (and, when `limits` says GPU, without the gpu_search_pruning ones), with every
  // refined_last parameter at its default.
  std::vector<Params> search_space(const DeviceLimits* limits) const;
  // The same for a problem whose input has `input_bits` bits: parameters whose
  // only_input_bits is another width stay at their defaults.
  std::vector<Params> search_space(const DeviceLimits* limits, int input_bits) const;
  // `params` with every parameter whose only_input_bits is another width than `input_bits`
  // at its default: the name the tuner gives a point from elsewhere (a profile's, an earlier
  // problem's) for such a problem, so that it is one of search_space's.
  Params at_input_bits(Params params, int input_bits) const;
  // What the tuner measures after its search: `best` with one refined_last parameter set to
  // each of its other allowed values, the points legal on `limits`, in table order.
  std::vector<Params> refinements(const Params& best, const DeviceLimits* limits) const;
};

std::string format_params(const Params& params);  // "MWG=64 NWG=64 ..."

// The register target of `params` (0 when absent: the compiler's choice).
int register_target(const Params& params);

}  // namespace ocltk

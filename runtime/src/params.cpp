#include "ocltk/params.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "ocltk/device.hpp"
#include "ocltk/status.hpp"

namespace ocltk {

DeviceLimits DeviceLimits::of(const DeviceInfo& device) {
  DeviceLimits limits;
  limits.max_work_group_size = device.max_work_group_size;
  limits.max_work_item_sizes = device.max_work_item_sizes;
  limits.local_mem_bytes = device.local_mem_bytes;
  limits.gpu = device.type == "gpu";
  limits.cpu = device.type == "cpu";
  // "sm_XY" from architecture_of (device.cpp); the platform test matches device_build_options.
  int sm = 0;
  if (device.architecture.rfind("sm_", 0) == 0) sm = std::atoi(device.architecture.c_str() + 3);
  limits.tensor_mma = device.platform == "NVIDIA CUDA" && sm >= 80;
  limits.ptx_binaries = device.platform == "NVIDIA CUDA";
  limits.device_atomics_std = device.device_atomics_std;
  return limits;
}

ParamSpec register_target_param() {
  // 128, 168 and 255 registers leave 16, 12 and 8 warps an SM (65536 registers); 96, 20.
  // The order is the refinement's: the two targets that won on the H200 first.
  return {kRegisterTarget,
          0,
          {0, 128, 168, 96, 255},
          "registers per work-item the PTX assembler may use (.maxnreg; NVIDIA only); 0: the compiler's choice",
          /*refined_last=*/true};
}

int register_target(const Params& params) {
  const auto it = params.find(kRegisterTarget);
  return it == params.end() ? 0 : it->second;
}

const ParamSpec* AlgorithmSpec::find(const std::string& param) const {
  for (const ParamSpec& p : params)
    if (p.name == param) return &p;
  return nullptr;
}

Params AlgorithmSpec::defaults() const {
  Params out;
  for (const ParamSpec& p : params) out[p.name] = p.default_value;
  return out;
}

Params AlgorithmSpec::complete(const Params& partial) const {
  Params out = defaults();
  for (const auto& [name, value] : partial) {
    const ParamSpec* spec = find(name);
    if (spec == nullptr) throw Error(ErrorCode::kProfile, "unknown parameter " + name + " for algorithm " + this->name);
    if (std::find(spec->allowed.begin(), spec->allowed.end(), value) == spec->allowed.end()) {
      std::ostringstream allowed;
      for (std::size_t i = 0; i < spec->allowed.size(); ++i) allowed << (i ? ", " : "") << spec->allowed[i];
      throw Error(ErrorCode::kProfile, "parameter " + name + " = " + std::to_string(value) +
                                           " is outside the legal values of algorithm " + this->name + " {" +
                                           allowed.str() + "}");
    }
    out[name] = value;
  }
  return out;
}

std::size_t AlgorithmSpec::work_group_size(const Params& p) const {
  const std::array<std::size_t, 2> local = local_size(p);
  return local[0] * local[1];
}

std::optional<std::string> AlgorithmSpec::violation(const Params& p, const DeviceLimits* limits) const {
  for (const Constraint& c : constraints)
    if (!c.holds(p)) return c.name;
  if (limits == nullptr) return std::nullopt;
  if (register_target(p) != 0 && !limits->ptx_binaries)
    return std::string(kRegisterTarget) + " = " + std::to_string(register_target(p)) +
           " (a register target) needs a device whose program binaries are PTX (NVIDIA's OpenCL)";
  if (uses_device_atomics(p) && limits->device_atomics_std.empty())
    for (const ParamSpec& spec : params)
      if (spec.needs_device_atomics && p.at(spec.name) != spec.default_value)
        return spec.name + " = " + std::to_string(p.at(spec.name)) +
               " needs device-scope acquire/release atomics (OpenCL C 2.0, or 3.0 with "
               "__opencl_c_atomic_order_acq_rel and __opencl_c_atomic_scope_device), which this device does not report";
  const std::array<std::size_t, 2> local = local_size(p);
  if (local[0] * local[1] > limits->max_work_group_size)
    return "workgroup of " + std::to_string(local[0] * local[1]) + " work-items exceeds the device's " +
           std::to_string(limits->max_work_group_size);
  for (std::size_t d = 0; d < local.size(); ++d) {
    const std::size_t max_d = d < limits->max_work_item_sizes.size() ? limits->max_work_item_sizes[d] : 1;
    if (local[d] > max_d)
      return "workgroup dimension " + std::to_string(d) + " of " + std::to_string(local[d]) + " exceeds the device's " +
             std::to_string(max_d);
  }
  if (local_mem_bytes && local_mem_bytes(p, *limits) > limits->local_mem_bytes)
    return "local memory of " + std::to_string(local_mem_bytes(p, *limits)) + " bytes exceeds the device's " +
           std::to_string(limits->local_mem_bytes);
  return std::nullopt;
}

bool AlgorithmSpec::uses_device_atomics(const Params& p) const {
  for (const ParamSpec& spec : params)
    if (spec.needs_device_atomics && p.count(spec.name) && p.at(spec.name) != spec.default_value) return true;
  return false;
}

std::string AlgorithmSpec::build_options(const Params& p, const DeviceLimits* limits) const {
  std::ostringstream out;
  const bool atomics = limits != nullptr && !limits->device_atomics_std.empty() && uses_device_atomics(p);
  out << "-cl-std=" << (atomics ? limits->device_atomics_std : "CL1.2") << " -cl-mad-enable";
  for (const ParamSpec& spec : params) out << " -D" << spec.name << "=" << p.at(spec.name);
  return out.str();
}

std::vector<Params> AlgorithmSpec::legal_space(const DeviceLimits* limits) const {
  std::vector<Params> space;
  std::vector<std::size_t> pos(params.size(), 0);
  while (true) {
    Params point;
    for (std::size_t i = 0; i < params.size(); ++i) point[params[i].name] = params[i].allowed[pos[i]];
    if (!violation(point, limits)) space.push_back(point);
    std::size_t i = params.size();
    while (i > 0) {
      --i;
      if (++pos[i] < params[i].allowed.size()) break;
      pos[i] = 0;
      if (i == 0) return space;
    }
    if (params.empty()) return space;
  }
}

std::vector<Params> AlgorithmSpec::search_space(const DeviceLimits* limits) const {
  if (search_needs_tensor_mma && (limits == nullptr || !limits->tensor_mma)) return {};
  std::vector<Params> space = legal_space(limits);
  space.erase(std::remove_if(space.begin(), space.end(),
                             [&](const Params& p) {
                               const auto pruned = [&](const Constraint& c) { return !c.holds(p); };
                               for (const ParamSpec& spec : params)
                                 if (spec.refined_last && p.at(spec.name) != spec.default_value) return true;
                               return std::any_of(search_pruning.begin(), search_pruning.end(), pruned) ||
                                      (limits != nullptr && limits->gpu &&
                                       std::any_of(gpu_search_pruning.begin(), gpu_search_pruning.end(), pruned)) ||
                                      (limits != nullptr && limits->cpu &&
                                       std::any_of(cpu_search_pruning.begin(), cpu_search_pruning.end(), pruned));
                             }),
              space.end());
  return space;
}

std::vector<Params> AlgorithmSpec::search_space(const DeviceLimits* limits, int input_bits) const {
  std::vector<Params> space = search_space(limits);
  space.erase(
      std::remove_if(space.begin(), space.end(), [&](const Params& p) { return at_input_bits(p, input_bits) != p; }),
      space.end());
  return space;
}

Params AlgorithmSpec::at_input_bits(Params p, int input_bits) const {
  for (const ParamSpec& spec : params)
    if (spec.only_input_bits != 0 && spec.only_input_bits != input_bits && p.count(spec.name))
      p[spec.name] = spec.default_value;
  return p;
}

std::vector<Params> AlgorithmSpec::refinements(const Params& best, const DeviceLimits* limits) const {
  std::vector<Params> around;
  for (const ParamSpec& spec : params) {
    if (!spec.refined_last) continue;
    for (int value : spec.allowed) {
      if (value == best.at(spec.name)) continue;
      Params p = best;
      p[spec.name] = value;
      if (!violation(p, limits)) around.push_back(std::move(p));
    }
  }
  return around;
}

std::string format_params(const Params& params) {
  std::ostringstream out;
  bool first = true;
  for (const auto& [name, value] : params) {
    out << (first ? "" : " ") << name << "=" << value;
    first = false;
  }
  return out.str();
}

}  // namespace ocltk

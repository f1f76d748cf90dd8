// Device discovery and selection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ocltk/cl.hpp"

namespace ocltk {

// The prefix of a PoCL device's architecture: what follows is the target PoCL's compiler
// builds for (its HSTR), which devices of any vendor can share.
inline constexpr const char* kPoclArchitecturePrefix = "pocl:";

// What a profile is keyed on and what the legal parameter space depends on.
struct DeviceInfo {
  int index = -1;  // position in list_devices(), across all platforms
  std::string platform;
  std::string platform_version;
  std::string name;
  std::string vendor;
  std::string driver;   // CL_DRIVER_VERSION
  std::string version;  // CL_DEVICE_VERSION
  // e.g. "sm_90" (NVIDIA), "gfx90a" (AMD), "pocl:pthread-x86_64-pc-linux-gnu-skylake-avx512"
  // (PoCL: its compiler's target, kPoclArchitecturePrefix); empty where unknown
  std::string architecture;
  std::string type;  // "gpu", "cpu", "accelerator" or "other"
  std::uint32_t compute_units = 0;
  std::size_t max_work_group_size = 0;
  std::vector<std::size_t> max_work_item_sizes;
  std::uint64_t local_mem_bytes = 0;
  std::uint64_t global_mem_bytes = 0;
  std::uint64_t max_alloc_bytes = 0;
  // The -cl-std under which the device's compiler offers device-scope acquire/release atomics
  // and fences: "CL2.0" (OpenCL C 2.x), "CL3.0" (3.0 with __opencl_c_atomic_order_acq_rel and
  // __opencl_c_atomic_scope_device), or "" (none: OpenCL 1.2's model only).
  std::string device_atomics_std;
  boost::compute::device handle;
};

DeviceInfo describe_device(const boost::compute::device& device, int index = -1);

// Every OpenCL device on every platform, in platform order. Never throws: an absent
// ICD or platform yields an empty list.
std::vector<DeviceInfo> list_devices();

// Picks a device from a selector: a decimal index into list_devices(), or a
// case-insensitive substring of "platform name / device name / vendor". An empty
// selector reads OCLTK_DEVICE; if that is unset too, the first GPU, else the first
// device. Throws Error(kNotFound) naming the selector when nothing matches.
DeviceInfo select_device(const std::string& selector = "");

}  // namespace ocltk

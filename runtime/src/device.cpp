#include "ocltk/device.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ocltk/status.hpp"

namespace ocltk {
namespace {

// cl_nv_device_attribute_query; not in every header set.
constexpr cl_device_info kComputeCapabilityMajorNv = 0x4000;
constexpr cl_device_info kComputeCapabilityMinorNv = 0x4001;
// OpenCL 3.0 queries, defined here because the headers hide them below CL_TARGET_OPENCL_VERSION 300.
constexpr cl_device_info kOpenClCAllVersions = 0x1066;  // CL_DEVICE_OPENCL_C_ALL_VERSIONS
constexpr cl_device_info kOpenClCFeatures = 0x106F;     // CL_DEVICE_OPENCL_C_FEATURES
struct NameVersion {                                    // cl_name_version
  cl_uint version;
  char name[64];
};

std::string trim(std::string s) {
  while (!s.empty() && (std::isspace(static_cast<unsigned char>(s.back())) || s.back() == '\0')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string architecture_of(const boost::compute::device& d, const std::string& vendor, const std::string& name,
                            const std::string& version) {
  // PoCL names the target its compiler builds kernels for in CL_DEVICE_VERSION ("OpenCL 3.0
  // PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512"): the same code on an Intel or an
  // AMD CPU, so this architecture is not tied to the vendor (same_architecture, profile.hpp).
  if (const std::size_t h = version.find("HSTR: ");
      h != std::string::npos && version.find("PoCL") != std::string::npos) {
    const std::size_t from = h + 6;
    const std::size_t to = version.find_first_of(" \t", from);
    const std::string target = version.substr(from, to == std::string::npos ? std::string::npos : to - from);
    return target.empty() ? "" : std::string(kPoclArchitecturePrefix) + target;
  }
  const std::string v = lower(vendor);
  if (v.find("nvidia") != std::string::npos) {
    cl_uint major = 0, minor = 0;
    if (clGetDeviceInfo(d.id(), kComputeCapabilityMajorNv, sizeof major, &major, nullptr) == CL_SUCCESS &&
        clGetDeviceInfo(d.id(), kComputeCapabilityMinorNv, sizeof minor, &minor, nullptr) == CL_SUCCESS)
      return "sm_" + std::to_string(major) + std::to_string(minor);
    return "";
  }
  // AMD reports the gfx target as the device name, e.g. "gfx90a:sramecc+:xnack-".
  if (name.rfind("gfx", 0) == 0) return name.substr(0, name.find(':'));
  return "";
}

// A cl_name_version list (OpenCL 3.0 queries); empty where the device does not answer.
std::vector<NameVersion> name_versions(cl_device_id id, cl_device_info what) {
  std::size_t bytes = 0;
  if (clGetDeviceInfo(id, what, 0, nullptr, &bytes) != CL_SUCCESS || bytes % sizeof(NameVersion) != 0) return {};
  std::vector<NameVersion> list(bytes / sizeof(NameVersion));
  if (!list.empty() && clGetDeviceInfo(id, what, bytes, list.data(), nullptr) != CL_SUCCESS) return {};
  for (NameVersion& v : list) v.name[sizeof v.name - 1] = '\0';
  return list;
}

// OpenCL C 2.x has device-scope acquire/release atomics and fences as core features; 3.0
// has them where the device lists both optional features (PoCL's CPU device does; a 3.0
// driver whose OpenCL C stops at 1.2, as NVIDIA's, lists no 3.0 at all).
std::string device_atomics_std_of(const boost::compute::device& d) {
  const std::string c_version = d.get_info<std::string>(CL_DEVICE_OPENCL_C_VERSION);  // "OpenCL C X.Y ..."
  int major = 0;
  if (c_version.rfind("OpenCL C ", 0) == 0) major = std::atoi(c_version.c_str() + 9);
  if (major == 2) return "CL2.0";
  bool c30 = false, acq_rel = false, device_scope = false;
  for (const NameVersion& v : name_versions(d.id(), kOpenClCAllVersions)) c30 |= (v.version >> 22) == 3;
  for (const NameVersion& v : name_versions(d.id(), kOpenClCFeatures)) {
    acq_rel |= std::strcmp(v.name, "__opencl_c_atomic_order_acq_rel") == 0;
    device_scope |= std::strcmp(v.name, "__opencl_c_atomic_scope_device") == 0;
  }
  return c30 && acq_rel && device_scope ? "CL3.0" : "";
}

}  // namespace

DeviceInfo describe_device(const boost::compute::device& d, int index) {
  DeviceInfo info;
  info.index = index;
  info.handle = d;
  const boost::compute::platform platform(d.platform());
  info.platform = trim(platform.name());
  info.platform_version = trim(platform.version());
  info.name = trim(d.name());
  info.vendor = trim(d.vendor());
  info.driver = trim(d.driver_version());
  info.version = trim(d.version());
  info.architecture = architecture_of(d, info.vendor, info.name, info.version);
  const cl_device_type type = d.type();
  info.type = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
              : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
              : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                    : "other";
  info.compute_units = d.compute_units();
  info.max_work_group_size = d.max_work_group_size();
  info.max_work_item_sizes = d.get_info<std::vector<std::size_t>>(CL_DEVICE_MAX_WORK_ITEM_SIZES);
  info.local_mem_bytes = d.local_memory_size();
  info.global_mem_bytes = d.global_memory_size();
  info.max_alloc_bytes = d.max_memory_alloc_size();
  info.device_atomics_std = device_atomics_std_of(d);
  return info;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> devices;
  cl_uint platform_count = 0;
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) return devices;
  std::vector<cl_platform_id> platforms(platform_count);
  if (clGetPlatformIDs(platform_count, platforms.data(), nullptr) != CL_SUCCESS) return devices;
  for (cl_platform_id p : platforms) {
    cl_uint count = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> ids(count);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id id : ids) {
      try {
        devices.push_back(describe_device(boost::compute::device(id), static_cast<int>(devices.size())));
      } catch (const std::exception&) {
        // A device that cannot describe itself cannot run anything either.
      }
    }
  }
  return devices;
}

DeviceInfo select_device(const std::string& selector_arg) {
  std::string selector = selector_arg;
  std::string origin = "device selector";
  if (selector.empty()) {
    if (const char* env = std::getenv("OCLTK_DEVICE"); env != nullptr && *env != '\0') {
      selector = env;
      origin = "OCLTK_DEVICE";
    }
  }
  const std::vector<DeviceInfo> devices = list_devices();
  if (devices.empty())
    throw Error(ErrorCode::kDevice,
                "no OpenCL device found: install an OpenCL driver (e.g. the pocl-opencl-icd package) and check "
                "/etc/OpenCL/vendors");
  if (selector.empty()) {
    for (const DeviceInfo& d : devices)
      if (d.type == "gpu") return d;
    return devices.front();
  }
  const bool numeric = std::all_of(selector.begin(), selector.end(), [](unsigned char c) { return std::isdigit(c); });
  if (numeric) {
    // Compared as text first: an index too long for any integer type names no device.
    if (selector.size() <= 9 && std::stoul(selector) < devices.size()) return devices[std::stoul(selector)];
    throw Error(ErrorCode::kNotFound, origin + " '" + selector + "': no device with that index (" +
                                          std::to_string(devices.size()) + " found; see `ocltk devices`)");
  }
  const std::string needle = lower(selector);
  for (const DeviceInfo& d : devices) {
    if (lower(d.platform + " / " + d.name + " / " + d.vendor).find(needle) != std::string::npos) return d;
  }
  throw Error(ErrorCode::kNotFound,
              origin + " '" + selector + "' matches no device name, platform or vendor (see `ocltk devices`)");
}

}  // namespace ocltk

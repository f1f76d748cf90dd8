#include "ocltk/runtime.hpp"

#if defined(OCLTK_CONFIGS_BESIDE_LIBRARY)
#include <dlfcn.h>
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "dispatch.hpp"
#include "gemm_nt_probe.hpp"
#include "user_dirs.hpp"

namespace ocltk {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kDefaultMaxGroupsPerDispatch = 65535;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : fallback;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// The YAML files a path names: the file itself, or a folder's *.yaml / *.yml, sorted.
std::vector<std::string> profile_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  }
  return files;
}

// An explicit choice with an unknown parameter or an illegal value is the caller's
// mistake, not a profile's.
Params complete_choice(const AlgorithmSpec& algorithm, const Params& params) {
  try {
    return algorithm.complete(params);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, e.what());
  }
}

}  // namespace

std::string user_profile_dir() {
  const std::string base = detail::xdg_base_dir("XDG_CONFIG_HOME", ".config");
  return base.empty() ? "" : (fs::path(base) / "ocltk" / "profiles").string();
}

std::string installed_configs_dir() {
#if defined(OCLTK_CONFIGS_BESIDE_LIBRARY)
  // The Python package: the library and its profiles move with the package's folder.
  Dl_info library{};
  if (dladdr(reinterpret_cast<void*>(&installed_configs_dir), &library) == 0 || library.dli_fname == nullptr) return "";
  return (fs::path(library.dli_fname).parent_path() / OCLTK_CONFIGS_BESIDE_LIBRARY).string();
#elif defined(OCLTK_INSTALL_CONFIGS_DIR)
  return OCLTK_INSTALL_CONFIGS_DIR;
#else
  return "";
#endif
}

// What one file offers a device: a profile file itself, at whatever level its header
// fits; a database its members only for their own device (a member of another device of
// the same architecture or vendor is represented by the derived sections), and each
// derived section that fits.
std::vector<ProfileCandidate> candidates_in(const ProfileFile& file, const DeviceInfo& device,
                                            const std::string& tier) {
  std::vector<ProfileCandidate> out;
  if (file.schema == kProfileSchema) {
    ProfileCandidate c;
    c.profile = file.profile;
    c.level = match_level(c.profile.device, device);
    c.tier = tier;
    if (c.level != MatchLevel::kNone) out.push_back(std::move(c));
    return out;
  }
  for (const Profile& member : file.database.profiles) {
    ProfileCandidate c;
    c.level = match_level(member.device, device);
    if (c.level != MatchLevel::kExact && c.level != MatchLevel::kDevice) continue;
    c.profile = member;
    c.tier = tier;
    c.section = device_label(member.device);
    out.push_back(std::move(c));
  }
  for (const DerivedProfile& derived : file.database.derived) {
    ProfileCandidate c;
    c.level = derived.fit(device);
    if (c.level == MatchLevel::kNone) continue;
    c.profile = derived.as_profile(file.path);
    c.tier = tier;
    c.section = derived.describe();
    out.push_back(std::move(c));
  }
  return out;
}

ProfileSelection find_profiles(const DeviceInfo& device, const RuntimeOptions& options) {
  ProfileSelection selection;
  if (!options.use_profiles) return selection;
  struct Tier {
    std::string name;
    std::vector<std::string> paths;
  };
  std::vector<Tier> tiers;
  if (!options.profile_path.empty()) {
    // An explicit profile is the caller's word: it is used if it fits the device at
    // any level, and otherwise ignored with a warning in favour of the built-in defaults.
    selection.searched.push_back(options.profile_path);
    const ProfileFile file = read_profile_file(options.profile_path);  // a broken explicit profile is an error
    selection.candidates = candidates_in(file, device, "explicit");
    if (selection.candidates.empty() && file.schema == kProfileSchema) {
      selection.warnings.push_back(options.profile_path + ": profile is for '" + file.profile.device.name + "' (" +
                                   file.profile.device.vendor + "), not '" + device.name +
                                   "'; ignoring it and using the built-in defaults");
    } else if (selection.candidates.empty()) {
      selection.warnings.push_back(options.profile_path + ": profile database has no profile for '" + device.name +
                                   "' and no derived section for its architecture or vendor (" + device.vendor +
                                   "); ignoring it and using the built-in defaults");
    }
    std::stable_sort(selection.candidates.begin(), selection.candidates.end(),
                     [](const ProfileCandidate& a, const ProfileCandidate& b) { return a.level < b.level; });
    return selection;
  }
  tiers.push_back({"OCLTK_PROFILE_PATH", split(env_or("OCLTK_PROFILE_PATH", ""), ':')});
  if (const std::string user = user_profile_dir(); !user.empty()) tiers.push_back({"user", {user}});
  if (const std::string installed = installed_configs_dir(); !installed.empty())
    tiers.push_back({"installed", {installed}});

  std::vector<std::pair<std::size_t, ProfileCandidate>> found;  // (tier index, candidate)
  for (std::size_t t = 0; t < tiers.size(); ++t) {
    for (const std::string& path : tiers[t].paths) {
      for (const std::string& file : profile_files(path)) {
        selection.searched.push_back(file);
        ProfileFile contents;
        try {
          contents = read_profile_file(file);
        } catch (const std::exception& e) {
          selection.warnings.push_back(std::string(e.what()) + " (profile skipped)");
          continue;
        }
        for (ProfileCandidate& c : candidates_in(contents, device, tiers[t].name)) found.emplace_back(t, std::move(c));
      }
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return a.second.level != b.second.level ? a.second.level < b.second.level : a.first < b.first;
  });
  for (auto& [tier, c] : found) selection.candidates.push_back(std::move(c));
  return selection;
}

std::string ProfileCandidate::where() const {
  return section.empty() ? profile.path : profile.path + " [" + section + "]";
}

std::string Choice::describe() const {
  std::ostringstream out;
  out << kernel << "/" << shape_class << " -> " << algorithm << " {" << format_params(params) << "} from " << source;
  if (!section.empty()) out << " [" << section << "]";
  out << " (match: " << (level == MatchLevel::kNone ? "built-in" : to_string(level)) << ")";
  if (!tuned_on.empty()) {
    out << " tuned on";
    for (const auto& [name, value] : tuned_on) out << " " << name << "=" << value;
  }
  if (!adjusted.empty()) out << "; " << adjusted;
  return out.str();
}

namespace {

// What decides a prepared launch (Runtime::Impl::prepared): the algorithm's table (its
// address: the families' tables live as long as the program) and its name and source, the
// family, the build variant, the kernels and the parameters as the caller gave them.
struct PreparedKey {
  const AlgorithmSpec* spec;
  std::string kernel, algorithm, source, variant;
  std::vector<std::string> kernel_names;
  Params params;
};

// The same, borrowed from a launch's arguments, to look the map up without copies.
struct PreparedRef {
  const AlgorithmSpec* spec;
  const std::string &kernel, &algorithm, &source, &variant;
  const std::vector<std::string>& kernel_names;
  const Params& params;
};

template <class K>
auto prepared_tie(const K& k) {
  return std::tie(k.spec, k.kernel, k.algorithm, k.source, k.variant, k.kernel_names, k.params);
}

struct PreparedLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return prepared_tie(a) < prepared_tie(b);
  }
};

struct Prepared {
  Params params;                   // completed
  std::vector<cl_kernel> kernels;  // owned by Runtime::Impl::kernels
};

}  // namespace

struct Runtime::Impl {
  DeviceInfo device;
  boost::compute::context context;
  boost::compute::command_queue queue;
  RuntimeOptions options;
  ProgramCache cache;
  ProfileSelection profiles;
  std::mutex mutex;  // guards kernels, programs, prepared, last_choice and logged
  std::map<std::pair<cl_program, std::string>, boost::compute::kernel> kernels;
  // Programs this runtime has fetched, by source name and build options: a launch finds its
  // program here without the cache's key (device queries and a hash of the whole source,
  // tens of microseconds a launch).
  std::unordered_map<std::string, boost::compute::program> programs;
  // Launches prepared before: the parameters completed and checked against the device, the
  // program fetched, the kernels created and their workgroup limit checked, by what decides
  // them (PreparedKey). A launch found here goes straight to its arguments and enqueue: the
  // checks, the build options' text and the driver's queries cost the host tens of
  // microseconds a launch on NVIDIA's OpenCL, more than a decode-sized kernel runs.
  std::map<PreparedKey, Prepared, PreparedLess> prepared;
  // choose()'s answers, by kernel, class and problem: the profiles do not change after the
  // runtime opens, and the search over a profile's entries (problem_distance) took about
  // 10 microseconds of a decode launch's host time on the H200's machine.
  std::map<std::tuple<std::string, std::string, std::map<std::string, std::int64_t>>, Choice, std::less<>> chosen;
  std::mutex chosen_mutex;  // guards chosen (choose() is const and runs outside the launch lock)
  // The runtime's own queue's mode, and the queue it was asked for: queue() hands out a
  // reference, so a caller may replace the queue, and the mode is asked again then.
  mutable std::atomic<bool> out_of_order{false};
  mutable std::atomic<cl_command_queue> mode_of{nullptr};
  std::shared_ptr<const Choice> last_choice;  // the latest launch's, parameters completed
  std::set<std::string> logged;
  // Launch plans by their family's key (Runtime::find_plan).
  struct PlanKeyHash {
    std::size_t operator()(const PlanKey& k) const {
      std::uint64_t h = 1469598103934665603ull;
      for (const std::int64_t v : k.values) h = (h ^ std::uint64_t(v)) * 1099511628211ull;
      return std::size_t(h);
    }
  };
  std::unordered_map<PlanKey, std::shared_ptr<const LaunchPlan>, PlanKeyHash> plans;
  mutable std::mutex plans_mutex;  // guards plans
  bool verbose = false;
  AlgorithmExclusions excluded;
  // probe_tensor_cores' answers by kind and OCLTK_TC_PROBE mode. The mutex is held while a
  // probe runs, so that two threads' first tc launches probe once.
  std::map<std::string, TensorCoreProbe> probes;
  std::mutex probe_mutex;

  Impl(DeviceInfo d, boost::compute::context c, boost::compute::command_queue q, RuntimeOptions o)
      : device(std::move(d)),
        context(std::move(c)),
        queue(std::move(q)),
        options(std::move(o)),
        cache(options.cache_dir) {
    out_of_order = detail::queue_out_of_order(queue.get());
    mode_of = queue.get();
    verbose = options.verbose >= 0 ? options.verbose > 0 : env_or("OCLTK_VERBOSE", "0") != "0";
    if (options.exclude_algorithms.empty())
      excluded = AlgorithmExclusions::from_environment();
    else if (options.exclude_algorithms != "-")
      excluded = AlgorithmExclusions::parse(options.exclude_algorithms, "RuntimeOptions::exclude_algorithms");
    profiles = find_profiles(device, options);
    // Entries of removed algorithms are dropped here, so the search passes over them to the
    // next entry of their class, the next profile or the built-in default.
    if (!excluded.empty()) {
      for (ProfileCandidate& c : profiles.candidates) {
        std::vector<ProfileEntry>& entries = c.profile.entries;
        const std::size_t before = entries.size();
        entries.erase(std::remove_if(entries.begin(), entries.end(),
                                     [&](const ProfileEntry& e) { return excluded.excludes(e.kernel, e.algorithm); }),
                      entries.end());
        if (verbose && entries.size() < before)
          std::cerr << "ocltk: " << c.where() << ": " << before - entries.size()
                    << " entries passed over (excluded: " << excluded.describe() << ")\n";
      }
    }
    for (const std::string& w : profiles.warnings) std::cerr << "ocltk: warning: " << w << "\n";
    if (verbose) {
      for (const ProfileCandidate& c : profiles.candidates)
        std::cerr << "ocltk: profile " << c.where() << " fits " << device.name << " (match: " << to_string(c.level)
                  << ", from " << c.tier << ")\n";
      if (profiles.candidates.empty()) std::cerr << "ocltk: no profile fits " << device.name << "; built-in defaults\n";
    }
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;
Runtime::~Runtime() = default;

Result<Runtime> Runtime::open(const RuntimeOptions& options) {
  try {
    DeviceInfo device = select_device(options.device);
    boost::compute::context context(device.handle);
    boost::compute::command_queue queue(context, device.handle, boost::compute::command_queue::enable_profiling);
    return Runtime(std::make_unique<Impl>(std::move(device), std::move(context), std::move(queue), options));
  } catch (const Error& e) {
    return Status::from(e);
  } catch (const boost::compute::opencl_error& e) {
    return Status(ErrorCode::kDevice, std::string("cannot open the OpenCL device: ") + e.what(), e.error_code());
  } catch (const std::exception& e) {
    return Status(ErrorCode::kDevice, std::string("cannot open the runtime: ") + e.what());
  }
}

Result<Runtime> Runtime::wrap(cl_context context, cl_device_id device, cl_command_queue queue,
                              const RuntimeOptions& options) {
  try {
    if (context == nullptr || device == nullptr || queue == nullptr)
      return Status(ErrorCode::kInvalidArgument, "Runtime::wrap needs a context, a device and a queue");
    DeviceInfo info = describe_device(boost::compute::device(device, true));
    return Runtime(std::make_unique<Impl>(std::move(info), boost::compute::context(context, true),
                                          boost::compute::command_queue(queue, true), options));
  } catch (const Error& e) {
    return Status::from(e);
  } catch (const boost::compute::opencl_error& e) {
    return Status(ErrorCode::kDevice, std::string("cannot wrap the OpenCL objects: ") + e.what(), e.error_code());
  } catch (const std::exception& e) {
    return Status(ErrorCode::kDevice, std::string("cannot open the runtime: ") + e.what());
  }
}

const DeviceInfo& Runtime::device() const { return impl_->device; }
const boost::compute::context& Runtime::context() const { return impl_->context; }
boost::compute::command_queue& Runtime::queue() { return impl_->queue; }
bool Runtime::queue_out_of_order() const {
  cl_command_queue queue = impl_->queue.get();
  if (impl_->mode_of.load() != queue) {  // replaced through queue() since last asked
    impl_->out_of_order = detail::queue_out_of_order(queue);
    impl_->mode_of = queue;
  }
  return impl_->out_of_order;
}
const ProfileSelection& Runtime::profiles() const { return impl_->profiles; }
const AlgorithmExclusions& Runtime::excluded_algorithms() const { return impl_->excluded; }
ProgramCache& Runtime::program_cache() { return impl_->cache; }
const RuntimeOptions& Runtime::options() const { return impl_->options; }

Choice Runtime::last_choice() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->last_choice ? *impl_->last_choice : Choice{};
}

Result<boost::compute::buffer> Runtime::allocate(std::size_t bytes, cl_mem_flags flags) {
  if (bytes == 0) return Status(ErrorCode::kInvalidArgument, "allocate: size must be at least one byte");
  try {
    return boost::compute::buffer(impl_->context, bytes, flags);
  } catch (const boost::compute::opencl_error& e) {
    return Status(ErrorCode::kDevice, "allocate(" + std::to_string(bytes) + " bytes) failed: " + e.what(),
                  e.error_code());
  }
}

Choice Runtime::choose(const std::string& kernel, const std::string& shape_class,
                       const std::map<std::string, std::int64_t>& problem) const {
  const auto key = std::tie(kernel, shape_class, problem);
  {
    std::lock_guard<std::mutex> lock(impl_->chosen_mutex);
    if (const auto it = impl_->chosen.find(key); it != impl_->chosen.end()) return it->second;
  }
  Choice c = search_choice(kernel, shape_class, problem);
  std::lock_guard<std::mutex> lock(impl_->chosen_mutex);
  if (impl_->chosen.size() >= 4096) impl_->chosen.clear();  // an engine's problems vary; memory stays bounded
  impl_->chosen.emplace(std::make_tuple(kernel, shape_class, problem), c);
  return c;
}

Choice Runtime::search_choice(const std::string& kernel, const std::string& shape_class,
                              const std::map<std::string, std::int64_t>& problem) const {
  const KernelFamily* family = find_family(kernel);
  if (family == nullptr) throw Error(ErrorCode::kNotFound, "unknown kernel '" + kernel + "'");
  Choice c;
  c.kernel = kernel;
  c.shape_class = shape_class;
  for (const ProfileCandidate& candidate : impl_->profiles.candidates) {
    if (const ProfileEntry* e = candidate.profile.find(kernel, shape_class, &problem)) {
      const auto same_class =
          std::count_if(candidate.profile.entries.begin(), candidate.profile.entries.end(),
                        [&](const ProfileEntry& x) { return x.kernel == kernel && x.shape_class == shape_class; });
      if (same_class > 1) c.tuned_on = e->problem;
      c.algorithm = e->algorithm;
      c.params = e->params;
      if (const AlgorithmSpec* a = family->find_algorithm(c.algorithm))
        c.adjusted = adapt_params_to_device(*a, impl_->device, c.params);
      c.source = candidate.profile.path;
      c.section = candidate.section;
      c.level = candidate.level;
      return c;
    }
  }
  const DeviceLimits limits = DeviceLimits::of(impl_->device);
  const BuiltinChoice builtin = family->builtin_point(shape_class, impl_->excluded, &limits);
  c.algorithm = builtin.algorithm;
  c.params = builtin.params;
  return c;
}

std::string adapt_params_to_device(const AlgorithmSpec& algorithm, const DeviceInfo& device, Params& params) {
  const DeviceLimits limits = DeviceLimits::of(device);
  std::string adjusted;
  // A register target needs PTX: a profile matched by device name or vendor on another
  // platform (another driver for the same GPU) runs the entry with the compiler's choice.
  if (const int target = register_target(params); target != 0 && !limits.ptx_binaries) {
    params[kRegisterTarget] = 0;
    adjusted = std::string(kRegisterTarget) + " " + std::to_string(target) +
               " -> 0: this device's program binaries are not PTX";
  }
  // Likewise an OpenCL C 2.0 variant where the device has only OpenCL 1.2's memory model:
  // the parameter's default is the conformant way everywhere.
  if (limits.device_atomics_std.empty())
    for (const ParamSpec& spec : algorithm.params) {
      const auto it = params.find(spec.name);
      if (!spec.needs_device_atomics || it == params.end() || it->second == spec.default_value) continue;
      adjusted += (adjusted.empty() ? "" : "; ") + spec.name + " " + std::to_string(it->second) + " -> " +
                  std::to_string(spec.default_value) + ": this device reports no device-scope atomics";
      it->second = spec.default_value;
    }
  return adjusted;
}

Choice Runtime::choose_gemm_nt(const GemmProblem& problem, ElementType input, GemmPrecision precision) {
  const std::map<std::string, std::int64_t> key = gemm_nt_problem_of(problem, input);
  const std::string shape_class = gemm_nt_shape_class(problem, input, precision);
  const std::string exact_class = gemm_nt_exact_class(shape_class);
  Choice c = choose("gemm_nt", shape_class, key);
  if (c.level == MatchLevel::kNone && exact_class != shape_class) {
    // No profile tuned this precision: the exact class's entry is as accurate and tuned.
    c = choose("gemm_nt", exact_class, key);
    c.adjusted = "no profile entry for " + shape_class + ": " + exact_class + "'s";
  } else if (exact_class != shape_class && !gemm_nt_tensor_core_algorithm(c.algorithm)) {
    // A twin's SIMT entry is at best its exact class's point (a device without tensor cores
    // writes the exact class's point under the twin's name): a profile that matches this
    // device better and has an entry for the exact class serves instead.
    Choice exact = choose("gemm_nt", exact_class, key);
    if (exact.level < c.level) {
      exact.adjusted = (exact.adjusted.empty() ? "" : exact.adjusted + "; ") + shape_class + "'s entry from " +
                       c.source + " (match: " + to_string(c.level) + ") names a SIMT algorithm: " + exact_class +
                       "'s of a nearer profile";
      c = exact;
    }
  }
  if (!gemm_nt_tensor_core_algorithm(c.algorithm)) return c;
  std::string why = gemm_nt_tc_refusal(problem, input, precision);
  if (why.empty()) {
    const TensorCoreProbe probe = probe_tensor_cores(input, precision);
    if (!probe.usable) why = probe.reason;
  }
  if (why.empty()) return c;
  // The portable kernels instead: for f32 the exact class's choice (never tc where the tuner
  // wrote it), else, and where that is tc too (a profile written by hand), the built-in.
  Choice fallback = choose("gemm_nt", exact_class, key);
  if (gemm_nt_tensor_core_algorithm(fallback.algorithm) || input != ElementType::f32) {
    const KernelFamily& family = gemm_nt_family();
    const BuiltinChoice builtin = family.builtin_point(shape_class);
    fallback = Choice{};
    fallback.kernel = "gemm_nt";
    fallback.shape_class = shape_class;
    fallback.algorithm = builtin.algorithm;
    fallback.params = builtin.params;
  }
  fallback.adjusted = c.algorithm + " from " + c.source + " not used: " + why;
  return fallback;
}

TensorCoreProbe Runtime::probe_tensor_cores(ElementType input, GemmPrecision precision) {
  TensorCoreProbe answer;
  answer.kind = input == ElementType::f32 ? to_string(precision) : to_string(input);
  if (input == ElementType::f32 && precision == GemmPrecision::exact) {
    answer.reason = gemm_nt_tc_refusal({1, 1, kTf32x3MinK}, input, precision);
    return answer;
  }
  const std::string mode = env_or("OCLTK_TC_PROBE", "");
  if (mode == "off") {
    answer.reason = "tensor cores are turned off by OCLTK_TC_PROBE=off";
    return answer;
  }
  if (!mode.empty() && mode != "emulated" && mode != "fail") {
    answer.reason = "OCLTK_TC_PROBE='" + mode + "' is none of off, emulated and fail: tensor cores stay off";
    return answer;
  }
  if (mode.empty() && !DeviceLimits::of(impl_->device).tensor_mma) {
    answer.reason = impl_->device.name + " has no mma.sync (tc needs NVIDIA's OpenCL at sm_80 or newer)";
    return answer;
  }
  std::lock_guard<std::mutex> lock(impl_->probe_mutex);
  const std::string key = answer.kind + "/" + mode;
  if (const auto it = impl_->probes.find(key); it != impl_->probes.end()) return it->second;
  answer = detail::probe_gemm_nt_tc(*this, input, precision, mode == "fail");
  impl_->probes.emplace(key, answer);
  if (impl_->verbose)
    std::cerr << "ocltk: tensor-core probe (" << answer.kind << ") on " << impl_->device.name << ": "
              << (answer.usable ? "usable, " : "not usable, ") << answer.reason << "\n";
  return answer;
}

std::string Runtime::program_options(const AlgorithmSpec& algorithm, const Params& params,
                                     const std::string& variant) const {
  const DeviceLimits limits = DeviceLimits::of(impl_->device);
  return algorithm.build_options(params, &limits) + device_build_options(impl_->device) + variant;
}

boost::compute::program Runtime::program_for(const AlgorithmSpec& algorithm, const Params& params,
                                             const std::string& variant) {
  const std::string options = program_options(algorithm, params, variant);
  const std::string key = algorithm.source_name + "\n" + options;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (const auto it = impl_->programs.find(key); it != impl_->programs.end()) return it->second;
  }
  boost::compute::program program = impl_->cache.get(
      impl_->context, impl_->device.handle, kernel_source(algorithm.source_name), options, register_target(params));
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->programs.emplace(key, program);
  return program;
}

std::string device_build_options(const DeviceInfo& device) {
  // NVIDIA's OpenCL compiler accepts inline PTX (asm), which kernels use behind OCLTK_PTX.
  return device.platform == "NVIDIA CUDA" ? " -DOCLTK_PTX=1" : "";
}

Status Runtime::check_gemm_nt(const GemmNtArgs& args) const {
  const GemmProblem& p = args.problem;
  auto invalid = [](const std::string& message) { return Status(ErrorCode::kInvalidArgument, message); };
  const std::pair<const char*, std::int64_t> dims[] = {{"M", p.m}, {"N", p.n}, {"K", p.k}};
  for (const auto& [name, value] : dims) {
    if (value < 1)
      return invalid(std::string("gemm_nt: ") + name + " = " + std::to_string(value) + " must be at least 1");
    if (value > INT_MAX)
      return invalid(std::string("gemm_nt: ") + name + " = " + std::to_string(value) + " exceeds the kernel limit " +
                     std::to_string(INT_MAX));
  }
  if (args.b.type != args.a.type)
    return invalid(std::string("gemm_nt: B is ") + to_string(args.b.type) + " but A is " + to_string(args.a.type) +
                   " (A and B share one element type)");
  if (args.c.type != args.a.type && args.c.type != ElementType::f32)
    return invalid(std::string("gemm_nt: C is ") + to_string(args.c.type) + " but A and B are " +
                   to_string(args.a.type) + " (C takes their type or f32)");
  struct Operand {
    const char* name;
    const Matrix& m;
    std::int64_t rows, cols;
  };
  const Operand operands[] = {{"A", args.a, p.m, p.k}, {"B", args.b, p.n, p.k}, {"C", args.c, p.m, p.n}};
  for (const Operand& o : operands) {
    const std::string name = o.name;
    if (o.m.buffer == nullptr) return invalid("gemm_nt: buffer " + name + " is null");
    const std::int64_t ld = o.m.ld == 0 ? o.cols : std::int64_t(o.m.ld);
    if (ld < o.cols)
      return invalid("gemm_nt: leading dimension ld" + std::string(1, char(std::tolower(o.name[0]))) + " = " +
                     std::to_string(ld) + " is smaller than the row length of " + name + " (" + std::to_string(o.cols) +
                     ")");
    if (ld > INT_MAX) return invalid("gemm_nt: leading dimension of " + name + " exceeds " + std::to_string(INT_MAX));
    cl_context ctx = nullptr;
    std::size_t bytes = 0;
    if (clGetMemObjectInfo(o.m.buffer, CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS ||
        clGetMemObjectInfo(o.m.buffer, CL_MEM_SIZE, sizeof bytes, &bytes, nullptr) != CL_SUCCESS)
      return invalid("gemm_nt: buffer " + name + " is not a valid OpenCL buffer");
    if (ctx != impl_->context.get()) return invalid("gemm_nt: buffer " + name + " belongs to another OpenCL context");
    const double needed =
        double(element_size(o.m.type)) * (double(o.m.offset) + double(o.rows - 1) * double(ld) + double(o.cols));
    if (needed > double(bytes))
      return invalid("gemm_nt: buffer " + name + " holds " + std::to_string(bytes) + " bytes but " +
                     std::to_string(o.rows) + "x" + std::to_string(o.cols) + " " + to_string(o.m.type) +
                     " elements at offset " + std::to_string(o.m.offset) + " with leading dimension " +
                     std::to_string(ld) + " need " + std::to_string(std::uint64_t(needed)));
  }
  return Status();
}

namespace {

const std::string& gemm_nt_kernel_name(bool accumulate) {
  static const std::string plain = "gemm_nt", accum = "gemm_nt_accum";
  return accumulate ? accum : plain;
}

// gemm_nt's arguments and dispatches for `kernel`, under the launch lock: dispatches of at most
// the options' cap of workgroups per dimension, each addressing its own block of C through the
// offsets, so that the kernel never sees the split.
void enqueue_gemm_nt(cl_kernel kernel, const std::string& kernel_name, const std::string& algorithm,
                     const Params& params, const GemmNtArgs& args, const RuntimeOptions& options,
                     cl_command_queue queue, bool out_of_order, const Launch& launch_options) {
  const GemmProblem& p = args.problem;
  const std::int64_t lda = args.a.ld ? std::int64_t(args.a.ld) : p.k;
  const std::int64_t ldb = args.b.ld ? std::int64_t(args.b.ld) : p.k;
  const std::int64_t ldc = args.c.ld ? std::int64_t(args.c.ld) : p.n;
  const LaunchGeometry whole = gemm_nt_geometry(algorithm, params, p);
  const std::int64_t cap =
      options.max_groups_per_dispatch > 0 ? options.max_groups_per_dispatch : kDefaultMaxGroupsPerDispatch;
  const std::int64_t rows_per_dispatch = cap * whole.tile_m;
  const std::int64_t cols_per_dispatch = cap * whole.tile_n;
  detail::DispatchChain chain(queue, out_of_order, launch_options);
  for (std::int64_t m0 = 0; m0 < p.m; m0 += rows_per_dispatch) {
    for (std::int64_t n0 = 0; n0 < p.n; n0 += cols_per_dispatch) {
      const GemmProblem part{std::min(rows_per_dispatch, p.m - m0), std::min(cols_per_dispatch, p.n - n0), p.k};
      const LaunchGeometry g = gemm_nt_geometry(algorithm, params, part);
      const cl_int m = cl_int(part.m), n = cl_int(part.n), k = cl_int(part.k);
      const cl_long a_off = cl_long(args.a.offset + m0 * lda), b_off = cl_long(args.b.offset + n0 * ldb),
                    c_off = cl_long(args.c.offset + m0 * ldc + n0);
      const cl_int lda_i = cl_int(lda), ldb_i = cl_int(ldb), ldc_i = cl_int(ldc);
      cl_mem a = args.a.buffer, b = args.b.buffer, c = args.c.buffer;
      detail::set_kernel_args(kernel,
                              {{sizeof m, &m},
                               {sizeof n, &n},
                               {sizeof k, &k},
                               {sizeof args.alpha, &args.alpha},
                               {sizeof a, &a},
                               {sizeof a_off, &a_off},
                               {sizeof lda_i, &lda_i},
                               {sizeof b, &b},
                               {sizeof b_off, &b_off},
                               {sizeof ldb_i, &ldb_i},
                               {sizeof c, &c},
                               {sizeof c_off, &c_off},
                               {sizeof ldc_i, &ldc_i}},
                              kernel_name);
      chain.enqueue(kernel, 2, g.global.data(), g.local.data(), kernel_name);
    }
  }
  chain.finish();
}

// A plan's key for gemm_nt: everything choose_gemm_nt, the checks of the choice and the
// launch variant depend on.
Runtime::PlanKey gemm_nt_plan_key(const GemmNtArgs& args, bool accumulate) {
  Runtime::PlanKey key;
  key.values = {std::int64_t(Runtime::PlanFamily::kGemmNt),
                args.problem.m,
                args.problem.n,
                args.problem.k,
                std::int64_t(args.a.type),
                std::int64_t(args.c.type),
                std::int64_t(args.precision),
                accumulate ? 1 : 0};
  return key;
}

}  // namespace

Status Runtime::gemm_nt(const GemmNtArgs& args, const Launch& launch) { return gemm_nt_planned(false, args, launch); }

Status Runtime::gemm_nt_accum(const GemmNtArgs& args, const Launch& launch) {
  return gemm_nt_planned(true, args, launch);
}

// gemm_nt and gemm_nt_accum: the arguments checked, then the plan of the launch's problem (made
// once: choose_gemm_nt, then what gemm_nt_with checks) enqueued.
Status Runtime::gemm_nt_planned(bool accumulate, const GemmNtArgs& args, const Launch& launch_options) {
  if (Status status = check_gemm_nt(args); !status) return status;
  return guard([&] {
    const PlanKey key = gemm_nt_plan_key(args, accumulate);
    std::shared_ptr<const LaunchPlan> plan = find_plan(key);
    if (!plan) {
      Choice choice = choose_gemm_nt(args.problem, args.a.type, args.precision);
      const AlgorithmSpec& algorithm = gemm_nt_algorithm(choice, args);
      choice.params = complete_choice(algorithm, choice.params);  // as gemm_nt_with prepares it
      plan =
          keep_plan(key, make_plan(choice, algorithm, {gemm_nt_kernel_name(accumulate)},
                                   gemm_nt_launch_variant(args.a.type, args.c.type, algorithm.name, args.precision)));
    }
    const std::string& kernel_name = gemm_nt_kernel_name(accumulate);
    launch(*plan, [&](const std::vector<cl_kernel>& kernels) {
      enqueue_gemm_nt(kernels.front(), kernel_name, plan->algorithm->name, plan->choice->params, args, impl_->options,
                      impl_->queue.get(), queue_out_of_order(), launch_options);
    });
  });
}

// The algorithm `choice` names for a gemm_nt launch of `args`, where it may serve it.
const AlgorithmSpec& Runtime::gemm_nt_algorithm(const Choice& choice, const GemmNtArgs& args) const {
  const AlgorithmSpec* algorithm = gemm_nt_family().find_algorithm(choice.algorithm);
  if (algorithm == nullptr)
    throw Error(ErrorCode::kInvalidArgument, "gemm_nt has no algorithm '" + choice.algorithm + "'");
  if (gemm_nt_tensor_core_algorithm(algorithm->name))
    if (const std::string why = gemm_nt_tc_refusal(args.problem, args.a.type, args.precision); !why.empty())
      throw Error(ErrorCode::kInvalidArgument, "gemm_nt/" + algorithm->name + ": " + why);
  return *algorithm;
}

Status Runtime::gemm_nt_with(const Choice& choice, bool accumulate, const GemmNtArgs& args,
                             const Launch& launch_options) {
  if (Status status = check_gemm_nt(args); !status) return status;
  return guard([&] {
    const AlgorithmSpec& algorithm = gemm_nt_algorithm(choice, args);
    Choice used = choice;
    used.params = complete_choice(algorithm, choice.params);
    const std::string& kernel_name = gemm_nt_kernel_name(accumulate);
    launch(
        used, algorithm, kernel_name,
        [&](cl_kernel kernel) {
          enqueue_gemm_nt(kernel, kernel_name, algorithm.name, used.params, args, impl_->options, impl_->queue.get(),
                          queue_out_of_order(), launch_options);
        },
        gemm_nt_launch_variant(args.a.type, args.c.type, algorithm.name, args.precision));
  });
}

// The launch's choice as last_choice(), logged once under OCLTK_VERBOSE; under Impl::mutex.
void Runtime::record_choice(Impl& impl, std::shared_ptr<const Choice> choice) {
  impl.last_choice = std::move(choice);
  if (impl.verbose) {
    std::string line = impl.last_choice->describe();
    if (impl.logged.insert(line).second) std::cerr << "ocltk: " << line << "\n";
  }
}

void Runtime::launch(const Choice& choice, const AlgorithmSpec& algorithm, const std::string& kernel_name,
                     const std::function<void(cl_kernel)>& enqueue, const std::string& variant) {
  launch(
      choice, algorithm, std::vector<std::string>{kernel_name},
      [&](const std::vector<cl_kernel>& kernels) { enqueue(kernels.front()); }, variant);
}

void Runtime::launch(const Choice& choice, const AlgorithmSpec& algorithm, const std::vector<std::string>& kernel_names,
                     const std::function<void(const std::vector<cl_kernel>&)>& enqueue, const std::string& variant) {
  launch(make_plan(choice, algorithm, kernel_names, variant), enqueue);
}

std::shared_ptr<const Runtime::LaunchPlan> Runtime::find_plan(const PlanKey& key) const {
  std::lock_guard<std::mutex> lock(impl_->plans_mutex);
  const auto it = impl_->plans.find(key);
  return it == impl_->plans.end() ? nullptr : it->second;
}

std::shared_ptr<const Runtime::LaunchPlan> Runtime::keep_plan(const PlanKey& key, LaunchPlan plan) {
  auto kept = std::make_shared<const LaunchPlan>(std::move(plan));
  decltype(impl_->plans) forgotten;  // destroyed after the lock, not while others wait for it
  std::lock_guard<std::mutex> lock(impl_->plans_mutex);
  if (impl_->plans.size() >= kMaxPlans) forgotten.swap(impl_->plans);
  impl_->plans[key] = kept;
  return kept;
}

Runtime::LaunchPlan Runtime::make_plan(const Choice& choice, const AlgorithmSpec& algorithm,
                                       const std::vector<std::string>& kernel_names, const std::string& variant) {
  const PreparedRef ref{&algorithm, choice.kernel, algorithm.name, algorithm.source_name,
                        variant,    kernel_names,  choice.params};
  std::unique_lock<std::mutex> lock(impl_->mutex);
  auto it = impl_->prepared.find(ref);
  if (it == impl_->prepared.end()) {
    lock.unlock();  // prepare() takes it where it needs it
    prepare(choice, algorithm, kernel_names, variant);
    lock.lock();
    it = impl_->prepared.find(ref);
  }
  LaunchPlan plan;
  auto used = std::make_shared<Choice>(choice);
  used->params = it->second.params;
  plan.choice = std::move(used);
  plan.algorithm = &algorithm;
  plan.kernels = it->second.kernels;
  return plan;
}

void Runtime::launch(const LaunchPlan& plan, const std::function<void(const std::vector<cl_kernel>&)>& enqueue) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // Recorded under the same lock as the enqueue, so last_choice() names this launch.
  record_choice(*impl_, plan.choice);
  enqueue(plan.kernels);  // under the lock: arguments and enqueues of two threads never interleave
}

void Runtime::prepare(const Choice& choice, const AlgorithmSpec& algorithm,
                      const std::vector<std::string>& kernel_names, const std::string& variant) {
  const Params params = complete_choice(algorithm, choice.params);
  const DeviceLimits limits = DeviceLimits::of(impl_->device);
  if (const auto bad = algorithm.violation(params, &limits))
    throw Error(ErrorCode::kInvalidArgument, choice.kernel + "/" + algorithm.name + " {" + format_params(params) +
                                                 "} is illegal on " + impl_->device.name + ": " + *bad);
  boost::compute::program program = program_for(algorithm, params, variant);

  std::lock_guard<std::mutex> lock(impl_->mutex);
  const std::size_t wg = algorithm.work_group_size(params);
  std::vector<cl_kernel> kernels;
  for (const std::string& kernel_name : kernel_names) {
    const auto key = std::make_pair(program.get(), kernel_name);
    auto it = impl_->kernels.find(key);
    if (it == impl_->kernels.end()) it = impl_->kernels.emplace(key, program.create_kernel(kernel_name)).first;
    cl_kernel kernel = it->second.get();
    std::size_t kernel_wg = 0;
    detail::check_cl(clGetKernelWorkGroupInfo(kernel, impl_->device.handle.id(), CL_KERNEL_WORK_GROUP_SIZE,
                                              sizeof kernel_wg, &kernel_wg, nullptr),
                     "clGetKernelWorkGroupInfo");
    if (wg > kernel_wg)
      throw Error(ErrorCode::kDevice,
                  choice.kernel + "/" + algorithm.name + ": workgroup of " + std::to_string(wg) + " exceeds " +
                      kernel_name + "'s CL_KERNEL_WORK_GROUP_SIZE " + std::to_string(kernel_wg),
                  CL_INVALID_WORK_GROUP_SIZE);
    kernels.push_back(kernel);
  }
  impl_->prepared.emplace(PreparedKey{&algorithm, choice.kernel, algorithm.name, algorithm.source_name, variant,
                                      kernel_names, choice.params},
                          Prepared{params, kernels});
}

const char* version() { return OCLTK_VERSION; }

}  // namespace ocltk

// The runtime an engine links: open a device, pick each launch's parameters from the
// profile that fits the device, and enqueue kernels with no host round trip.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ocltk/cl.hpp"
#include "ocltk/device.hpp"
#include "ocltk/element_type.hpp"
#include "ocltk/family.hpp"
#include "ocltk/gemm_nt.hpp"
#include "ocltk/profile.hpp"
#include "ocltk/profile_db.hpp"
#include "ocltk/program_cache.hpp"
#include "ocltk/status.hpp"

namespace ocltk {

struct RuntimeOptions {
  std::string device;        // selector, see select_device(); empty reads OCLTK_DEVICE
  std::string profile_path;  // an explicit profile file, searched before everything else
  bool use_profiles = true;  // false: built-in defaults only (benchmarks of the defaults)
  std::string cache_dir;     // program cache folder; "" default, "-" no disk cache
  int verbose = -1;          // -1: read OCLTK_VERBOSE; 0 quiet; 1 log each choice once
  // Most workgroups one dispatch may have along dimension 1 (M); larger problems are
  // split into several dispatches. 0: 65535, the smallest limit among common drivers.
  std::int64_t max_groups_per_dispatch = 0;
  // Algorithms the runtime must not choose (AlgorithmExclusions::parse's list); "" reads
  // OCLTK_EXCLUDE_ALGORITHMS, "-" removes none. A list naming no known algorithm fails open().
  std::string exclude_algorithms;
};

// Where the profiles for a device come from (docs/profile-schema.md): an explicit path
// alone if given; else OCLTK_PROFILE_PATH, the user folder and the installed configs/.
// Matching profiles are ranked by match level first (device + driver, device,
// architecture, vendor); at equal level the earlier source wins. A profile file is one
// candidate; a database (schema 2) offers its member for this device (device + driver
// or device level only) and its derived sections for this device's architecture and
// vendor, each a candidate of its own.
struct ProfileCandidate {
  Profile profile;  // for a derived section: its choices under a header without a name
  MatchLevel level = MatchLevel::kNone;
  std::string tier;           // "explicit", "OCLTK_PROFILE_PATH", "user", "installed"
  std::string section;        // in a database: device_label() of the member or the derived
                              // section's describe(); empty for a profile file
  std::string where() const;  // "PATH" or "PATH [SECTION]"
};
struct ProfileSelection {
  std::vector<ProfileCandidate> candidates;  // sorted best first; only matching ones
  std::vector<std::string> warnings;         // unreadable files, profiles for other devices
  std::vector<std::string> searched;         // every file looked at, in order
};
ProfileSelection find_profiles(const DeviceInfo& device, const RuntimeOptions& options);
// $XDG_CONFIG_HOME/ocltk/profiles, else ~/.config/ocltk/profiles (HOME, else the password
// database's home folder: XDG's base directories); "" where there is no home folder at all.
std::string user_profile_dir();
std::string installed_configs_dir();  // <prefix>/share/ocltk/configs

// Which algorithm and parameters serve a launch, and why.
struct Choice {
  std::string kernel, shape_class, algorithm;
  Params params;
  std::string source = "built-in";       // the profile's path, or "built-in"
  std::string section;                   // the database section (ProfileCandidate::section)
  MatchLevel level = MatchLevel::kNone;  // the fallback step; kNone for built-in
  // Where the profile holds several entries of the class (tune --shapes): the problem of
  // the one chosen, the nearest to the launch's.
  std::map<std::string, std::int64_t> tuned_on;
  // What the runtime changed in the profile's entry for this device, e.g. a register target
  // (REGS) where program binaries are not PTX; empty when nothing.
  std::string adjusted;
  std::string describe() const;  // one line for logs, naming the file and the step
};

// A matrix operand: a buffer, an element offset and a leading dimension in elements
// (0 means packed: the row length), and the type its elements are stored in.
struct Matrix {
  cl_mem buffer = nullptr;
  std::size_t offset = 0;
  std::size_t ld = 0;
  ElementType type = ElementType::f32;
};

struct GemmNtArgs {
  GemmProblem problem;
  float alpha = 1.0f;
  // A: M×K, B: N×K, C: M×N. A and B share one type (f32, f16 or bf16); C is of their type
  // or f32 (16-bit A and B into an f32 C, as LoRA's shrink into its intermediate).
  Matrix a, b, c;
  // For f32 A and B: whether tensor cores may multiply them in TF32 or 3×TF32 (GemmPrecision
  // says what each guarantees). Ignored for 16-bit A and B.
  GemmPrecision precision = GemmPrecision::exact;
};

// Whether the tensor-core gemm_nt (algorithm tc) computes correctly on a device, for one
// kind of product: f16, bf16, tf32 or tf32x3 (Runtime::probe_tensor_cores).
struct TensorCoreProbe {
  bool usable = false;
  std::string kind;    // "f16", "bf16", "tf32", "tf32x3"
  std::string reason;  // why not, or how it was found to work
};

struct Launch {
  cl_command_queue queue = nullptr;  // nullptr: the runtime's own queue
  std::vector<cl_event> wait_for;
  // When set, receives the event of the last dispatch (the caller releases it).
  cl_event* event = nullptr;
  // When set, receives the event of the first command the launch enqueued (the caller
  // releases it; the same event as `event` where there is one command): from its start to
  // `event`'s end the launch ran, pre-passes (the f32 split of nf4_forward's tc) included.
  cl_event* first_event = nullptr;
};

// What the runtime changes in a profile entry's parameters before running them on `device`:
// a register target (REGS) to 0 where program binaries are not PTX, and a parameter that
// needs device-scope atomics (ParamSpec::needs_device_atomics) to its default where the
// device has none. Changes `params` in place; returns a note of each change ("" for none),
// as Choice::adjusted says it.
std::string adapt_params_to_device(const AlgorithmSpec& algorithm, const DeviceInfo& device, Params& params);

// Build options every kernel gets on `device`, after the algorithm's: " -DOCLTK_PTX=1" on
// NVIDIA's platform (kernels may then use inline PTX), else nothing.
std::string device_build_options(const DeviceInfo& device);

// Threads. One Runtime may be used from several threads at once for everything but the
// members named below: choose() and choose_gemm_nt(), the check_*() functions, the launches
// (gemm_nt*, the nf4 functions of nf4.hpp, launch()), the launch plans' members and
// program_for(). What they share (compiled programs, kernels, prepared launches, launch
// plans, remembered choices) is guarded by the
// runtime's locks, and a kernel's arguments are set and enqueued under one lock, so two
// threads' launches never interleave them. Launches from several threads may go to the
// runtime's queue (an in-order queue runs them in the order their enqueues took that lock)
// or to queues of their own (Launch::queue, of the runtime's context). The scratch of the
// launches that keep some (the split backwards' partial sums, the tc forward's split input)
// is per queue and serves in-order queues; two such launches on one out-of-order queue must
// be ordered by the caller (Launch::wait_for). Not to be done while other threads use the
// runtime: moving or destroying it, replacing the queue through queue(), and
// program_cache().clear_memory(). last_choice() names the latest launch of any thread: a
// thread that needs its own launch's choice asks choose() for it.
class Runtime {
 public:
  static Result<Runtime> open(const RuntimeOptions& options = {});
  // Wraps an engine's own context, device and queue (retained, not taken over).
  static Result<Runtime> wrap(cl_context context, cl_device_id device, cl_command_queue queue,
                              const RuntimeOptions& options = {});

  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;
  ~Runtime();

  const DeviceInfo& device() const;
  const boost::compute::context& context() const;
  boost::compute::command_queue& queue();
  // Whether queue() runs commands out of order (asked when the runtime opened, and again
  // after the queue was replaced through queue()).
  bool queue_out_of_order() const;
  Result<boost::compute::buffer> allocate(std::size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE);

  // Validates arguments without enqueuing anything; the message names the argument.
  Status check_gemm_nt(const GemmNtArgs& args) const;
  Status gemm_nt(const GemmNtArgs& args, const Launch& launch = {});
  Status gemm_nt_accum(const GemmNtArgs& args, const Launch& launch = {});
  // As above with an explicit choice instead of the profile's (tuner, tests, benches).
  Status gemm_nt_with(const Choice& choice, bool accumulate, const GemmNtArgs& args, const Launch& launch_options = {});

  // The profile entry (or built-in default) that serves a kernel and class; with the
  // launch's problem, the class's entry tuned on the nearest problem (Profile::find).
  // Searched once per kernel, class and problem, then remembered (the profiles do not
  // change while the runtime is open).
  Choice choose(const std::string& kernel, const std::string& shape_class,
                const std::map<std::string, std::int64_t>& problem = {}) const;
  // The choice that serves a gemm_nt launch whose A and B are of type `input` (the *_half
  // classes for 16-bit input) under `precision` (the TF32 twins of large, lora_shrink and
  // lora_expand for f32 launches that tensor cores may compute so: gemm_nt_shape_class; where
  // no profile has an entry for the twin, or where the twin's entry names a SIMT algorithm and
  // a better-matched profile has one for the exact class, the exact class's). A
  // profile's tc entry serves only where gemm_nt_tc_refusal allows it and
  // probe_tensor_cores passes (which the first such choice runs); elsewhere the launch gets
  // the SIMT choice of the exact class (f32) or the class's built-in (16-bit), and
  // Choice::adjusted says why (logged under OCLTK_VERBOSE).
  Choice choose_gemm_nt(const GemmProblem& problem, ElementType input = ElementType::f32,
                        GemmPrecision precision = GemmPrecision::exact);
  // Whether tc may serve launches of this input type and precision on this device: only on
  // NVIDIA's OpenCL at sm_80 or newer (DeviceLimits::tensor_mma), and only where a small tc
  // product built and run there matches the CPU reference within its bound (the probe). The
  // answer is kept for the runtime's life and on disk beside the program cache (keyed like a
  // program: source, options, device, driver), so the probe runs once per device, driver
  // and kind. OCLTK_TC_PROBE changes that: `off` refuses tc everywhere; `emulated` probes
  // on any device (without PTX the kernel emulates mma.sync: tests on PoCL); `fail` probes
  // on any device and makes the comparison fail (tests of the fallback; never on disk). A
  // launch plan keeps the answer its first launch saw (find_plan).
  TensorCoreProbe probe_tensor_cores(ElementType input, GemmPrecision precision = GemmPrecision::exact);
  // The choice behind the most recent launch of this runtime, from whichever thread.
  Choice last_choice() const;

  // The profiles found for the device, less the entries of excluded algorithms.
  const ProfileSelection& profiles() const;
  // The algorithms this runtime never chooses (RuntimeOptions::exclude_algorithms).
  const AlgorithmExclusions& excluded_algorithms() const;
  ProgramCache& program_cache();
  // Builds (or fetches) the program for an algorithm and parameters: the one path the
  // launcher and the tuner share. The options are the algorithm's (build_options), the
  // device's (device_build_options) and the launch's `variant` (see
  // AlgorithmSpec::tuned_variant). The runtime keeps every program it fetched, by source
  // and options, for the rest of its life (program_cache().clear_memory() does not drop
  // them). Throws Error / BuildError.
  boost::compute::program program_for(const AlgorithmSpec& algorithm, const Params& params,
                                      const std::string& variant = "");
  // The build options program_for uses for them (the program cache's key besides the
  // source and the device).
  std::string program_options(const AlgorithmSpec& algorithm, const Params& params,
                              const std::string& variant = "") const;
  const RuntimeOptions& options() const;

  // The launch path every kernel family shares: checks `params` against the algorithm's
  // table and the device, fetches the built program and the named kernel (cached), checks
  // the workgroup size against CL_KERNEL_WORK_GROUP_SIZE, records `choice` as the last
  // choice (logging it once under OCLTK_VERBOSE), then calls `enqueue` with the kernel
  // under the runtime's launch lock, so argument setting and enqueueing never interleave
  // between threads. `variant`: build options of this launch (AlgorithmSpec::tuned_variant).
  // Throws Error / BuildError.
  void launch(const Choice& choice, const AlgorithmSpec& algorithm, const std::string& kernel_name,
              const std::function<void(cl_kernel)>& enqueue, const std::string& variant = "");
  // The same for several kernels of the one program (a pre-pass and the product, say):
  // each is checked as above, and `enqueue` gets them in the order named. All of that but
  // the enqueue is done once per family, algorithm, variant, kernels and parameters as
  // given: later launches of the same find it prepared (a few microseconds of the host's
  // time, where the checks and the driver's queries took tens on NVIDIA's OpenCL).
  void launch(const Choice& choice, const AlgorithmSpec& algorithm, const std::vector<std::string>& kernel_names,
              const std::function<void(const std::vector<cl_kernel>&)>& enqueue, const std::string& variant = "");

  // Launch plans: what a family's launch resolves before its arguments (the choice, its
  // parameters completed and checked, its program and kernels), kept per key, so that a
  // launch of a problem seen before skips choose(), the parameters' completion and the
  // prepared launch's lookup, all keyed by strings and maps (most of a decode-sized
  // launch's host time, more than the driver's enqueue on PoCL). The key is the family's own
  // encoding (PlanFamily first) of everything its choice and the choice's checks depend on:
  // kernel, problem, element types, precision. A family makes its plan with make_plan where
  // find_plan has none and hands it to keep_plan. At most kMaxPlans are kept (then all
  // forgotten at once: an engine's problems vary). A plan keeps what its first launch saw,
  // the tensor-core probe's answer under OCLTK_TC_PROBE among it; its kernels and algorithm
  // are valid while the runtime lives. gemm_nt(), gemm_nt_accum(), and the LoRA and NF4
  // launches without an explicit choice go through plans.
  enum class PlanFamily : std::int64_t { kGemmNt = 1, kLoraShrink, kLoraExpand, kLoraApply, kNf4Forward, kNf4Backward };
  struct PlanKey {
    std::array<std::int64_t, 12> values{};
    bool operator==(const PlanKey& other) const { return values == other.values; }
  };
  struct LaunchPlan {
    std::shared_ptr<const Choice> choice;  // parameters completed
    const AlgorithmSpec* algorithm = nullptr;
    std::vector<cl_kernel> kernels;  // owned by the runtime, in the order named
  };
  static constexpr std::size_t kMaxPlans = 4096;
  std::shared_ptr<const LaunchPlan> find_plan(const PlanKey& key) const;
  std::shared_ptr<const LaunchPlan> keep_plan(const PlanKey& key, LaunchPlan plan);
  // What launch() prepares for `choice` (the same checks and errors: launch() runs this plan),
  // once per family, algorithm, variant, kernels and parameters as given (Impl::prepared).
  LaunchPlan make_plan(const Choice& choice, const AlgorithmSpec& algorithm,
                       const std::vector<std::string>& kernel_names, const std::string& variant = "");
  // launch() for a plan: records its choice as the last one and calls `enqueue` with its
  // kernels under the launch lock.
  void launch(const LaunchPlan& plan, const std::function<void(const std::vector<cl_kernel>&)>& enqueue);

 private:
  // choose()'s search, done once per kernel, class and problem.
  Choice search_choice(const std::string& kernel, const std::string& shape_class,
                       const std::map<std::string, std::int64_t>& problem) const;
  // launch()'s first time for a key: completes and checks the parameters, fetches the
  // program and the kernels, and records the prepared launch (Impl::prepared).
  void prepare(const Choice& choice, const AlgorithmSpec& algorithm, const std::vector<std::string>& kernel_names,
               const std::string& variant);
  // gemm_nt() and gemm_nt_accum() through their launch plan.
  Status gemm_nt_planned(bool accumulate, const GemmNtArgs& args, const Launch& launch_options);
  // The algorithm a choice names for a gemm_nt launch, where it may serve it (else throws).
  const AlgorithmSpec& gemm_nt_algorithm(const Choice& choice, const GemmNtArgs& args) const;
  struct Impl;
  static void record_choice(Impl& impl, std::shared_ptr<const Choice> choice);
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Version of the library, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace ocltk

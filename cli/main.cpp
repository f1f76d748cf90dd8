// `ocltk`: the command-line front end, a thin layer over the runtime and the tuner.
// Exit status: 0 success; 2 bad usage or bad input (one line on stderr); 1 a device or
// OpenCL failure.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "lora_commands.hpp"
#include "nf4_commands.hpp"
#include "npy.hpp"
#include "ocltk/ocltk.hpp"
#include "profile_commands.hpp"
#include "replay.hpp"
#include "tuner.hpp"

namespace {

using ocltk::cli::Args;
using ocltk::cli::check_output_path;
using ocltk::cli::parse_double;
using ocltk::cli::parse_int;
using ocltk::cli::parse_max_evals;
using ocltk::cli::split_list;
using ocltk::cli::UsageError;

constexpr int kExitOk = 0;
constexpr int kExitDevice = 1;
constexpr int kExitUsage = 2;

const char* const kMainHelp = R"(ocltk - tuned OpenCL kernels for LoRA (NT GEMM) and NF4 expert GEMMs

Usage: ocltk COMMAND [OPTIONS]

Commands:
  devices                 list OpenCL platforms and devices, their limits and the profile each would use
  tune                    tune the kernels on a device and write a YAML profile
  run gemm-nt             compute C = alpha * A * B^T (or C += ...) on .npy files
  run lora                LoRA in one call, Y (+)= scale * (X * A^T) * B^T, many adapters in one launch
  run nf4-forward         grouped product of rows with 4-bit NF4 expert weights (segmented by expert)
  run nf4-backward        its input gradient, dX = G * W per expert
  quantize nf4            weights (.npy, E x N x K or N x K) to packed NF4 codes + scales (bitsandbytes layout)
  dequantize nf4          packed NF4 codes + scales back to weights
  profile show FILE       print a profile (or a profile database) as tables
  profile validate FILE...
                          check profiles against the schema and the kernels' parameter tables
  profile merge FILE...   merge profiles into a database (-o DB.yaml) with per-architecture and per-vendor entries
  profile diff A B        compare two profiles or databases (exit 0 same, 1 different)
  profile check FILE      run every entry of a profile once on this device against the CPU reference
                          (exit 1 if any fails)

Options for every command:
  -h, --help              show help for the command
  --version               print the version

Environment: OCLTK_DEVICE (device selector), OCLTK_PROFILE_PATH (profile files or folders,
':'-separated), OCLTK_VERBOSE=1 (log which profile entry serves each launch), OCLTK_CACHE_DIR
(program cache folder; '-' disables it), OCLTK_EXCLUDE_ALGORITHMS (algorithms the runtime and
`tune` must not choose, e.g. "tc,gemm_nt:xgemm": a driver escape hatch, docs/robustness.md).
Exit status: 0 success, 2 bad usage or input, 1 device or OpenCL failure.
)";

const char* const kDevicesHelp = R"(Usage: ocltk devices

Lists every OpenCL platform and device with its limits, marks the default device (*), and
says which profile each device would use (and how it matched: device+driver, device,
architecture, vendor; for a profile database also which section: the device's own
profile or a derived one), then the further candidates it falls back to per kernel and
class ("fallback:"), or that built-in defaults apply. With OCLTK_EXCLUDE_ALGORITHMS set, a
last line names the algorithms it removes; a list the runtime would refuse is refused here
too (exit 2), before anything is listed.
)";

const char* const kTuneHelp = R"(Usage: ocltk tune [OPTIONS]
       ocltk tune --replay FILE [REPLAY OPTIONS]

Searches every kernel's parameter space on one device, verifies each candidate against a
CPU reference (rejecting wrong ones), and writes the fastest verified choice per
problem-size class into a YAML profile. Ends with a table per kernel and class: best,
built-in default, speed-up, evaluations, space size and time spent.

Options:
  --device SEL        device index or name substring (default: OCLTK_DEVICE, else first GPU, else first device)
  --out FILE          where to write the profile (default: ~/.config/ocltk/profiles/<device>.yaml,
                      where the runtime finds it: $XDG_CONFIG_HOME/ocltk/profiles where set, and the
                      password database's home folder where HOME is unset); a profile of this device
                      already there keeps the entries this run does not tune. Checked before tuning:
                      an empty path, a folder or anything but a regular file is refused
  --budget SECONDS    time budget of the search (default 165 on a CPU device, 285 on a GPU or an
                      accelerator, so that a whole run, with the candidate in flight at the end,
                      stays within 3 or 5 minutes), split over the classes (each at least half an
                      even share, so a class that ran long cannot starve the last); a tenth is held
                      for each kernel's classes to measure the best points the others kept (and
                      neighbours of their own best the others ran faster), after the kernel's last
                      class
  --strategy NAME     guided (default: a Gaussian-process cost model fitted on the points measured
                      so far picks the next ones), local (sample + coordinate descent), random, or
                      exhaustive
  --max-evals N|P%    at most N candidates per class, or P percent of each class's search space
                      (default: no limit besides the budget)
  --kernels LIST      comma-separated kernels to tune (default: all: gemm_nt, nf4_forward, nf4_backward,
                      lora_shrink, lora_expand, lora_apply)
  --classes LIST      comma-separated shape classes (default: all; gemm_nt has gemv, lora_shrink,
                      lora_expand, small_batch, large, their 16-bit twins gemv_half, ...,
                      large_half, and the twins of large, lora_shrink and lora_expand for f32
                      that allows tensor cores, large_tf32, large_tf32x3, ...,
                      lora_expand_tf32x3; nf4_* have decode, small_batch, prefill; lora_* have decode,
                      small_batch, prefill, multi_decode, multi_batch)
  --repeats N         timed runs per candidate, median taken (default 5), after a warm-up (on a CPU
                      device 50 ms of runs); a run of a kernel under 1 ms is the mean of back-to-back
                      runs 1 ms long
  --seed N            random seed of the search and of the test data (default 1)
  --cold              do not start from the profiles that already fit the device and the one at --out,
                      nor from the best points of the run's earlier problems of a class (by default
                      these are measured first, so running tune again refines its last answer), nor
                      measure the best points a kernel's other classes kept
  --jobs N            build workers compiling candidates while others are measured (default: one
                      per core on a CPU device, where they are paused while a candidate is timed;
                      one per spare core on a GPU, at most 4 worker processes)
  --timeout SECONDS   a candidate still running after this long is recorded as a hang and skipped
                      (default: max(2 s, 100 x the class's built-in default time)); counted from
                      when it starts running, so a compile at its first launch (PoCL) is not
  --cache DIR         folder of the resume caches (default: $OCLTK_CACHE_DIR/tune, else
                      ~/.cache/ocltk/tune); '-' keeps none
  --no-resume         measure every candidate again instead of recalling the cache's measurements
  --record FILE       append every measured point to FILE as JSON lines (parameters, time or the
                      reason it was rejected), written as they are measured
  --report DIR        write DIR/report.json (every evaluation in order, best so far) and one SVG
                      plot per class (DIR/<kernel>-<class>.svg)
  --shapes FILE       also tune your own problem sizes, from a YAML file: a model's sizes
                      (model: hidden, intermediate, experts, top_k, block_size, lora_ranks,
                      tokens) from which LoRA and NF4 expert problems are derived, and/or an
                      explicit list (shapes: - {kernel: gemm_nt, m: 1, n: 4096, k: 4096}; a gemm_nt
                      or NF4 problem with input_bits: 16 is measured with bf16 input; a LoRA one
                      names m, n, k, rank, adapters, segments and input_bits). Each
                      problem is stored beside its class's default entry; at launch the runtime
                      picks, within the launch's class, the entry whose problem is nearest in
                      log space (sum over dimensions of |log2 launch - log2 entry|)
  --priors WHICH      the known devices that seed a device (configs/ profiles and prior files,
                      built in): all (default), others (all but this device's own: a first tune of
                      a device nobody tuned, where somebody did), none. Per class the nearest
                      devices' best points are measured after the warm start's, steer the guided
                      model, and say how near the class is, which sets its share of the budget
  --builders KIND     where candidates are built ahead: auto (default: worker processes on a CPU
                      device, paused while a candidate is timed, and on NVIDIA; else threads
                      sharing the measuring context), shared, contexts (threads with contexts of
                      their own; on a CPU the timing waits for the builds they run), processes
  --json              print the summary as JSON on stdout (progress and messages go to stderr)
  --quiet             no progress output

Resume: every measurement is appended to a cache per device, driver, kernel and search
space as it is made. A run stopped by Ctrl-C, a crash or its budget leaves the profile as
it was; the same command run again recalls what was measured and goes on from there. A
cache written on another device or for another search space is refused. A cache that
cannot be written (a full disk) is warned about once and the run goes on without it; what
it already holds stays valid for the next run.

Algorithms named in OCLTK_EXCLUDE_ALGORITHMS are not searched, measured first or written.

Priors: ocltk tune --derive-priors OUT RECORDING... [--top N] writes a prior file of the
recordings' device: per class its N fastest verified points (default 24) and the built-in
default. configs/priors/ ships one per device the project recorded (docs/tuning.md).

Replay (no device): --replay FILE runs strategies against a recording made with --record
(an exhaustive one gives the true optimum) and reports, per class, how close each gets to
the recorded optimum.
  --strategy LIST     strategies to compare (default: guided,local,random)
  --max-evals N|P%    evaluations per run (default 15%)
  --seeds N           runs per strategy, seeds SEED .. SEED+N-1 (default 20)
  --seed N, --kernels LIST, --classes LIST, --json as above
)";

const char* const kRunHelp = R"(Usage: ocltk run gemm-nt --lhs A.npy --rhs B.npy --out C.npy [OPTIONS]

Computes C = alpha * A * B^T on the device. A is M x K, B is N x K, both float32, 2-D, C
order; C is written as an M x N float32 .npy file (atomically: a failed run leaves --out as it was).

Options:
  --lhs FILE          A, M x K float32
  --rhs FILE          B, N x K float32
  --out FILE          C, M x N float32 (read as the initial C with --accumulate)
  --accumulate        C += alpha * A * B^T, reading C from --out
  --alpha X           scale (default 1)
  --precision MODE    exact (default: f32 multiplies, never tensor cores), tf32 (tensor cores may
                      round A and B to TF32 first: about 3 decimal digits) or tf32x3 (tensor cores
                      in three TF32 products, within f32's error bound; K < 8 runs exact); tf32
                      and tf32x3 allow tensor cores where the device and its profile have them
  --device SEL        device index or name substring
  --profile FILE      use this profile instead of searching for one
)";

// Temporary file beside `path`, then rename: a failed write leaves `path` as it was.
void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp + " (" + std::strerror(errno) + ")");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
}

bool wants_help(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens)
    if (t == "--help" || t == "-h") return true;
  return false;
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(v < 10 && u > 0 ? 1 : 0) << v << " " << units[u];
  return out.str();
}

ocltk::Runtime open_runtime(const ocltk::RuntimeOptions& options) {
  ocltk::Result<ocltk::Runtime> rt = ocltk::Runtime::open(options);
  if (!rt) rt.status().throw_if_error();
  return std::move(rt.value());
}

int cmd_devices(const std::vector<std::string>& tokens) {
  Args args(tokens, ocltk::cli::kDevicesSyntax);
  if (!args.positional().empty()) throw UsageError("`ocltk devices` takes no arguments");
  // What every runtime and tune would refuse: said here, where a user checks the setup.
  const ocltk::AlgorithmExclusions excluded = ocltk::AlgorithmExclusions::from_environment();
  const std::vector<ocltk::DeviceInfo> devices = ocltk::list_devices();
  if (devices.empty()) {
    std::cout << "No OpenCL devices found (is an ICD such as pocl-opencl-icd installed?).\n";
    return kExitDevice;
  }
  int default_index = -1;
  try {
    default_index = ocltk::select_device("").index;
  } catch (const ocltk::Error&) {
  }
  std::string platform;
  for (const ocltk::DeviceInfo& d : devices) {
    if (d.platform != platform) {
      platform = d.platform;
      std::cout << "Platform: " << d.platform << " (" << d.platform_version << ")\n";
    }
    std::cout << (d.index == default_index ? " *" : "  ") << "[" << d.index << "] " << d.name << " (" << d.type << ")\n"
              << "      vendor " << d.vendor << ", driver " << d.driver << ", " << d.version << "\n"
              << "      architecture " << (d.architecture.empty() ? "unknown" : d.architecture) << ", "
              << d.compute_units << " compute units, max workgroup " << d.max_work_group_size << " (";
    for (std::size_t i = 0; i < d.max_work_item_sizes.size(); ++i)
      std::cout << (i ? "x" : "") << d.max_work_item_sizes[i];
    std::cout << "), local memory " << human_bytes(d.local_mem_bytes) << ", global memory "
              << human_bytes(d.global_mem_bytes) << ", max allocation " << human_bytes(d.max_alloc_bytes) << "\n";
    ocltk::cli::print_profile_selection(std::cout, ocltk::find_profiles(d, ocltk::RuntimeOptions{}));
  }
  std::cout << "(* = default device; select with --device INDEX|NAME or OCLTK_DEVICE)\n";
  if (!excluded.empty()) std::cout << "OCLTK_EXCLUDE_ALGORITHMS removes " << excluded.describe() << "\n";
  return kExitOk;
}

std::atomic<bool> g_stop_tuning{false};

extern "C" void request_tune_stop(int) { g_stop_tuning.store(true); }

int cmd_tune_replay(const Args& args) {
  ocltk::tuner::ReplayOptions options;
  for (const char* device_only : {"--device", "--out", "--budget", "--repeats", "--record", "--report", "--jobs",
                                  "--timeout", "--cache", "--shapes", "--priors", "--builders"})
    if (args.get(device_only)) throw UsageError(std::string(device_only) + " does not apply to --replay (no device)");
  for (const char* device_only : {"--cold", "--no-resume"})
    if (args.flag(device_only)) throw UsageError(std::string(device_only) + " does not apply to --replay (no device)");
  if (auto v = args.get("--strategy")) {
    options.strategies.clear();
    for (const std::string& name : split_list(*v)) {
      auto s = ocltk::tuner::parse_strategy(name);
      if (!s) throw UsageError("--strategy must list guided, local, random or exhaustive, got '" + name + "'");
      options.strategies.push_back(*s);
    }
    if (options.strategies.empty()) throw UsageError("--strategy needs at least one strategy");
  }
  if (auto v = args.get("--max-evals")) parse_max_evals(*v, options.max_evals, options.max_evals_fraction);
  if (auto v = args.get("--seeds")) options.seeds = int(parse_int(*v, "--seeds", 1, 100000));
  if (auto v = args.get("--seed")) options.seed = std::uint64_t(parse_int(*v, "--seed", 0, LLONG_MAX));
  if (auto v = args.get("--kernels")) options.kernels = split_list(*v);
  if (auto v = args.get("--classes")) options.classes = split_list(*v);
  const std::string path = *args.get("--replay");
  const ocltk::tuner::Recording recording = ocltk::tuner::read_recording(path);
  const auto results = ocltk::tuner::replay(recording, options);
  if (args.flag("--json")) {
    ocltk::tuner::print_replay_json(std::cout, results, options, recording);
  } else {
    std::cout << "Recording " << path << ": " << recording.device << " (driver " << recording.driver << ")\n";
    ocltk::tuner::print_replay(std::cout, results, options);
  }
  return kExitOk;
}

// `ocltk tune --derive-priors OUT RECORDING... [--top N]`.
int cmd_tune_derive_priors(const Args& args) {
  const std::string out = *args.get("--derive-priors");
  if (args.positional().empty()) throw UsageError("--derive-priors needs the recordings to derive from");
  std::size_t top = 24;
  if (auto v = args.get("--top")) top = std::size_t(parse_int(*v, "--top", 1, 100000));
  std::vector<ocltk::tuner::Recording> recordings;
  for (const std::string& path : args.positional()) recordings.push_back(ocltk::tuner::read_recording(path));
  std::ostringstream text;
  ocltk::tuner::write_priors(text, recordings, top);
  check_output_path(out, "--derive-priors");
  write_file_atomically(out, text.str());
  std::cout << "priors of " << recordings.front().device << " written to " << out << "\n";
  return kExitOk;
}

// `ocltk tune --build-worker --device N`: builds candidates for a tuner that runs it (build_workers.hpp).
int cmd_tune_build_worker(const Args& args) {
  ocltk::RuntimeOptions options;
  options.device = args.get("--device").value_or("");
  options.use_profiles = false;
  ocltk::Runtime rt = open_runtime(options);
  if (ocltk::tuner::compiles_at_first_launch(rt.device())) rt.program_cache().set_writes_to_disk(false);
  ocltk::tuner::serve_build_requests(rt, ocltk::tuner::tunable_families(), std::cin, std::cout);
  return kExitOk;
}

// The executable running now, for worker processes of its own.
std::string own_executable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

int cmd_tune(const std::vector<std::string>& tokens) {
  const std::string command = ocltk::cli::kTuneSyntax.command;
  Args args(tokens, ocltk::cli::kTuneSyntax);
  if (args.get("--derive-priors")) return cmd_tune_derive_priors(args);
  if (args.get("--top")) throw UsageError("--top applies to --derive-priors only");
  if (!args.positional().empty())
    throw UsageError("unexpected argument '" + args.positional()[0] + "' for `ocltk tune`");
  if (args.flag("--build-worker")) return cmd_tune_build_worker(args);
  if (args.get("--replay")) return cmd_tune_replay(args);
  if (args.get("--seeds")) throw UsageError("--seeds applies to --replay only");
  ocltk::tuner::TuneOptions options;
  options.warm_start = !args.flag("--cold");
  options.resume = !args.flag("--no-resume");
  if (auto v = args.get("--budget")) {
    options.budget_seconds = parse_double(*v, "--budget");
    if (!(options.budget_seconds > 0)) throw UsageError("--budget must be a positive number of seconds");
  }
  if (auto v = args.get("--strategy")) {
    auto s = ocltk::tuner::parse_strategy(*v);
    if (!s) throw UsageError("--strategy must be guided, local, random or exhaustive, got '" + *v + "'");
    options.strategy = *s;
  }
  if (auto v = args.get("--max-evals")) parse_max_evals(*v, options.max_evals, options.max_evals_fraction);
  if (auto v = args.get("--repeats")) options.repeats = int(parse_int(*v, "--repeats", 1, 1000));
  if (auto v = args.get("--seed")) options.seed = std::uint64_t(parse_int(*v, "--seed", 0, LLONG_MAX));
  if (auto v = args.get("--jobs")) options.compile_threads = int(parse_int(*v, "--jobs", 0, 256));
  if (auto v = args.get("--timeout")) {
    options.timeout_seconds = parse_double(*v, "--timeout");
    if (!(options.timeout_seconds > 0)) throw UsageError("--timeout must be a positive number of seconds");
  }
  if (auto v = args.get("--cache")) {
    if (v->empty()) throw UsageError("--cache needs a folder, or '-' for none");
    options.cache_dir = *v;
  }
  if (auto v = args.get("--kernels")) options.kernels = split_list(*v);
  if (auto v = args.get("--classes")) options.classes = split_list(*v);
  if (auto v = args.get("--shapes")) {
    try {
      options.shapes = ocltk::tuner::read_shapes(*v, ocltk::tuner::tunable_families());
    } catch (const ocltk::Error& e) {
      if (e.code() != ocltk::ErrorCode::kIo && e.code() != ocltk::ErrorCode::kNotFound) throw;
      throw UsageError("--shapes " + std::string(e.what()));  // a missing file, a FIFO, ...: name the option
    }
  }
  if (auto v = args.get("--priors")) {
    const auto use = ocltk::tuner::parse_prior_use(*v);
    if (!use) throw UsageError("--priors must be all, others or none, got '" + *v + "'");
    options.priors = *use;
  }
  if (auto v = args.get("--builders")) {
    const auto b = ocltk::tuner::parse_builders(*v);
    if (!b) throw UsageError("--builders must be auto, shared, contexts or processes, got '" + *v + "'");
    options.builders = *b;
  }
  if (const std::string self = own_executable(); !self.empty())
    options.worker_command = {self, "tune", "--build-worker"};
  const std::optional<std::string> report = args.get("--report");
  if (report) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(*report, ec) && !fs::is_directory(*report, ec))
      throw UsageError("--report " + *report + " exists and is not a folder");
    fs::create_directories(*report, ec);
    if (ec) throw UsageError("--report " + *report + " cannot be created (" + ec.message() + ")");
    check_output_path((fs::path(*report) / "report.json").string(), "--report");
  }
  ocltk::RuntimeOptions rt_options;
  rt_options.device = args.get("--device").value_or("");
  rt_options.use_profiles = false;  // the tuner measures explicit choices only
  ocltk::Runtime rt = open_runtime(rt_options);
  const std::optional<std::string> out_option = args.get("--out");
  const std::string out = out_option ? *out_option : ocltk::tuner::default_profile_path(rt.device());
  check_output_path(out, "--out");  // before minutes of tuning, not after
  // A profile already at --out keeps what this run does not tune; anything else there is
  // refused now rather than overwritten after minutes of tuning.
  std::optional<ocltk::Profile> existing;
  if (std::filesystem::exists(out)) {
    try {
      existing = ocltk::read_profile(out);
    } catch (const std::exception& e) {
      throw UsageError("--out " + out + " exists and is not an ocltk profile (" + e.what() +
                       "); remove it or choose another path");
    }
    // Its choices seed the search (warm start), like those of the profiles found for the
    // device, when it is this device's.
    if (existing->device.name == rt.device().name) options.warm_profiles.push_back(*existing);
  }
  std::ofstream record;
  if (auto path = args.get("--record")) {
    record.open(*path, std::ios::app);
    if (!record)
      throw UsageError("--record " + *path + " cannot be opened for appending (" + std::strerror(errno) + ")");
    // One header line per run, then one line per measured point (appended as measured).
    ocltk::tuner::write_record_header(record, rt.device());
    options.record = &record;
  }
  if (!args.flag("--quiet")) {
    options.progress = &std::cerr;
    options.progress_is_terminal = ::isatty(STDERR_FILENO) != 0;
  }
  if (!(options.budget_seconds > 0)) options.budget_seconds = ocltk::tuner::default_budget_seconds(rt.device());
  const bool json = args.flag("--json");
  std::ostream& log = json ? std::cerr : std::cout;  // with --json, stdout holds only the JSON
  log << "Tuning on " << rt.device().name << " (" << rt.device().platform << ", driver " << rt.device().driver
      << "), strategy " << ocltk::tuner::to_string(options.strategy) << ", budget " << options.budget_seconds << " s\n"
      << std::flush;
  // Ctrl-C stops after the current candidate; what was measured stays in the cache.
  g_stop_tuning.store(false);
  options.stop = &g_stop_tuning;
  std::signal(SIGINT, request_tune_stop);
  std::signal(SIGTERM, request_tune_stop);
  const ocltk::tuner::TuneResult result = ocltk::tuner::tune(rt, options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (report) ocltk::tuner::write_report(*report, result);
  if (result.interrupted) {
    std::cerr << "ocltk tune: interrupted; " << out << " was not written. The measurements so far are kept in";
    for (const std::string& c : result.caches) std::cerr << " " << c;
    std::cerr << (result.caches.empty() ? " no cache (--cache -)" : "; run the same command again to resume") << ".\n";
    return 130;
  }
  if (!json) ocltk::tuner::print_summary(std::cout, result);
  ocltk::Profile written = result.profile;
  std::size_t kept = 0;
  if (existing) {
    kept = ocltk::tuner::keep_untuned_entries(*existing, written);
    if (existing->device.name != written.device.name)
      log << "replacing " << out << ", a profile of another device (" << existing->device.name << ")\n";
  }
  ocltk::write_profile_atomically(out, written);
  if (json) {
    ocltk::tuner::print_summary_json(std::cout, result, out);
  } else {
    std::cout << "profile written to " << out;
    if (kept > 0)
      std::cout << " (kept " << kept << (kept == 1 ? " entry" : " entries") << " of the profile not tuned in this run)";
    std::cout << "\n";
    if (report) std::cout << "report written to " << *report << "/report.json and one SVG plot per class\n";
  }
  return kExitOk;
}

int cmd_run_gemm_nt(const std::vector<std::string>& tokens) {
  const std::string command = ocltk::cli::kRunGemmNtSyntax.command;
  Args args(tokens, ocltk::cli::kRunGemmNtSyntax);
  if (!args.positional().empty())
    throw UsageError("unexpected argument '" + args.positional()[0] + "' for `" + command + "`");
  const std::string lhs = args.required("--lhs"), rhs = args.required("--rhs"), out = args.required("--out");
  check_output_path(out, "--out");
  const float alpha = float(parse_double(args.get("--alpha").value_or("1"), "--alpha"));
  const bool accumulate = args.flag("--accumulate");
  const std::string precision_name = args.get("--precision").value_or("exact");
  const std::optional<ocltk::GemmPrecision> precision = ocltk::parse_gemm_precision(precision_name);
  if (!precision) throw UsageError("--precision must be exact, tf32 or tf32x3, got '" + precision_name + "'");

  // Everything is read and checked before the device is touched or anything written.
  const ocltk::npy::Array a = ocltk::npy::read_matrix_f32(lhs, "--lhs");
  const ocltk::npy::Array b = ocltk::npy::read_matrix_f32(rhs, "--rhs");
  const std::int64_t m = std::int64_t(a.shape[0]), k = std::int64_t(a.shape[1]), n = std::int64_t(b.shape[0]);
  if (std::int64_t(b.shape[1]) != k)
    throw UsageError(rhs + ": --rhs must be N x K with K = " + std::to_string(k) + " (the columns of --lhs), got " +
                     ocltk::npy::shape_str(b.shape));
  if (m == 0 || n == 0 || k == 0)
    throw UsageError("empty operand: --lhs is " + ocltk::npy::shape_str(a.shape) + ", --rhs is " +
                     ocltk::npy::shape_str(b.shape) + "; M, N and K must be at least 1");
  ocltk::npy::Array c;
  if (accumulate) {
    c = ocltk::npy::read_matrix_f32(out, "--out");
    if (std::int64_t(c.shape[0]) != m || std::int64_t(c.shape[1]) != n)
      throw UsageError(out + ": --out must be M x N = (" + std::to_string(m) + ", " + std::to_string(n) +
                       ") with --accumulate, got " + ocltk::npy::shape_str(c.shape));
  } else {
    c.dtype = ocltk::npy::DType::f32;
    c.shape = {std::size_t(m), std::size_t(n)};
    c.data.resize(std::size_t(m * n) * 4);
  }

  ocltk::RuntimeOptions options;
  options.device = args.get("--device").value_or("");
  options.profile_path = args.get("--profile").value_or("");
  ocltk::Runtime rt = open_runtime(options);
  auto buffer = [&](std::size_t bytes) { return rt.allocate(std::max<std::size_t>(bytes, 4)).value(); };
  boost::compute::buffer da = buffer(a.data.size()), db = buffer(b.data.size()), dc = buffer(c.data.size());
  boost::compute::command_queue& q = rt.queue();
  q.enqueue_write_buffer(da, 0, a.data.size(), a.data.data());
  q.enqueue_write_buffer(db, 0, b.data.size(), b.data.data());
  if (accumulate) q.enqueue_write_buffer(dc, 0, c.data.size(), c.data.data());
  ocltk::GemmNtArgs g;
  g.problem = {m, n, k};
  g.alpha = alpha;
  g.a.buffer = da.get();
  g.b.buffer = db.get();
  g.c.buffer = dc.get();
  g.precision = *precision;
  const ocltk::Status status = accumulate ? rt.gemm_nt_accum(g) : rt.gemm_nt(g);
  status.throw_if_error();
  q.enqueue_read_buffer(dc, 0, c.data.size(), c.data.data());
  ocltk::npy::write_atomically(out, c);
  return kExitOk;
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("missing command (see `ocltk --help`)");
  const std::string& command = argv[0];
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kMainHelp;
    return kExitOk;
  }
  if (command == "--version") {
    std::cout << "ocltk " << ocltk::version() << "\n";
    return kExitOk;
  }
  if (command == "devices") {
    if (wants_help(rest)) return std::cout << kDevicesHelp, kExitOk;
    return cmd_devices(rest);
  }
  if (command == "tune") {
    if (wants_help(rest)) return std::cout << kTuneHelp, kExitOk;
    return cmd_tune(rest);
  }
  if (command == "run") {
    if (rest.empty() || rest[0] == "--help" || rest[0] == "-h") {
      if (rest.empty()) throw UsageError("`ocltk run` needs a kernel: gemm-nt (see `ocltk run gemm-nt --help`)");
      return std::cout << kRunHelp, kExitOk;
    }
    const std::vector<std::string> opts(rest.begin() + 1, rest.end());
    if (rest[0] == "lora") {
      if (wants_help(opts)) return std::cout << ocltk::cli::lora_help(), kExitOk;
      return ocltk::cli::run_lora_command(opts);
    }
    if (rest[0] == "nf4-forward" || rest[0] == "nf4-backward") {
      if (wants_help(opts)) return std::cout << ocltk::cli::nf4_help(rest[0]), kExitOk;
      return ocltk::cli::run_nf4_command(rest[0], opts);
    }
    if (rest[0] != "gemm-nt")
      throw UsageError("unknown kernel '" + rest[0] + "' for `ocltk run` (gemm-nt, lora, nf4-forward, nf4-backward)");
    if (wants_help(opts)) return std::cout << kRunHelp, kExitOk;
    return cmd_run_gemm_nt(opts);
  }
  if (command == "quantize" || command == "dequantize") {
    if (rest.empty() || rest[0] != "nf4") {
      if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h"))
        return std::cout << ocltk::cli::nf4_help(command), kExitOk;
      throw UsageError("`ocltk " + command + "` needs a format: nf4 (see `ocltk " + command + " nf4 --help`)");
    }
    const std::vector<std::string> opts(rest.begin() + 1, rest.end());
    if (wants_help(opts)) return std::cout << ocltk::cli::nf4_help(command), kExitOk;
    return ocltk::cli::run_nf4_command(command, opts);
  }
  if (command == "profile") {
    if (wants_help(rest)) return std::cout << ocltk::cli::profile_help(), kExitOk;
    return ocltk::cli::run_profile_command(rest);
  }
  throw UsageError("unknown command '" + command + "' (see `ocltk --help`)");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (const UsageError& e) {
    std::cerr << "ocltk: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ocltk::cli::Nf4UsageError& e) {
    std::cerr << "ocltk: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ocltk::cli::LoraUsageError& e) {
    std::cerr << "ocltk: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ocltk::npy::Error& e) {
    std::cerr << "ocltk: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ocltk::Error& e) {
    std::cerr << "ocltk: " << e.what() << "\n";
    switch (e.code()) {
      case ocltk::ErrorCode::kInvalidArgument:
      case ocltk::ErrorCode::kNotFound:
      case ocltk::ErrorCode::kProfile:
      case ocltk::ErrorCode::kIo:
        return kExitUsage;
      default:
        return kExitDevice;
    }
  } catch (const std::exception& e) {
    std::cerr << "ocltk: OpenCL failure: " << e.what() << "\n";
    return kExitDevice;
  }
}

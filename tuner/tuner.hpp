// `ocltk tune`: measure a kernel family's legal parameter space on one device and write
// the best choice per shape class into a profile. Built on the runtime's own build and
// launch path (Runtime::program_for, Runtime::gemm_nt_with); it only adds measuring.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ocltk/gemm_nt.hpp"
#include "ocltk/profile.hpp"
#include "ocltk/runtime.hpp"

namespace ocltk::tuner {

enum class Strategy {
  kLocal,       // defaults + a random sample, then coordinate descent from the best (default)
  kRandom,      // a seeded random sample of the legal space
  kExhaustive,  // every legal point
};
const char* to_string(Strategy s);
std::optional<Strategy> parse_strategy(const std::string& name);

struct TuneOptions {
  Strategy strategy = Strategy::kLocal;
  double budget_seconds = 180;  // whole run; split evenly over the classes still to tune
  std::int64_t max_evals = 0;   // per class; 0 = no limit besides the budget
  int repeats = 5;              // timed runs per candidate (median), after one warm-up
  std::uint64_t seed = 1;
  // Measure the choices of profiles that already fit the device (OCLTK_PROFILE_PATH, the
  // user folder, installed configs) right after the built-in default.
  bool warm_start = true;
  std::vector<std::string> kernels;  // empty: every tunable family
  std::vector<std::string> classes;  // empty: every class; else only these (where a family has them)
  // Receives progress: a live line on a terminal, plain lines otherwise.
  std::ostream* progress = nullptr;
  // Receives every measured point as one JSON line (kernel, class, problem, algorithm,
  // parameters, and the time or why it was rejected), flushed as it is measured.
  std::ostream* record = nullptr;
  bool progress_is_terminal = false;
};

// One measured candidate.
struct Evaluation {
  std::string algorithm;
  Params params;
  bool ok = false;
  std::string rejected;  // why not ok: build failure, launch error, wrong result
  double time_ms = 0;    // median of the timed runs
};

struct ClassResult {
  std::string kernel;
  std::string shape_class;
  std::map<std::string, std::int64_t> problem;
  double flops = 0;
  Evaluation best;
  Evaluation builtin;  // the built-in default on the same problem
  int evaluations = 0;
  int rejected = 0;
  std::size_t space_size = 0;
  double seconds = 0;
  double speedup() const { return best.ok && builtin.ok ? builtin.time_ms / best.time_ms : 0; }
};

struct TuneResult {
  Profile profile;
  std::vector<ClassResult> classes;
  double seconds = 0;
};

// Tunes the selected families on the runtime's device. Throws Error on failures that
// are not a candidate's fault (a bad candidate is recorded and skipped, never fatal).
TuneResult tune(Runtime& runtime, const TuneOptions& options);

// The best-vs-default table printed at the end of a run.
void print_summary(std::ostream& out, const TuneResult& result);
// The same as one JSON object: device, seconds, and per kernel and class the problem, the
// space size, evaluations, rejections, seconds, the built-in default and the best choice.
void print_summary_json(std::ostream& out, const TuneResult& result, const std::string& profile_path);

// The first line a run appends to a --record file: format version, ocltk version, device.
void write_record_header(std::ostream& out, const DeviceInfo& device);

// The default profile location for a device: <user profile folder>/<device>.yaml.
std::string default_profile_path(const DeviceInfo& device);

}  // namespace ocltk::tuner

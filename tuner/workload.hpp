// What the tuner needs from a kernel family: for a shape class, a problem on the device
// that can be run with any legal choice, timed, and checked against a CPU reference.
// Each family provides one in its own file (gemm_nt_workload.cpp, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ocltk/family.hpp"
#include "ocltk/runtime.hpp"
#include "ocltk/status.hpp"

namespace ocltk::tuner {

class Workload {
 public:
  virtual ~Workload() = default;
  // The problem as stored in a profile entry, e.g. {m: 1, n: 4096, k: 4096}.
  virtual std::map<std::string, std::int64_t> problem() const = 0;
  virtual double flops() const = 0;
  virtual double min_bytes() const = 0;  // bytes that must cross memory at least once
  // Fills every output with NaN so an element a candidate never writes fails verify().
  virtual void poison() = 0;
  // Enqueues the operation once with `choice`, waits for it and returns its device time
  // in milliseconds from OpenCL profiling events (first dispatch's start to last one's
  // end). Throws Error / BuildError for a candidate that cannot run.
  virtual double run(const Choice& choice) = 0;
  // Empty when the output of the last run matches the CPU reference within the family's
  // documented error bound; otherwise one line saying which element is wrong.
  virtual std::string verify() = 0;
  // What verify() compares with the reference: `checked` of the output's `rows` rows (a
  // large problem's sample, its first and last rows among them), every element of each; the
  // rest of the output is checked only for having been written, where the family says so.
  // Zeros where unknown.
  struct CheckedRows {
    std::int64_t checked = 0, rows = 0;
  };
  virtual CheckedRows checked_rows() const { return {}; }
  // The build options run() launches `algorithm` with beside its parameters' (what the
  // compile pool prebuilds): its tuned_variant unless the problem's input type differs.
  virtual std::string variant(const AlgorithmSpec& algorithm) const { return algorithm.tuned_variant; }
  // Whether `best` at another value of its refined-last parameter `param` runs other work on
  // this problem (the refinement measures it only then): nf4_backward's SPLIT_SUM says how the
  // splits of N are added, and a launch of one split adds none (nf4_backward_splits).
  virtual bool refines(const AlgorithmSpec& algorithm, const Params& best, const std::string& param) {
    (void)algorithm, (void)best, (void)param;
    return true;
  }

  // run() gives up waiting after this many seconds (0: no limit) by throwing CandidateHang.
  double timeout_seconds = 0;
  // And a launch may wait this much longer before its command starts running (wait_for_event):
  // on a device that compiles a kernel at its first launch, the compile.
  double start_seconds = 0;
};

// A candidate still running past its time limit. The device may still be busy with it.
struct CandidateHang : Error {
  explicit CandidateHang(const std::string& message) : Error(ErrorCode::kDevice, message) {}
};

// Waits for `event` like clWaitForEvents, but polls, and throws CandidateHang once it has run
// for `timeout_seconds` (> 0), or waited `start_seconds` more than that without starting to
// run (CL_RUNNING; a driver that never reports it is given `start_seconds` more). PoCL compiles
// a kernel for its workgroup size when the command is taken off the queue, before it reports it
// running: seconds, which a limit of 2 s counted as a hang on the loaded 2-core PoCL machine
// (the nearest device's best point of nf4_backward decode in a first tune). Throws Error for a
// failed command.
void wait_for_event(cl_event event, double timeout_seconds, double start_seconds = 0);

// A problem as profiles store it, e.g. {m: 1, n: 4096, k: 4096}.
using Problem = std::map<std::string, std::int64_t>;

// A model's sizes, from a `tune --shapes` file: each family derives the problems its
// layers launch (LoRA shrink and expand per rank, NF4 expert projections).
struct ModelDescription {
  std::int64_t hidden = 0, intermediate = 0, experts = 0, top_k = 2, block_size = 64;
  std::vector<std::int64_t> lora_ranks;
  std::vector<std::int64_t> tokens{1, 16, 512};  // rows per launch to tune for
};

// What FamilyTuning::served_by answers: the serving class, and why on this device.
struct ServedBy {
  std::string shape_class;
  std::string reason;
};

struct FamilyTuning {
  const KernelFamily* family;
  // The problem `tune` measures for a class on this device.
  std::function<std::unique_ptr<Workload>(Runtime&, const std::string& shape_class, std::mt19937_64& rng)> make;
  // A user's own problem (`tune --shapes`): the keys it takes (all needed but block_size,
  // 64 when absent, and input_bits, 32 when absent), the class the runtime files it under, its
  // workload, and the problems a model description implies (may be none).
  std::vector<std::string> problem_keys;
  std::function<std::string(const Problem&)> class_of;
  std::function<std::unique_ptr<Workload>(Runtime&, const Problem&, std::mt19937_64& rng)> make_for;
  std::function<std::vector<Problem>(const ModelDescription&)> derive;
  // A small problem of the family for input of `input_bits` bits (32 or 16): a build worker
  // on a device that compiles kernels at their first launch launches a candidate once on it
  // (build_workers.hpp), so that the measuring context finds the compiled kernel in the
  // driver's cache. Absent: workers build programs only.
  std::function<Problem(std::int64_t input_bits)> small_problem;
  // Whether a class's search includes an algorithm on this runtime's device (null: every
  // algorithm in every class): gemm_nt searches tc only in the classes whose launches may
  // run it and only where the runtime's tensor-core probe passes.
  std::function<bool(Runtime&, const std::string& shape_class, const AlgorithmSpec&)> searches;
  // A profile entry's own problem under the entry's class (`profile check`), where the class
  // carries what the problem does not: gemm_nt's TF32 classes, their precision. Absent:
  // make_for.
  std::function<std::unique_ptr<Workload>(Runtime&, const std::string& shape_class, const Problem&,
                                          std::mt19937_64& rng)>
      make_for_class;
  // The class whose entry serves a class's launches on this runtime's device with the very
  // programs that class would measure, on the same problem, and why (null, or nullopt: the
  // class is its own): gemm_nt's TF32 classes where the probe refuses tensor cores run the
  // exact class's SIMT kernels. `tune` measures such a class only where the serving class is
  // not tuned in the same run; otherwise it writes the serving class's entry for it too.
  std::function<std::optional<ServedBy>(Runtime&, const std::string& shape_class)> served_by;
  // The input width (32 or 16) a class's own problem runs (null: 32): gemm_nt's *_half classes
  // and the LoRA classes run 16-bit input.
  std::function<int(const std::string& shape_class)> class_input_bits;
  // The build variant a class's workload launches `algorithm` with at `input_bits`
  // (Workload::variant), known before the workload is made: what `tune` builds ahead for the
  // classes to come. Null: the algorithm's tuned_variant, which is f32's for gemm_nt's SIMT
  // algorithms and the LoRA kernels, whose 16-bit classes measure other programs.
  std::function<std::string(const std::string& shape_class, int input_bits, const AlgorithmSpec&)> variant_for;
};

// Every family the tuner knows, in tuning order.
const std::vector<FamilyTuning>& tunable_families();

}  // namespace ocltk::tuner

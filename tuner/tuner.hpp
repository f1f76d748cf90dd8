// `ocltk tune`: measure a kernel family's legal parameter space on one device and write
// the best choice per shape class into a profile. Built on the runtime's own build and
// launch path (Runtime::program_for, Runtime::gemm_nt_with); it only adds measuring.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "build_workers.hpp"
#include "ocltk/gemm_nt.hpp"
#include "ocltk/profile.hpp"
#include "ocltk/runtime.hpp"
#include "priors.hpp"
#include "record.hpp"
#include "search.hpp"
#include "shapes.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

struct TuneOptions {
  Strategy strategy = Strategy::kGuided;
  // The whole run's, split over the classes; 0: the device's default (default_budget_seconds).
  double budget_seconds = 0;
  std::int64_t max_evals = 0;     // per class; 0 = no limit besides the budget
  double max_evals_fraction = 0;  // per class, as a fraction of its search space; 0 = none
  int repeats = 5;                // timed runs per candidate (median), after the warm-up
  // How long a candidate runs back to back before it is timed, in ms; below 0: 50 on a CPU
  // device, whose kernels' first launches ran slow (tuner.cpp, kSettleMs), 0 elsewhere.
  double settle_ms = -1;
  std::uint64_t seed = 1;
  // Measure the choices of profiles that already fit the device (OCLTK_PROFILE_PATH, the
  // user folder, installed configs) right after the built-in default, and for each problem
  // the best points of the run's earlier problems of its class.
  bool warm_start = true;
  // With warm_start, these profiles' choices are measured too (the CLI passes the profile
  // already at --out when it is for this device, wherever it lies).
  std::vector<Profile> warm_profiles;
  std::vector<std::string> kernels;  // empty: every tunable family
  std::vector<std::string> classes;  // empty: every class; else only these (where a family has them)
  // Threads compiling candidates ahead of the measurement; -1: on a CPU device one per core
  // (no build runs while a candidate is timed), on a GPU one per spare core (at most 4
  // processes).
  int compile_threads = -1;
  // A candidate still running after this many seconds is recorded as a hang and skipped;
  // 0: max(2 s, 100 x the class's built-in default time).
  double timeout_seconds = 0;
  // Folder of the append-only resume caches ("" = TuneCache::default_dir(), "-" = none).
  std::string cache_dir;
  bool resume = true;  // reuse the cache's measurements (false: measure everything again)
  // Set from a signal handler (Ctrl-C): the run stops after the current candidate.
  const std::atomic<bool>* stop = nullptr;
  // Receives progress: a live bar on a terminal, plain periodic lines otherwise.
  std::ostream* progress = nullptr;
  bool progress_is_terminal = false;
  double progress_interval_seconds = 5;  // plain lines: at most one per interval (and one per class)
  // Receives every measured point as one JSON line (record.hpp), flushed as measured.
  std::ostream* record = nullptr;
  // The families to tune; nullptr: tunable_families(). Tests inject their own.
  const std::vector<FamilyTuning>* families = nullptr;
  // A user's own problems (tune --shapes), tuned after the default classes; each becomes
  // an entry of its class beside the default one (the runtime picks the nearest problem).
  std::vector<UserShape> shapes;
  bool default_classes = true;  // false: only `shapes`
  // With warm_start, which known devices seed the run (priors.hpp): their best points for
  // each class are measured after the warm start's, steer the guided model, and set how near
  // a class is to what is known. `known_devices`: nullptr for those embedded from configs/.
  PriorUse priors = PriorUse::kAll;
  const std::vector<PriorDevice>* known_devices = nullptr;
  // Where candidates are built ahead (build_workers.hpp); processes run `worker_command`
  // (the ocltk executable, "tune", "--build-worker"), which auto uses on NVIDIA when given.
  Builders builders = Builders::kAuto;
  std::vector<std::string> worker_command;
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
  int cached = 0;                   // of the evaluations, recalled from the resume cache
  std::vector<Evaluation> history;  // every evaluation in order (the report plots it)
  std::size_t space_size = 0;
  double seconds = 0;
  // The nearest known devices that seeded it (priors.hpp) and their distance (-1: none), and
  // the weight of its share when it ended (class_share).
  int prior_distance = -1;
  std::vector<std::string> prior_devices;
  // The devices further on that lent their recordings of the class (ClassPrior::lenders) and
  // their distance (-1: none).
  std::vector<std::string> prior_lenders;
  int lender_distance = -1;
  // The devices of its vendor and kind further on whose profiles' choices it took among its
  // first points, after the nearest devices' and the sibling classes' (ClassPrior::
  // vendor_chosen; measured where its time allows); their distance is 2.
  std::vector<std::string> vendor_devices;
  // The earlier classes of its kernel in this run whose best points it measured first, where
  // this device had no point of its own for it (no profile choice, recording or earlier
  // problem of the class), nearest first.
  std::vector<std::string> seed_classes;
  // Where it knew its built-in default's algorithm by that default alone: the known devices'
  // point of it it measured, "ALGORITHM from CLASS" (tuner.cpp, builtin_stand_in); empty: none.
  std::string default_stand_in;
  double weight = 1;
  // After its kernel's last class: the other classes of the kernel whose best points it
  // measured then, nearest first (points it had not measured, whose programs were built: tuner.cpp,
  // revisit_points), and the one whose point it kept (empty: none of them).
  std::vector<std::string> revisited_from;
  std::string revisit_kept;
  // Then the classes that had measured a one-parameter neighbour of its best beside that best,
  // faster there, whose neighbour it measured (revisit_points), and the one whose neighbour it
  // kept (empty: none).
  std::vector<std::string> neighbours_from;
  std::string neighbour_kept;
  // The points timed again together at the end of its search, and again after its kernel's
  // last class where that measured or found near points, with their new figures (the best is
  // the point of the last re-timing whose fastest re-timed figure, this re-timing's or an
  // earlier one's, is the least, with that figure, unless a run-off below put another first),
  // and the seconds those took with their run-offs (DeviceMeasure::retime in tuner.cpp).
  std::vector<Evaluation> retimed;
  // The run-offs that ended those re-timings (DeviceMeasure::runoff in tuner.cpp): the point a
  // re-timing kept so far and a challenger within 1.5x of it, each with the figure it met the
  // other with, timed launch by launch in alternation, `pairs` pairs; `ratio` the median of
  // their time ratios, challenger over kept.
  struct Runoff {
    Evaluation kept, challenger;
    int pairs = 0;
    double ratio = 0;
    bool challenger_kept = false;
  };
  std::vector<Runoff> runoffs;
  double retime_seconds = 0;
  double speedup() const { return best.ok && builtin.ok ? builtin.time_ms / best.time_ms : 0; }
  // Whether the built-in default was measured (verified or rejected): not where the class
  // started past the run's budget and measured the nearest device's point alone.
  bool builtin_measured() const { return !builtin.algorithm.empty(); }
};

// A class `tune` did not measure because on this device its launches run the very programs of
// another class of the run, on the same problem (FamilyTuning::served_by): the profile gets
// that class's entry for it.
struct ServedClass {
  std::string kernel, shape_class;
  std::string by;        // the class whose entries serve it
  std::string reason;    // why, on this device
  bool written = false;  // whether `by` kept a verified point, written for it
};

struct TuneResult {
  Profile profile;
  std::vector<ClassResult> classes;
  double seconds = 0;
  double budget_seconds = 0;        // the run's budget: --budget, else default_budget_seconds
  bool interrupted = false;         // stopped by options.stop before every class was tuned
  std::vector<std::string> caches;  // resume cache files used
  int compile_threads = 0;
  int prebuilt = 0;      // evaluations whose program a build worker had built (or was building)
  std::string builders;  // where candidates were built ahead: shared, contexts or processes
  // Problems a user's shape repeated (e.g. a class's own), tuned once: "kernel/class problem".
  std::vector<std::string> repeated;
  std::vector<ServedClass> served;  // in family and class order
};

// The budget of a run without --budget: 165 s on a CPU device (a whole default run ends
// within 3 minutes), 285 s on a GPU or an accelerator (within 5 minutes), whose program
// builds take 1-8 s each, so the same evaluations a class gets on a CPU cost more there.
double default_budget_seconds(const DeviceInfo& device);

// Tunes the selected families on the runtime's device, without the algorithms the runtime
// excludes (Runtime::excluded_algorithms: OCLTK_EXCLUDE_ALGORITHMS). Throws Error on failures that
// are not a candidate's fault (a bad candidate is recorded and skipped, never fatal).
TuneResult tune(Runtime& runtime, const TuneOptions& options);

// The best-vs-default table printed at the end of a run.
void print_summary(std::ostream& out, const TuneResult& result);
// One of its number cells, right-aligned in `width`: the value with `precision` decimals and
// `unit` ("2.00x"), or "-" where not measured (with a blank under the unit), as `ocltk profile
// show` writes its speed-ups too.
std::string summary_cell(bool measured, double value, int precision, int width, const char* unit = "");
// The same as one JSON object: device, seconds, and per kernel and class the problem, the
// space size, evaluations, rejections, seconds, the built-in default and the best choice.
void print_summary_json(std::ostream& out, const TuneResult& result, const std::string& profile_path);

// One class's fields in --json and report.json alike: kernel, class, problem, space size,
// evaluations, rejections, seconds, speed-up, weight, priors, seeds, revisits, the built-in
// default and the best choice (the members of a JSON object, without its braces).
std::string json_class_fields(const ClassResult& c);

// The served classes as a JSON array of {kernel, class, by, reason, written} (--json and
// report.json).
std::string json_served(const std::vector<ServedClass>& served);

// --report DIR: report.json (every evaluation of every class in order, best so far) and
// one SVG plot per class (time of each evaluated point and the best so far).
void write_report(const std::string& dir, const TuneResult& result);

// A one-parameter neighbour of a class's best that a sibling class measured beside that best,
// over this ratio faster there, is measured after the kernel's last class (revisit_points in
// tuner.cpp; ClassResult::neighbours_from): the spread of one point's figures between runs, up
// to about 10 % on the 2-core PoCL hosts. kNeighbours such points a class measures, at most.
constexpr double kNeighbourMargin = 1.1;
constexpr std::size_t kNeighbours = 2;

// The seconds a class may spend: an even share of what is left of the budget after
// `elapsed_seconds`, over the `classes_left` classes still to tune (this one included). A
// class that ran long (a candidate's build or measurement finishing past its share)
// shrinks the shares after it, but not below kMinClassShare of an even share of the whole
// budget (the floor), so it cannot leave the last classes nothing; the floor may carry the
// run's planned end past the budget by one floor at most (half a class's even share), and
// after that the classes get what is left.
constexpr double kMinClassShare = 0.5;
//
// `weight` scales this class's part against the classes after it (1 each): a class whose best
// is near what is known gets less, one far from it more (tune() weighs each class once its
// first points are measured, and again at each new best). The floor scales with a weight
// below 1.
double class_share(double budget_seconds, double elapsed_seconds, int classes, int classes_left, double weight = 1);

// How many evaluations `left_seconds` of a class allow: at the pace of the `done` so far
// (`elapsed_seconds` over them), but no faster than `least_pace` seconds each (0: no bound).
// A class's first evaluations are of programs built ahead, the search's mostly not: where
// builds share the CPU with measuring, the least pace is a build of the class's algorithm
// over the build workers (DeviceMeasure::expected_evaluations). 0 before any evaluation.
std::int64_t evaluations_left(double left_seconds, double elapsed_seconds, int done, double least_pace);

// The default profile location for a device: <user profile folder>/<device>.yaml. Throws
// Error(kInvalidArgument) where there is no user profile folder (no XDG_CONFIG_HOME, HOME or
// home folder in the password database), rather than a folder the runtime never reads.
std::string default_profile_path(const DeviceInfo& device);

// A run that tunes some kernels or classes must not drop the others from the profile it
// rewrites: adds to `tuned` every entry of `existing` (the profile already at --out) that
// this run did not measure, i.e. of another kernel or class, or of a problem of a tuned
// class that this run did not tune (a --shapes entry of an earlier run). An entry without
// a problem counts as its class's default problem. Only when `existing` is for the same
// device (name); returns how many entries were kept.
std::size_t keep_untuned_entries(const Profile& existing, Profile& tuned);

}  // namespace ocltk::tuner

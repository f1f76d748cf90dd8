#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "build_workers.hpp"
#include "compile_pool.hpp"
#include "ocltk/family.hpp"

namespace ocltk::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Whether two evaluations are of one point (algorithm and parameters).
bool same_point(const Evaluation& a, const Evaluation& b) { return a.algorithm == b.algorithm && a.params == b.params; }

// Runs, verifies, then times a candidate after a warm-up run; stops timing early when the
// first timed run is already three times slower than the best so far. `hang` is set when a
// run outlived the workload's time limit (the device may still be busy with it). `quiet` is
// entered for the warm-up and the timed runs (no build runs while the CPU the workers share
// with the device times); `run_ms` receives the device time of every run.
//
// The warm-up: the first run after verifying (the host compares results, the workers take
// the cores meanwhile) ran 1.05-2.7x slower than the next ones on PoCL, and with the load of
// the shared machine that one run, alone, crossed the early stop's bar: the first tune timed
// nf4_forward/decode's shipped point at 7.07 ms from one run (3.7x the best so far; ~2.0 ms
// warm) and kept another.
//
// Settled: where `settle_ms` > 0 (a CPU device: kSettleMs), the warm-up goes on, run after run,
// until that long has passed since it began. On the 2-core PoCL virtual machine a
// sub-millisecond kernel ran about 2x slower in its first tenth of a second of back-to-back
// launches than after (lora_shrink small_batch's Xeon point: 0.31-0.56 ms timed after one
// warm-up run, 0.17-0.19 after 50 ms of runs, 0.167 in the benchmark's 400 iterations; 10 ms
// did not settle it, 25 ms once in two; keeping the CPU busy without launches did not), and
// the tune timed a point whose program its process had just compiled at the faster figure.
//
// In blocks: a timed run of a kernel shorter than kBlockMs is the mean of a block of
// back-to-back runs (kBlockMs of them by the warm-up's time, kMaxBlock at most), as the
// benchmark of bench/first_tune.sh times a point (over 0.5 s). On the 2-core PoCL machine the
// LoRA figures a first tune kept read 1.01-3.31x the benchmark's of the same points when timed
// run by run, 0.92-1.05x in blocks (results/first-tune/pocl-epyc/).
// The median; of an even count, the mean of the middle two (of a re-timing's two rounds, not
// the slower).
double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const std::size_t mid = times.size() / 2;
  return times.size() % 2 == 1 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
}

constexpr double kBlockMs = 1.0;
constexpr int kMaxBlock = 64;

// The runs of a block of a kernel that takes `ms` a run: kBlockMs of them, 1 to kMaxBlock.
int block_runs(double ms) { return std::clamp(int(std::ceil(kBlockMs / std::max(ms, 1e-6))), 1, kMaxBlock); }

// `runs` back-to-back runs of `choice`: their mean; their device time is added to `run_ms`.
double block_mean(Workload& w, const Choice& choice, int runs, double& run_ms) {
  double sum = 0;
  for (int i = 0; i < runs; ++i) sum += w.run(choice);
  run_ms += sum;
  return sum / runs;
}

template <typename Quiet>
Evaluation evaluate_candidate(Workload& w, const Choice& choice, int repeats, double best_ms, double settle_ms,
                              bool& hang, Quiet&& quiet, double& run_ms) {
  Evaluation e;
  e.algorithm = choice.algorithm;
  e.params = choice.params;
  hang = false;
  run_ms = 0;
  try {
    w.poison();
    run_ms += w.run(choice);
    if (std::string why = w.verify(); !why.empty()) {
      e.rejected = why;
      return e;
    }
    std::vector<double> times;
    const auto rest = quiet();
    const auto warm_start = Clock::now();
    double warm_ms = w.run(choice);  // the warm-up
    run_ms += warm_ms;
    while (seconds_since(warm_start) * 1e3 < settle_ms) {
      warm_ms = w.run(choice);
      run_ms += warm_ms;
    }
    const int block = block_runs(warm_ms);
    for (int r = 0; r < std::max(1, repeats); ++r) {
      times.push_back(block_mean(w, choice, block, run_ms));
      if (r == 0 && best_ms > 0 && times[0] > 3 * best_ms) break;
    }
    e.time_ms = median(std::move(times));
    e.ok = true;
  } catch (const CandidateHang& err) {
    e.rejected = err.what();
    hang = true;
  } catch (const BuildError& err) {
    e.rejected = std::string("build failed: ") + err.what();
  } catch (const std::exception& err) {
    e.rejected = err.what();
  }
  return e;
}

// Times verified candidates again, their runs interleaved (warm-up rounds for at least
// `settle_ms`, at least one, then `repeats` timed rounds, each in another order), so that the
// load of the moment weighs on each alike: the median of each. Their programs are built and
// their results were verified when they were evaluated; each timed round runs `blocks[i]` of
// choice i back to back (block_runs of its figure then).
template <typename Quiet>
std::vector<double> retime_candidates(Workload& w, const std::vector<Choice>& choices, const std::vector<int>& blocks,
                                      int repeats, double settle_ms, Quiet&& quiet, double& run_ms) {
  std::vector<std::vector<double>> times(choices.size());
  const auto rest = quiet();
  const auto warm_start = Clock::now();
  do {
    for (const Choice& choice : choices) block_mean(w, choice, 1, run_ms);
  } while (seconds_since(warm_start) * 1e3 < settle_ms);
  // Each round starts one choice further on, so that none is always timed first: in a
  // re-timing of seven lora_expand decode points on the 2-core PoCL machine, the two timed first
  // in every round read 1.44x and 1.54x their search's figures, the others 0.98-1.21x.
  for (int round = 0; round < std::max(1, repeats); ++round)
    for (std::size_t k = 0; k < choices.size(); ++k) {
      const std::size_t i = (k + std::size_t(round)) % choices.size();
      times[i].push_back(block_mean(w, choices[i], blocks[i], run_ms));
    }
  std::vector<double> medians;
  for (std::vector<double>& t : times) medians.push_back(median(std::move(t)));
  return medians;
}

// Times two verified candidates launch by launch in alternation (A B, then B A, ...), after one
// warm-up pair (a re-timing has just run both): the median of the pairs' time ratios B/A, as
// the first-tune benchmark compares two points (bench/bench_profiles.cpp, --ocltk_paired_with).
// Two launches a moment apart see the same load of a shared machine. `max_pairs` pairs, fewer
// where they pass `limit_ms` of wall time once `min_pairs` are timed; `pairs` receives how
// many. NaN where none was.
template <typename Quiet>
double paired_ratio(Workload& w, const Choice& a, const Choice& b, int min_pairs, int max_pairs, double limit_ms,
                    Quiet&& quiet, int& pairs, double& run_ms) {
  const auto rest = quiet();
  const auto started = Clock::now();
  run_ms += w.run(a);
  run_ms += w.run(b);
  std::vector<double> ratios;
  for (pairs = 0; pairs < max_pairs; ++pairs) {
    if (pairs >= min_pairs && seconds_since(started) * 1e3 > limit_ms) break;
    const bool a_first = pairs % 2 == 0;
    const double first = w.run(a_first ? a : b), second = w.run(a_first ? b : a);
    const double ms_a = a_first ? first : second, ms_b = a_first ? second : first;
    run_ms += ms_a + ms_b;
    if (ms_a > 0 && ms_b > 0) ratios.push_back(ms_b / ms_a);
  }
  return ratios.empty() ? std::numeric_limits<double>::quiet_NaN() : median(std::move(ratios));
}

// After a hang: waits (bounded) until the device has finished the hung candidate, so the
// next measurement starts on an idle device. Throws when it never finishes.
void drain_after_hang(Runtime& rt, double limit_seconds, const std::string& what) {
  cl_event marker = nullptr;
  if (clEnqueueMarkerWithWaitList(rt.queue().get(), 0, nullptr, &marker) != CL_SUCCESS)
    throw Error(ErrorCode::kDevice, "cannot wait for the device after " + what);
  try {
    wait_for_event(marker, limit_seconds);
  } catch (const CandidateHang&) {
    clReleaseEvent(marker);
    throw Error(ErrorCode::kDevice, what + " and the device was still busy with it after " +
                                        std::to_string(int(limit_seconds)) +
                                        " s; it is recorded in the resume cache and will be skipped when you run "
                                        "`ocltk tune` again");
  }
  clReleaseEvent(marker);
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Builds candidates' programs ahead of their measurement on a CompilePool, in one of the
// ways build_workers.hpp describes: into the measuring runtime's program cache (shared),
// or through contexts or processes of the workers' own, whose builds reach the measuring
// context through caches on disk. A quarter of the threads (at least one) may run
// speculative builds at once (compile_pool.hpp says why). Where building and measuring share
// the CPU, no build runs while a candidate is timed: build processes are paused (SIGSTOP)
// and go on after it; threads cannot be, so the measuring thread waits for the builds they
// run and they build only what is about to be measured (on the loaded 2-core development
// machine a speculative one held a timing up to 20 s). Processes are the CPU's default:
// PoCL builds one program at a time in a process, however many contexts ask: a first tune
// on that machine kept 1.1 of its 2 cores busy and made 95 evaluations with threads, 183
// with paused processes (results/first-tune/pocl-zen2/).
class Prefetcher {
 public:
  struct Setup {
    Runtime& rt;
    Builders builders;  // resolved: shared, contexts or processes
    int threads;
    bool rest_while_timing;
    std::vector<std::string> worker_command;  // processes: the command, before "--device N"
  };
  explicit Prefetcher(Setup s)
      : rt_(s.rt),
        builders_(s.builders),
        rest_while_timing_(s.rest_while_timing),
        slots_(make_slots(s)),
        pool_(
            s.threads, s.rest_while_timing && !pauses_builds() ? 0 : std::max(1, s.threads / 4),
            [this](const Build& b, int worker) { build(b, worker); }, abandon_for(s.builders)) {}

  // The workload whose problem the next builds serve (its input type picks the variant of
  // algorithms built per type), of the run's job `job` (-1: none); null: each algorithm's
  // tuned_variant.
  void serve(const Workload* workload, const FamilyTuning* tuning, int input_bits, int job) {
    workload_ = workload;
    tuning_ = tuning;
    input_bits_ = input_bits;
    job_ = job;
  }

  // Queues builds of `points`; urgent ones (about to be measured) go first, in order. For
  // another job than the one served, name it, its family, class and input width, which decide
  // the variant it will launch.
  void prefetch(const std::vector<const Point*>& points, bool urgent = true, const FamilyTuning* tuning = nullptr,
                int input_bits = 0, int job = -1, const std::string& shape_class = "") {
    if (!pool_.enabled()) return;
    const FamilyTuning* t = tuning ? tuning : tuning_;
    const int bits = tuning ? input_bits : input_bits_;
    for (const Point* p : points) {
      std::string variant = tuning == nullptr     ? variant_of(*p, true)
                            : tuning->variant_for ? tuning->variant_for(shape_class, bits, *p->algorithm)
                                                  : p->algorithm->tuned_variant;
      std::string key = key_of(*p, variant);
      pool_.add({*p, std::move(variant), t, bits}, key, urgent, tuning ? job : job_);
    }
  }

  // The measuring thread is about to build `point`: waits for a worker building it. The
  // seconds a worker spent on it, where one built it.
  std::optional<double> claim(const Point& point) {
    if (!pool_.enabled()) return std::nullopt;
    return pool_.claim(key_of(point, variant_of(point, true)));
  }
  bool built(const Point& point) const {
    return pool_.enabled() && pool_.finished(key_of(point, variant_of(point, true)));
  }

  // While a Rest lives, no build runs (quiet(): where building and measuring share the CPU).
  // Not copyable: a copy's end would end the rest (make_unique from a temporary Rest once
  // released the pool as the rest began, so builds started while candidates were timed).
  class Rest {
   public:
    explicit Rest(Prefetcher& p) : p_(p) {
      p_.pool_.hold(!p_.pauses_builds());
      if (p_.pauses_builds())
        for (Slot& slot : p_.slots_) slot.process->pause();
    }
    Rest(const Rest&) = delete;
    Rest& operator=(const Rest&) = delete;
    ~Rest() {
      if (p_.pauses_builds())
        for (Slot& slot : p_.slots_) slot.process->resume();
      p_.pool_.release();
    }

   private:
    Prefetcher& p_;
  };
  std::unique_ptr<Rest> quiet() {
    if (!rest_while_timing_ || !pool_.enabled()) return nullptr;
    return std::make_unique<Rest>(*this);
  }

  // Job `job` (a class) is over: what it alone still wanted built leaves the queue; what other
  // jobs want waits as speculative builds, behind the next class's urgent ones.
  void class_done(int job) { pool_.done(job); }
  bool rests_while_timing() const { return rest_while_timing_ && pool_.enabled(); }
  // How many programs build at once in the background (0: each is built as measured).
  int builders() const { return pool_.enabled() ? pool_.threads() : 0; }

  // The run is over: worker processes end now rather than finish builds nobody needs (a
  // build on NVIDIA took up to 8 s), so that the run ends within its budget.
  ~Prefetcher() {
    pool_.stop();
    for (Slot& slot : slots_)
      if (slot.process) slot.process->kill();
  }

 private:
  struct Build {
    Point point;
    std::string variant;
    const FamilyTuning* tuning;
    int input_bits;
  };
  struct Slot {  // one worker thread's own runtime or process, made on its first build
    std::optional<Runtime> rt;
    std::unique_ptr<CandidateBuilder> builder;
    std::unique_ptr<WorkerProcess> process;
  };

  // A build in a worker process that no class wants any more is stopped with its process
  // (started again for the next build); one in a thread runs to its end.
  CompilePool<Build>::Abandon abandon_for(Builders builders) {
    if (builders != Builders::kProcesses) return nullptr;
    return [this](int worker) {
      if (Slot& slot = slots_[std::size_t(worker)]; slot.process) slot.process->kill();
    };
  }
  // Builds run in processes, paused while a candidate is timed.
  bool pauses_builds() const { return rest_while_timing_ && builders_ == Builders::kProcesses; }
  std::string variant_of(const Point& p, bool served) const {
    return served && workload_ ? workload_->variant(*p.algorithm) : p.algorithm->tuned_variant;
  }
  static std::string key_of(const Point& p, const std::string& variant) {
    return p.algorithm->source_name + " " + p.algorithm->build_options(p.params) + variant;
  }

  void build(const Build& b, int worker) {
    if (builders_ == Builders::kShared || b.tuning == nullptr) {
      rt_.program_for(*b.point.algorithm, b.point.params, b.variant);
      return;
    }
    Slot& slot = slots_[std::size_t(worker)];
    if (slot.process) {
      slot.process->build(
          build_request(b.tuning->family->name, b.point.algorithm->name, b.point.params, b.variant, b.input_bits));
      return;
    }
    if (!slot.rt) {
      slot.rt.emplace(open_runtime_like(rt_, cache_dir()));
      slot.builder = std::make_unique<CandidateBuilder>(*slot.rt);
    }
    slot.builder->build(*b.tuning, *b.point.algorithm, b.point.params, b.variant, b.input_bits);
  }
  // Where a worker leaves what it built: the measuring runtime's program cache folder, or
  // none where the driver keeps its own (PoCL's, which the measuring context then finds).
  static std::string cache_dir(Runtime& rt) {
    return compiles_at_first_launch(rt.device()) ? "-" : rt.program_cache().directory();
  }
  std::string cache_dir() const { return cache_dir(rt_); }
  // One slot per worker; for processes, each with its process (started at its first build).
  static std::vector<Slot> make_slots(const Setup& s) {
    std::vector<Slot> slots(std::size_t(std::max(0, s.threads)));
    if (s.builders != Builders::kProcesses) return slots;
    std::vector<std::string> command = s.worker_command;
    command.push_back("--device");
    command.push_back(std::to_string(s.rt.device().index));
    for (Slot& slot : slots)
      slot.process = std::make_unique<WorkerProcess>(
          command, std::vector<std::pair<std::string, std::string>>{{"OCLTK_CACHE_DIR", cache_dir(s.rt)}});
    return slots;
  }

  Runtime& rt_;
  Builders builders_;
  bool rest_while_timing_;
  const Workload* workload_ = nullptr;
  int job_ = -1;  // the job the served builds are for
  const FamilyTuning* tuning_ = nullptr;
  int input_bits_ = 32;
  std::vector<Slot> slots_;  // before pool_: its threads use them until it is destroyed
  CompilePool<Build> pool_;
};

class Progress {
 public:
  explicit Progress(const TuneOptions& o)
      : out_(o.progress), tty_(o.progress_is_terminal), interval_(o.progress_interval_seconds) {}

  // done / planned evaluations, the best time so far, seconds left of the class budget.
  void update(const std::string& prefix, int done, int planned, double best_ms, double gflops, double left_s,
              const std::string& last, bool force = false) {
    if (out_ == nullptr) return;
    std::ostringstream line;
    if (tty_) {
      constexpr int kWidth = 20;
      const int filled = planned > 0 ? std::min(kWidth, done * kWidth / planned) : 0;
      line << "\r\033[K" << prefix << " [" << std::string(std::size_t(filled), '#')
           << std::string(std::size_t(kWidth - filled), '.') << "] " << done << "/" << planned << " evals";
    } else {
      if (!force && seconds_since(last_line_) < interval_) return;
      line << prefix << " " << done << "/" << planned << " evals";
    }
    line << ", best " << std::fixed << std::setprecision(3) << best_ms << " ms (" << std::setprecision(1) << gflops
         << " GFLOP/s), " << std::setprecision(0) << std::max(0.0, left_s) << " s left";
    if (tty_) {
      line << " | " << last.substr(0, 60);
      *out_ << line.str() << std::flush;
    } else {
      *out_ << line.str() << "\n" << std::flush;
    }
    last_line_ = Clock::now();
  }
  void finish_line() {
    if (out_ != nullptr && tty_) *out_ << "\n" << std::flush;
  }

 private:
  std::ostream* out_;
  bool tty_;
  double interval_;
  Clock::time_point last_line_ = Clock::now() - std::chrono::hours(1);
};

// What an evaluation costs on this device, learnt over the run (programs serve every class
// of their family): the seconds an evaluation takes besides its runs, with the program built
// (verification, the host's work) and without (its build added), per kernel and algorithm.
class EvaluationCosts {
 public:
  // One evaluation of `algorithm`: `seconds` besides its runs; `warm` where its program was
  // built before (by a worker, whose own time is `worker_build`, or by an earlier evaluation).
  // Builds are counted per algorithm of a kernel, not per name: kernels share names (`tiled`)
  // whose programs differ in cost by 10x (NF4's against LoRA's on PoCL).
  void measured(const AlgorithmSpec* algorithm, const std::string& key, bool warm, double seconds,
                std::optional<double> worker_build) {
    seconds = std::max(0.0, seconds);
    Mean& builds = builds_[algorithm];
    if (warm) {
      warm_.add(seconds);
    } else {
      builds.add(std::max(0.0, seconds - overhead()));
      all_builds_.add(std::max(0.0, seconds - overhead()));
    }
    if (worker_build) {
      builds.add(*worker_build);
      all_builds_.add(*worker_build);
    }
    built_.insert(key);
  }
  bool built(const std::string& key) const { return built_.count(key) != 0; }
  double overhead() const { return warm_.count ? warm_.mean() : 0.05; }
  double build_seconds(const AlgorithmSpec* algorithm) const {
    const auto it = builds_.find(algorithm);
    if (it != builds_.end() && it->second.count) return it->second.mean();
    return all_builds_.count ? all_builds_.mean() : 1.0;
  }

 private:
  struct Mean {
    double sum = 0;
    int count = 0;
    void add(double v) {
      sum += v;
      ++count;
    }
    double mean() const { return sum / count; }
  };
  Mean warm_, all_builds_;
  std::map<const AlgorithmSpec*, Mean> builds_;
  std::set<std::string> built_;  // point keys measured in this run
};

// The most of a class's time (and of its --max-evals) the search leaves to the refinement
// around its best point (DeviceMeasure::out_of_budget).
constexpr double kRefinementShare = 0.2;

// The re-timing of a class's closest points (DeviceMeasure::retime): those within
// kRetimeMargin of the best, kRetimeCount at most, where their runs fit in kRetimeShare of the
// class's time.
constexpr double kRetimeMargin = 1.5, kRetimeShare = 0.1;
constexpr std::size_t kRetimeCount = 3;
// Where the re-timing would take longer, the best and one other point alone, at fewer rounds,
// but not fewer than this.
constexpr int kMinRetimeRounds = 2;

// A sibling class's best point measured within this of a class's best is timed again beside it
// after the kernel's last class, and a known device's profile choice for the class at the
// class's end and again after the kernel's last class (DeviceMeasure::retime): one evaluation's
// figure can be that far off on a shared CPU. On the 2-core PoCL machine a first tune timed
// lora_shrink multi_batch's best known point (prefill's best in that run) at 1.76 ms in its
// search, 1.57x its best then; the benchmark read it at 0.85x that best.
constexpr double kRevisitMargin = 2.0;

// A known device's profile choice for a class whose fastest re-timed figure comes within this of
// the re-timing's fastest is kept (DeviceMeasure::retime): their order is then the order of one
// moment, and the choice was a long tune's answer there. This device's own shipped choice
// (distance 0) counts too; a warm start's profile choice does not (the class keeps its best
// anyway unless something ran faster). On the 2-core AMD EPYC a first tune, before re-timings
// alone counted, kept lora_shrink prefill's tiled TR 8 VW 8 by its search's figure, 0.6295 ms,
// over the Xeon's choice TR 4 VW 16 at 0.6314 (both re-timings read the choice faster); the
// benchmark after, other tenants at work on the host, read them at 1.015 and 0.618 ms.
constexpr double kKnownTieMargin = 1.02;

// The run-off that ends a re-timing (DeviceMeasure::retime): each other point of it within
// kRetimeMargin of the point it kept, fastest first, is timed against the point kept so far
// launch by launch in alternation (paired_ratio), kMaxRunoffPairs pairs at most, while
// kMinRunoffPairs at least fit in kRunoffShare of the class's time, and the faster by the median
// of the pairs' ratios is kept; the loser's figure is then no less than the winner's times
// their ratio (runoff_floor). Blocks of runs a round apart can order two points against the
// benchmark's alternation: on the 2-core Xeon a first tune's revisit re-timed lora_shrink
// small_batch's `TR` 4, the long tune's best, at 0.182 ms beside its kept `TR` 2 at 0.145, where
// the benchmark read `TR` 2 1.125x slower (results/first-tune/pocl-xeon/others/); on the EPYC
// two re-timings read lora_apply small_batch's kept `fused` point 0.89x and 1.19x the best
// known's, the benchmark 1.129x (ba10656).
constexpr double kRunoffShare = 0.05;
constexpr int kMinRunoffPairs = 8, kMaxRunoffPairs = 64;

// The part of the run's budget held for the revisits after each kernel's last class
// (revisit_points), each kernel's by its number of classes; what a kernel's revisit leaves goes
// to the classes after it. Held, because a kernel's revisit comes after its classes took their
// shares: unheld, in a first tune on the 2-core PoCL machine the run's last kernel, lora_apply,
// was left 9 s for its 5 classes (14-15 s before revisits), two of them started past the budget.
constexpr double kRevisitShare = 0.1;

// How long a candidate runs back to back before it is timed on a CPU device
// (evaluate_candidate, "Settled").
constexpr double kSettleMs = 50;

// How long a launch may wait to start running on a device that compiles a kernel at its first
// launch (Workload::start_seconds): PoCL's compiles took 1-5 s on the 2-core machine, more
// while build workers shared its cores; a build worker's small problem waits as long.
constexpr double kCompileAtLaunchSeconds = 30;

// The least figure the run-offs a point lost leave it (ClassResult::runoffs): the winner's
// figure then times the loser's time over the winner's in their pairs; 0 where it lost none.
double runoff_floor(const ClassResult& cr, const Evaluation& e) {
  double floor = 0;
  for (const ClassResult::Runoff& r : cr.runoffs) {
    if (r.challenger_kept && same_point(r.kept, e)) floor = std::max(floor, r.challenger.time_ms / r.ratio);
    if (!r.challenger_kept && same_point(r.challenger, e)) floor = std::max(floor, r.kept.time_ms * r.ratio);
  }
  return floor;
}

// A verified point's figure in its class: its fastest re-timing where it was re-timed, else its
// search's, and no less than the run-offs it lost leave it (runoff_floor). A re-timing keeps a
// point by its re-timings alone, then its run-off (DeviceMeasure::retime), so a point they put
// behind another keeps its lower figure nowhere: not in the next re-timing's choice of points,
// nor in what the kernel's later classes and kin kernels take from this one (run_class_of).
double retimed_figure(const ClassResult& cr, const Evaluation& e) {
  double least = std::numeric_limits<double>::infinity();
  for (const Evaluation& r : cr.retimed)
    if (same_point(r, e)) least = std::min(least, r.time_ms);
  return std::max(std::isfinite(least) ? least : e.time_ms, runoff_floor(cr, e));
}

// The Measure a strategy drives on the device: one class's workload, the resume cache,
// the compile pool, the budget, the record and the progress line.
class DeviceMeasure : public Measure {
 public:
  struct Setup {
    Runtime& rt;
    const TuneOptions& options;
    const std::string& kernel;
    ClassResult& cr;
    Workload& workload;
    TuneCache* cache;
    Prefetcher& prefetcher;
    Progress& progress;
    std::string prefix;
    double budget_seconds;
    std::int64_t max_evals;
    // When the class started: its budget counts from there, so building the workload and
    // measuring the built-in default come out of the class's own share, not the next ones'.
    Clock::time_point class_start;
    // For the refinement around the best (refinement(), start_refining).
    const KernelFamily& family;
    const DeviceLimits& limits;
    std::shared_ptr<EvaluationCosts> costs;  // the run's, shared by its classes
    int* prebuilt;                           // TuneResult::prebuilt
  };
  explicit DeviceMeasure(Setup s) : s_(std::move(s)), measuring_since_(Clock::now()) {
    best_.time_ms = std::numeric_limits<double>::infinity();
  }

  // The class's share, changed where its best comes near what is known (tune()).
  void set_budget(double seconds) { s_.budget_seconds = seconds; }
  // The known devices' profile choices for the class (ClassPrior::chosen, vendor_chosen), by
  // Point::key: timed again beside the best (retime) and kept on a tie with it.
  void set_known_choices(std::set<std::string> keys) { known_choices_ = std::move(keys); }
  // Whether `e` is one of those choices.
  bool known(const Evaluation& e) const { return known_choices_.count(e.key()) > 0; }
  // Called after each new best (null: nothing).
  void on_improvement(std::function<void()> f) { on_improvement_ = std::move(f); }

  const Evaluation* recall(const Point& point) const override {
    const auto it = seen_.find(point.key());
    return it == seen_.end() ? nullptr : &it->second;
  }

  // How long a candidate runs before it is timed (TuneOptions::settle_ms; evaluate_candidate).
  double settle_ms() const {
    if (s_.options.settle_ms >= 0) return s_.options.settle_ms;
    return s_.rt.device().type == "cpu" ? kSettleMs : 0;
  }

  // The pace of the evaluations so far over the time left (the refinement's share held back).
  // The search's points are mostly not built yet, where the warm start's were built ahead:
  // where builds share the CPU with measuring, a pace no faster than a build of the best
  // point's algorithm over the build workers (evaluations_left). On the 2-core PoCL machine
  // the lora_shrink classes of a first tune measured their first three in 0.05 s each and the
  // next in 0.3 s each: that pace promised 24-46 evaluations where they made 8-11, and the
  // guided opening of 8 random points (that promise said the budget was not short) took most.
  std::int64_t expected_evaluations() const override {
    double least_pace = 0;
    const Evaluation& typical = best_.ok ? best_ : s_.cr.builtin;
    if (s_.prefetcher.rests_while_timing() && !typical.algorithm.empty())
      least_pace = costs_->build_seconds(s_.family.find_algorithm(typical.algorithm)) /
                       double(std::max(1, s_.prefetcher.builders())) +
                   costs_->overhead();
    return evaluations_left(s_.budget_seconds - seconds_since(s_.class_start), seconds_since(measuring_since_),
                            s_.cr.evaluations, least_pace);
  }

  // Whether the point's program was built in this run (by an evaluation or a worker).
  bool built(const Point& point) const { return costs_->built(point.key()) || s_.prefetcher.built(point); }

  // A program not built yet costs its algorithm's build time as measured so far in this run
  // (any algorithm's, before its first; 1 s before any); then verification, and the runs.
  double cost_seconds(const Point& point, double predicted_ms) const override {
    const double runs = (1 + std::max(1, s_.options.repeats)) * predicted_ms * 1e-3 + costs_->overhead();
    if (built(point)) return runs;
    return runs + costs_->build_seconds(point.algorithm);
  }

  // Until start_refining, the search stops early enough to leave the refinement of the
  // best so far its evaluations: as many as it has left (at least one of --max-evals, at
  // most a fifth), and their time at the pace so far, after the evaluation that would start
  // now (at most a fifth of the class's).
  bool out_of_budget() const override {
    if (out_of_evaluations()) return true;
    const std::int64_t pending = refining_ ? 0 : std::int64_t(pending_refinement_);
    const double elapsed = seconds_since(s_.class_start);
    const double pace = elapsed / std::max(1, s_.cr.evaluations);
    // An evaluation started now ends a pace later: the pending points need their time after
    // it, so one more pace is held back while there are any.
    const double held = pending > 0 ? std::min(kRefinementShare * s_.budget_seconds, double(pending + 1) * pace) : 0.0;
    // Nor does it start one expected to end more than half an evaluation past the share (at
    // the pace of measuring, builds included, once two evaluations set it): a class then ends
    // as near its share after as before it, where each class used to run past it by its last
    // evaluation (runs past 165 s of 10-60 s on the loaded 2-core development machine).
    // The refinement has its time held back already.
    const int done = s_.cr.evaluations;
    const double half_next = done >= 2 && !refining_ ? 0.5 * seconds_since(measuring_since_) / done : 0.0;
    return elapsed + half_next >= s_.budget_seconds - held;
  }
  // The best so far at each other value of its refined_last parameters, the points not
  // measured yet (AlgorithmSpec::refinements), where that value runs other work on this
  // problem (Workload::refines): on the 2-core PoCL machine every nf4_backward class spent one
  // of its three evaluations, a build of seconds, on SPLIT_SUM 1 at a point whose launch makes
  // one split, where both values run the same kernels.
  std::vector<Point> refinement() {
    std::vector<Point> around;
    const AlgorithmSpec* algorithm = best_.ok ? s_.family.find_algorithm(best_.algorithm) : nullptr;
    if (algorithm == nullptr) return around;
    if (refined_for_ != best_.algorithm + " " + format_params(best_.params)) {
      refined_for_ = best_.algorithm + " " + format_params(best_.params);
      refinable_.clear();
      for (const ParamSpec& spec : algorithm->params)
        if (spec.refined_last && s_.workload.refines(*algorithm, best_.params, spec.name)) refinable_.insert(spec.name);
    }
    for (Params& p : algorithm->refinements(best_.params, &s_.limits)) {
      bool refinable = false;  // a refinement differs from the best in one parameter
      for (const std::string& name : refinable_) refinable = refinable || p.at(name) != best_.params.at(name);
      Point point{algorithm, std::move(p)};
      if (refinable && seen_.count(point.key()) == 0) around.push_back(std::move(point));
    }
    return around;
  }
  // From here on the whole budget is open: what the search left, and what it held back.
  void start_refining() { refining_ = true; }
  // Measured even where the class's time is spent, but not after a stop or past
  // --max-evals (the refinement's first point, the nearest known devices' best).
  const Evaluation* evaluate_past_time(const Point& point) {
    return out_of_evaluations() ? nullptr : evaluate(point, true);
  }

  const Evaluation* evaluate(const Point& point) override { return evaluate(point, false); }

  // `always`: measured even when the budget is spent (the built-in default, the baseline).
  const Evaluation* evaluate(const Point& point, bool always) {
    const std::string key = point.key();
    if (auto it = seen_.find(key); it != seen_.end()) return &it->second;
    if (!always && out_of_budget()) return nullptr;
    Evaluation e;
    if (const Evaluation* hit = s_.cache != nullptr && s_.options.resume
                                    ? s_.cache->find(s_.cr.shape_class, s_.cr.problem, key)
                                    : nullptr) {
      e = *hit;
      e.cached = true;
      ++s_.cr.cached;
    } else {
      Choice choice;
      choice.kernel = s_.kernel;
      choice.shape_class = s_.cr.shape_class;
      choice.algorithm = point.algorithm->name;
      choice.params = point.params;
      bool hang = false;
      // A program a worker is building is waited for, one it has not started is built here.
      const std::optional<double> worker_build = s_.prefetcher.claim(point);
      if (worker_build) ++*s_.prebuilt;
      const bool warm = worker_build.has_value() || costs_->built(key);
      const auto started = Clock::now();
      double run_ms = 0;
      e = evaluate_candidate(
          s_.workload, choice, s_.options.repeats, best_.ok ? best_.time_ms : 0, settle_ms(), hang,
          [this] { return s_.prefetcher.quiet(); }, run_ms);
      costs_->measured(point.algorithm, key, warm, seconds_since(started) - run_ms * 1e-3, worker_build);
      // Into the cache first: should waiting for the hung candidate never end, the next
      // run still knows to skip it.
      if (s_.cache != nullptr) s_.cache->append(s_.cr.shape_class, s_.cr.problem, e);
      if (hang)
        drain_after_hang(s_.rt, std::max(30.0, 10 * s_.workload.timeout_seconds),
                         s_.kernel + "/" + s_.cr.shape_class + " candidate " + key + " hung");
    }
    ++s_.cr.evaluations;
    if (!e.ok) ++s_.cr.rejected;
    const bool improved = e.ok && e.time_ms < best_.time_ms;
    if (improved) best_ = e;
    if (improved && on_improvement_) on_improvement_();
    s_.cr.history.push_back(e);
    if (s_.options.record != nullptr)
      write_record_line(*s_.options.record, s_.kernel, s_.cr.shape_class, s_.cr.problem, e);
    const double left = s_.budget_seconds - seconds_since(s_.class_start);
    s_.progress.update(s_.prefix, s_.cr.evaluations, planned(left), best_.ok ? best_.time_ms : 0,
                       best_.ok ? s_.cr.flops / best_.time_ms * 1e-6 : 0, left,
                       key + ": " + (e.ok ? std::to_string(e.time_ms) + " ms" : "rejected: " + e.rejected));
    const Evaluation* stored = &seen_.emplace(key, std::move(e)).first->second;
    const std::vector<Point> around = refinement();  // best_ and seen_ change only here
    pending_refinement_ = around.size();
    if (improved && !around.empty()) {
      // Their programs (a rebuild each, for REGS) are built in the background while the
      // search goes on, so that the refinement's time is spent measuring.
      std::vector<const Point*> hint;
      for (const Point& p : around) hint.push_back(&p);
      might_evaluate(hint);
    }
    return stored;
  }

  // Hints queue builds only while the class has budget: past it they would only take
  // threads from the next class's builds.
  // Where the workers share the CPU with the device, only as many as the class's time is
  // expected to measure: a build still running when the class ends takes a core from the next
  // class's builds (and, in a thread, which cannot be paused, holds up its first timing).
  void will_evaluate(const std::vector<const Point*>& points) override {
    if (out_of_budget()) return;
    std::vector<const Point*> wanted = points;
    if (const std::int64_t expected = expected_evaluations(); s_.prefetcher.rests_while_timing() && expected > 0)
      wanted.resize(std::min(wanted.size(), std::size_t(expected)));
    s_.prefetcher.prefetch(wanted, true);
  }
  void might_evaluate(const std::vector<const Point*>& points) override {
    if (!out_of_budget()) s_.prefetcher.prefetch(points, false);
  }

  // Times the best so far again beside the verified points measured within kRetimeMargin of
  // it in this run (kRetimeCount in all, fastest first), their runs interleaved
  // (retime_candidates), and keeps the fastest by its figure (retimed_figure, below), then the
  // winner of its run-off (runoff), where their runs are expected to take at most kRetimeShare
  // of the class's time (else the best and one other at fewer rounds, below) and nothing
  // stopped the run. Figures
  // taken minutes apart on a shared CPU differ by the load of their moment (1.3-2.3x on the
  // loaded 2-core development machine), more than neighbouring points do; figures taken
  // together do not. What it measured goes to ClassResult::retimed.
  // Also the points `also` names (sibling classes' best points and the neighbours of the best
  // they ran faster, after the kernel's last class) and the known devices' choices
  // (set_known_choices) measured within kRevisitMargin of the best, beside those; where a
  // known choice comes within kKnownTieMargin of the fastest, it is kept.
  void retime(std::set<std::string> also = {}) {
    if (!best_.ok || (s_.options.stop != nullptr && s_.options.stop->load())) return;
    also.insert(known_choices_.begin(), known_choices_.end());
    // Each by its figure (retimed_figure): a point an earlier re-timing put behind the best
    // counts by that re-timing, not by the search's figure it lost on.
    const auto figure = [this](const Evaluation& e) { return retimed_figure(s_.cr, e); };
    // Their runs' length by the slower of a point's search and fastest re-timed figures: the
    // fastest re-timing is its quietest moment, and the re-timing keeps to its share.
    const auto cost = [&](const Evaluation& e) { return std::max(e.time_ms, figure(e)); };
    std::vector<const Evaluation*> close;
    for (const auto& [key, e] : seen_)
      if (e.ok && !e.cached && figure(e) <= kRetimeMargin * best_.time_ms) close.push_back(&e);
    std::sort(close.begin(), close.end(),
              [&](const Evaluation* a, const Evaluation* b) { return figure(*a) < figure(*b); });
    // The best so far is always among them, first, so that cutting the list to kRetimeCount
    // keeps it: a best recalled from the resume cache is not among them by the filter, and a
    // known choice kept on a tie may rank after a point re-timed faster.
    for (const auto& [key, e] : seen_)
      if (e.ok && same_point(e, best_)) {
        close.erase(std::remove(close.begin(), close.end(), &e), close.end());
        close.insert(close.begin(), &e);
      }
    if (close.size() > kRetimeCount) close.resize(kRetimeCount);
    // Their runs, then each of `also` while they all fit in kRetimeShare of the class's time.
    const int repeats = std::max(1, s_.options.repeats);
    const double limit_ms = kRetimeShare * s_.budget_seconds * 1e3 - settle_ms();
    double expected_ms = 0;
    std::vector<int> blocks;
    for (const Evaluation* e : close) {
      const double ms = cost(*e);
      blocks.push_back(block_runs(ms));
      expected_ms += (1 + repeats * blocks.back()) * ms;
    }
    int rounds = repeats;
    if (expected_ms > limit_ms) {
      // Too long for them all (long kernels, a short share): the best and one other, a known
      // device's choice within kRevisitMargin first (the fastest), else the next close point,
      // at as many rounds as fit, kMinRetimeRounds at least (--repeats where fewer). A class of few evaluations of long
      // kernels is where one figure is most at its moment's mercy: on the 2-core AVX-512 EPYC,
      // nf4_backward prefill (5 evaluations, 7.9 s) timed the Xeon's choice, the long tune's
      // best, at 112 ms in its search and kept the built-in default at 89; the benchmark read
      // that default at 1.36x the choice, and a re-timing of all three closest would have taken
      // 1.7 s of the 0.8 allowed (results/first-tune/pocl-epyc/, cefb4e7).
      const auto is_best = [this](const Evaluation* e) { return same_point(*e, best_); };
      const auto best_at = std::find_if(close.begin(), close.end(), is_best);
      const Evaluation* other = nullptr;
      for (const std::string& key : known_choices_)
        if (const auto it = seen_.find(key); it != seen_.end()) {
          const Evaluation& e = it->second;
          if (e.ok && !e.cached && !is_best(&e) && figure(e) <= kRevisitMargin * best_.time_ms &&
              (other == nullptr || figure(e) < figure(*other)))
            other = &e;
        }
      if (other == nullptr)
        for (const Evaluation* e : close)
          if (!is_best(e)) {
            other = e;
            break;
          }
      if (best_at == close.end() || (*best_at)->cached || other == nullptr) return;
      close = {*best_at, other};
      const double best_ms = cost(*close[0]), other_ms = cost(*close[1]);
      blocks = {block_runs(best_ms), block_runs(other_ms)};
      const double warm_ms = best_ms + other_ms;
      const double round_ms = blocks[0] * best_ms + blocks[1] * other_ms;
      const int least_rounds = std::min(kMinRetimeRounds, repeats);
      if (!(round_ms > 0) || limit_ms - warm_ms < least_rounds * round_ms) return;
      rounds = int(std::min<double>(repeats, (limit_ms - warm_ms) / round_ms));
      also.clear();
    }
    for (const std::string& key : also)
      if (const auto it = seen_.find(key); it != seen_.end()) {
        const Evaluation& e = it->second;
        const double each_ms = cost(e);
        const int block = block_runs(each_ms);
        const double ms = (1 + repeats * block) * each_ms;
        if (e.ok && !e.cached && figure(e) <= kRevisitMargin * best_.time_ms && expected_ms + ms <= limit_ms &&
            std::find(close.begin(), close.end(), &e) == close.end()) {
          close.push_back(&e);
          blocks.push_back(block);
          expected_ms += ms;
        }
      }
    if (close.size() < 2) return;
    std::vector<Choice> choices;
    for (const Evaluation* e : close) {
      Choice c;
      c.kernel = s_.kernel;
      c.shape_class = s_.cr.shape_class;
      c.algorithm = e->algorithm;
      c.params = e->params;
      choices.push_back(std::move(c));
    }
    const auto started = Clock::now();
    double run_ms = 0;
    std::vector<double> medians;
    try {
      medians = retime_candidates(
          s_.workload, choices, blocks, rounds, settle_ms(), [this] { return s_.prefetcher.quiet(); }, run_ms);
    } catch (const CandidateHang& err) {
      // They ran within the limit before: their figures stand, once the device is idle again.
      drain_after_hang(s_.rt, std::max(30.0, 10 * s_.workload.timeout_seconds),
                       s_.kernel + "/" + s_.cr.shape_class + " re-timing: " + err.what());
      return;
    } catch (const std::exception&) {
      return;  // they ran before: the figures of their evaluations stand
    }
    // Each point by its fastest re-timing, this one's median or an earlier one's (no less than the
    // run-offs it lost leave it, runoff_floor): the load of
    // a moment only ever adds time, and a re-timing's points share their moments. In two first
    // tunes on the 2-core Zen 2 (d05aad5, 7e503bc: results/first-tune/pocl-zen2/) the re-timing
    // after the kernel's last class read lora_expand decode's best at 0.068 ms, the re-timing
    // at the class's end at 0.045-0.048, and kept prefill's point at 0.055, 1.5x that best in
    // the benchmark. Not by its search's figure, taken alone at a moment of its own: in three
    // first tunes on the 2-core AVX-512 EPYC (54d5bf4, 1aa6a36, ec7f79c) 8 of the 11 classes
    // that missed the long tune's best by over 10 % had kept a point by its search's figure
    // over points every re-timing read faster (lora_apply multi_decode, 1.35x: 0.418 ms in its
    // search, 0.716 and 0.615 re-timed, against 0.465 and 0.467 for its VW 8 neighbour).
    std::size_t fastest = 0;
    std::vector<double> least(close.size());
    for (std::size_t i = 0; i < close.size(); ++i) {
      Evaluation e = *close[i];
      e.time_ms = medians[i];
      s_.cr.retimed.push_back(e);
      least[i] = retimed_figure(s_.cr, e);
      if (least[i] < least[fastest]) fastest = i;
    }
    // A known device's choice as fast as the fastest, within what one point's figures spread,
    // is kept: it ran well on another device too.
    if (!known(*close[fastest])) {
      std::size_t tie = close.size();
      for (std::size_t i = 0; i < close.size(); ++i)
        if (known(*close[i]) && least[i] <= kKnownTieMargin * least[fastest] &&
            (tie == close.size() || least[i] < least[tie]))
          tie = i;
      if (tie < close.size()) fastest = tie;
    }
    const double best_ms = runoff(close, choices, least, fastest, cost);
    best_ = *close[fastest];
    best_.time_ms = best_ms;
    s_.cr.retime_seconds += seconds_since(started);
  }

  // The run-off that ends a re-timing (kRunoffShare): the point the re-timing kept, close[kept]
  // (its figure least[kept]), against each other point of it within kRetimeMargin, fastest
  // first, launch by launch in alternation; the faster by the median of the pairs' ratios goes
  // on, a known device's choice against another point by kKnownTieMargin. `kept` becomes the
  // point kept; returns its figure, its fastest re-timing (a challenger that won may have been
  // re-timed slower than the point it beat: blocks of runs favoured that one). What it measured
  // goes to ClassResult::runoffs.
  template <typename Cost>
  double runoff(const std::vector<const Evaluation*>& close, const std::vector<Choice>& choices,
                const std::vector<double>& least, std::size_t& kept, const Cost& cost) {
    std::vector<std::size_t> challengers;
    for (std::size_t i = 0; i < close.size(); ++i)
      if (i != kept && least[i] <= kRetimeMargin * least[kept]) challengers.push_back(i);
    std::stable_sort(challengers.begin(), challengers.end(),
                     [&](std::size_t a, std::size_t b) { return least[a] < least[b]; });
    const auto started = Clock::now();
    const double limit_ms = kRunoffShare * s_.budget_seconds * 1e3;
    double figure = least[kept];
    for (const std::size_t i : challengers) {
      if (s_.options.stop != nullptr && s_.options.stop->load()) break;
      const double left_ms = limit_ms - seconds_since(started) * 1e3;
      const double pair_ms = cost(*close[kept]) + cost(*close[i]);
      if (!(pair_ms > 0) || left_ms < (1 + kMinRunoffPairs) * pair_ms) break;
      double run_ms = 0, ratio = 0;
      int pairs = 0;
      try {
        ratio = paired_ratio(
            s_.workload, choices[kept], choices[i], kMinRunoffPairs, kMaxRunoffPairs, left_ms,
            [this] { return s_.prefetcher.quiet(); }, pairs, run_ms);
      } catch (const CandidateHang& err) {
        drain_after_hang(s_.rt, std::max(30.0, 10 * s_.workload.timeout_seconds),
                         s_.kernel + "/" + s_.cr.shape_class + " run-off: " + err.what());
        break;
      } catch (const std::exception&) {
        break;  // they ran before: the re-timing's order stands
      }
      if (!std::isfinite(ratio)) break;
      double bar = 1;
      if (known(*close[kept]) && !known(*close[i])) bar = 1 / kKnownTieMargin;
      if (known(*close[i]) && !known(*close[kept])) bar = kKnownTieMargin;
      ClassResult::Runoff r;
      r.kept = *close[kept];
      r.kept.time_ms = figure;
      r.challenger = *close[i];
      r.challenger.time_ms = least[i];
      r.pairs = pairs;
      r.ratio = ratio;
      r.challenger_kept = ratio < bar;
      s_.cr.runoffs.push_back(std::move(r));
      if (ratio < bar) {
        figure = least[i];
        kept = i;
      }
    }
    return figure;
  }

  void finish() {
    const double left = s_.budget_seconds - seconds_since(s_.class_start);
    s_.progress.update(s_.prefix, s_.cr.evaluations, s_.cr.evaluations, best_.ok ? best_.time_ms : 0,
                       best_.ok ? s_.cr.flops / best_.time_ms * 1e-6 : 0, left, "done", true);
    s_.progress.finish_line();
  }
  const Evaluation& best() const { return best_; }

 private:
  // The budget without its time: a stop, or --max-evals (less what the refinement still
  // needs, until start_refining).
  bool out_of_evaluations() const {
    if (s_.options.stop != nullptr && s_.options.stop->load()) return true;
    if (s_.max_evals <= 0) return false;
    const std::int64_t pending = refining_ ? 0 : std::int64_t(pending_refinement_);
    const std::int64_t held =
        std::min(pending, std::max<std::int64_t>(1, std::int64_t(kRefinementShare * double(s_.max_evals))));
    return s_.cr.evaluations >= s_.max_evals - held;
  }
  bool refining_ = false;
  std::size_t pending_refinement_ = 0;  // refinement().size(), kept by evaluate()
  // The refined-last parameters the workload refines at the best so far, and that best.
  std::string refined_for_;
  std::set<std::string> refinable_;
  // Evaluations expected by the end of the class: the cap, or the pace so far over the
  // time left, never more than the space.
  int planned(double left) const {
    const int done = s_.cr.evaluations;
    const int space_left = int(s_.cr.space_size) + 2 - done;
    int plan = done + space_left;
    if (s_.max_evals > 0) plan = std::min<int>(plan, int(s_.max_evals));
    const double elapsed = seconds_since(measuring_since_);  // the pace of measuring, not of the workload build
    if (elapsed > 0.5 && done > 0) plan = std::min<int>(plan, done + int(double(done) / elapsed * std::max(0.0, left)));
    return std::max(plan, done);
  }

  Setup s_;
  std::shared_ptr<EvaluationCosts> costs_ = s_.costs;
  std::function<void()> on_improvement_;
  Clock::time_point measuring_since_;  // its workload built: the pace of evaluations counts from here
  std::map<std::string, Evaluation> seen_;
  std::set<std::string> known_choices_;  // set_known_choices
  Evaluation best_;
};

// A point from elsewhere (a profile, a known device) as this run would measure it: in this
// problem's names for the parameters of another input width's path (at_input_bits, as the
// search space does), where its algorithm exists, is not excluded and the point is legal here.
std::optional<Point> legal_point(const KernelFamily& family, const std::string& algorithm_name, const Params& params,
                                 int input_bits, const DeviceLimits& limits, const AlgorithmExclusions& excluded) {
  const AlgorithmSpec* algorithm = family.find_algorithm(algorithm_name);
  if (algorithm == nullptr || excluded.excludes(family.name, algorithm->name)) return std::nullopt;
  Point p{algorithm, algorithm->at_input_bits(params, input_bits)};
  if (algorithm->violation(p.params, &limits)) return std::nullopt;
  return p;
}

// The nearest devices' contenders (ClassPrior::contenders) legal here, in this problem's
// names, not among `skip`: measured right after their first point, and like it even where the
// class's time is spent, so that a class with time for two evaluations (PoCL's gemm_nt
// lora_expand: a build and its first launch take seconds) tries each algorithm those devices
// found as fast, not only the one they happened to time first.
std::vector<Point> contender_points(const ClassPrior& prior, const KernelFamily& family, const DeviceLimits& limits,
                                    const AlgorithmExclusions& excluded, int input_bits, std::set<std::string> skip) {
  std::vector<Point> out;
  for (const Evaluation& e : prior.contenders)
    if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded))
      if (skip.insert(p->key()).second) out.push_back(std::move(*p));
  return out;
}

// The algorithms of `space` the nearest devices' full lists of the class leave out while
// their recordings of the kernel hold them elsewhere (ClassPrior::outrun): there each ran behind
// every listed point, so a short guided opening spends no evaluation on one (GuidedSearch::run).
// The 2-core Zen 2 EPYC's first tunes gave nf4_backward decode 4-6 evaluations, one of them a
// random `tiled` point (61 ms, its long tune's best 1.6 ms; the Xeon's 24 listed points there
// are all `stream`, its other nf4_backward classes' lists hold `tiled`).
std::set<const AlgorithmSpec*> outrun_algorithms(const ClassPrior& prior, const std::vector<Point>& space) {
  std::set<const AlgorithmSpec*> out;
  for (const Point& p : space)
    if (prior.outrun.count(p.algorithm->name)) out.insert(p.algorithm);
  return out;
}

// How many parameters two points differ in; points of two algorithms differ in all.
std::size_t params_apart(const Point& a, const Point& b) {
  if (a.algorithm != b.algorithm) return std::max(a.params.size(), b.params.size());
  std::size_t n = 0;
  for (const auto& [name, value] : a.params)
    if (const auto it = b.params.find(name); it == b.params.end() || it->second != value) ++n;
  return n;
}

// The nearest known devices' points a class measures first, legal here, in this problem's
// names (at_input_bits): a profile's choice first (the nearest device's where it has one),
// then their recordings' best points, two in all from the device itself, four from others.
// A shipped entry is a long tune's answer, checked beside the entry before it in a benchmark
// run; a recording's best is one figure of a run that may predate it, and another device's
// order may differ here. On the EPYC, the Xeon profile's choices were the 20-minute tune's
// best point in 9 of 33 classes, the Xeon recordings' best in 1 (a first tune that measured
// the recordings' best first missed two of those 9 by 13 % and 38 %: results/first-tune/).
// From another device, after its best, the points within kContenderMargin of it
// (ClassPrior::near_ties) come furthest apart first: the most parameters apart from every
// point taken and from its contenders (measured anyway), the faster among equals. Its order
// among them is within its own spread, and its next points by time were mostly its best one
// parameter away: on the Xeon, gemm_nt lora_expand's 24 fastest points were within 10 %, most
// of them VW 4; on the Zen 2 EPYC, its 12th, VW 1 and four other parameters apart from the
// first tiled one, ran 13.0 ms in a benchmark run against 21.8 for the VW 4 points
// (results/first-tune/pocl-zen2/). The first of those near ties comes second, right after
// the first point (a profile's choice, else the recordings' best; where neither is legal
// here, the near tie furthest from the contenders, the fastest where there are none, and the
// next second): `ahead` (where given) says how many of the points come before the sibling
// classes' (1 or 2), the others after them. Algorithms OCLTK_EXCLUDE_ALGORITHMS names are
// skipped, as in the search space.
std::vector<Point> prior_candidates(const ClassPrior& prior, const KernelFamily& family, const DeviceLimits& limits,
                                    const AlgorithmExclusions& excluded, int input_bits, std::size_t* ahead = nullptr) {
  const std::size_t count = prior.distance == 0 ? 2 : 4;
  if (ahead != nullptr) *ahead = 1;
  std::vector<Point> out;
  std::set<std::string> keys;
  auto take = [&](const std::vector<Evaluation>& points, std::size_t most) {
    for (const Evaluation& e : points) {
      if (out.size() >= most) return;
      std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded);
      if (p && keys.insert(p->key()).second) out.push_back(std::move(*p));
    }
  };
  take(prior.chosen, 1);
  if (prior.distance > 0 && !prior.points.empty()) {
    take({prior.points.front()}, count);
    std::vector<Point> taken = out, ties;
    std::set<std::string> skip = keys;
    for (Point& c : contender_points(prior, family, limits, excluded, input_bits, {})) {
      skip.insert(c.key());
      taken.push_back(std::move(c));
    }
    for (const Evaluation& e : prior.near_ties)
      if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded))
        if (skip.insert(p->key()).second) ties.push_back(std::move(*p));
    const std::size_t first_tie = out.size();
    while (out.size() < count && !ties.empty()) {
      std::size_t pick = 0, pick_apart = 0;
      for (std::size_t i = 0; i < ties.size(); ++i) {
        std::size_t apart = std::numeric_limits<std::size_t>::max();
        for (const Point& t : taken) apart = std::min(apart, params_apart(ties[i], t));
        if (i == 0 || apart > pick_apart) {
          pick = i;
          pick_apart = apart;
        }
      }
      keys.insert(ties[pick].key());
      taken.push_back(ties[pick]);
      out.push_back(std::move(ties[pick]));
      ties.erase(ties.begin() + std::ptrdiff_t(pick));
    }
    // Where no point came before the near ties, the first of them is the first point.
    const std::size_t lead = std::max<std::size_t>(first_tie, 1);
    if (out.size() > lead) {
      std::rotate(out.begin() + 1, out.begin() + std::ptrdiff_t(lead), out.begin() + std::ptrdiff_t(lead) + 1);
      if (ahead != nullptr) *ahead = 2;
    }
  }
  take(prior.points, count);
  take(prior.vendor_chosen, out.size() + prior.vendor_chosen.size());
  return out;
}

// What a problem tuned earlier in the run found, for the other classes of its kernel after it
// (sibling_seeds): its verified points, the one it kept first, then the others fastest first.
struct RunClass {
  std::string kernel, shape_class;
  Problem problem;
  std::string variants;  // the build variants its workload launches (input type, precision)
  std::vector<Evaluation> points;
};

// The build variants a workload launches its family's algorithms with, as one string: two
// classes that differ in it run other code (16-bit input, TF32 products) on any point.
std::string launch_variants(const KernelFamily& family, const Workload& workload) {
  std::string out;
  for (const AlgorithmSpec& a : family.algorithms) out += a.name + "=" + workload.variant(a) + ";";
  return out;
}

// What the earlier classes of the kernel say about a class that this device never measured
// (no profile choice or recording of its own, no earlier problem of the class in this run).
struct SiblingSeeds {
  std::vector<Point> points;             // measured first: nearest classes' best points first
  std::vector<std::string> from;         // the classes they came from, nearest first
  std::map<std::string, double> log_ms;  // their verified points for the guided model (SearchPrior)
};

constexpr std::size_t kSiblingSeeds = 2;    // points measured first
constexpr std::size_t kSiblingClasses = 2;  // classes whose points enter the model
constexpr std::size_t kSiblingPoints = 24;  // points of each, at most (a prior file's top 24)

// Nearest first: problem_distance, plus 4 (a 16-fold size) where the classes launch other
// build variants at one input width, so a class of the same input type and precision comes
// before one of the same sizes; a class of another width has other variants by that alone,
// and problem_distance counts the width already (4). Counted twice, on the H100 the TF32 twin
// lora_shrink_tf32 put its 16-bit twin (whose `tcs` tile the twin's 4-minute tune found best)
// at 8, tied with large_tf32 (256 times as many columns), which was tuned later and came
// first: lora_shrink (4) and large_tf32 seeded it, neither with a `tcs` point, and its first
// tunes kept `skinny` at 1.57x that best (results/first-tune/h100/). Among equals the class
// tuned last. Each class gives its first point (the best it kept) that is legal here, searched
// in this class (`searched`) and not in `skip` (where it is added), until kSiblingSeeds; the
// nearest kSiblingClasses with a legal point enter the model, each class's times relative to
// its own best (the guided model shifts them to this class's times).
SiblingSeeds sibling_seeds(const std::vector<RunClass>& run, const KernelFamily& family, const std::string& shape_class,
                           const Problem& problem, const std::string& variants, int input_bits,
                           const DeviceLimits& limits, const AlgorithmExclusions& excluded,
                           const std::set<const AlgorithmSpec*>& searched, std::set<std::string>& skip) {
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < run.size(); ++i)
    if (run[i].kernel == family.name && run[i].shape_class != shape_class && !run[i].points.empty())
      order.push_back(
          {problem_distance(run[i].problem, problem) +
               (run[i].variants == variants || input_bits_of(run[i].problem) != input_bits_of(problem) ? 0.0 : 4.0),
           run.size() - i});
  std::sort(order.begin(), order.end());
  SiblingSeeds out;
  std::size_t modelled = 0;
  for (const auto& [distance, back] : order) {
    const RunClass& sibling = run[run.size() - back];
    std::vector<Point> legal;
    for (const Evaluation& e : sibling.points)
      if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded))
        if (searched.count(p->algorithm)) legal.push_back(std::move(*p));
    if (legal.empty()) continue;
    if (out.points.size() < kSiblingSeeds && skip.insert(legal.front().key()).second) {
      out.points.push_back(legal.front());
      out.from.push_back(sibling.shape_class);
    }
    if (modelled < kSiblingClasses) {
      ++modelled;
      const double best = std::log(sibling.points.front().time_ms);
      for (std::size_t i = 0, taken = 0; i < sibling.points.size() && taken < kSiblingPoints; ++i) {
        const Evaluation& e = sibling.points[i];
        if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded)) {
          out.log_ms.emplace(p->key(), std::log(e.time_ms) - best);
          ++taken;
        }
      }
    }
    if (out.points.size() >= kSiblingSeeds && modelled >= kSiblingClasses) break;
  }
  return out;
}

// `onto` with `from`'s values of the parameters `to` has too (the same name, a value `to`
// allows): a point of a kin algorithm (AlgorithmSpec::tiles_like) in `to`'s terms.
Params kin_params(const AlgorithmSpec& to, const Params& from, Params onto) {
  for (const ParamSpec& spec : to.params)
    if (const auto it = from.find(spec.name); it != from.end())
      if (std::find(spec.allowed.begin(), spec.allowed.end(), it->second) != spec.allowed.end())
        onto[spec.name] = it->second;
  return onto;
}

// The run's classes of `kernel` that measured a point of `algorithm`, nearest to a class of
// `shape_class` at `input_bits` first: the same class (LoRA's five classes are the same problems
// in each of its kernels), then the same input width (the NF4 workloads' f32 input multiplying
// by 3xTF32 as gemm_nt's large_tf32x3 does), then the class tuned last; each with its best point
// of the algorithm: the one it kept where that is of the algorithm, else the fastest by its
// figure (RunClass::points' order). Not the fastest figure of all: a run-off may leave a point it
// put behind the kept one a lower figure than the kept one's re-timing (lora_expand decode on
// the Xeon kept CB 4096 over CB 2048 WGS 1, which had beaten CB 2048 WGS 4 in another run-off;
// the last read 0.036 ms against the kept point's 0.041).
struct KinClass {
  const RunClass* run_class;
  const Evaluation* best;
};

std::vector<KinClass> kin_classes(const std::vector<RunClass>& run, const std::string& tiles_like,
                                  const std::string& shape_class, int input_bits) {
  const std::size_t slash = tiles_like.find('/');
  if (slash == std::string::npos) return {};
  const std::string kernel = tiles_like.substr(0, slash), algorithm = tiles_like.substr(slash + 1);
  std::vector<std::tuple<int, int, std::size_t, const Evaluation*>> order;  // other class, other width, after it
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (run[i].kernel != kernel) continue;
    const auto best = std::find_if(run[i].points.begin(), run[i].points.end(),
                                   [&](const Evaluation& e) { return e.algorithm == algorithm; });
    if (best != run[i].points.end())
      order.push_back({run[i].shape_class == shape_class ? 0 : 1, input_bits_of(run[i].problem) == input_bits ? 0 : 1,
                       run.size() - 1 - i, &*best});
  }
  std::sort(order.begin(), order.end());  // "after it" differs between any two: no tie reaches the pointer
  std::vector<KinClass> out;
  for (const auto& [other_class, other_width, after, best] : order) out.push_back({&run[run.size() - 1 - after], best});
  return out;
}

// What the run's classes of other kernels found for the algorithms a class's algorithms run the
// tiles of (AlgorithmSpec::tiles_like), for a class this device never measured, kSiblingSeeds
// points at most per algorithm searched here:
// - of one kin algorithm, its best point in each of the nearest classes that measured one
//   (kin_classes), mapped by kin_params onto the algorithm's defaults. On the H200
//   nobody-tuned run, NF4 prefill measured one tc_tiled point (rejected) in 20 evaluations and
//   kept tc at 1.97x the shipped tc_tiled entry, whose tile is gemm_nt large_tf32x3's;
// - of several, a point per kin composed of each kin's best point in its nearest class, that
//   kin's setting the parameters they share (lora_apply's WGS, TR, VA): the first named first.
//   The Xeon's long tune of lora_apply decode kept the very composition of the points a first
//   tune kept for lora_shrink and lora_expand decode, which that first tune never measured in
//   13 evaluations (it kept 1.27x; ddbd65f's run, results/first-tune/README.md).
struct KinSeeds {
  std::vector<Point> points;
  std::vector<std::string> from;  // "KERNEL/CLASS" of each, kins joined by " + "
};

KinSeeds kin_seeds(const std::vector<RunClass>& run, const KernelFamily& family, const std::string& shape_class,
                   int input_bits, const DeviceLimits& limits, const AlgorithmExclusions& excluded,
                   const std::set<const AlgorithmSpec*>& searched, std::set<std::string>& skip) {
  KinSeeds out;
  const auto add = [&](const AlgorithmSpec& a, const Params& params, const std::string& from) {
    std::optional<Point> p = legal_point(family, a.name, params, input_bits, limits, excluded);
    if (!p || !skip.insert(p->key()).second) return false;
    out.points.push_back(std::move(*p));
    out.from.push_back(from);
    return true;
  };
  const auto named = [](const std::string& tiles_like, const KinClass& c) {
    return tiles_like.substr(0, tiles_like.find('/')) + "/" + c.run_class->shape_class;
  };
  for (const AlgorithmSpec& a : family.algorithms) {
    if (a.tiles_like.empty() || !searched.count(&a)) continue;
    if (a.tiles_like.size() == 1) {
      std::size_t taken = 0;
      for (const KinClass& c : kin_classes(run, a.tiles_like[0], shape_class, input_bits))
        if (taken < kSiblingSeeds && add(a, kin_params(a, c.best->params, a.defaults()), named(a.tiles_like[0], c)))
          ++taken;
      continue;
    }
    std::vector<std::pair<const std::string*, KinClass>> nearest;  // per kin that has a class
    for (const std::string& kin : a.tiles_like)
      if (const std::vector<KinClass> classes = kin_classes(run, kin, shape_class, input_bits); !classes.empty())
        nearest.push_back({&kin, classes.front()});
    std::string from;
    for (const auto& [kin, c] : nearest) from += (from.empty() ? "" : " + ") + named(*kin, c);
    // Point r: the kins applied last to first, the r-th last of all (its shared values kept).
    std::size_t taken = 0;
    for (std::size_t r = 0; r < nearest.size() && taken < kSiblingSeeds; ++r) {
      Params params = a.defaults();
      for (std::size_t i = nearest.size(); i-- > 0;)
        if (i != r) params = kin_params(a, nearest[i].second.best->params, std::move(params));
      params = kin_params(a, nearest[r].second.best->params, std::move(params));
      if (add(a, params, from)) ++taken;
    }
  }
  return out;
}

// What a class that kept `best` found, for the classes of its kernel after it: its best, then
// its other verified points fastest first, each by its figure (retimed_figure: a point a
// re-timing put behind the best does not come before it by its search's figure).
RunClass run_class_of(const ClassResult& cr, const Evaluation& best, const std::string& variants) {
  RunClass found{cr.kernel, cr.shape_class, cr.problem, variants, {best}};
  std::vector<Evaluation> others;
  for (const Evaluation& e : cr.history)
    if (const double ms = retimed_figure(cr, e); e.ok && ms > 0 && !same_point(e, best)) {
      others.push_back(e);
      others.back().time_ms = ms;
    }
  std::stable_sort(others.begin(), others.end(),
                   [](const Evaluation& a, const Evaluation& b) { return a.time_ms < b.time_ms; });
  found.points.insert(found.points.end(), others.begin(), others.end());
  return found;
}

// The best points of the kernel's other classes in this run (`run`), for the class `at` after
// the kernel's last class (the revisit in tune(): it measures those it has not, and times those
// near its best again beside it): the nearest classes' first (problem_distance), each point
// once, legal here and searched here. Only classes that launch the same build variants (input
// type, precision): their programs are built, so each costs the class its runs alone. A class's
// search sees only the classes before it: on the 2-core PoCL Zen 2 a first tune kept the Xeon's
// VW 16 in lora_shrink decode (its kernel's first class, 4-6 evaluations) at 1.66x the best
// known point, while the kernel's later classes found this CPU's VW 8, which the long tune had
// recorded at 0.86x that point in decode. Then the neighbours of its best its siblings ran
// faster (kNeighbourMargin).
struct RevisitPoint {
  Point point;
  std::string from;        // the class whose best it is, or that measured it (neighbour)
  bool neighbour = false;  // a neighbour of the class's best that `from` ran faster
};
std::vector<RevisitPoint> revisit_points(const std::vector<RunClass>& run, std::size_t at, const KernelFamily& family,
                                         int input_bits, const DeviceLimits& limits,
                                         const AlgorithmExclusions& excluded,
                                         const std::set<const AlgorithmSpec*>& searched) {
  const RunClass& self = run[at];
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < run.size(); ++i)
    if (i != at && run[i].kernel == self.kernel && run[i].variants == self.variants && !run[i].points.empty())
      order.push_back({problem_distance(run[i].problem, self.problem), i});
  std::stable_sort(order.begin(), order.end());
  std::vector<RevisitPoint> out;
  std::set<std::string> keys;
  for (const auto& [distance, i] : order) {
    const Evaluation& best = run[i].points.front();
    std::optional<Point> p = legal_point(family, best.algorithm, best.params, input_bits, limits, excluded);
    if (!p || !searched.count(p->algorithm) || !keys.insert(p->key()).second) continue;
    out.push_back({std::move(*p), run[i].shape_class});
  }
  // Then the one-parameter neighbours of this class's best that a sibling measured beside that
  // best, over kNeighbourMargin faster there, by that ratio (kNeighbours at most): how one
  // parameter moves the time carries from a problem to its sibling better than which point
  // wins. On the 2-core Zen 2 EPYC a first tune kept lora_expand multi_batch's CB 1024 TR 8
  // (1.19x the long tune's best in the benchmark), whose TR 2 neighbour, its long tune's best,
  // multi_decode had run at 0.35x of TR 8; over its 19 first tunes such pairs named 15 points the
  // long tune ran faster than the class's best, 7 slower, 16 it never measured (each costs the
  // runs of a program built already). Not a point the class measured itself, nor figures
  // recalled from the resume cache (another run's), nor from a sibling that kept this class's
  // best: its re-timing read that best faster than any point its search had timed faster.
  const Evaluation& mine = self.points.front();
  const std::optional<Point> best = legal_point(family, mine.algorithm, mine.params, input_bits, limits, excluded);
  if (!best) return out;
  for (const Evaluation& e : self.points)
    if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded))
      keys.insert(p->key());
  std::vector<std::pair<double, RevisitPoint>> neighbours;
  for (const auto& [distance, i] : order) {
    std::vector<std::pair<Point, double>> measured;  // the sibling's points legal here, and times
    double at_best = 0;                              // its time of this class's best
    for (std::size_t k = 0; k < run[i].points.size(); ++k) {
      const Evaluation& e = run[i].points[k];
      if (e.cached) continue;
      if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded)) {
        if (p->key() != best->key())
          measured.push_back({std::move(*p), e.time_ms});
        else if (k == 0)
          break;  // the sibling kept it
        else
          at_best = e.time_ms;  // each point once (run_class_of)
      }
    }
    if (!(at_best > 0)) continue;
    for (auto& [p, ms] : measured)
      if (params_apart(p, *best) == 1 && ms * kNeighbourMargin < at_best && searched.count(p.algorithm))
        neighbours.push_back({ms / at_best, RevisitPoint{std::move(p), run[i].shape_class, true}});
  }
  std::stable_sort(neighbours.begin(), neighbours.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t taken = 0;
  for (auto& [ratio, r] : neighbours)
    if (taken < kNeighbours && keys.insert(r.point.key()).second) {
      out.push_back(std::move(r));
      ++taken;
    }
  return out;
}

// A class of a device nobody tuned that knows the algorithm of its built-in default by that
// default alone (none of the nearest devices' points of the class, or those lent to them
// (ClassPrior::lenders), is of it but the default itself, which their recordings hold, nor
// any point it measures first): a default is a portable guess, and the guided model ranks an
// algorithm by its points, so it does not come back to one its default put far behind. On the
// 2-core Zen 2 EPYC, gemm_nt gemv_half's default (reduce RW 32 VW 1) ran 9.3 ms, 6.5x the long
// tune's best reduce point, and first tunes kept tiled at 1.3-1.8x that point. What stands in
// for it: the nearest devices' point of that algorithm in the kernel's nearest other class
// (algorithm_elsewhere), legal here and not the default itself (the Xeon's gemv reduce RW 1
// TR 2 VW 8, one parameter from the Zen 2 gemv_half's best); nullopt where there is none.
std::optional<RevisitPoint> builtin_stand_in(const std::vector<PriorDevice>& known, const DeviceInfo& device,
                                             PriorUse use, const ClassPrior& prior, const KernelFamily& family,
                                             const std::string& shape_class, const Problem& problem,
                                             const Point& builtin, const std::vector<Point>& first, int input_bits,
                                             const DeviceLimits& limits, const AlgorithmExclusions& excluded) {
  for (const Evaluation& e : prior.points)  // their recordings hold the default too
    if (e.algorithm == builtin.algorithm->name &&
        Point{builtin.algorithm, builtin.algorithm->at_input_bits(e.params, input_bits)}.key() != builtin.key())
      return std::nullopt;
  for (const Point& p : first)
    if (p.algorithm == builtin.algorithm && p.key() != builtin.key()) return std::nullopt;
  for (const PointElsewhere& e : algorithm_elsewhere(known, device, use, prior.distance, family.name, shape_class,
                                                     problem, builtin.algorithm->name))
    if (std::optional<Point> p = legal_point(family, e.point.algorithm, e.point.params, input_bits, limits, excluded))
      if (p->key() != builtin.key()) return RevisitPoint{std::move(*p), e.shape_class};
  return std::nullopt;
}

// The builders `auto` stands for, and how many threads build.
Builders resolve_builders(const TuneOptions& options, const DeviceInfo& device, const DeviceLimits& limits) {
  const bool processes_possible = !options.worker_command.empty() && device.index >= 0;
  if (options.builders == Builders::kProcesses && !processes_possible)
    throw Error(ErrorCode::kInvalidArgument,
                "build workers in processes need the worker command (the ocltk executable) and a device opened by "
                "its index");
  if (options.builders != Builders::kAuto) return options.builders;
  if (device.type == "cpu") return processes_possible ? Builders::kProcesses : Builders::kContexts;
  return limits.ptx_binaries && processes_possible ? Builders::kProcesses : Builders::kShared;
}

int default_compile_threads(const DeviceInfo& device, Builders builders) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  // A CPU device: every core builds while the device is not timing (no build runs then).
  if (device.type == "cpu") return int(std::min(hw, 16u));
  // Four processes overlapped on the H200 (2.3x one process's builds); eight made fewer
  // evaluations in a first tune (44 against 62, results/h200-dropped-ideas/build-workers/).
  if (builders == Builders::kProcesses) return int(std::clamp<unsigned>(hw > 1 ? hw - 1 : 1, 1, 4));
  return int(std::clamp<unsigned>(hw > 1 ? hw - 1 : 1, 1, 16));
}

// How much of an even share a class gets, by how far its best is from what is known. Near:
// within kNearGap of the best a nearest device measured on the same problem (distance 0) or
// of the share of its built-in default's time the nearest devices' search saved (the smaller
// gap of the two counts; not where this run timed a stand-in for the default, its algorithm
// excluded: the caller passes no `builtin` then), or within kNearFloor of its memory floor
// (where the class's bytes do not fit the device's cache, on a device the copy bandwidth bounds: floor_bounds_kernels):
// kNearWeight. Far: over kFarGap from what the nearest devices reached: kFarWeight (a floor
// never says far: no kernel may reach it). Else, or with nothing known, 1. The share saved
// says near only from devices of the class's architecture or nearer (kSavedShareNear, a
// prior_distance): the built-in default is a portable guess, and on another microarchitecture
// it runs at another fraction of the best. On the 2-core Zen 2 EPYC, seeded by the Xeon
// (distance 3), a first tune called five classes near by it, gemm_nt gemv and gemv_half among
// them, which the benchmarked first tune of that code had kept at 1.22x and 1.18x the long
// tune's best (results/first-tune/pocl-zen2/): gemv's default ran 4.7x that best.
constexpr double kNearGap = 0.05, kFarGap = 0.5, kNearFloor = 0.25;
constexpr double kNearWeight = 0.4, kFarWeight = 1.5;
constexpr int kSavedShareNear = 1;
double class_weight(const Evaluation& best, const Evaluation& builtin, const std::optional<ClassPrior>& prior,
                    double floor_ms) {
  if (!best.ok) return 1;
  if (floor_ms > 0 && best.time_ms <= (1 + kNearFloor) * floor_ms) return kNearWeight;
  // Best over what the nearest devices reached, minus one; the smaller of the two yardsticks,
  // so that a device slower all over (another run's load, another clock) is not called far.
  std::optional<double> gap;
  if (prior && prior->best_ms > 0) gap = best.time_ms / prior->best_ms - 1;
  if (prior && prior->best_ratio > 0 && builtin.ok) {
    const double relative = (best.time_ms / builtin.time_ms) / prior->best_ratio - 1;
    gap = gap ? std::min(*gap, relative) : relative;
  }
  if (!gap) return 1;
  if (*gap <= kNearGap) return prior->distance <= kSavedShareNear ? kNearWeight : 1;
  if (*gap > kFarGap) return kFarWeight;
  return 1;
}

// Whether the copy bandwidth bounds the device's kernels, so that a class's floor can say near:
// every device but a CPU, taken to behave as a GPU does (an accelerator, another kind). On a
// GPU a read kernel reached 92-99 % of it (the H200, docs/performance.md), but a CPU's copy
// pays for its writes what a read-mostly kernel does not: on the 2-core AVX-512 EPYC
// through PoCL, `gemm_nt` gemv read its 67 MB in 1.24 ms (54 GB/s, 1.48x the copy's 36.5), so
// its floor called a point near that the benchmark then read at 1.10-1.13x the long tune's
// best (results/first-tune/pocl-epyc/, 7a15f27), with 7 evaluations at weight 0.4.
bool floor_bounds_kernels(const DeviceInfo& device) { return device.type != "cpu"; }

std::uint64_t global_cache_bytes(const DeviceInfo& device) {
  cl_ulong cache = 0;
  clGetDeviceInfo(device.handle.id(), CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof cache, &cache, nullptr);
  return cache;
}

// The device's copy bandwidth in bytes per second (clEnqueueCopyBuffer, read + write, the
// best of three after one warm-up); 0 where it cannot be measured.
double copy_bandwidth(Runtime& rt) {
  const DeviceInfo& d = rt.device();
  const std::size_t bytes =
      std::size_t(std::min<std::uint64_t>({256ull << 20, d.max_alloc_bytes / 2, d.global_mem_bytes / 8}));
  if (bytes < (1u << 20)) return 0;
  try {
    boost::compute::buffer from = rt.allocate(bytes).value(), to = rt.allocate(bytes).value();
    double best = 0;
    for (int i = 0; i < 4; ++i) {
      cl_event event = nullptr;
      if (clEnqueueCopyBuffer(rt.queue().get(), from.get(), to.get(), 0, 0, bytes, 0, nullptr, &event) != CL_SUCCESS)
        return 0;
      clWaitForEvents(1, &event);
      cl_ulong start = 0, end = 0;
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
      clReleaseEvent(event);
      if (i > 0 && end > start) best = std::max(best, 2.0 * double(bytes) / (double(end - start) * 1e-9));
    }
    return best;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::int64_t evaluations_left(double left_seconds, double elapsed_seconds, int done, double least_pace) {
  if (done <= 0 || elapsed_seconds <= 0) return 0;
  const double pace = std::max(elapsed_seconds / done, least_pace);
  return std::max<std::int64_t>(1, std::int64_t(left_seconds * (1 - kRefinementShare) / pace));
}

double class_share(double budget_seconds, double elapsed_seconds, int classes, int classes_left, double weight) {
  if (classes_left <= 0) return 0;
  // This class at `weight`, those after it at 1 each (their weights are not known yet).
  const double part = weight / (weight + double(classes_left - 1));
  const double floor = kMinClassShare * std::min(1.0, weight) * budget_seconds / double(classes);
  const double fair = std::max(0.0, budget_seconds - elapsed_seconds) * part;
  // The floor may carry the run past the budget, by one floor at most in all.
  const double stretched =
      std::max(0.0, budget_seconds + kMinClassShare * budget_seconds / double(classes) - elapsed_seconds) * part;
  return std::max(fair, std::min(floor, stretched));
}

std::string default_profile_path(const DeviceInfo& device) {
  const std::string dir = user_profile_dir();
  if (dir.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "no folder to write the profile to where the runtime looks: XDG_CONFIG_HOME and HOME are unset and "
                "the user has no home folder; pass --out FILE (and OCLTK_PROFILE_PATH=FILE to the runtime)");
  return dir + "/" + file_name_of(device.name) + ".yaml";
}

namespace {

// Whether a tuned entry's problem replaces an existing one: the same problem, or the same but
// for the `max_rows` that routed entries name since 2026-12-01f, which an existing routed
// entry (one that names `active`) written before then lacks.
bool replaces(const std::map<std::string, std::int64_t>& tuned, const std::map<std::string, std::int64_t>& existing) {
  if (same_problem(tuned, existing)) return true;
  if (existing.count("max_rows") || !existing.count("active") || !tuned.count("max_rows")) return false;
  std::map<std::string, std::int64_t> without = tuned;
  without.erase("max_rows");
  return same_problem(without, existing);
}

}  // namespace

std::size_t keep_untuned_entries(const Profile& existing, Profile& tuned) {
  if (existing.device.name != tuned.device.name) return 0;
  std::set<std::pair<std::string, std::string>> tuned_classes;
  for (const ProfileEntry& e : tuned.entries) tuned_classes.insert({e.kernel, e.shape_class});
  std::vector<ProfileEntry> kept;
  for (const ProfileEntry& old : existing.entries) {
    bool replaced = false;
    if (tuned_classes.count({old.kernel, old.shape_class})) {
      // The first entry of a class is its default problem (tune measures it first).
      const ProfileEntry* class_default = tuned.find(old.kernel, old.shape_class);
      const std::map<std::string, std::int64_t>& problem = old.problem.empty() ? class_default->problem : old.problem;
      for (const ProfileEntry& e : tuned.entries)
        if (e.kernel == old.kernel && e.shape_class == old.shape_class && replaces(e.problem, problem)) replaced = true;
    }
    if (!replaced) kept.push_back(old);
  }
  tuned.entries.insert(tuned.entries.end(), kept.begin(), kept.end());
  return kept.size();
}

double default_budget_seconds(const DeviceInfo& device) {
  return device.type == "gpu" || device.type == "accelerator" ? 285 : 165;
}

TuneResult tune(Runtime& rt, const TuneOptions& given) {
  const DeviceInfo& device = rt.device();
  TuneOptions options = given;
  if (!(options.budget_seconds > 0)) options.budget_seconds = default_budget_seconds(device);
  const DeviceLimits limits = DeviceLimits::of(device);
  // What the runtime must never choose is never searched, measured first or written either.
  const AlgorithmExclusions& excluded = rt.excluded_algorithms();
  const auto start = Clock::now();
  std::mt19937_64 rng(options.seed);
  Progress progress(options);
  const std::vector<FamilyTuning>& families = options.families ? *options.families : tunable_families();

  struct Job {
    const FamilyTuning* tuning;
    std::string shape_class;
    std::optional<Problem> problem;  // a user's shape; else the class's representative problem
  };
  std::vector<Job> jobs;
  for (const std::string& k : options.kernels) {
    const bool known =
        std::any_of(families.begin(), families.end(), [&](const FamilyTuning& f) { return f.family->name == k; });
    if (!known) throw Error(ErrorCode::kInvalidArgument, "no tunable kernel named '" + k + "'");
  }
  for (const std::string& c : options.classes) {
    const bool known = std::any_of(families.begin(), families.end(),
                                   [&](const FamilyTuning& f) { return f.family->find_class(c) != nullptr; });
    if (!known) throw Error(ErrorCode::kInvalidArgument, "no kernel has a shape class named '" + c + "'");
  }
  auto kernel_selected = [&](const std::string& name) {
    return options.kernels.empty() ||
           std::find(options.kernels.begin(), options.kernels.end(), name) != options.kernels.end();
  };
  auto class_selected = [&](const std::string& name) {
    return options.classes.empty() ||
           std::find(options.classes.begin(), options.classes.end(), name) != options.classes.end();
  };
  // A class whose launches here run the very programs of another class of the run, on the same
  // problem (FamilyTuning::served_by), is not measured again: that class's entries are written
  // for it too (close_open). Named without its serving class, it is tuned as any class; a run
  // that names the serving class alone leaves it as the profile at --out has it.
  std::vector<ServedClass> served;
  for (const FamilyTuning& f : families) {
    if (!options.default_classes || !kernel_selected(f.family->name)) continue;
    for (const ShapeClassSpec& c : f.family->classes) {
      if (!class_selected(c.name)) continue;
      if (f.served_by)
        if (std::optional<ServedBy> by = f.served_by(rt, c.name); by && by->shape_class != c.name &&
                                                                  f.family->find_class(by->shape_class) != nullptr &&
                                                                  class_selected(by->shape_class)) {
          served.push_back({f.family->name, c.name, by->shape_class, by->reason, false});
          continue;
        }
      jobs.push_back({&f, c.name, std::nullopt});
    }
  }
  for (const UserShape& shape : options.shapes)
    if (kernel_selected(shape.tuning->family->name) && class_selected(shape.shape_class))
      jobs.push_back({shape.tuning, shape.shape_class, shape.problem});
  if (jobs.empty())
    throw Error(ErrorCode::kInvalidArgument, "the selected kernels, classes and shapes leave nothing to tune");
  // The input width a job's workload runs: its user's problem's, else its class's own.
  const auto job_input_bits = [](const Job& job) {
    if (job.problem) return int(input_bits_of(*job.problem));
    return job.tuning->class_input_bits ? job.tuning->class_input_bits(job.shape_class) : 32;
  };

  // Resume caches, one per kernel; a foreign one stops the run before any measuring.
  TuneResult result;
  result.served = std::move(served);
  std::map<std::string, std::unique_ptr<TuneCache>> caches;
  const std::string cache_dir = options.cache_dir.empty() ? TuneCache::default_dir() : options.cache_dir;
  if (!cache_dir.empty() && cache_dir != "-") {
    for (const Job& job : jobs) {
      const KernelFamily& family = *job.tuning->family;
      if (caches.count(family.name)) continue;
      const std::uint64_t hash = search_space_hash(family, limits);
      auto cache = std::make_unique<TuneCache>(TuneCache::path_for(cache_dir, device, family.name, hash), device,
                                               family.name, hash);
      result.caches.push_back(cache->path());
      caches.emplace(family.name, std::move(cache));
    }
  }

  const PriorUse prior_use = options.warm_start ? options.priors : PriorUse::kNone;
  ProfileSelection prior;
  if (options.warm_start) {
    try {
      prior = find_profiles(device, RuntimeOptions{});
    } catch (const std::exception&) {
      // An unreadable profile only costs the warm start.
    }
    // A device nobody tuned, simulated: this device's own profiles are set aside too.
    if (prior_use == PriorUse::kOthers)
      prior.candidates.erase(
          std::remove_if(prior.candidates.begin(), prior.candidates.end(),
                         [&](const ProfileCandidate& c) { return c.profile.device.name == device.name; }),
          prior.candidates.end());
  }
  const std::vector<PriorDevice>& known = options.known_devices ? *options.known_devices : embedded_priors();
  auto prior_of = [&](const std::string& kernel, const std::string& shape_class, const Problem* problem) {
    return class_prior(known, device, prior_use, kernel, shape_class, problem);
  };

  // Asking PoCL for a program's binary, to store it, compiles it again for any workgroup
  // size: the tuner measures thousands of programs once each, and PoCL caches them itself.
  struct KeepWrites {
    ProgramCache& cache;
    bool writes;
    ~KeepWrites() { cache.set_writes_to_disk(writes); }
  } keep_writes{rt.program_cache(), rt.program_cache().writes_to_disk()};
  if (compiles_at_first_launch(device)) rt.program_cache().set_writes_to_disk(false);

  const Builders builders = resolve_builders(options, device, limits);
  result.builders = to_string(builders);
  result.compile_threads =
      options.compile_threads >= 0 ? options.compile_threads : default_compile_threads(device, builders);
  Prefetcher prefetcher({rt, builders, result.compile_threads, device.type == "cpu", options.worker_command});
  auto costs = std::make_shared<EvaluationCosts>();
  std::optional<double> bandwidth;  // measured at the first class that needs it
  result.profile.device = profile_device_of(device);
  result.budget_seconds = options.budget_seconds;
  result.profile.tuner_version = version();

  // Each class searches with its own generator, so what its strategy asks for first is
  // known now: those points and the built-in defaults of every class are queued as
  // speculative builds, compiled while earlier classes are measured (programs do not
  // depend on the class), so a class whose programs are slow to build starts at once.
  std::vector<std::vector<Point>> spaces(jobs.size());
  std::vector<std::mt19937_64> search_rngs;
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    const KernelFamily& family = *jobs[ji].tuning->family;
    // Parameters of another input width's code path are searched at their defaults alone.
    const FamilyTuning& tuning = *jobs[ji].tuning;
    for (const AlgorithmSpec& algorithm : family.algorithms) {
      if (excluded.excludes(family.name, algorithm.name)) continue;  // OCLTK_EXCLUDE_ALGORITHMS
      if (tuning.searches && !tuning.searches(rt, jobs[ji].shape_class, algorithm)) continue;
      for (Params& p : algorithm.search_space(&limits, job_input_bits(jobs[ji])))
        spaces[ji].push_back({&algorithm, std::move(p)});
    }
    search_rngs.emplace_back(options.seed * 0x9E3779B97F4A7C15ull + ji + 1);
  }
  // What each job will measure first: its built-in default, the nearest known devices' best
  // points, then its strategy's opening (fewer of them on a CPU device, whose builds take the
  // measuring CPU's time, and where a short budget cuts the opening: GuidedSearch).
  std::vector<std::vector<Point>> first_points(jobs.size());
  std::vector<Point> builtin_points(jobs.size());                   // each job's built-in default here
  std::vector<bool> prior_known(jobs.size(), false);                // the nearest devices know the class
  std::vector<std::set<const AlgorithmSpec*>> outrun(jobs.size());  // outrun_algorithms
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    const KernelFamily& family = *jobs[ji].tuning->family;
    const BuiltinChoice builtin = family.builtin_point(jobs[ji].shape_class, excluded, &limits);
    builtin_points[ji] = {family.find_algorithm(builtin.algorithm), builtin.params};
    first_points[ji].push_back(builtin_points[ji]);
    const std::optional<ClassPrior> p =
        prior_of(family.name, jobs[ji].shape_class, jobs[ji].problem ? &*jobs[ji].problem : nullptr);
    const int bits = job_input_bits(jobs[ji]);
    if (p) {
      prior_known[ji] = true;
      outrun[ji] = outrun_algorithms(*p, spaces[ji]);
      // In the order the class measures them: the first, its contenders, the others.
      const std::vector<Point> firsts = prior_candidates(*p, family, limits, excluded, bits);
      for (std::size_t i = 0; i < firsts.size(); ++i) {
        first_points[ji].push_back(firsts[i]);
        if (i == 0)
          for (const Point& point : contender_points(*p, family, limits, excluded, bits, {firsts[0].key()}))
            first_points[ji].push_back(point);
      }
      if (firsts.empty())
        for (const Point& point : contender_points(*p, family, limits, excluded, bits, {}))
          first_points[ji].push_back(point);
    }
  }
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    std::vector<const Point*> hint;
    for (const Point& p : first_points[ji]) hint.push_back(&p);
    prefetcher.prefetch(hint, false, jobs[ji].tuning, job_input_bits(jobs[ji]), int(ji), jobs[ji].shape_class);
  }
  // On a CPU device, not the opening's points of an algorithm a first point covers where the
  // nearest devices know the class: there a class's budget is short, and the guided opening
  // keeps only algorithms nothing measured or known covers (GuidedSearch::run), so those
  // builds would only take the measuring CPU's time (on the 2-core PoCL machine a first tune
  // queued 8 a class, of 0.3-5 s each, behind the first points).
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    std::set<const AlgorithmSpec*> covered;
    if (device.type == "cpu" && options.strategy == Strategy::kGuided && prior_known[ji]) {
      for (const Point& p : first_points[ji]) covered.insert(p.algorithm);
      covered.insert(outrun[ji].begin(), outrun[ji].end());
    }
    std::vector<const Point*> opening;
    for (const Point* p : opening_points(options.strategy, spaces[ji], search_rngs[ji], device.type == "cpu" ? 8 : 24))
      if (!covered.count(p->algorithm)) opening.push_back(p);
    prefetcher.prefetch(opening, false, jobs[ji].tuning, job_input_bits(jobs[ji]), int(ji), jobs[ji].shape_class);
  }

  // The best point of each problem tuned so far, by (kernel, class): with warm_start the
  // later problems of that class measure them first (a user's shapes of one class are
  // often won by the same point, and a share of the budget is short for a search).
  // And (run_classes, best first) what each found, for the classes of its kernel this device
  // never measured (sibling_seeds).
  std::vector<RunClass> run_classes;
  // The problems tuned so far: a user's shape that repeats one (the class's own problem,
  // say) is tuned once, so the profile gets one entry for it.
  std::set<std::tuple<std::string, std::string, std::map<std::string, std::int64_t>>> tuned_problems;
  std::unique_ptr<Workload> previous_workload;

  // The classes of the kernel being tuned stay open until its last one is done: then each
  // measures the best points its siblings kept that it has not (revisit_points), while the run
  // has time, and the kernel's profile entries are written. A class whose problem's bytes
  // (Workload::min_bytes, less than its buffers) would take the kernel's open ones past a quarter
  // of the device's memory, or any under --cold, is closed at once: its best still goes to the
  // others.
  struct OpenClass {
    std::unique_ptr<ClassResult> cr;
    std::unique_ptr<Workload> workload;      // null: closed at once
    std::unique_ptr<DeviceMeasure> measure;  // with it
    const FamilyTuning* tuning = nullptr;
    int input_bits = 32;
    std::size_t run_index = 0;  // its RunClass (npos: it kept none)
    int job = -1;               // its index in jobs
    std::set<const AlgorithmSpec*> searched;
  };
  std::vector<OpenClass> open;
  std::size_t open_kernel = 0;  // theirs (kernel_of)
  // Kernels in run order (consecutive jobs of one family) and the time held for their revisits.
  std::vector<std::size_t> kernel_of(jobs.size(), 0);
  std::vector<double> revisit_held;
  for (std::size_t ji = 0, count = 0; ji <= jobs.size(); ++ji) {
    if (ji > 0 && (ji == jobs.size() || jobs[ji].tuning != jobs[ji - 1].tuning)) {
      const double share = options.budget_seconds * kRevisitShare * double(count) / double(jobs.size());
      revisit_held.push_back(options.warm_start && count > 1 ? share : 0.0);
      count = 0;
    }
    if (ji < jobs.size()) {
      kernel_of[ji] = revisit_held.size();
      ++count;
    }
  }
  // The budget the classes share: the run's, less what the revisits of kernels not closed hold.
  auto classes_budget = [&] {
    double held = 0;
    for (double h : revisit_held) held += h;
    return options.budget_seconds - held;
  };
  auto open_bytes = [&] {
    double bytes = 0;
    for (const OpenClass& c : open)
      if (c.workload) bytes += c.workload->min_bytes();
    return bytes;
  };
  auto close_open = [&](std::size_t kernel) {
    const bool revisit = options.warm_start && open.size() > 1 && !(options.stop != nullptr && options.stop->load());
    // Each class may take an even part of what the kernel's held time has left, and none past
    // the run's budget.
    const auto kernel_revisit = Clock::now();
    for (std::size_t i = 0; revisit && i < open.size(); ++i) {
      OpenClass& c = open[i];
      if (!c.measure || c.run_index == std::string::npos) continue;
      const auto revisit_start = Clock::now();
      const double until = std::min(options.budget_seconds - seconds_since(start),
                                    (revisit_held[kernel] - seconds_since(kernel_revisit)) / double(open.size() - i));
      if (until <= 0) continue;
      DeviceMeasure& m = *c.measure;
      const std::vector<RevisitPoint> points =
          revisit_points(run_classes, c.run_index, *c.tuning->family, c.input_bits, limits, excluded, c.searched);
      if (points.empty()) continue;
      prefetcher.serve(c.workload.get(), c.tuning, int(input_bits_of(c.workload->problem())), c.job);
      const Evaluation before = m.best();
      std::set<std::string> keys;
      for (const RevisitPoint& r : points) {
        keys.insert(r.point.key());
        // Not one whose program this run has not built (a sibling's best recalled from the
        // resume cache): its build would take seconds of the measuring thread.
        if (m.recall(r.point) != nullptr || !m.built(r.point)) continue;
        if (seconds_since(revisit_start) >= until) break;
        if (m.evaluate_past_time(r.point) == nullptr) break;  // a stop or --max-evals
        (r.neighbour ? c.cr->neighbours_from : c.cr->revisited_from).push_back(r.from);
      }
      // Timed again where the best moved, or a point measured for the revisit (a sibling's best,
      // a neighbour) not kept came within the margin.
      bool near = !same_point(m.best(), before);
      for (const RevisitPoint& r : points)
        if (const Evaluation* e = m.recall(r.point))
          near = near || (e->ok && !e->cached && retimed_figure(*c.cr, *e) <= kRevisitMargin * m.best().time_ms &&
                          !same_point(*e, m.best()));
      // Where the best moved to a point measured now, its one figure against the best's
      // re-timed one, the re-timing runs even past the revisit's time (it keeps to its tenth of
      // the class's share): else the class would keep that point by its search's figure alone.
      if (near && (seconds_since(revisit_start) < until || !same_point(m.best(), before))) m.retime(keys);
      m.finish();
      prefetcher.class_done(c.job);  // what its measurements queued (a refinement's hints)
      if (m.best().ok && !same_point(m.best(), before))
        for (const RevisitPoint& r : points)
          if (const Evaluation* e = m.recall(r.point); e != nullptr && same_point(*e, m.best()))
            (r.neighbour ? c.cr->neighbour_kept : c.cr->revisit_kept) = r.from;
      if (m.best().ok) {
        c.cr->best = m.best();
        run_classes[c.run_index] = run_class_of(*c.cr, c.cr->best, run_classes[c.run_index].variants);
      }
      c.cr->seconds += seconds_since(revisit_start);
    }
    for (OpenClass& c : open) {
      const ClassResult& cr = *c.cr;
      if (cr.best.ok) {
        ProfileEntry entry;
        entry.kernel = cr.kernel;
        entry.shape_class = cr.shape_class;
        entry.algorithm = cr.best.algorithm;
        entry.params = cr.best.params;
        entry.problem = cr.problem;
        entry.time_ms = cr.best.time_ms;
        entry.gflops = cr.flops / cr.best.time_ms * 1e-6;
        if (cr.builtin.ok) {
          entry.default_time_ms = cr.builtin.time_ms;
          entry.default_algorithm = cr.builtin.algorithm;
          entry.default_params = cr.builtin.params;
        }
        entry.provenance.kind = "tuned";
        result.profile.entries.push_back(entry);
        // Its point for the classes it serves (a user's shape of it too: the runtime picks
        // the entry of the nearest problem in the served class as in its own).
        for (ServedClass& s : result.served)
          if (s.kernel == cr.kernel && s.by == cr.shape_class) {
            ProfileEntry copy = entry;
            copy.shape_class = s.shape_class;
            copy.provenance.note = s.by + "'s point, not measured again: " + s.reason;
            result.profile.entries.push_back(std::move(copy));
            s.written = true;
          }
      }
      result.classes.push_back(std::move(*c.cr));
    }
    // The last workload is kept until the next is made, so data it shares with it is reused.
    if (!open.empty() && open.back().workload) {
      open.back().measure.reset();
      previous_workload = std::move(open.back().workload);
    }
    prefetcher.serve(nullptr, nullptr, 32, -1);  // the workloads it served are gone
    open.clear();
    revisit_held[kernel] = 0;  // spent, or left to the classes after it
  };

  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    if (!open.empty() && kernel_of[ji] != open_kernel) close_open(open_kernel);
    if (options.stop != nullptr && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    const KernelFamily& family = *jobs[ji].tuning->family;
    const std::string& shape_class = jobs[ji].shape_class;
    const auto class_start = Clock::now();
    const double class_budget =
        class_share(classes_budget(), seconds_since(start), int(jobs.size()), int(jobs.size() - ji));

    const std::vector<Point>& space = spaces[ji];

    auto owned_cr = std::make_unique<ClassResult>();
    ClassResult& cr = *owned_cr;
    cr.kernel = family.name;
    cr.shape_class = shape_class;
    cr.space_size = space.size();
    std::unique_ptr<Workload> workload = jobs[ji].problem ? jobs[ji].tuning->make_for(rt, *jobs[ji].problem, rng)
                                                          : jobs[ji].tuning->make(rt, shape_class, rng);
    previous_workload.reset();  // kept until now, so data it shares with this one is reused
    const int input_bits = job_input_bits(jobs[ji]);
    // The width the workload runs (a class of 16-bit input names it in its problem): what a
    // build worker's small problem must run to build the same program.
    prefetcher.serve(workload.get(), jobs[ji].tuning, int(input_bits_of(workload->problem())), int(ji));
    cr.problem = workload->problem();
    if (!tuned_problems.insert({family.name, shape_class, cr.problem}).second) {
      result.repeated.push_back(family.name + "/" + shape_class + " " + format_problem(cr.problem));
      prefetcher.class_done(int(ji));
      previous_workload = std::move(workload);
      continue;
    }
    cr.flops = workload->flops();
    std::int64_t max_evals = options.max_evals;
    if (options.max_evals_fraction > 0) {
      const auto cap = std::max<std::int64_t>(1, std::int64_t(options.max_evals_fraction * double(space.size())));
      max_evals = max_evals > 0 ? std::min(max_evals, cap) : cap;
    }
    const auto cache_it = caches.find(family.name);
    auto owned_measure = std::make_unique<DeviceMeasure>(DeviceMeasure::Setup{
        rt, options, family.name, cr, *workload, cache_it == caches.end() ? nullptr : cache_it->second.get(),
        prefetcher, progress,
        "[" + std::to_string(ji + 1) + "/" + std::to_string(jobs.size()) + " " + family.name + "/" + shape_class + "]",
        class_budget, max_evals, class_start, family, limits, costs, &result.prebuilt});
    DeviceMeasure& measure = *owned_measure;

    // The class's built-in default here: measured first (below), never one of its seeds.
    const Point& builtin_point = builtin_points[ji];

    // Warm start: the choices of the profiles that already fit this device (an earlier
    // run's, or a shipped one for the same device or vendor) and of warm_profiles (the
    // profile at --out) are measured next, so a repeated `tune` starts from its last
    // answer instead of from scratch; then the best points of this run's earlier problems
    // of the class (repeats of one point are measured once).
    std::vector<Point> warm;
    std::vector<const Profile*> warm_from;
    for (const ProfileCandidate& candidate : prior.candidates) warm_from.push_back(&candidate.profile);
    if (options.warm_start)
      for (const Profile& profile : options.warm_profiles) warm_from.push_back(&profile);
    bool own_seed = false;  // a point this device itself chose or measured for the class
    for (const Profile* profile : warm_from)
      if (const ProfileEntry* entry = profile->find(family.name, shape_class, &cr.problem))
        if (std::optional<Point> p =
                legal_point(family, entry->algorithm, entry->params, input_bits, limits, excluded)) {
          warm.push_back(std::move(*p));
          own_seed = own_seed || profile->device.name == device.name;
        }
    if (options.warm_start)
      for (const RunClass& earlier : run_classes)
        if (earlier.kernel == family.name && earlier.shape_class == shape_class)
          if (const AlgorithmSpec* a = family.find_algorithm(earlier.points.front().algorithm)) {
            warm.push_back({a, a->at_input_bits(earlier.points.front().params, input_bits)});
            own_seed = true;
          }
    // Then the nearest known devices' best points for the class (priors.hpp).
    const std::optional<ClassPrior> class_known = prior_of(family.name, shape_class, &cr.problem);
    SearchPrior search_prior;
    std::optional<RevisitPoint> default_stand_in;  // builtin_stand_in, where there is one
    std::optional<Point> first_prior_point;
    std::set<std::string> contender_keys;  // measured right after the first, past time like it
    std::set<std::string> known_choices;   // the known devices' profile choices legal here
    std::size_t sibling_at = warm.size();
    const std::size_t warm_before_prior = warm.size();
    if (class_known) {
      cr.prior_distance = class_known->distance;
      cr.prior_devices = class_known->devices;
      cr.prior_lenders = class_known->lenders;
      cr.lender_distance = class_known->lender_distance;
      own_seed = own_seed || class_known->distance == 0;
      std::size_t ahead = 1, placed = 0;  // the first `ahead` before the sibling classes' points
      for (const Point& p : prior_candidates(*class_known, family, limits, excluded, input_bits, &ahead)) {
        if (contender_keys.count(p.key())) continue;
        warm.push_back(p);
        if (!first_prior_point) {
          first_prior_point = p;
          for (Point& c : contender_points(*class_known, family, limits, excluded, input_bits, {p.key()})) {
            contender_keys.insert(c.key());
            warm.push_back(std::move(c));
          }
        }
        if (++placed <= ahead) sibling_at = warm.size();
      }
      for (const Evaluation& e : class_known->points)
        if (const AlgorithmSpec* a = family.find_algorithm(e.algorithm))
          search_prior.log_ms.emplace(Point{a, a->at_input_bits(e.params, input_bits)}.key(), std::log(e.time_ms));
      search_prior.outrun = outrun_algorithms(*class_known, space);
      // The known choices legal here; the vendor's devices whose choices are among the points
      // placed (not one dropped here).
      for (const Evaluation& e : class_known->chosen)
        if (std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded))
          known_choices.insert(p->key());
      for (std::size_t i = 0; i < class_known->vendor_chosen.size(); ++i) {
        const Evaluation& e = class_known->vendor_chosen[i];
        const std::optional<Point> p = legal_point(family, e.algorithm, e.params, input_bits, limits, excluded);
        if (!p) continue;
        known_choices.insert(p->key());
        if (std::any_of(warm.begin() + std::ptrdiff_t(warm_before_prior), warm.end(),
                        [&p](const Point& w) { return w.key() == p->key(); }))
          cr.vendor_devices.push_back(class_known->vendor_devices[i]);
      }
      measure.set_known_choices(known_choices);
    }
    // A class this device never measured starts from what the earlier classes of its kernel
    // found in this run (sibling_seeds), after the nearest devices' first point: a sibling's
    // best is a point of this device, while another device's order may differ here.
    const std::string variants = launch_variants(family, *workload);
    if (options.warm_start && !own_seed) {
      std::set<std::string> skip;
      for (const Point& p : warm) skip.insert(p.key());
      skip.insert(builtin_point.key());
      std::set<const AlgorithmSpec*> searched;
      for (const Point& p : space) searched.insert(p.algorithm);
      SiblingSeeds siblings = sibling_seeds(run_classes, family, shape_class, cr.problem, variants, input_bits, limits,
                                            excluded, searched, skip);
      // Then the tiles other kernels' classes found for the algorithms these run (kin_seeds).
      KinSeeds kin = kin_seeds(run_classes, family, shape_class, input_bits, limits, excluded, searched, skip);
      siblings.points.insert(siblings.points.end(), kin.points.begin(), kin.points.end());
      cr.seed_classes = siblings.from;
      for (const std::string& from : kin.from)  // a composition names its classes once for its points
        if (std::find(cr.seed_classes.begin(), cr.seed_classes.end(), from) == cr.seed_classes.end())
          cr.seed_classes.push_back(from);
      if (!first_prior_point && !siblings.points.empty()) first_prior_point = siblings.points.front();
      warm.insert(warm.begin() + std::ptrdiff_t(sibling_at), siblings.points.begin(), siblings.points.end());
      // In the known devices' times where they have some (the model shifts all of them by one
      // offset): a sibling's best at their best.
      double base = 0;
      if (!search_prior.log_ms.empty()) {
        base = std::numeric_limits<double>::infinity();
        for (const auto& [key, y] : search_prior.log_ms) base = std::min(base, y);
      }
      for (const auto& [key, y] : siblings.log_ms) search_prior.log_ms.emplace(key, base + y);
      // Then a point of the built-in default's algorithm from another class, where that
      // default is all the class knows of it (builtin_stand_in).
      if (class_known)
        if (std::optional<RevisitPoint> stand_in =
                builtin_stand_in(known, device, prior_use, *class_known, family, shape_class, cr.problem, builtin_point,
                                 warm, input_bits, limits, excluded)) {
          warm.push_back(stand_in->point);
          default_stand_in = std::move(stand_in);
        }
    }
    const Point* first_prior = first_prior_point ? &*first_prior_point : nullptr;

    // The built-in default is measured first: it is the baseline of the speed-up, and its
    // time sets the hang limit of the others. Past the run's budget, where a class has time
    // for one evaluation at most, that one is the nearest devices' first point instead (at
    // distance 0 the device's shipped choice; without a known device, a sibling class's),
    // which a default on a device nobody tuned rarely matches: the classes at the end of a run
    // on a loaded machine kept their defaults, up to 50x the shipped choice (PoCL's LoRA
    // apply), and the run ended no sooner.
    const bool builtin_skipped = first_prior != nullptr && seconds_since(start) >= options.budget_seconds;
    workload->timeout_seconds = options.timeout_seconds > 0 ? options.timeout_seconds : 60;
    // The compile at a first launch is no hang (wait_for_event).
    workload->start_seconds = compiles_at_first_launch(device) ? kCompileAtLaunchSeconds : 0;
    // The points measured first are built while the default is: urgent, after it, before the
    // class measures it (on the 2-core PoCL machine nf4_backward decode built its default and
    // then the known device's point, 1.5-2 s each, of its 3.7 s, one after the other).
    std::vector<const Point*> warm_hint;
    if (!builtin_skipped) warm_hint.push_back(&builtin_point);
    for (const Point& p : warm) warm_hint.push_back(&p);
    prefetcher.prefetch(warm_hint);
    if (!builtin_skipped) {
      if (const Evaluation* e = measure.evaluate(builtin_point, true)) cr.builtin = *e;
      if (options.timeout_seconds <= 0)
        workload->timeout_seconds = std::max(2.0, 100 * (cr.builtin.ok ? cr.builtin.time_ms * 1e-3 : 0.1));
    }

    // The class's share follows how near its best is to what is known (class_weight): a
    // class already there leaves time to the others, one far from it takes more.
    double floor_ms = 0;
    if (floor_bounds_kernels(device) && workload->min_bytes() > double(global_cache_bytes(device))) {
      if (!bandwidth) bandwidth = copy_bandwidth(rt);
      if (*bandwidth > 0) floor_ms = workload->min_bytes() / *bandwidth * 1e3;
    }
    const double elapsed_before = seconds_since(start) - seconds_since(class_start);
    // The share of the default's time saved is compared with the nearest devices' share of
    // today's built-in default's: where this run excludes that default's algorithm, it timed
    // a stand-in, another yardstick, and the share says nothing.
    const bool builtin_is_todays =
        family.is_builtin_point(shape_class, builtin_point.algorithm->name, builtin_point.params);
    auto reweigh = [&] {
      cr.weight = class_weight(measure.best(), builtin_is_todays ? cr.builtin : Evaluation{}, class_known, floor_ms);
      measure.set_budget(
          class_share(classes_budget(), elapsed_before, int(jobs.size()), int(jobs.size() - ji), cr.weight));
    };
    // The nearest devices' best point is measured even where the built-in default took the
    // class's time (a slow default on a slow device): it is the evaluation most likely to pay.
    // Also where the default's measurement took the run past its budget: a class past it
    // measures that point alone (builtin_skipped), and the one the budget ends in measures
    // two. Keeping the default there kept 20x the Xeon's point (PoCL's lora_apply
    // multi_decode, 9.5 against 0.47 ms, in a first tune on the 2-core Zen 2).
    // So are their contenders, which their order between algorithms says nothing about
    // (contender_points), and the known devices' profile choices placed among these points (a
    // long tune's answer on a device of this one's architecture or vendor), but only while the
    // run's budget is not spent. On the 2-core AVX-512 EPYC, nf4_forward small_batch, near by
    // the Xeon's yardstick (weight 0.4), had time for 4 evaluations, and the Zen 2's choice,
    // placed after the Xeon's points, was not among them: it was the long tune's best, and the
    // first tune kept 1.24x it (results/first-tune/pocl-epyc/, daa6bc1).
    for (const Point& p : warm)
      if (first_prior != nullptr && p.key() == first_prior->key())
        measure.evaluate_past_time(p);
      else if ((contender_keys.count(p.key()) || known_choices.count(p.key())) &&
               seconds_since(start) < options.budget_seconds)
        measure.evaluate_past_time(p);
      else
        measure.evaluate(p);
    if (default_stand_in && measure.recall(default_stand_in->point) != nullptr)
      cr.default_stand_in = default_stand_in->point.algorithm->name + " from " + default_stand_in->from;
    reweigh();
    measure.on_improvement(reweigh);

    run_strategy(options.strategy, space, measure, search_rngs[ji],
                 search_prior.log_ms.empty() ? nullptr : &search_prior);
    measure.on_improvement(nullptr);
    // The refinement: the best so far at each other value of its refined_last parameters.
    const std::vector<Point> around = measure.refinement();
    measure.start_refining();
    std::vector<const Point*> hint;
    for (const Point& p : around) hint.push_back(&p);
    measure.will_evaluate(hint);
    // The first is measured even where the search (its last evaluation running long) left
    // no time: every class tries its best point at one other value (a stop or --max-evals
    // still end the class).
    for (std::size_t i = 0; i < around.size(); ++i)
      if (i == 0)
        measure.evaluate_past_time(around[i]);
      else
        measure.evaluate(around[i]);
    measure.retime();
    measure.finish();
    prefetcher.class_done(int(ji));
    cr.best = measure.best().ok ? measure.best() : cr.builtin;
    cr.seconds = seconds_since(class_start);
    OpenClass kept;
    kept.tuning = jobs[ji].tuning;
    kept.input_bits = input_bits;
    kept.job = int(ji);
    kept.run_index = std::string::npos;
    if (cr.best.ok) {
      kept.run_index = run_classes.size();
      run_classes.push_back(run_class_of(cr, cr.best, variants));
    }
    // Not, for the siblings' best points after the kernel's last class, an algorithm the known
    // devices' full lists of the class leave out (outrun_algorithms), unless this class
    // measured one of it that verified: on the Zen 2 EPYC nf4_backward decode (best 1.6 ms)
    // spent two of its 6 evaluations on its siblings' best `tiled` points, 19 ms each.
    std::set<const AlgorithmSpec*> outrun = search_prior.outrun;
    for (const Evaluation& e : cr.history)
      if (e.ok)
        if (const AlgorithmSpec* a = family.find_algorithm(e.algorithm)) outrun.erase(a);
    for (const Point& p : space)
      if (!outrun.count(p.algorithm)) kept.searched.insert(p.algorithm);
    const double memory = double(device.global_mem_bytes);
    if (options.warm_start && (memory <= 0 || open_bytes() + workload->min_bytes() <= memory / 4)) {
      kept.workload = std::move(workload);
      kept.measure = std::move(owned_measure);
    } else {
      owned_measure.reset();
      previous_workload = std::move(workload);
    }
    kept.cr = std::move(owned_cr);
    open.push_back(std::move(kept));
    open_kernel = kernel_of[ji];
    if (options.stop != nullptr && options.stop->load()) result.interrupted = true;
  }
  if (!open.empty()) close_open(open_kernel);
  // A stop during the last kernel's revisit: the run did not finish either.
  if (options.stop != nullptr && options.stop->load()) result.interrupted = true;
  result.seconds = seconds_since(start);
  result.profile.tuning_seconds = result.seconds;
  result.profile.date = now_iso8601();
  return result;
}

std::string summary_cell(bool measured, double value, int precision, int width, const char* unit) {
  std::ostringstream s;
  if (measured)
    s << std::fixed << std::setprecision(precision) << value << unit;
  else
    s << "-" << (*unit ? " " : "");
  const std::string text = s.str();
  return std::string(std::size_t(std::max(0, width - int(text.size()))), ' ') + text;
}

void print_summary(std::ostream& out, const TuneResult& result) {
  std::size_t problem_width = 8, class_width = 13;  // the 16-bit classes' names are longer
  for (const ClassResult& c : result.classes) {
    problem_width = std::max(problem_width, format_problem(c.problem).size() + 2);
    class_width = std::max(class_width, c.shape_class.size() + 1);
  }
  out << "\n"
      << std::left << std::setw(14) << "kernel" << std::setw(int(class_width)) << "class"
      << std::setw(int(problem_width)) << "problem" << std::right << std::setw(12) << "default ms" << std::setw(12)
      << "best ms" << std::setw(10) << "GFLOP/s" << std::setw(10) << "speed-up" << std::setw(8) << "evals"
      << std::setw(8) << "space" << std::setw(8) << "secs"
      << "  best choice\n";
  // A figure not measured reads "-", not 0: the built-in default of a class that started past
  // the run's budget (the nearest device's point was measured alone), or a class with no
  // verified point.
  int unmeasured_defaults = 0;
  for (const ClassResult& c : result.classes) {
    unmeasured_defaults += c.builtin_measured() ? 0 : 1;
    out << std::left << std::setw(14) << c.kernel << std::setw(int(class_width)) << c.shape_class
        << std::setw(int(problem_width)) << format_problem(c.problem) << std::right
        << summary_cell(c.builtin.ok, c.builtin.time_ms, 3, 12) << summary_cell(c.best.ok, c.best.time_ms, 3, 12)
        << summary_cell(c.best.ok, c.best.ok ? c.flops / c.best.time_ms * 1e-6 : 0, 1, 10)
        << summary_cell(c.speedup() > 0, c.speedup(), 2, 10, "x") << std::setw(8) << c.evaluations << std::setw(8)
        << c.space_size << std::fixed << std::setprecision(0) << std::setw(8) << c.seconds << "  "
        << (c.best.ok ? c.best.algorithm + " " + format_params(c.best.params) : "none verified") << "\n";
  }
  if (unmeasured_defaults > 0)
    out << "built-in default not measured in " << unmeasured_defaults
        << (unmeasured_defaults == 1 ? " class" : " classes")
        << ": it started past the run's budget and measured the nearest device's point alone (--budget for more)\n";
  for (const std::string& r : result.repeated) out << "tuned once: " << r << " (named again in the shapes)\n";
  // The classes another's point serves (not measured), per kernel, serving class, reason and
  // whether that class had a point to write for them.
  std::map<std::tuple<std::string, std::string, std::string, bool>, std::string> served;
  for (const ServedClass& s : result.served) {
    std::string& line = served[{s.kernel, s.by, s.reason, s.written}];
    line += (line.empty() ? "" : ", ") + s.shape_class;
  }
  for (const auto& [key, classes] : served)
    out << "not measured, " << std::get<0>(key) << " " << classes << ": " << std::get<1>(key)
        << (std::get<3>(key) ? "'s point written for them (" : " kept no verified point, none written for them (")
        << std::get<2>(key) << ")\n";
  // Which known devices seeded the classes (priors.hpp), grouped.
  std::map<std::string, int> seeded;
  const auto named = [](const std::vector<std::string>& devices, int distance) {
    std::string out;
    for (const std::string& d : devices) out += (out.empty() ? "" : ", ") + d;
    return out + " (distance " + std::to_string(distance) + ")";
  };
  for (const ClassResult& c : result.classes) {
    if (c.prior_distance < 0) continue;
    std::string from = named(c.prior_devices, c.prior_distance);
    if (!c.prior_lenders.empty()) from += ", with the recordings of " + named(c.prior_lenders, c.lender_distance);
    if (!c.vendor_devices.empty()) from += ", and the choices of " + named(c.vendor_devices, 2);
    ++seeded[from];
  }
  for (const auto& [from, classes] : seeded)
    out << "seeded from " << from << ": " << classes << (classes == 1 ? " class\n" : " classes\n");
  // One line per kernel: `what`, then each class that `note` says something of, with it.
  const auto per_kernel = [&](const std::string& what, const std::function<std::string(const ClassResult&)>& note) {
    std::map<std::string, std::string> lines;
    for (const ClassResult& c : result.classes)
      if (const std::string n = note(c); !n.empty()) {
        std::string& line = lines[c.kernel];
        line += (line.empty() ? " " : ", ") + c.shape_class + " (" + n + ")";
      }
    for (const auto& [kernel, line] : lines) out << what << ", " << kernel << ":" << line << "\n";
  };
  // Which classes started from the best points of earlier classes of their kernel.
  per_kernel("seeded from classes of this run", [](const ClassResult& c) {
    std::string from;
    for (std::size_t i = 0; i < c.seed_classes.size(); ++i) from += (i ? ", " : "from ") + c.seed_classes[i];
    return from;
  });
  // Which measured a known device's point of their default's algorithm from another class.
  per_kernel("the built-in default's algorithm from a known device's other class",
             [](const ClassResult& c) { return c.default_stand_in; });
  // Which kept another class's best point, measured after their kernel's last class.
  per_kernel("after the kernel's last class, kept a sibling class's best",
             [](const ClassResult& c) { return c.revisit_kept.empty() ? "" : c.revisit_kept + "'s"; });
  // Which kept a neighbour of their best that another class had run faster than that best.
  per_kernel(
      "after the kernel's last class, kept a one-parameter neighbour of its best that a sibling class ran faster",
      [](const ClassResult& c) { return c.neighbour_kept.empty() ? "" : "from " + c.neighbour_kept; });
  int cached = 0;
  for (const ClassResult& c : result.classes) cached += c.cached;
  out << "tuned in " << std::fixed << std::setprecision(1) << result.seconds << " s";
  if (cached > 0) out << " (" << cached << " evaluations recalled from the resume cache)";
  out << "\n";
}

std::string json_class_fields(const ClassResult& c) {
  std::ostringstream out;
  out << "\"kernel\": " << json_string(c.kernel) << ", \"class\": " << json_string(c.shape_class)
      << ", \"problem\": " << json_problem(c.problem) << ", \"space_size\": " << c.space_size
      << ", \"evaluations\": " << c.evaluations << ", \"rejected\": " << c.rejected << ", \"cached\": " << c.cached
      << ", \"seconds\": " << c.seconds << ", \"speedup\": " << c.speedup() << ", \"weight\": " << c.weight
      << ", \"prior_distance\": " << c.prior_distance << ", \"prior_devices\": " << json_strings(c.prior_devices)
      << ", \"prior_lenders\": " << json_strings(c.prior_lenders) << ", \"lender_distance\": " << c.lender_distance
      << ", \"vendor_devices\": " << json_strings(c.vendor_devices)
      << ", \"seed_classes\": " << json_strings(c.seed_classes)
      << ", \"default_stand_in\": " << json_string(c.default_stand_in)
      << ", \"revisited_from\": " << json_strings(c.revisited_from)
      << ", \"revisit_kept\": " << json_string(c.revisit_kept)
      << ", \"neighbours_from\": " << json_strings(c.neighbours_from)
      << ", \"neighbour_kept\": " << json_string(c.neighbour_kept) << ",\n     \"default\": " << json_choice(c.builtin)
      << ",\n     \"best\": " << json_choice(c.best);
  return out.str();
}

std::string json_served(const std::vector<ServedClass>& served) {
  std::string out = "[";
  for (std::size_t i = 0; i < served.size(); ++i)
    out += std::string(i ? ", " : "") + "{\"kernel\": " + json_string(served[i].kernel) +
           ", \"class\": " + json_string(served[i].shape_class) + ", \"by\": " + json_string(served[i].by) +
           ", \"reason\": " + json_string(served[i].reason) +
           ", \"written\": " + (served[i].written ? "true" : "false") + "}";
  return out + "]";
}

void print_summary_json(std::ostream& out, const TuneResult& result, const std::string& profile_path) {
  const ProfileDevice& d = result.profile.device;
  out << "{\n  \"device\": {\"name\": " << json_string(d.name) << ", \"vendor\": " << json_string(d.vendor)
      << ", \"driver\": " << json_string(d.driver) << ", \"platform\": " << json_string(d.platform) << "},\n"
      << "  \"profile\": " << json_string(profile_path) << ",\n  \"seconds\": " << std::setprecision(6)
      << result.seconds << ",\n  \"budget_seconds\": " << result.budget_seconds
      << ",\n  \"interrupted\": " << (result.interrupted ? "true" : "false")
      << ",\n  \"compile_threads\": " << result.compile_threads << ", \"builders\": " << json_string(result.builders)
      << ", \"prebuilt\": " << result.prebuilt << ",\n  \"caches\": " << json_strings(result.caches)
      << ",\n  \"classes\": [";
  for (std::size_t i = 0; i < result.classes.size(); ++i)
    out << (i ? "," : "") << "\n    {" << json_class_fields(result.classes[i]) << "}";
  out << "\n  ],\n  \"tuned_once\": " << json_strings(result.repeated)
      << ",\n  \"served\": " << json_served(result.served) << "\n}\n";
}

}  // namespace ocltk::tuner

#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
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

#include "compile_pool.hpp"
#include "ocltk/family.hpp"

namespace ocltk::tuner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The width of a job's input (input_bits_of): f32 for the class's own problem.
int job_input_bits(const std::optional<Problem>& problem) { return problem ? int(input_bits_of(*problem)) : 32; }

// Runs, verifies, then times a candidate; stops timing early when the first timed run is
// already three times slower than the best so far. `hang` is set when a run outlived the
// workload's time limit (the device may still be busy with it).
Evaluation evaluate_candidate(Workload& w, const Choice& choice, int repeats, double best_ms, bool& hang) {
  Evaluation e;
  e.algorithm = choice.algorithm;
  e.params = choice.params;
  hang = false;
  try {
    w.poison();
    w.run(choice);
    if (std::string why = w.verify(); !why.empty()) {
      e.rejected = why;
      return e;
    }
    std::vector<double> times;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      times.push_back(w.run(choice));
      if (r == 0 && best_ms > 0 && times[0] > 3 * best_ms) break;
    }
    std::sort(times.begin(), times.end());
    e.time_ms = times[times.size() / 2];
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

// Builds candidates' programs ahead of their measurement on a CompilePool. The program
// cache (thread-safe, one build per program) hands the measuring thread the built
// program, or makes it wait for a build in flight. A quarter of the threads (at least
// one) may run speculative builds at once (compile_pool.hpp says why).
class Prefetcher {
 public:
  Prefetcher(Runtime& rt, int threads)
      : pool_(threads, threads / 4,
              [&rt](const Build& b) { rt.program_for(*b.point.algorithm, b.point.params, b.variant); }) {}

  // The workload whose problem the next builds serve (its input type picks the variant of
  // algorithms built per type); null: each algorithm's tuned_variant.
  void serve(const Workload* workload) { workload_ = workload; }

  // Queues builds of `points`; urgent ones (about to be measured) go first, in order.
  void prefetch(const std::vector<const Point*>& points, bool urgent = true) {
    if (!pool_.enabled()) return;
    for (const Point* p : points) {
      std::string variant = workload_ ? workload_->variant(*p->algorithm) : p->algorithm->tuned_variant;
      std::string key = p->algorithm->source_name + " " + p->algorithm->build_options(p->params) + variant;
      pool_.add({*p, std::move(variant)}, key, urgent);
    }
  }

  // A class is over: what it still wanted built waits as speculative builds, behind the
  // next class's urgent ones.
  void class_done() { pool_.demote(); }

 private:
  struct Build {
    Point point;
    std::string variant;
  };
  CompilePool<Build> pool_;
  const Workload* workload_ = nullptr;
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

// The most of a class's time (and of its --max-evals) the search leaves to the refinement
// around its best point (DeviceMeasure::out_of_budget).
constexpr double kRefinementShare = 0.2;

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
  };
  explicit DeviceMeasure(Setup s) : s_(std::move(s)), measuring_since_(Clock::now()) {
    best_.time_ms = std::numeric_limits<double>::infinity();
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
    return elapsed >= s_.budget_seconds - held;
  }
  // The best so far at each other value of its refined_last parameters, the points not
  // measured yet (AlgorithmSpec::refinements).
  std::vector<Point> refinement() const {
    std::vector<Point> around;
    const AlgorithmSpec* algorithm = best_.ok ? s_.family.find_algorithm(best_.algorithm) : nullptr;
    if (algorithm == nullptr) return around;
    for (Params& p : algorithm->refinements(best_.params, &s_.limits)) {
      Point point{algorithm, std::move(p)};
      if (seen_.count(point.key()) == 0) around.push_back(std::move(point));
    }
    return around;
  }
  // From here on the whole budget is open: what the search left, and what it held back.
  void start_refining() { refining_ = true; }
  // Measured even where the class's time is spent, but not after a stop or past
  // --max-evals (the refinement's first point).
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
      e = evaluate_candidate(s_.workload, choice, s_.options.repeats, best_.ok ? best_.time_ms : 0, hang);
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
  void will_evaluate(const std::vector<const Point*>& points) override {
    if (!out_of_budget()) s_.prefetcher.prefetch(points, true);
  }
  void might_evaluate(const std::vector<const Point*>& points) override {
    if (!out_of_budget()) s_.prefetcher.prefetch(points, false);
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
  Clock::time_point measuring_since_;  // its workload built: the pace of evaluations counts from here
  std::map<std::string, Evaluation> seen_;
  Evaluation best_;
};

int default_compile_threads(const DeviceInfo& device) {
  if (device.type == "cpu") return 0;  // the CPU both compiles and runs: keep timings clean
  const unsigned hw = std::thread::hardware_concurrency();
  return int(std::clamp<unsigned>(hw > 1 ? hw - 1 : 1, 1, 16));
}

}  // namespace

double class_share(double budget_seconds, double elapsed_seconds, int classes, int classes_left) {
  if (classes_left <= 0) return 0;
  const double floor = kMinClassShare * budget_seconds / double(classes);
  const double fair = std::max(0.0, budget_seconds - elapsed_seconds) / double(classes_left);
  // The floor may carry the run past the budget, by one floor at most in all.
  const double stretched = std::max(0.0, budget_seconds + floor - elapsed_seconds) / double(classes_left);
  return std::max(fair, std::min(floor, stretched));
}

std::string default_profile_path(const DeviceInfo& device) {
  const std::string dir = user_profile_dir();
  const std::string file = file_name_of(device.name) + ".yaml";
  return dir.empty() ? file : dir + "/" + file;
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

TuneResult tune(Runtime& rt, const TuneOptions& options) {
  const DeviceInfo& device = rt.device();
  const DeviceLimits limits = DeviceLimits::of(device);
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
  for (const FamilyTuning& f : families) {
    if (!options.default_classes || !kernel_selected(f.family->name)) continue;
    for (const ShapeClassSpec& c : f.family->classes)
      if (class_selected(c.name)) jobs.push_back({&f, c.name, std::nullopt});
  }
  for (const UserShape& shape : options.shapes)
    if (kernel_selected(shape.tuning->family->name) && class_selected(shape.shape_class))
      jobs.push_back({shape.tuning, shape.shape_class, shape.problem});
  if (jobs.empty())
    throw Error(ErrorCode::kInvalidArgument, "the selected kernels, classes and shapes leave nothing to tune");

  // Resume caches, one per kernel; a foreign one stops the run before any measuring.
  TuneResult result;
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

  ProfileSelection prior;
  if (options.warm_start) {
    try {
      prior = find_profiles(device, RuntimeOptions{});
    } catch (const std::exception&) {
      // An unreadable profile only costs the warm start.
    }
  }

  result.compile_threads = options.compile_threads >= 0 ? options.compile_threads : default_compile_threads(device);
  Prefetcher prefetcher(rt, result.compile_threads);
  result.profile.device = profile_device_of(device);
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
      if (tuning.searches && !tuning.searches(rt, jobs[ji].shape_class, algorithm)) continue;
      for (Params& p : algorithm.search_space(&limits, job_input_bits(jobs[ji].problem)))
        spaces[ji].push_back({&algorithm, std::move(p)});
    }
    search_rngs.emplace_back(options.seed * 0x9E3779B97F4A7C15ull + ji + 1);
  }
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    const KernelFamily& family = *jobs[ji].tuning->family;
    const BuiltinChoice builtin = family.builtin_for(jobs[ji].shape_class);
    const AlgorithmSpec* algorithm = family.find_algorithm(builtin.algorithm);
    const Point point{algorithm, algorithm->complete(builtin.params)};
    prefetcher.prefetch({&point}, false);
  }
  for (std::size_t ji = 0; ji < jobs.size(); ++ji)
    prefetcher.prefetch(opening_points(options.strategy, spaces[ji], search_rngs[ji], 24), false);

  // The best point of each problem tuned so far, by (kernel, class): with warm_start the
  // later problems of that class measure them first (a user's shapes of one class are
  // often won by the same point, and a share of the budget is short for a search).
  std::map<std::pair<std::string, std::string>, std::vector<Point>> run_bests;
  // The problems tuned so far: a user's shape that repeats one (the class's own problem,
  // say) is tuned once, so the profile gets one entry for it.
  std::set<std::tuple<std::string, std::string, std::map<std::string, std::int64_t>>> tuned_problems;
  std::unique_ptr<Workload> previous_workload;
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    if (options.stop != nullptr && options.stop->load()) {
      result.interrupted = true;
      break;
    }
    const KernelFamily& family = *jobs[ji].tuning->family;
    const std::string& shape_class = jobs[ji].shape_class;
    const auto class_start = Clock::now();
    const double class_budget =
        class_share(options.budget_seconds, seconds_since(start), int(jobs.size()), int(jobs.size() - ji));

    const std::vector<Point>& space = spaces[ji];

    ClassResult cr;
    cr.kernel = family.name;
    cr.shape_class = shape_class;
    cr.space_size = space.size();
    std::unique_ptr<Workload> workload = jobs[ji].problem ? jobs[ji].tuning->make_for(rt, *jobs[ji].problem, rng)
                                                          : jobs[ji].tuning->make(rt, shape_class, rng);
    previous_workload.reset();  // kept until now, so data it shares with this one is reused
    prefetcher.serve(workload.get());
    cr.problem = workload->problem();
    if (!tuned_problems.insert({family.name, shape_class, cr.problem}).second) {
      result.repeated.push_back(family.name + "/" + shape_class + " " + format_problem(cr.problem));
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
    DeviceMeasure measure(
        {rt, options, family.name, cr, *workload, cache_it == caches.end() ? nullptr : cache_it->second.get(),
         prefetcher, progress,
         "[" + std::to_string(ji + 1) + "/" + std::to_string(jobs.size()) + " " + family.name + "/" + shape_class + "]",
         class_budget, max_evals, class_start, family, limits});

    // The built-in default is always measured: it is the baseline of the speed-up, and
    // its time sets the hang limit of the others.
    const BuiltinChoice builtin = family.builtin_for(shape_class);
    const AlgorithmSpec* builtin_algorithm = family.find_algorithm(builtin.algorithm);
    const Point builtin_point{builtin_algorithm, builtin_algorithm->complete(builtin.params)};
    prefetcher.prefetch({&builtin_point});
    workload->timeout_seconds = options.timeout_seconds > 0 ? options.timeout_seconds : 60;
    if (const Evaluation* e = measure.evaluate(builtin_point, true)) cr.builtin = *e;
    if (options.timeout_seconds <= 0)
      workload->timeout_seconds = std::max(2.0, 100 * (cr.builtin.ok ? cr.builtin.time_ms * 1e-3 : 0.1));

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
    // Points from elsewhere take this problem's names for parameters of another input
    // width's path (AlgorithmSpec::at_input_bits), as the search space does.
    const int input_bits = job_input_bits(jobs[ji].problem);
    for (const Profile* profile : warm_from) {
      const ProfileEntry* entry = profile->find(family.name, shape_class, &cr.problem);
      const AlgorithmSpec* algorithm = entry ? family.find_algorithm(entry->algorithm) : nullptr;
      if (algorithm == nullptr || algorithm->violation(entry->params, &limits)) continue;
      warm.push_back({algorithm, algorithm->at_input_bits(entry->params, input_bits)});
    }
    if (options.warm_start)
      for (const Point& p : run_bests[{family.name, shape_class}])
        warm.push_back({p.algorithm, p.algorithm->at_input_bits(p.params, input_bits)});
    std::vector<const Point*> warm_hint;
    for (const Point& p : warm) warm_hint.push_back(&p);
    prefetcher.prefetch(warm_hint);
    for (const Point& p : warm) measure.evaluate(p);

    run_strategy(options.strategy, space, measure, search_rngs[ji]);
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
    measure.finish();
    prefetcher.class_done();
    cr.best = measure.best().ok ? measure.best() : cr.builtin;
    cr.seconds = seconds_since(class_start);
    if (cr.best.ok) {
      ProfileEntry entry;
      entry.kernel = family.name;
      entry.shape_class = shape_class;
      entry.algorithm = cr.best.algorithm;
      entry.params = cr.best.params;
      entry.problem = cr.problem;
      entry.time_ms = cr.best.time_ms;
      entry.gflops = cr.flops / cr.best.time_ms * 1e-6;
      entry.default_time_ms = cr.builtin.ok ? cr.builtin.time_ms : 0;
      entry.provenance.kind = "tuned";
      result.profile.entries.push_back(entry);
      const AlgorithmSpec* algorithm = family.find_algorithm(cr.best.algorithm);
      if (algorithm != nullptr) run_bests[{family.name, shape_class}].push_back({algorithm, cr.best.params});
    }
    result.classes.push_back(std::move(cr));
    previous_workload = std::move(workload);
    if (options.stop != nullptr && options.stop->load()) result.interrupted = true;
  }
  result.seconds = seconds_since(start);
  result.profile.tuning_seconds = result.seconds;
  result.profile.date = now_iso8601();
  return result;
}

void print_summary(std::ostream& out, const TuneResult& result) {
  std::size_t problem_width = 8;
  for (const ClassResult& c : result.classes)
    problem_width = std::max(problem_width, format_problem(c.problem).size() + 2);
  out << "\n"
      << std::left << std::setw(14) << "kernel" << std::setw(13) << "class" << std::setw(int(problem_width))
      << "problem" << std::right << std::setw(12) << "default ms" << std::setw(12) << "best ms" << std::setw(10)
      << "GFLOP/s" << std::setw(10) << "speed-up" << std::setw(8) << "evals" << std::setw(8) << "space" << std::setw(8)
      << "secs"
      << "  best choice\n";
  for (const ClassResult& c : result.classes) {
    out << std::left << std::setw(14) << c.kernel << std::setw(13) << c.shape_class << std::setw(int(problem_width))
        << format_problem(c.problem) << std::right << std::fixed << std::setprecision(3) << std::setw(12)
        << (c.builtin.ok ? c.builtin.time_ms : 0.0) << std::setw(12) << (c.best.ok ? c.best.time_ms : 0.0)
        << std::setprecision(1) << std::setw(10) << (c.best.ok ? c.flops / c.best.time_ms * 1e-6 : 0.0)
        << std::setprecision(2) << std::setw(9) << c.speedup() << "x" << std::setw(8) << c.evaluations << std::setw(8)
        << c.space_size << std::setprecision(0) << std::setw(8) << c.seconds << "  "
        << (c.best.ok ? c.best.algorithm + " " + format_params(c.best.params) : "none verified") << "\n";
  }
  for (const std::string& r : result.repeated) out << "tuned once: " << r << " (named again in the shapes)\n";
  int cached = 0;
  for (const ClassResult& c : result.classes) cached += c.cached;
  out << "tuned in " << std::fixed << std::setprecision(1) << result.seconds << " s";
  if (cached > 0) out << " (" << cached << " evaluations recalled from the resume cache)";
  out << "\n";
}

void print_summary_json(std::ostream& out, const TuneResult& result, const std::string& profile_path) {
  const ProfileDevice& d = result.profile.device;
  out << "{\n  \"device\": {\"name\": " << json_string(d.name) << ", \"vendor\": " << json_string(d.vendor)
      << ", \"driver\": " << json_string(d.driver) << ", \"platform\": " << json_string(d.platform) << "},\n"
      << "  \"profile\": " << json_string(profile_path) << ",\n  \"seconds\": " << std::setprecision(6)
      << result.seconds << ",\n  \"interrupted\": " << (result.interrupted ? "true" : "false")
      << ",\n  \"compile_threads\": " << result.compile_threads << ",\n  \"caches\": [";
  for (std::size_t i = 0; i < result.caches.size(); ++i) out << (i ? ", " : "") << json_string(result.caches[i]);
  out << "],\n  \"classes\": [";
  for (std::size_t i = 0; i < result.classes.size(); ++i) {
    const ClassResult& c = result.classes[i];
    out << (i ? "," : "") << "\n    {\"kernel\": " << json_string(c.kernel)
        << ", \"class\": " << json_string(c.shape_class) << ", \"problem\": " << json_problem(c.problem)
        << ", \"space_size\": " << c.space_size << ", \"evaluations\": " << c.evaluations
        << ", \"rejected\": " << c.rejected << ", \"cached\": " << c.cached << ", \"seconds\": " << std::setprecision(6)
        << c.seconds << ", \"speedup\": " << c.speedup() << ",\n     \"default\": " << json_choice(c.builtin)
        << ",\n     \"best\": " << json_choice(c.best) << "}";
  }
  out << "\n  ],\n  \"tuned_once\": [";
  for (std::size_t i = 0; i < result.repeated.size(); ++i) out << (i ? ", " : "") << json_string(result.repeated[i]);
  out << "]\n}\n";
}

}  // namespace ocltk::tuner

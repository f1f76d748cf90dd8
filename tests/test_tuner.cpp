// The tuner's search and bookkeeping: strategies on recorded spaces (the 5% / 15% claim
// on the spaces recorded in tests/data/spaces/), determinism, budgets, bad-candidate handling,
// resume after an interrupted run, refusal of a foreign cache, the report files.
// A mock family stands in for kernels where the behaviour under test is the tuner's
// (an injected build failure, wrong result, hang); no OpenCL program is built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compile_pool.hpp"
#include "ocltk/ocltk.hpp"
#include "record.hpp"
#include "replay.hpp"
#include "search.hpp"
#include "tuner.hpp"

namespace fs = std::filesystem;
using namespace ocltk;
using namespace ocltk::tuner;

namespace {

// ---- strategies on synthetic spaces ----------------------------------------------------

// A deterministic landscape over two algorithms: a smooth bowl with noise-like ripples.
struct Landscape {
  std::deque<AlgorithmSpec> algorithms;
  std::vector<Point> points;
  std::map<std::string, Evaluation> evals;
  double optimum = 1e30;
};

Landscape make_landscape(std::uint64_t seed) {
  Landscape l;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ripple(0.9, 1.1);
  for (const std::string name : {"alpha", "beta"}) {
    AlgorithmSpec a;
    a.name = name;
    a.params = {{"P", 1, {1, 2, 4, 8, 16, 32}, ""}, {"Q", 1, {1, 2, 4, 8}, ""}, {"R", 0, {0, 1, 2}, ""}};
    l.algorithms.push_back(a);
  }
  for (const AlgorithmSpec& a : l.algorithms) {
    const double base = a.name == "alpha" ? 1.0 : 1.3;
    const double p0 = a.name == "alpha" ? 3 : 1, q0 = a.name == "alpha" ? 1 : 2;
    for (int pi = 0; pi < 6; ++pi)
      for (int qi = 0; qi < 4; ++qi)
        for (int r = 0; r < 3; ++r) {
          Point p{&a, {{"P", a.params[0].allowed[pi]}, {"Q", a.params[1].allowed[qi]}, {"R", r}}};
          Evaluation e{a.name, p.params, true, "", 0, false};
          e.time_ms = base * (1 + 0.3 * (pi - p0) * (pi - p0) + 0.5 * (qi - q0) * (qi - q0) + 0.2 * r) * ripple(rng);
          if (pi == 5 && qi == 3) {
            e.ok = false;
            e.rejected = "build failed: injected";
          }
          if (e.ok) l.optimum = std::min(l.optimum, e.time_ms);
          l.evals[p.key()] = e;
          l.points.push_back(p);
        }
  }
  return l;
}

class LookupMeasure : public Measure {
 public:
  LookupMeasure(const Landscape& l, std::int64_t max_evals) : l_(l), max_(max_evals) {}
  bool out_of_budget() const override { return std::int64_t(order.size()) >= max_; }
  const Evaluation* evaluate(const Point& p) override {
    const std::string key = p.key();
    const Evaluation* e = &l_.evals.at(key);
    if (std::find(order.begin(), order.end(), key) != order.end()) return e;
    if (out_of_budget()) return nullptr;
    order.push_back(key);
    if (e->ok) best = std::min(best, e->time_ms);
    return e;
  }
  std::vector<std::string> order;
  double best = 1e30;

 private:
  const Landscape& l_;
  std::int64_t max_;
};

const Strategy kAll[] = {Strategy::kGuided, Strategy::kLocal, Strategy::kRandom, Strategy::kExhaustive};

TEST(Strategies, SameSeedSameSequenceAndBudgetHeld) {
  const Landscape l = make_landscape(7);
  for (Strategy s : kAll) {
    std::vector<std::string> first;
    for (int run = 0; run < 2; ++run) {
      LookupMeasure m(l, 20);
      std::mt19937_64 rng(42);
      run_strategy(s, l.points, m, rng);
      EXPECT_EQ(m.order.size(), 20u) << to_string(s);
      EXPECT_EQ(std::set<std::string>(m.order.begin(), m.order.end()).size(), m.order.size())
          << to_string(s) << " measured a point twice";
      if (run == 0) {
        first = m.order;
      } else {
        EXPECT_EQ(m.order, first) << to_string(s) << " is not deterministic for a seed";
      }
    }
  }
}

TEST(Strategies, ExhaustiveCoversTheSpaceAndOtherSeedsDiffer) {
  const Landscape l = make_landscape(3);
  LookupMeasure all(l, 1 << 20);
  std::mt19937_64 rng(1);
  run_strategy(Strategy::kExhaustive, l.points, all, rng);
  EXPECT_EQ(all.order.size(), l.points.size());
  EXPECT_DOUBLE_EQ(all.best, l.optimum);
  LookupMeasure a(l, 15), b(l, 15);
  std::mt19937_64 r1(1), r2(2);
  run_strategy(Strategy::kRandom, l.points, a, r1);
  run_strategy(Strategy::kRandom, l.points, b, r2);
  EXPECT_NE(a.order, b.order);
}

// What a strategy hints to the compile pool: an ordered strategy keeps a full window of
// points ahead of the one it measures (not blocks that drain); guided, beyond each batch
// it is about to measure, hints its model's next-best points as speculative builds.
class HintMeasure : public LookupMeasure {
 public:
  using LookupMeasure::LookupMeasure;
  const Evaluation* evaluate(const Point& p) override {
    std::size_t ahead = 0;
    for (const std::string& k : urgent)
      if (std::find(order.begin(), order.end(), k) == order.end() && k != p.key()) ++ahead;
    min_ahead = std::min(min_ahead, ahead);
    return LookupMeasure::evaluate(p);
  }
  void will_evaluate(const std::vector<const Point*>& points) override {
    for (const Point* p : points) urgent.insert(p->key());
  }
  void might_evaluate(const std::vector<const Point*>& points) override {
    for (const Point* p : points) {
      if (std::find(order.begin(), order.end(), p->key()) != order.end()) measured_speculative = true;
      speculative.insert(p->key());
    }
  }
  std::set<std::string> urgent, speculative;
  std::size_t min_ahead = 1 << 20;
  bool measured_speculative = false;
};

TEST(Strategies, CompileHintsRunAheadOfTheMeasurements) {
  const Landscape l = make_landscape(5);  // 144 points
  HintMeasure ordered(l, 100);
  std::mt19937_64 rng(3);
  run_strategy(Strategy::kExhaustive, l.points, ordered, rng);
  ASSERT_EQ(ordered.order.size(), 100u);
  EXPECT_GE(ordered.min_ahead, 31u) << "the window of hinted, unmeasured points ran dry";

  HintMeasure guided(l, 40);
  std::mt19937_64 rng2(3);
  run_strategy(Strategy::kGuided, l.points, guided, rng2);
  EXPECT_GE(guided.speculative.size(), 12u);
  EXPECT_FALSE(guided.measured_speculative) << "a speculative hint named a point already measured";
  std::size_t used = 0;
  for (const std::string& k : guided.order) used += guided.speculative.count(k);
  EXPECT_GT(used, 0u) << "no speculative build was ever measured";
}

// What tune compiles ahead for a class (its strategy's opening, known before any
// measurement) is what the strategy then asks for first.
TEST(Strategies, OpeningPointsAreTheFirstOnesEvaluated) {
  const Landscape l = make_landscape(9);
  for (Strategy s : kAll) {
    std::mt19937_64 rng(17);
    const std::vector<const Point*> opening = opening_points(s, l.points, rng, 24);
    LookupMeasure m(l, 60);
    run_strategy(s, l.points, m, rng);
    ASSERT_GE(opening.size(), 8u) << to_string(s);
    ASSERT_GE(m.order.size(), opening.size()) << to_string(s);
    for (std::size_t i = 0; i < opening.size(); ++i)
      EXPECT_EQ(opening[i]->key(), m.order[i]) << to_string(s) << " point " << i;
  }
}

TEST(Strategies, GuidedFindsTheBowlFloorWithFewEvaluations) {
  // 144 points; 15% = 21 evaluations; median over 20 seeds within 5% of the optimum.
  const Landscape l = make_landscape(11);
  std::vector<double> gaps;
  for (int seed = 0; seed < 20; ++seed) {
    LookupMeasure m(l, std::int64_t(0.15 * double(l.points.size())));
    std::mt19937_64 rng{std::uint64_t(seed)};
    run_strategy(Strategy::kGuided, l.points, m, rng);
    gaps.push_back(m.best / l.optimum - 1);
  }
  std::sort(gaps.begin(), gaps.end());
  EXPECT_LE(gaps[gaps.size() / 2], 0.05);
}

TEST(Strategies, ParseAndName) {
  for (Strategy s : kAll) EXPECT_EQ(parse_strategy(to_string(s)), s);
  EXPECT_FALSE(parse_strategy("annealing").has_value());
}

// ---- the claim on the recorded spaces in tests/data/spaces/ -----------------------------

std::vector<std::string> shipped_recordings() {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(OCLTK_SPACES_DIR))
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(RecordedSpaces, GuidedWithin5PercentUsingAtMost15PercentOfTheEvaluations) {
  const std::vector<std::string> files = shipped_recordings();
  ASSERT_FALSE(files.empty()) << "no tests/data/spaces/*.jsonl recordings";
  ReplayOptions options;
  options.strategies = {Strategy::kGuided, Strategy::kRandom};
  options.max_evals_fraction = 0.15;
  options.seeds = 20;
  for (const std::string& file : files) {
    const Recording rec = read_recording(file);
    for (const ReplayClassResult& r : replay(rec, options)) {
      SCOPED_TRACE(file + ": " + r.kernel + "/" + r.shape_class);
      if (r.space_size < 50) {  // a class the recording's time budget cut short
        std::cout << file << " " << r.kernel << "/" << r.shape_class << ": only " << r.space_size
                  << " points recorded; too few to judge a strategy, skipped\n";
        continue;
      }
      EXPECT_LE(double(r.max_evals), 0.15 * double(r.space_size));
      EXPECT_LE(r.strategies[0].median_gap, 0.05) << "guided median gap " << r.strategies[0].median_gap;
      // Printed for the record: random sampling with the same budget.
      std::cout << file << " " << r.kernel << "/" << r.shape_class << ": space " << r.space_size << ", " << r.max_evals
                << " evals, guided median gap " << r.strategies[0].median_gap * 100
                << "% (within 5%: " << r.strategies[0].within << "/20), random " << r.strategies[1].median_gap * 100
                << "% (" << r.strategies[1].within << "/20)\n";
    }
  }
}

// A recording keeps the points of algorithms a kernel has since dropped (its format does not
// change); a replay leaves them out, so its optimum is the best a tune could find today.
TEST(Recording, ReplayLeavesOutPointsOfRemovedAlgorithms) {
  const fs::path dir = fs::temp_directory_path() / ("ocltk-removed-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "old.jsonl").string();
  std::ofstream out(path);
  out << "{\"record\": 1, \"ocltk\": \"x\", \"device\": \"D\", \"vendor\": \"V\", \"driver\": \"1\"}\n";
  const std::string head = "{\"kernel\": \"nf4_forward\", \"class\": \"decode\", \"problem\": {\"rows\": 32}, ";
  // The removed algorithm holds the fastest point; stream's best is 2.0 ms.
  for (int i = 0; i < 3; ++i)
    out << head << "\"choice\": {\"algorithm\": \"lanes\", \"params\": {\"WGS\": " << (32 << i)
        << "}, \"ok\": true, \"time_ms\": " << 0.5 + i << "}}\n";
  for (int tr : {1, 2, 4, 8})
    out << head << "\"choice\": {\"algorithm\": \"stream\", \"params\": {\"RL\": 2, \"TR\": " << tr
        << ", \"UNROLL\": 1, \"WGS\": 128}, \"ok\": true, \"time_ms\": " << 2.0 + tr << "}}\n";
  out.close();
  ReplayOptions options;
  options.strategies = {Strategy::kRandom};
  options.seeds = 2;
  options.max_evals = 4;
  const std::vector<ReplayClassResult> results = replay(read_recording(path), options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].space_size, 4u);
  EXPECT_EQ(results[0].dropped, 3u);
  EXPECT_DOUBLE_EQ(results[0].optimum_ms, 3.0);
  EXPECT_EQ(results[0].optimum.rfind("stream ", 0), 0u) << results[0].optimum;
  EXPECT_EQ(results[0].strategies.at(0).median_gap, 0.0) << "every stream point evaluated";
  std::ostringstream text;
  print_replay(text, results, options);
  EXPECT_NE(text.str().find("nf4_forward/decode: 3 recorded points of algorithms this ocltk no longer has"),
            std::string::npos)
      << text.str();
  fs::remove_all(dir);
}

// The resume cache is keyed on this hash: whatever changes the programs the tuner measures
// must change it, the variant it builds with included.
TEST(Recording, SearchSpaceHashFollowsWhatIsBuilt) {
  DeviceLimits limits;
  limits.gpu = true;
  limits.tensor_mma = true;
  limits.max_work_group_size = 1024;
  limits.local_mem_bytes = 48 * 1024;
  const KernelFamily& forward = nf4_forward_family();
  const std::uint64_t base = search_space_hash(forward, limits);
  EXPECT_EQ(search_space_hash(forward, limits), base);
  KernelFamily other = forward;
  for (AlgorithmSpec& a : other.algorithms)
    if (a.name == "tc") a.tuned_variant += " -DTC_ADDR=0";
  EXPECT_NE(search_space_hash(other, limits), base) << "tuned_variant";
  other = forward;
  other.algorithms.back().params.front().allowed.pop_back();
  EXPECT_NE(search_space_hash(other, limits), base) << "a parameter's values";
  limits.tensor_mma = false;  // tc leaves the search
  EXPECT_NE(search_space_hash(forward, limits), base) << "the device's limits";
}

TEST(Recording, MalformedLinesAreNamedWithTheirLine) {
  const fs::path dir = fs::temp_directory_path() / ("ocltk-rec-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "bad.jsonl").string();
  std::ofstream(path) << "{\"record\": 1, \"ocltk\": \"x\", \"device\": \"D\", \"vendor\": \"V\", \"driver\": \"1\"}\n"
                      << "{\"kernel\": \"gemm_nt\", \"class\": \"gemv\", \"problem\": {\"m\": 1}, \"choice\": "
                         "{\"algorithm\": \"reduce\", \"params\": {\"WGS\": 64}, \"ok\": true, \"time_ms\": 1}}\n"
                      << "{\"kernel\": \"gemm_nt\", \"class\": \"gemv\"}\n";
  try {
    read_recording(path);
    FAIL() << "accepted a line without a choice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:3:"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "{\"kernel\": \"gemm_nt\"}\n";
  EXPECT_THROW(read_recording(path), Error);  // no header
  fs::remove_all(dir);
}

// ---- the compile pool ------------------------------------------------------------------

// A gate a fake build waits at until the test opens it, and a log of what was built,
// both waited on with a generous timeout so a loaded machine cannot make the tests flaky.
struct BuildLog {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::vector<int> started, finished;
  int running_speculative = 0, most_speculative = 0;

  // Waits until pred() holds (under the lock), at most 10 s.
  template <typename Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::seconds(10), pred);
  }
  void open_gate() {
    {
      std::lock_guard<std::mutex> lock(m);
      open = true;
    }
    cv.notify_all();
  }
};

// Opens the gate when a test leaves its scope early (a failed ASSERT), before the pool's
// destructor waits for its threads.
struct OpenGateOnExit {
  BuildLog& log;
  ~OpenGateOnExit() { log.open_gate(); }
};

// A pool's build function that logs each job's start and finish and holds job 0 until the
// gate opens (with one thread, every later job waits for it in the queue).
std::function<void(const int&)> holding_job_0(BuildLog& log) {
  return [&log](const int& job) {
    std::unique_lock<std::mutex> lock(log.m);
    log.started.push_back(job);
    log.cv.notify_all();
    if (job == 0) log.cv.wait(lock, [&] { return log.open; });
    log.finished.push_back(job);
    log.cv.notify_all();
  };
}

// Speculative builds never take more than their share of the threads: with one allowed
// and four threads, an urgent build queued behind six speculative ones starts while the
// first speculative build is still running; every distinct job is built once.
TEST(CompilePoolTest, SpeculativeBuildsLeaveThreadsForUrgentOnes) {
  BuildLog log;
  {
    CompilePool<int> pool(4, 1, [&](const int& job) {
      const bool speculative = job >= 100;
      std::unique_lock<std::mutex> lock(log.m);
      log.started.push_back(job);
      if (speculative) log.most_speculative = std::max(log.most_speculative, ++log.running_speculative);
      log.cv.notify_all();
      if (speculative) log.cv.wait(lock, [&] { return log.open; });
      if (speculative) --log.running_speculative;
      log.finished.push_back(job);
      log.cv.notify_all();
    });
    OpenGateOnExit guard{log};
    for (int j = 100; j < 106; ++j) pool.add(j, "s" + std::to_string(j), false);
    pool.add(100, "s100", false);  // the same program again: not built twice
    ASSERT_TRUE(log.wait([&] { return !log.started.empty(); }));
    pool.add(1, "u1", true);
    // The urgent build runs to its end while the gate still holds the speculative one.
    ASSERT_TRUE(log.wait([&] { return std::count(log.finished.begin(), log.finished.end(), 1) == 1; }));
    {
      std::lock_guard<std::mutex> lock(log.m);
      EXPECT_EQ(log.started.size(), 2u);  // one speculative build, then the urgent one
    }
    log.open_gate();
    ASSERT_TRUE(log.wait([&] { return log.finished.size() == 7; }));
  }
  EXPECT_EQ(log.most_speculative, 1);
  std::sort(log.finished.begin(), log.finished.end());
  EXPECT_EQ(std::adjacent_find(log.finished.begin(), log.finished.end()), log.finished.end());
}

// A speculative job that becomes urgent moves ahead of the speculative ones queued
// before it.
TEST(CompilePoolTest, AQueuedSpeculativeJobThatBecomesUrgentMovesUp) {
  BuildLog log;
  {
    CompilePool<int> pool(1, 1, holding_job_0(log));
    OpenGateOnExit guard{log};
    pool.add(0, "j0", false);
    ASSERT_TRUE(log.wait([&] { return !log.started.empty(); }));
    for (int j = 1; j <= 5; ++j) pool.add(j, "j" + std::to_string(j), false);
    pool.add(4, "j4", true);
    log.open_gate();
    ASSERT_TRUE(log.wait([&] { return log.finished.size() == 6; }));
  }
  EXPECT_EQ(log.finished, (std::vector<int>{0, 4, 1, 2, 3, 5}));
}

// After demote(), the urgent jobs a finished class left queued wait behind the next
// class's urgent ones.
TEST(CompilePoolTest, DemotedUrgentJobsWaitBehindNewUrgentOnes) {
  BuildLog log;
  {
    CompilePool<int> pool(1, 1, holding_job_0(log));
    OpenGateOnExit guard{log};
    pool.add(0, "j0", true);
    ASSERT_TRUE(log.wait([&] { return !log.started.empty(); }));
    for (int j = 1; j <= 3; ++j) pool.add(j, "j" + std::to_string(j), true);  // the finished class's
    pool.demote();
    pool.add(4, "j4", true);  // the next class's
    pool.add(2, "j2", true);  // wanted again: urgent once more
    log.open_gate();
    ASSERT_TRUE(log.wait([&] { return log.finished.size() == 5; }));
  }
  EXPECT_EQ(log.started, (std::vector<int>{0, 4, 2, 1, 3}));
}

// Rewriting a profile keeps the entries this run did not tune, and drops those it did, also
// where the old entry says input_bits 32 and the new one (the tuner's, f32) none.
TEST(KeepUntunedEntries, KeepsOtherProblemsAndDropsTunedOnes) {
  const auto entry = [](const std::string& cls, std::map<std::string, std::int64_t> problem, const char* algorithm) {
    ProfileEntry e;
    e.kernel = "nf4_forward";
    e.shape_class = cls;
    e.algorithm = algorithm;
    e.problem = std::move(problem);
    return e;
  };
  Profile existing, tuned;
  existing.device.name = tuned.device.name = "dev";
  existing.entries = {entry("decode", {{"rows", 8}, {"input_bits", 32}}, "stream"),
                      entry("decode", {{"rows", 8}, {"input_bits", 16}}, "tc"), entry("decode", {{"rows", 64}}, "tc"),
                      entry("prefill", {{"rows", 4096}}, "tiled")};
  tuned.entries = {entry("decode", {{"rows", 8}}, "warps"), entry("decode", {{"rows", 64}, {"input_bits", 32}}, "tc")};
  EXPECT_EQ(keep_untuned_entries(existing, tuned), 2u);
  ASSERT_EQ(tuned.entries.size(), 4u);
  EXPECT_EQ(tuned.entries[2].algorithm, "tc");
  EXPECT_EQ(tuned.entries[2].problem.at("input_bits"), 16) << "the 16-bit entry is another problem: kept";
  EXPECT_EQ(tuned.entries[3].shape_class, "prefill");
  // Another device's profile keeps nothing.
  Profile other = existing;
  other.device.name = "other";
  Profile fresh;
  fresh.device.name = "dev";
  EXPECT_EQ(keep_untuned_entries(other, fresh), 0u);
  // A routed entry written before entries named max_rows is replaced by its re-tune, which
  // names it; one whose max_rows differs, or an even entry at the same rows, is not.
  Profile routed_old, routed_new;
  routed_old.device.name = routed_new.device.name = "dev";
  routed_old.entries = {entry("decode", {{"rows", 32}, {"experts", 8}, {"active", 8}}, "tc"),
                        entry("decode", {{"rows", 16}, {"experts", 8}, {"active", 7}, {"max_rows", 5}}, "tc"),
                        entry("decode", {{"rows", 32}, {"experts", 8}}, "tc")};
  routed_new.entries = {entry("decode", {{"rows", 32}, {"experts", 8}, {"active", 8}, {"max_rows", 7}}, "warps"),
                        entry("decode", {{"rows", 16}, {"experts", 8}, {"active", 7}, {"max_rows", 4}}, "warps")};
  EXPECT_EQ(keep_untuned_entries(routed_old, routed_new), 2u);
  ASSERT_EQ(routed_new.entries.size(), 4u);
  EXPECT_EQ(routed_new.entries[2].problem.at("max_rows"), 5);
  EXPECT_EQ(routed_new.entries[3].problem.count("active"), 0u);
}

TEST(ClassShareTest, EvenSplitOfWhatIsLeftWithABoundedFloor) {
  // 100 s over 4 classes: on time, each gets 25 s.
  EXPECT_DOUBLE_EQ(class_share(100, 0, 4, 4), 25);
  EXPECT_DOUBLE_EQ(class_share(100, 25, 4, 3), 25);
  // A class ran 20 s long: the three left share the rest.
  EXPECT_DOUBLE_EQ(class_share(100, 45, 4, 3), 55.0 / 3);
  // Nearly spent: the last class still gets the floor, half an even share (12.5 s)...
  EXPECT_DOUBLE_EQ(class_share(100, 99, 4, 1), kMinClassShare * 25);
  // ...but the floors together carry the run at most one floor past the budget.
  EXPECT_DOUBLE_EQ(class_share(100, 95, 4, 2), (112.5 - 95) / 2);
  EXPECT_DOUBLE_EQ(class_share(100, 105, 4, 1), 7.5);
  EXPECT_DOUBLE_EQ(class_share(100, 140, 4, 1), 0);
  EXPECT_DOUBLE_EQ(class_share(100, 0, 4, 0), 0);
}

// ---- the tuner engine with a mock family ---------------------------------------------

struct MockState {
  int measurements = 0;               // candidates measured (poison() opens each measurement)
  std::atomic<bool>* stop = nullptr;  // set during measurement number stop_after
  int stop_after = -1;
};

AlgorithmSpec mock_algorithm() {
  AlgorithmSpec a;
  a.name = "mock";
  a.source_name = "mock.cl";  // not embedded: the compile pool's prefetch fails quietly
  a.params = {{"X", 1, {1, 2, 3, 4, 5, 6, 7, 8}, "x"}, {"Y", 1, {1, 2, 3, 4}, "y"}};
  a.local_size = [](const Params&) -> std::array<std::size_t, 2> { return {1, 1}; };
  return a;
}

const KernelFamily& mock_family() {
  static const KernelFamily f = [] {
    KernelFamily k;
    k.name = "mock";
    k.algorithms = {mock_algorithm()};
    k.classes = {{"c1", "everything"}};
    k.builtin = {{"mock", {}}};
    return k;
  }();
  return f;
}

// A family whose algorithm also has Z, refined around the best (ParamSpec::refined_last).
const KernelFamily& mock_refined_family() {
  static const KernelFamily f = [] {
    KernelFamily k;
    k.name = "mock_refined";
    AlgorithmSpec a = mock_algorithm();
    a.params.push_back({"Z", 0, {0, 1, 2}, "z", /*refined_last=*/true});
    k.algorithms = {a};
    k.classes = {{"c1", "everything"}};
    k.builtin = {{"mock", {}}};
    return k;
  }();
  return f;
}

// A family whose algorithm also has W, read only for 32-bit input (ParamSpec::only_input_bits).
const KernelFamily& mock_wide_family() {
  static const KernelFamily f = [] {
    KernelFamily k;
    k.name = "mock_wide";
    AlgorithmSpec a = mock_algorithm();
    ParamSpec w{"W", 0, {0, 1}, "w"};
    w.only_input_bits = 32;
    a.params.push_back(w);
    k.algorithms = {a};
    k.classes = {{"c1", "everything"}};
    k.builtin = {{"mock", {}}};
    return k;
  }();
  return f;
}

// Time (X-6)² + (Y-3)² + 1 ms (problems of another n: (X - n/10)² + ...), less 0.5 ms at
// Z = 2 (only the refined family has Z) and 0.25 ms at W = 1 (only the wide family has W);
// X = 3 fails to build, (5, 2) computes a wrong result, (7, 4) hangs.
class MockWorkload : public Workload {
 public:
  // run_ms: how long each run() sleeps (0: returns at once); n: the problem's one size;
  // input_bits: the problem's input width where not 0 (it changes no time).
  explicit MockWorkload(MockState& s, int run_ms = 0, std::int64_t n = 10, std::int64_t input_bits = 0)
      : s_(s), run_ms_(run_ms), n_(n), input_bits_(input_bits) {}
  std::map<std::string, std::int64_t> problem() const override {
    std::map<std::string, std::int64_t> p = {{"n", n_}};
    if (input_bits_ != 0) p["input_bits"] = input_bits_;
    return p;
  }
  double flops() const override { return 1e6; }
  double min_bytes() const override { return 0; }
  void poison() override {
    wrong_ = false;
    ++s_.measurements;
    if (s_.stop != nullptr && s_.measurements == s_.stop_after) s_.stop->store(true);
  }
  double run(const Choice& c) override {
    const int x = c.params.at("X"), y = c.params.at("Y");
    if (x == 3) throw BuildError("injected build failure", "log: error: injected", -11);
    if (x == 7 && y == 4) throw CandidateHang("hang or far too slow: still running after 0.01 s");
    wrong_ = x == 5 && y == 2;
    if (run_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(run_ms_));
    const int xo = n_ == 10 ? 6 : int(n_ / 10);  // other problems (make_for) have their optimum elsewhere
    const bool z2 = c.params.count("Z") != 0 && c.params.at("Z") == 2;
    const bool w1 = c.params.count("W") != 0 && c.params.at("W") == 1;
    return (x - xo) * (x - xo) + (y - 3) * (y - 3) + 1.0 - (z2 ? 0.5 : 0.0) - (w1 ? 0.25 : 0.0);
  }
  std::string verify() override { return wrong_ ? "wrong result: injected" : ""; }

 private:
  MockState& s_;
  int run_ms_;
  std::int64_t n_;
  std::int64_t input_bits_;
  bool wrong_ = false;
};

class TunerEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    opened_ = new Result<Runtime>(Runtime::open(RuntimeOptions{}));
    ASSERT_TRUE(opened_->ok()) << opened_->status().message();
    rt_ = &opened_->value();
  }
  static void TearDownTestSuite() { delete opened_; }
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ocltk-tuner-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    FamilyTuning mock;
    mock.family = &mock_family();
    mock.make = [this](Runtime&, const std::string&, std::mt19937_64&) {
      return std::unique_ptr<Workload>(new MockWorkload(state_));
    };
    mock.make_for = [this](Runtime&, const Problem& problem, std::mt19937_64&) {
      const auto bits = problem.find("input_bits");
      return std::unique_ptr<Workload>(
          new MockWorkload(state_, 0, problem.at("n"), bits == problem.end() ? 0 : bits->second));
    };
    families_ = {mock};
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A run of mock_refined_family alone, with a budget of `budget_seconds` (and `max_evals`)
  // and no cache, each measurement taking `run_ms`: the one class's history.
  std::vector<Evaluation> refined_history(int run_ms, double budget_seconds, std::int64_t max_evals = 0) {
    FamilyTuning refined = families_[0];
    refined.family = &mock_refined_family();
    refined.make = [this, run_ms](Runtime&, const std::string&, std::mt19937_64&) {
      return std::unique_ptr<Workload>(new MockWorkload(state_, run_ms));
    };
    families_ = {refined};
    TuneOptions o = options(max_evals);
    o.budget_seconds = budget_seconds;
    o.cache_dir = "-";
    const TuneResult r = tune(*rt_, o);
    EXPECT_EQ(r.classes.size(), 1u);
    return r.classes.empty() ? std::vector<Evaluation>() : r.classes[0].history;
  }
  TuneOptions options(std::int64_t max_evals) {
    TuneOptions o;
    o.families = &families_;
    o.max_evals = max_evals;
    o.budget_seconds = 60;
    o.warm_start = false;
    o.cache_dir = (dir_ / "cache").string();
    o.compile_threads = 0;
    o.strategy = Strategy::kExhaustive;
    return o;
  }

  static Result<Runtime>* opened_;
  static Runtime* rt_;
  fs::path dir_;
  MockState state_;
  std::vector<FamilyTuning> families_;
};
Result<Runtime>* TunerEngine::opened_ = nullptr;
Runtime* TunerEngine::rt_ = nullptr;

TEST_F(TunerEngine, BadCandidatesAreRecordedWithTheirReasonAndSkipped) {
  std::ostringstream record;
  TuneOptions o = options(0);
  o.record = &record;
  const TuneResult r = tune(*rt_, o);
  ASSERT_EQ(r.classes.size(), 1u);
  const ClassResult& c = r.classes[0];
  EXPECT_EQ(c.space_size, 32u);
  EXPECT_EQ(c.evaluations, 32);  // the built-in default (1, 1) is in the space: measured once
  EXPECT_EQ(c.rejected, 4 + 1 + 1);
  EXPECT_TRUE(c.best.ok);
  EXPECT_EQ(c.best.params.at("X"), 6);
  EXPECT_EQ(c.best.params.at("Y"), 3);
  const std::string text = record.str();
  EXPECT_NE(text.find("build failed: injected build failure"), std::string::npos);
  EXPECT_NE(text.find("wrong result: injected"), std::string::npos);
  EXPECT_NE(text.find("hang or far too slow: still running"), std::string::npos);
  ASSERT_EQ(r.profile.entries.size(), 1u);
  EXPECT_EQ(r.profile.entries[0].params.at("X"), 6);
}

// Several problems of one class (a user's shapes): each later one measures the best points
// of the earlier ones right after its built-in default, unless the run is cold.
TEST_F(TunerEngine, LaterProblemsOfAClassStartFromTheEarlierOnesBest) {
  for (const bool warm : {false, true}) {
    SCOPED_TRACE(warm ? "warm" : "cold");
    TuneOptions o = options(4);
    o.warm_start = warm;
    o.cache_dir = "-";  // each problem measures its own points
    o.default_classes = false;
    for (std::int64_t n : {20, 40, 80}) o.shapes.push_back({&families_[0], "c1", {{"n", n}}, "test"});
    const TuneResult r = tune(*rt_, o);
    ASSERT_EQ(r.classes.size(), 3u);
    const auto measured = [&](const ClassResult& c, const Params& p) {
      return std::any_of(c.history.begin(), c.history.end(), [&](const Evaluation& h) { return h.params == p; });
    };
    if (warm) {
      for (std::size_t later = 1; later < r.classes.size(); ++later) {
        // The distinct earlier bests, in order, come right after the built-in default.
        std::vector<Params> bests;
        for (std::size_t earlier = 0; earlier < later; ++earlier) {
          const Evaluation& best = r.classes[earlier].best;
          ASSERT_TRUE(best.ok);
          if (std::find(bests.begin(), bests.end(), best.params) == bests.end()) bests.push_back(best.params);
        }
        // Each problem has its own optimum: the last one carries two different points.
        EXPECT_EQ(bests.size(), later) << "the earlier problems found the same point: a weaker check";
        const std::vector<Evaluation>& h = r.classes[later].history;
        ASSERT_GE(h.size(), 1 + bests.size());
        for (std::size_t i = 0; i < bests.size(); ++i)
          EXPECT_EQ(h[1 + i].params, bests[i]) << "problem " << later << ", evaluation " << 1 + i;
      }
    } else {
      // The seed's exhaustive orders give each problem other points: without the warm start
      // a later problem measures an earlier best only by chance.
      EXPECT_FALSE(measured(r.classes[1], r.classes[0].best.params) && measured(r.classes[2], r.classes[1].best.params))
          << "the cold run measures the earlier bests anyway: the warm case proves nothing";
    }
  }
}

// A parameter read only for 32-bit input is searched at its default for a 16-bit problem,
// and the best of an earlier 32-bit problem reaches it under that name (warm start), so
// the 16-bit problem never measures its program under another name.
TEST_F(TunerEngine, AParameterOfAnotherInputWidthStaysAtItsDefault) {
  families_[0].family = &mock_wide_family();
  TuneOptions o = options(0);
  o.warm_start = true;
  o.cache_dir = "-";
  o.default_classes = false;
  o.shapes.push_back({&families_[0], "c1", {{"n", 10}}, "test"});
  o.shapes.push_back({&families_[0], "c1", {{"n", 10}, {"input_bits", 16}}, "test"});
  const TuneResult r = tune(*rt_, o);
  ASSERT_EQ(r.classes.size(), 2u);
  ASSERT_TRUE(r.classes[0].best.ok);
  EXPECT_EQ(r.classes[0].best.params.at("W"), 1) << "the 32-bit problem's best must use W for the check to hold";
  EXPECT_EQ(r.classes[1].space_size * 2, r.classes[0].space_size);
  for (const Evaluation& e : r.classes[1].history) EXPECT_EQ(e.params.at("W"), 0) << ocltk::format_params(e.params);
  ASSERT_TRUE(r.classes[1].best.ok);
  EXPECT_EQ(r.classes[1].best.params.at("X"), r.classes[0].best.params.at("X"));
  EXPECT_EQ(r.classes[1].best.params.at("Y"), r.classes[0].best.params.at("Y"));
}

// The fastest verified evaluation among the first `count` of `history`.
const Evaluation& fastest(const std::vector<Evaluation>& history, std::size_t count) {
  return *std::min_element(
      history.begin(), history.begin() + std::ptrdiff_t(count),
      [](const Evaluation& a, const Evaluation& b) { return (a.ok ? a.time_ms : 1e9) < (b.ok ? b.time_ms : 1e9); });
}

// A refined_last parameter is left out of the search and measured around its best: the
// best (X, Y) at each other Z, after the search; with --max-evals part of the cap is kept
// for it.
TEST_F(TunerEngine, RefinedParametersAreMeasuredAroundTheBestAfterTheSearch) {
  FamilyTuning refined = families_[0];
  refined.family = &mock_refined_family();
  families_ = {refined};
  for (const std::int64_t max_evals : {std::int64_t(0), std::int64_t(20)}) {
    SCOPED_TRACE("max_evals " + std::to_string(max_evals));
    TuneOptions o = options(max_evals);
    o.cache_dir = "-";
    const TuneResult r = tune(*rt_, o);
    ASSERT_EQ(r.classes.size(), 1u);
    const ClassResult& c = r.classes[0];
    EXPECT_EQ(c.space_size, 32u) << "Z at its default only";
    const std::vector<Evaluation>& h = c.history;
    ASSERT_GE(h.size(), 3u);
    // The last two evaluations are the refinement, around the search's best.
    const Evaluation& searched = fastest(h, h.size() - 2);
    for (std::size_t i = 0; i + 2 < h.size(); ++i) EXPECT_EQ(h[i].params.at("Z"), 0) << "evaluation " << i;
    for (const std::size_t i : {h.size() - 2, h.size() - 1}) {
      Params expected = searched.params;
      expected["Z"] = i + 2 == h.size() ? 1 : 2;
      EXPECT_EQ(h[i].params, expected) << "evaluation " << i;
    }
    if (max_evals > 0) {
      EXPECT_EQ(c.evaluations, max_evals) << "the search left room for the refinement";
    } else {
      EXPECT_EQ(c.best.params, (Params{{"X", 6}, {"Y", 3}, {"Z", 2}}));
    }
    ASSERT_EQ(r.profile.entries.size(), 1u);
    EXPECT_EQ(r.profile.entries[0].params.at("Z"), 2);
  }
}

// Cut by time, the search still stops early enough for the refinement: its evaluations (at
// both other Z) come last, around the best the search found. (Without the time held back
// only the first would be measured, past the budget.)
TEST_F(TunerEngine, TheSearchLeavesTheRefinementItsTime) {
  const std::vector<Evaluation> h = refined_history(10, 1.0);
  ASSERT_LT(h.size(), 32u) << "the budget did not cut the search: a weaker check";
  std::size_t first = 0;
  while (first < h.size() && h[first].params.at("Z") == 0) ++first;
  ASSERT_LT(first, h.size()) << "no refinement after a search cut by time";
  EXPECT_EQ(h.size() - first, 2u) << "the search did not hold back the refinement's time";
  const Evaluation& searched = fastest(h, first);
  for (std::size_t i = first; i < h.size(); ++i) {
    EXPECT_NE(h[i].params.at("Z"), 0) << "evaluation " << i;
    EXPECT_EQ(h[i].params.at("X"), searched.params.at("X")) << "evaluation " << i;
    EXPECT_EQ(h[i].params.at("Y"), searched.params.at("Y")) << "evaluation " << i;
  }
}

// A user's shape that is the class's own problem (or repeats another shape) is tuned once:
// one class result and one profile entry for it, and the summary says so.
TEST_F(TunerEngine, AProblemNamedTwiceIsTunedOnce) {
  TuneOptions o = options(4);
  o.cache_dir = "-";
  o.classes = {"c1"};
  o.shapes.push_back({&families_[0], "c1", {{"n", 10}}, "test"});  // c1's own problem
  o.shapes.push_back({&families_[0], "c1", {{"n", 20}}, "test"});
  o.shapes.push_back({&families_[0], "c1", {{"n", 20}}, "test"});
  const TuneResult r = tune(*rt_, o);
  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_EQ(r.classes[0].problem.at("n"), 10);
  EXPECT_EQ(r.classes[1].problem.at("n"), 20);
  ASSERT_EQ(r.profile.entries.size(), 2u);
  EXPECT_NE(r.profile.entries[0].problem, r.profile.entries[1].problem);
  ASSERT_EQ(r.repeated.size(), 2u);
  std::ostringstream summary;
  print_summary(summary, r);
  EXPECT_NE(summary.str().find("tuned once: mock/c1 n=10"), std::string::npos) << summary.str();
  std::ostringstream json;
  print_summary_json(json, r, "p.yaml");
  EXPECT_NE(json.str().find("\"tuned_once\": [\"mock/c1 n=10\", \"mock/c1 n=20\"]"), std::string::npos) << json.str();
}

// A budget the search spends all of (the built-in default alone takes longer): the best is
// still measured at one other Z, last.
TEST_F(TunerEngine, TheRefinementMeasuresOnePointPastASpentBudget) {
  const std::vector<Evaluation> h = refined_history(30, 0.01);
  // --max-evals still ends the class before it: 1 leaves the built-in default alone.
  EXPECT_EQ(refined_history(0, 60, 1).size(), 1u);
  ASSERT_GE(h.size(), 2u);
  EXPECT_EQ(h.back().params.at("Z"), 1) << "the first other Z, after the search";
  const Evaluation& searched = fastest(h, h.size() - 1);
  EXPECT_EQ(h.back().params.at("X"), searched.params.at("X"));
  EXPECT_EQ(h.back().params.at("Y"), searched.params.at("Y"));
  for (std::size_t i = 0; i + 1 < h.size(); ++i) EXPECT_EQ(h[i].params.at("Z"), 0) << "evaluation " << i;
}

TEST_F(TunerEngine, AnInterruptedRunResumesWhereItStopped) {
  std::atomic<bool> stop{false};
  state_.stop = &stop;
  state_.stop_after = 10;
  TuneOptions o = options(0);
  o.stop = &stop;
  const TuneResult first = tune(*rt_, o);
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(state_.measurements, 10);
  ASSERT_EQ(first.caches.size(), 1u);
  EXPECT_TRUE(fs::exists(first.caches[0]));

  // Same command again: the 10 measured points are recalled, the other 22 measured.
  stop = false;
  state_.stop = nullptr;
  const TuneResult second = tune(*rt_, o);
  EXPECT_FALSE(second.interrupted);
  EXPECT_EQ(second.classes[0].cached, 10);
  EXPECT_EQ(second.classes[0].evaluations, 32);
  EXPECT_EQ(state_.measurements, 32);  // nothing measured twice across the two runs
  EXPECT_EQ(second.classes[0].best.params.at("X"), 6);

  // A third run recalls everything; --no-resume measures everything again.
  EXPECT_EQ(tune(*rt_, o).classes[0].cached, 32);
  EXPECT_EQ(state_.measurements, 32);
  o.resume = false;
  EXPECT_EQ(tune(*rt_, o).classes[0].cached, 0);
  EXPECT_EQ(state_.measurements, 64);
}

TEST_F(TunerEngine, AForeignCacheIsRefusedWithAClearMessage) {
  TuneOptions o = options(4);
  const TuneResult r = tune(*rt_, o);
  ASSERT_EQ(r.caches.size(), 1u);
  const std::string path = r.caches[0];
  std::string text;
  {
    std::ifstream in(path);
    std::getline(in, text);
  }
  const std::string header = text;
  for (const auto& [field, replacement] : std::vector<std::pair<std::string, std::string>>{
           {"\"device\": \"", "\"device\": \"Some Other GPU"}, {"\"space\": \"", "\"space\": \"00"}}) {
    std::string forged = header;
    forged.replace(forged.find(field), field.size(), replacement);
    std::ofstream(path) << forged << "\n";
    try {
      tune(*rt_, o);
      FAIL() << "accepted a cache with header " << forged;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("refusing tune cache " + path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--no-resume"), std::string::npos) << e.what();
    }
  }
  std::ofstream(path) << "not a header\n";
  EXPECT_THROW(tune(*rt_, o), Error);
}

TEST_F(TunerEngine, BudgetsAndFractionsCapEvaluations) {
  TuneOptions o = options(0);
  o.max_evals_fraction = 0.25;  // 8 of 32
  o.strategy = Strategy::kGuided;
  o.cache_dir = "-";
  const TuneResult r = tune(*rt_, o);
  EXPECT_EQ(r.classes[0].evaluations, 8);
  EXPECT_TRUE(r.caches.empty());
}

// Two classes whose workloads take 0.8 s to build, with a 3-s budget: each class's share
// counts from the class's start, so its build comes out of its own 1.5 s and the run ends
// near its budget. (When a class's clock started after its build, the first class ran
// 0.8 + 1.5 s and the run ~3.8 s.)
TEST_F(TunerEngine, WorkloadBuildTimeComesOutOfTheClassesOwnBudget) {
  static const KernelFamily two_classes = [] {
    KernelFamily k = mock_family();
    k.name = "mock2";
    k.classes = {{"c1", "first"}, {"c2", "second"}};
    k.builtin = {{"mock", {}}, {"mock", {}}};
    return k;
  }();
  FamilyTuning slow;
  slow.family = &two_classes;
  slow.make = [this](Runtime&, const std::string&, std::mt19937_64&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    return std::unique_ptr<Workload>(new MockWorkload(state_, 20));
  };
  families_ = {slow};
  TuneOptions o = options(0);
  o.budget_seconds = 3;
  o.cache_dir = "-";
  const TuneResult r = tune(*rt_, o);
  ASSERT_EQ(r.classes.size(), 2u);
  // Each class: 0.8 s build + measuring up to its 1.5-s share, plus one candidate in
  // flight (at most 6 runs of 20 ms).
  EXPECT_LT(r.classes[0].seconds, 2.0);
  EXPECT_LT(r.seconds, 3.45);
  EXPECT_GE(r.classes[1].evaluations, 2);  // the built-in default and at least one more
}

// The nf4 workloads check every candidate against one reference, computed at the first
// check (recomputing it per candidate took seconds at GPU class sizes): a correct run
// passes, an output left as the NaN poison fails, and both hold on every later check.
// Both directions, f32 input and (input_bits 16) bf16 input: correct runs pass and
// NaN-poisoned outputs fail, every time, against the one reference. A bf16 problem names its
// input width in its entries and prebuilds tc's bf16 variant. rows · n is odd: the forward's
// bf16 output is poisoned a 2-byte element at a time.
TEST_F(TunerEngine, Nf4WorkloadsCheckEveryRunAgainstOneReference) {
  int checked = 0;
  for (const FamilyTuning& f : tunable_families()) {
    if (f.family->name.rfind("nf4_", 0) != 0) continue;
    for (const std::int64_t bits : {32, 16}) {
      SCOPED_TRACE(f.family->name + " input_bits " + std::to_string(bits));
      std::mt19937_64 rng(3);
      Problem problem{{"experts", 3}, {"n", 45}, {"k", 128}, {"rows", 7}, {"block_size", 64}};
      if (bits == 16) problem["input_bits"] = 16;
      const std::unique_ptr<Workload> w = f.make_for(*rt_, problem, rng);
      EXPECT_EQ(w->problem(), problem);
      const AlgorithmSpec* tc = f.family->find_algorithm("tc");
      ASSERT_NE(tc, nullptr);
      EXPECT_EQ(w->variant(*tc), bits == 16 ? nf4_launch_variant(*tc, ElementType::bf16) : tc->tuned_variant);
      EXPECT_NE(w->variant(*tc), bits == 16 ? tc->tuned_variant : nf4_launch_variant(*tc, ElementType::bf16));
      const Choice choice = rt_->choose(f.family->name, "decode");
      for (int i = 0; i < 2; ++i) {
        w->poison();
        w->run(choice);
        EXPECT_EQ(w->verify(), "");
        w->poison();
        EXPECT_NE(w->verify().find("nan"), std::string::npos);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);
}

// The LoRA families and gemm_nt's 16-bit problems: each workload names its problem as the
// runtime keys launches (input_bits 16 for bf16; no n for shrink, no k for expand), files it
// under the runtime's class, builds its type's variant, and checks every run against one
// reference: a correct run passes, an output left as the NaN poison fails.
TEST_F(TunerEngine, LoraAndHalfGemmWorkloadsCheckEveryRun) {
  int checked = 0;
  for (const FamilyTuning& f : tunable_families()) {
    const std::string& name = f.family->name;
    if (name.rfind("lora_", 0) != 0 && name != "gemm_nt") continue;
    for (const std::int64_t bits : {32, 16}) {
      if (name == "gemm_nt" && bits == 32) continue;  // the f32 workload predates this test
      SCOPED_TRACE(name + " input_bits " + std::to_string(bits));
      std::mt19937_64 rng(5);
      Problem problem;
      if (name == "gemm_nt") {
        problem = {{"m", 7}, {"n", 70}, {"k", 65}};
      } else {
        problem = {{"m", 9}, {"rank", 12}, {"adapters", 3}, {"segments", 3}};
        if (name != "lora_shrink") problem["n"] = 45;
        if (name != "lora_expand") problem["k"] = 70;
      }
      if (bits == 16) problem["input_bits"] = 16;
      const std::unique_ptr<Workload> w = f.make_for(*rt_, problem, rng);
      EXPECT_EQ(w->problem(), problem);
      const std::string shape_class = f.class_of(problem);
      EXPECT_EQ(shape_class, name == "gemm_nt" ? "small_batch_half" : "multi_decode");
      const AlgorithmSpec& algorithm = f.family->algorithms.front();
      const std::string half_variant = name == "gemm_nt" ? gemm_nt_launch_variant(ElementType::bf16, ElementType::bf16)
                                                         : lora_launch_variant(ElementType::bf16);
      EXPECT_EQ(w->variant(algorithm), bits == 16 ? half_variant : std::string());
      EXPECT_GT(w->min_bytes(), 0);
      EXPECT_GT(w->flops(), 0);
      const Choice choice = rt_->choose(name, shape_class);
      for (int i = 0; i < 2; ++i) {
        w->poison();
        EXPECT_GT(w->run(choice), 0);
        EXPECT_EQ(w->verify(), "");
        w->poison();
        EXPECT_NE(w->verify(), "");
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7);
}

// gemm_nt searches tc only in the classes whose launches may run it (16-bit input, the TF32
// classes; never exact f32) and only where the runtime's tensor-core probe passes: on PoCL
// only when OCLTK_TC_PROBE=emulated makes it probe the emulation. The TF32 classes' workloads
// build tc with their split and hold every candidate to their precision's bound.
TEST_F(TunerEngine, GemmNtSearchesTcOnlyWhereItsClassAndTheProbeAllowIt) {
  const FamilyTuning* gemm = nullptr;
  for (const FamilyTuning& f : tunable_families())
    if (f.family->name == "gemm_nt") gemm = &f;
  ASSERT_NE(gemm, nullptr);
  ASSERT_TRUE(gemm->searches);
  RuntimeOptions options;
  options.cache_dir = (dir_ / "programs").string();  // the probe's answers land here, not in ~/.cache
  options.use_profiles = false;
  Result<Runtime> opened = Runtime::open(options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  Runtime& rt = opened.value();
  const AlgorithmSpec& tc = *gemm_nt_family().find_algorithm("tc");
  const bool tensor_cores = DeviceLimits::of(rt.device()).tensor_mma;
  const char* const old_mode = std::getenv("OCLTK_TC_PROBE");
  const std::string saved = old_mode ? old_mode : "";
  for (const char* mode : {"", "emulated", "fail"}) {
    SCOPED_TRACE(std::string("OCLTK_TC_PROBE=") + mode);
    ::setenv("OCLTK_TC_PROBE", mode, 1);
    const bool probe_passes = std::string(mode) == "emulated" || (*mode == '\0' && tensor_cores);
    for (const ShapeClassSpec& cls : gemm_nt_family().classes) {
      for (const AlgorithmSpec& a : gemm_nt_family().algorithms) {
        if (a.name != "tc") {
          EXPECT_TRUE(gemm->searches(rt, cls.name, a)) << cls.name << " " << a.name;
        }
      }
      const bool allowed = gemm_nt_class_input(cls.name) != ElementType::f32 ||
                           gemm_nt_class_precision(cls.name) != GemmPrecision::exact;
      EXPECT_EQ(gemm->searches(rt, cls.name, tc), allowed && probe_passes) << cls.name;
    }
  }
  if (old_mode != nullptr) {
    ::setenv("OCLTK_TC_PROBE", saved.c_str(), 1);
  } else {
    ::unsetenv("OCLTK_TC_PROBE");
  }

  std::mt19937_64 rng(3);
  for (const auto& [shape_class, split] : {std::pair{"large_tf32", " -DSPLIT=1"}, {"large_tf32x3", " -DSPLIT=3"}}) {
    const std::unique_ptr<Workload> w = gemm->make(rt, shape_class, rng);
    EXPECT_EQ(w->variant(tc), std::string(" -DIN_TYPE=0 -DOUT_TYPE=0") + split) << shape_class;
    EXPECT_EQ(w->variant(gemm_nt_family().algorithms.front()), "") << "SIMT f32 builds are the exact ones";
    EXPECT_EQ(w->problem(), gemm_nt_problem_of(gemm_nt_class_problem("large", rt.device().type == "cpu")));
  }
}

TEST_F(TunerEngine, ReportHasJsonAndOnePlotPerClass) {
  const TuneResult r = tune(*rt_, options(12));
  write_report((dir_ / "report").string(), r);
  const fs::path svg = dir_ / "report" / "mock-c1.svg";
  ASSERT_TRUE(fs::exists(svg));
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("best so far"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
  std::ifstream json(dir_ / "report" / "report.json");
  const std::string j((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(j.find("\"history\""), std::string::npos);
  EXPECT_NE(j.find("\"best_so_far_ms\""), std::string::npos);
  EXPECT_NE(j.find("mock-c1.svg"), std::string::npos);
}

}  // namespace

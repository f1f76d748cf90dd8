// Search strategies over one shape class's space, independent of how a point is measured:
// `tune` measures on the device, `tune --replay` looks points up in a recording. Both
// hand a strategy the same Measure interface, so strategies are compared offline on
// recorded spaces exactly as they run on a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ocltk/params.hpp"

namespace ocltk::tuner {

enum class Strategy {
  kGuided,      // a cost model fitted on the points measured so far picks the next ones (default)
  kLocal,       // a random sample, then coordinate descent from each algorithm's best
  kRandom,      // a seeded random sample of the space (the same order as exhaustive; named for intent)
  kExhaustive,  // every point (in a seeded random order: a budget-cut run is an unbiased sample)
};
const char* to_string(Strategy s);
std::optional<Strategy> parse_strategy(const std::string& name);

// One measured candidate.
struct Evaluation {
  std::string algorithm;
  Params params;
  bool ok = false;
  std::string rejected;  // why not ok: build failure, launch error, hang, wrong result
  double time_ms = 0;    // median of the timed runs
  bool cached = false;   // recalled from a resume cache or a recording, not measured now
  // The point's Point::key.
  std::string key() const { return algorithm + " " + format_params(params); }
};

// One point of a class's search space.
struct Point {
  const AlgorithmSpec* algorithm = nullptr;
  Params params;
  std::string key() const { return algorithm->name + " " + format_params(params); }
};

// What a strategy drives.
class Measure {
 public:
  virtual ~Measure() = default;
  virtual bool out_of_budget() const = 0;
  // The evaluation of `point` (measured now, or recalled when seen before); nullptr when
  // the budget is spent before it could be measured.
  virtual const Evaluation* evaluate(const Point& point) = 0;
  // The points the strategy will ask for next, in order: a device measure compiles them
  // on its thread pool, ahead of anything only `might_evaluate`d, while it measures the
  // current one. A hint only.
  virtual void will_evaluate(const std::vector<const Point*>& points) { (void)points; }
  // Points the strategy may ask for after those (e.g. the model's next-best beyond the
  // batch): compiled when the pool has nothing more urgent. A hint only.
  virtual void might_evaluate(const std::vector<const Point*>& points) { (void)points; }
  // The evaluation of `point` where it was measured before the strategy started (the
  // built-in default, a warm start's points), without measuring it; nullptr otherwise.
  virtual const Evaluation* recall(const Point& point) const {
    (void)point;
    return nullptr;
  }
  // How many more evaluations the budget is expected to allow; 0 where unknown.
  virtual std::int64_t expected_evaluations() const { return 0; }
  // The seconds an evaluation of `point` is expected to take, its time being `predicted_ms`:
  // its build where it is not built yet, and its runs. The same for every point where
  // unknown, which leaves the guided strategy's order as the model alone gives it.
  virtual double cost_seconds(const Point& point, double predicted_ms) const {
    (void)point;
    (void)predicted_ms;
    return 1;
  }
};

// What the nearest known devices measured at points of a class's space (priors.hpp):
// log(time in ms) by Point::key(). The guided strategy adds the points it has not measured
// to its model's data, shifted by how much slower or faster this device ran the prior points
// it measured (their median difference), and less certain than a measurement.
struct SearchPrior {
  std::map<std::string, double> log_ms;
  // Algorithms a known device's recording of the class found behind all its listed points
  // (ClassPrior::outrun): a short opening gives them no point, as if covered.
  std::set<const AlgorithmSpec*> outrun;
};

// The first points `strategy` will ask for, given the same rng state, before any
// measurement can steer it (at most `count`): a tuner compiles them ahead, while earlier
// classes are still being measured.
std::vector<const Point*> opening_points(Strategy strategy, const std::vector<Point>& space, std::mt19937_64 rng,
                                         std::size_t count);

// Runs `strategy` over `space` until the space or the budget is exhausted. Deterministic
// for a given rng state and the same measurements.
// With `prior`, the guided strategy also fits the prior's points (others ignore it).
void run_strategy(Strategy strategy, const std::vector<Point>& space, Measure& measure, std::mt19937_64& rng,
                  const SearchPrior* prior = nullptr);

}  // namespace ocltk::tuner

#include "search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace ocltk::tuner {

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::kGuided:
      return "guided";
    case Strategy::kLocal:
      return "local";
    case Strategy::kRandom:
      return "random";
    case Strategy::kExhaustive:
      return "exhaustive";
  }
  return "guided";
}

std::optional<Strategy> parse_strategy(const std::string& name) {
  for (Strategy s : {Strategy::kGuided, Strategy::kLocal, Strategy::kRandom, Strategy::kExhaustive})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

namespace {

// A sliding window of hints: before each point, the next kLookahead points are hinted, so
// the compile pool always has that many ahead (it skips what it already has) instead of
// draining at the end of each block of hints.
constexpr std::size_t kLookahead = 32;

void run_in_order(const std::vector<Point>& space, const std::vector<std::size_t>& order, Measure& measure) {
  for (std::size_t i = 0; i < order.size() && !measure.out_of_budget(); ++i) {
    std::vector<const Point*> next;
    for (std::size_t j = i; j < std::min(order.size(), i + kLookahead); ++j) next.push_back(&space[order[j]]);
    measure.will_evaluate(next);
    measure.evaluate(space[order[i]]);
  }
}

std::vector<std::size_t> shuffled_indices(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// The algorithms of a space in order of first appearance, and each point's index in that list.
void number_algorithms(const std::vector<Point>& space, std::vector<const AlgorithmSpec*>& algorithms,
                       std::vector<std::size_t>& algorithm_of) {
  for (const Point& p : space) {
    auto it = std::find(algorithms.begin(), algorithms.end(), p.algorithm);
    if (it == algorithms.end()) it = algorithms.insert(algorithms.end(), p.algorithm);
    algorithm_of.push_back(std::size_t(it - algorithms.begin()));
  }
}

// A small random sample finds good basins; coordinate descent then walks each
// algorithm's best point (algorithms have different basins: a GPU's best gemv and best
// large square rarely share one), changing one parameter at a time and moving on the
// first improvement of over 1%.
void local_search(const std::vector<Point>& space, Measure& measure, std::mt19937_64& rng) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < space.size(); ++i) index.emplace(space[i].key(), i);
  std::map<std::size_t, const Evaluation*> seen;
  auto evaluate = [&](std::size_t i) {
    const Evaluation* e = measure.evaluate(space[i]);
    if (e != nullptr) seen[i] = e;
    return e;
  };
  const std::vector<std::size_t> order = shuffled_indices(space.size(), rng);
  const std::size_t sample = std::min<std::size_t>(order.size(), 8);
  std::vector<const Point*> hint;
  for (std::size_t i = 0; i < sample; ++i) hint.push_back(&space[order[i]]);
  measure.will_evaluate(hint);
  for (std::size_t i = 0; i < sample && !measure.out_of_budget(); ++i) evaluate(order[i]);

  std::vector<const AlgorithmSpec*> algorithms;
  std::vector<std::size_t> algorithm_of;
  number_algorithms(space, algorithms, algorithm_of);
  auto best_of = [&](const AlgorithmSpec* a) -> std::optional<std::size_t> {
    std::optional<std::size_t> found;
    for (const auto& [i, e] : seen)
      if (e->ok && space[i].algorithm == a && (!found || e->time_ms < seen[*found]->time_ms)) found = i;
    return found;
  };
  auto sampled_ms = [&](const AlgorithmSpec* a) {
    const auto i = best_of(a);
    return i ? seen[*i]->time_ms : std::numeric_limits<double>::infinity();
  };
  // The most promising algorithm is walked first, so a short budget goes to it.
  std::stable_sort(algorithms.begin(), algorithms.end(),
                   [&](const AlgorithmSpec* x, const AlgorithmSpec* y) { return sampled_ms(x) < sampled_ms(y); });
  for (const AlgorithmSpec* algorithm : algorithms) {
    std::optional<std::size_t> current = best_of(algorithm);
    if (!current) {
      // Never sampled (or every sample failed): start from its defaults, else any point of it.
      const auto defaults = index.find(Point{algorithm, algorithm->defaults()}.key());
      for (std::size_t i : order)
        if (space[i].algorithm == algorithm) {
          const std::size_t start = defaults != index.end() ? defaults->second : i;
          if (measure.out_of_budget()) return;
          evaluate(start);
          current = best_of(algorithm);
          break;
        }
      if (!current) continue;
    }
    bool improved = true;
    while (improved && !measure.out_of_budget()) {
      improved = false;
      std::vector<std::size_t> neighbours;
      for (const ParamSpec& spec : algorithm->params) {
        for (int v : spec.allowed) {
          if (v == space[*current].params.at(spec.name)) continue;
          Params p = space[*current].params;
          p[spec.name] = v;
          const auto it = index.find(Point{algorithm, p}.key());
          if (it != index.end()) neighbours.push_back(it->second);
        }
      }
      std::shuffle(neighbours.begin(), neighbours.end(), rng);
      for (std::size_t n : neighbours) {
        if (measure.out_of_budget()) break;
        const Evaluation* e = evaluate(n);
        if (e != nullptr && e->ok && e->time_ms < 0.99 * seen[*current]->time_ms) {
          current = n;
          improved = true;
          break;
        }
      }
    }
  }
}

// The guided strategy: Gaussian-process regression of log(time) per algorithm over the
// parameters' positions in their allowed lists (scaled to [0, 1]), refitted after every
// batch; the next batch is the unmeasured points with the lowest lower confidence bound.
// Points that failed count as measured (never proposed again) but do not enter the fit.
// Measured by replay on the recorded spaces in tests/data/spaces/ (tests/test_tuner.cpp).
class GuidedSearch {
 public:
  GuidedSearch(const std::vector<Point>& space, Measure& measure, std::mt19937_64& rng, const SearchPrior* prior)
      : space_(space), measure_(measure), rng_(rng), done_(space.size(), false) {
    number_algorithms(space, algorithms_, algorithm_of_);
    for (std::size_t i = 0; i < space.size() && prior != nullptr; ++i)
      if (const auto it = prior->log_ms.find(space[i].key()); it != prior->log_ms.end())
        prior_.push_back({i, it->second});
    if (prior != nullptr) outrun_ = prior->outrun;
    for (std::size_t i = 0; i < space.size(); ++i) {
      const AlgorithmSpec* a = space[i].algorithm;
      std::vector<double> x;
      for (const ParamSpec& spec : a->params) {
        const auto pos = std::find(spec.allowed.begin(), spec.allowed.end(), space[i].params.at(spec.name));
        const double span = std::max<double>(1, double(spec.allowed.size()) - 1);
        x.push_back(double(pos - spec.allowed.begin()) / span);
      }
      coords_.push_back(std::move(x));
    }
  }

  void run() {
    // What was measured before (the built-in default, the warm start's points, the priors'
    // best points) is data from the start.
    for (std::size_t i = 0; i < space_.size(); ++i)
      if (const Evaluation* e = measure_.recall(space_[i])) record(i, *e);
    const std::int64_t expected = measure_.expected_evaluations();
    std::vector<std::size_t> opening = initial_design(space_, rng_, expected);
    // With points of known devices or sibling classes in the model and a short budget, the
    // random opening keeps only a point of each algorithm that nothing covers: on the 2-core
    // PoCL machine the LoRA classes of a first tune expect 6-8 evaluations, and the opening's
    // 4 random points (most 5-20x their best) took half of them from the model's proposals.
    if (!prior_.empty() && short_budget(space_.size(), expected)) {
      std::vector<bool> covered(algorithms_.size(), false);
      for (const auto& [i, y] : prior_) covered[algorithm_of_[i]] = true;
      for (std::size_t i = 0; i < space_.size(); ++i)
        if (done_[i] || outrun_.count(space_[i].algorithm)) covered[algorithm_of_[i]] = true;
      std::vector<std::size_t> kept;
      for (std::size_t i : opening)
        if (!covered[algorithm_of_[i]]) {
          covered[algorithm_of_[i]] = true;
          kept.push_back(i);
        }
      opening = std::move(kept);
    }
    evaluate_batch(opening);
    while (!measure_.out_of_budget() && measured_ < space_.size()) evaluate_batch(next_batch());
  }

  // A seeded sample of max(8, min(24, n/50)) points spread over the algorithms (round robin);
  // where that is over half the evaluations the budget is expected to allow, a quarter of
  // them, but at least 4 and one of each algorithm, so that a short budget leaves the model
  // most of its evaluations (a smaller sample is a prefix of the larger one: the points
  // compiled ahead stay the first asked for). Cutting it where it fits cost the replay of a
  // 174-point recording its 5 %. An algorithm never measured is only ever ranked as the
  // average point: on the H200, gemm_nt lora_shrink_half (seven algorithms, 27 evaluations in
  // a first tune, an opening of 4) never measured tcs, its best at a third of the time kept.
  static std::size_t full_opening(std::size_t n) { return std::min(n, std::clamp<std::size_t>(n / 50, 8, 24)); }
  // Whether the full opening would take over half the evaluations expected (0: unknown).
  static bool short_budget(std::size_t n, std::int64_t expected) {
    return expected > 0 && std::size_t(expected) < 2 * full_opening(n);
  }

  static std::vector<std::size_t> initial_design(const std::vector<Point>& space, std::mt19937_64& rng,
                                                 std::int64_t expected_evaluations = 0) {
    const std::size_t n = space.size();
    std::vector<const AlgorithmSpec*> algorithms;
    std::vector<std::size_t> algorithm_of;
    number_algorithms(space, algorithms, algorithm_of);
    std::size_t initial = full_opening(n);
    if (short_budget(n, expected_evaluations))
      initial = std::min(initial, std::max({std::size_t(4), algorithms.size(), std::size_t(expected_evaluations) / 4}));
    std::vector<std::vector<std::size_t>> by_algorithm(algorithms.size());
    for (std::size_t i : shuffled_indices(n, rng)) by_algorithm[algorithm_of[i]].push_back(i);
    std::vector<std::size_t> first;
    for (std::size_t round = 0; first.size() < initial; ++round)
      for (const auto& list : by_algorithm)
        if (round < list.size() && first.size() < initial) first.push_back(list[round]);
    return first;
  }

 private:
  static constexpr std::size_t kBatch = 4;
  static constexpr std::size_t kSpeculative = 12;  // next-best points hinted beyond a batch
  // The variance a prior point adds to the measurement noise (log time): a standard deviation
  // of about 0.3, a third either way, for how far another device's landscape may be from this one's.
  static constexpr double kPriorVariance = 0.1;

  void record(std::size_t i, const Evaluation& e) {
    done_[i] = true;
    ++measured_;
    if (e.ok && e.time_ms > 0) observed_.push_back({i, std::log(e.time_ms)});
  }

  void evaluate_batch(const std::vector<std::size_t>& batch) {
    std::vector<const Point*> hint;
    for (std::size_t i : batch)
      if (!done_[i]) hint.push_back(&space_[i]);
    measure_.will_evaluate(hint);
    for (std::size_t i : batch) {
      if (done_[i]) continue;
      if (measure_.out_of_budget()) return;
      const Evaluation* e = measure_.evaluate(space_[i]);
      if (e == nullptr) return;
      record(i, *e);
    }
  }

  // How much slower (positive) or faster this device runs the prior's points, in log time:
  // the median difference over the prior points measured; nullopt before any is.
  std::optional<double> prior_offset() const {
    std::vector<double> d;
    std::map<std::size_t, double> prior_y(prior_.begin(), prior_.end());
    for (const auto& [i, y] : observed_)
      if (const auto it = prior_y.find(i); it != prior_y.end()) d.push_back(y - it->second);
    if (d.empty()) return std::nullopt;
    std::sort(d.begin(), d.end());
    return d.size() % 2 ? d[d.size() / 2] : 0.5 * (d[d.size() / 2 - 1] + d[d.size() / 2]);
  }

  double kernel(const std::vector<double>& a, const std::vector<double>& b, double inv_two_l2) const {
    double d2 = 0;
    for (std::size_t j = 0; j < a.size(); ++j) d2 += (a[j] - b[j]) * (a[j] - b[j]);
    return std::exp(-d2 * inv_two_l2);
  }

  std::vector<std::size_t> next_batch() {
    const std::size_t n = space_.size();
    double best_y = std::numeric_limits<double>::infinity(), sum = 0, sum2 = 0;
    for (const auto& [i, y] : observed_) {
      best_y = std::min(best_y, y);
      sum += y;
      sum2 += y * y;
    }
    const double count = double(observed_.size());
    const double mean_all = count > 0 ? sum / count : 0;
    const double sd_all = count > 1 ? std::sqrt(std::max(1e-6, sum2 / count - mean_all * mean_all)) : 1;
    std::vector<double> score(n, std::numeric_limits<double>::infinity());
    std::vector<double> predicted(n, mean_all);  // log ms the model expects, for the cost of a point
    const std::optional<double> offset = prior_offset();
    for (std::size_t a = 0; a < algorithms_.size(); ++a) {
      std::vector<std::size_t> idx;
      std::vector<double> y;
      for (const auto& [i, yi] : observed_)
        if (algorithm_of_[i] == a) {
          idx.push_back(i);
          y.push_back(yi);
        }
      const std::size_t measured = idx.size();
      // The prior's points not measured here, at the prior's time shifted to this device.
      if (offset)
        for (const auto& [i, yi] : prior_)
          if (algorithm_of_[i] == a && !done_[i]) {
            idx.push_back(i);
            y.push_back(yi + *offset);
          }
      const std::size_t dims = algorithms_[a]->params.size();
      const double length = 0.25 * std::sqrt(double(std::max<std::size_t>(1, dims)));
      const double inv_two_l2 = 1.0 / (2 * length * length);
      if (idx.size() < 2) {
        // Too little to fit: rank its points as the average measured point, so the
        // algorithm is still explored.
        for (std::size_t i = 0; i < n; ++i)
          if (!done_[i] && algorithm_of_[i] == a) score[i] = mean_all - 0.5 * sd_all;
        continue;
      }
      const std::size_t m = idx.size();
      double mean = 0;
      for (double v : y) mean += v;
      mean /= double(m);
      // K + noise·I = L·Lᵀ, alpha = K⁻¹ (y - mean); a prior point is a measurement less sure.
      const double noise = 0.02;
      std::vector<double> L(m * m, 0.0);
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c <= r; ++c) {
          double v = kernel(coords_[idx[r]], coords_[idx[c]], inv_two_l2) +
                     (r == c ? noise + (r >= measured ? kPriorVariance : 0.0) : 0.0);
          for (std::size_t k = 0; k < c; ++k) v -= L[r * m + k] * L[c * m + k];
          L[r * m + c] = r == c ? std::sqrt(std::max(v, 1e-9)) : v / L[c * m + c];
        }
      std::vector<double> alpha(m);
      for (std::size_t r = 0; r < m; ++r) {
        double v = y[r] - mean;
        for (std::size_t k = 0; k < r; ++k) v -= L[r * m + k] * alpha[k];
        alpha[r] = v / L[r * m + r];
      }
      for (std::size_t r = m; r-- > 0;) {
        double v = alpha[r];
        for (std::size_t k = r + 1; k < m; ++k) v -= L[k * m + r] * alpha[k];
        alpha[r] = v / L[r * m + r];
      }
      double var_y = 0;
      for (double v : y) var_y += (v - mean) * (v - mean);
      const double sd = std::sqrt(std::max(1e-6, var_y / double(m)));
      std::vector<double> ks(m);
      for (std::size_t i = 0; i < n; ++i) {
        if (done_[i] || algorithm_of_[i] != a) continue;
        double mu = mean, nearest = 0;
        for (std::size_t r = 0; r < m; ++r) {
          ks[r] = kernel(coords_[i], coords_[idx[r]], inv_two_l2);
          mu += ks[r] * alpha[r];
          if (r < measured) nearest = std::max(nearest, ks[r]);
        }
        // Uncertainty grows with the distance to the nearest measured point.
        score[i] = mu - kappa_ * sd * (1.0 - nearest);
        predicted[i] = mu;
      }
    }
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < n; ++i)
      if (!done_[i]) candidates.push_back(i);
    std::shuffle(candidates.begin(), candidates.end(), rng_);  // ties broken by the seed
    const std::size_t take = std::min(kBatch, candidates.size());
    const std::size_t ranked = std::min(kBatch + kSpeculative, candidates.size());
    // Improvement per second: the points whose optimistic bound (score) beats the best so far
    // come first, by how much they promise to gain (in log time) over what they cost to
    // measure (a program not built yet costs its build); then the others, by their bound.
    // Where every point costs the same this is the order of the bound alone.
    std::vector<double> cost(n, 1.0);
    for (std::size_t i : candidates) cost[i] = std::max(1e-6, measure_.cost_seconds(space_[i], std::exp(predicted[i])));
    const bool gains = std::isfinite(best_y);
    std::partial_sort(candidates.begin(), candidates.begin() + long(ranked), candidates.end(),
                      [&](std::size_t x, std::size_t y) {
                        const double gx = best_y - score[x], gy = best_y - score[y];
                        const bool px = gains && gx > 0, py = gains && gy > 0;
                        if (px != py) return px;
                        if (px) return gx / cost[x] > gy / cost[y];
                        return score[x] < score[y];
                      });
    // The next-best beyond the batch are likely in the next batches: compiling them while
    // this batch is measured keeps the pool busy when builds are slower than runs.
    std::vector<const Point*> speculative;
    for (std::size_t j = take; j < ranked; ++j) speculative.push_back(&space_[candidates[j]]);
    measure_.might_evaluate(speculative);
    candidates.resize(take);
    return candidates;
  }

  const std::vector<Point>& space_;
  Measure& measure_;
  std::mt19937_64& rng_;
  std::vector<const AlgorithmSpec*> algorithms_;
  std::vector<std::size_t> algorithm_of_;
  std::vector<std::vector<double>> coords_;
  std::vector<bool> done_;
  std::size_t measured_ = 0;
  std::vector<std::pair<std::size_t, double>> observed_;
  std::vector<std::pair<std::size_t, double>> prior_;  // space index, the prior's log ms
  std::set<const AlgorithmSpec*> outrun_;              // SearchPrior::outrun
  double kappa_ = 1.0;
};

}  // namespace

std::vector<const Point*> opening_points(Strategy strategy, const std::vector<Point>& space, std::mt19937_64 rng,
                                         std::size_t count) {
  std::vector<std::size_t> first;
  if (!space.empty()) {
    switch (strategy) {
      case Strategy::kGuided:
        first = GuidedSearch::initial_design(space, rng);
        break;
      case Strategy::kLocal:  // its sample is a shuffled order's head
      case Strategy::kExhaustive:
      case Strategy::kRandom:
        first = shuffled_indices(space.size(), rng);
        if (strategy == Strategy::kLocal) first.resize(std::min<std::size_t>(first.size(), 8));
        break;
    }
  }
  std::vector<const Point*> points;
  for (std::size_t i = 0; i < first.size() && points.size() < count; ++i) points.push_back(&space[first[i]]);
  return points;
}

void run_strategy(Strategy strategy, const std::vector<Point>& space, Measure& measure, std::mt19937_64& rng,
                  const SearchPrior* prior) {
  if (space.empty()) return;
  switch (strategy) {
    case Strategy::kExhaustive:  // every point; a seeded order, so a run cut by its budget is a fair sample
    case Strategy::kRandom:
      run_in_order(space, shuffled_indices(space.size(), rng), measure);
      return;
    case Strategy::kLocal:
      local_search(space, measure, rng);
      return;
    case Strategy::kGuided:
      GuidedSearch(space, measure, rng, prior).run();
      return;
  }
}

}  // namespace ocltk::tuner

#include "replay.hpp"

#include <algorithm>
#include <deque>
#include <iomanip>
#include <limits>
#include <map>
#include <ostream>
#include <set>

#include "ocltk/family.hpp"
#include "ocltk/status.hpp"

namespace ocltk::tuner {
namespace {

// A recorded class as a search space. The algorithms' parameter lists are rebuilt from
// the values the recording holds, so a recording stays replayable after the kernel
// tables change; defaults come from the current table where it still has them. Points of an
// algorithm the kernel no longer has are left out (counted in `dropped`): no search could
// propose them, and the optimum is the best of what a tune would choose among today.
struct ReplaySpace {
  std::deque<AlgorithmSpec> algorithms;
  std::vector<Point> points;
  std::map<std::string, const Evaluation*> by_key;
  std::size_t dropped = 0;
};

ReplaySpace build_space(const RecordedClass& rc) {
  ReplaySpace s;
  const KernelFamily* family = find_family(rc.kernel);
  const auto removed = [&](const Evaluation& e) { return family && !family->find_algorithm(e.algorithm); };
  std::map<std::string, std::map<std::string, std::set<int>>> values;  // algorithm → param → values
  for (const Evaluation& e : rc.points)
    if (!removed(e))
      for (const auto& [name, v] : e.params) values[e.algorithm][name].insert(v);
  std::map<std::string, const AlgorithmSpec*> spec_of;
  for (const auto& [algorithm, params] : values) {
    AlgorithmSpec a;
    a.name = algorithm;
    const AlgorithmSpec* current = family ? family->find_algorithm(algorithm) : nullptr;
    for (const auto& [name, set] : params) {
      ParamSpec p;
      p.name = name;
      p.allowed.assign(set.begin(), set.end());
      p.default_value = p.allowed.front();
      if (const ParamSpec* cp = current ? current->find(name) : nullptr)
        if (set.count(cp->default_value)) p.default_value = cp->default_value;
      a.params.push_back(p);
    }
    s.algorithms.push_back(std::move(a));
    spec_of[algorithm] = &s.algorithms.back();
  }
  for (const Evaluation& e : rc.points) {
    if (removed(e)) {
      ++s.dropped;
      continue;
    }
    Point p{spec_of.at(e.algorithm), e.params};
    // Points recorded with fewer parameters than others of their algorithm are dropped.
    if (p.params.size() != p.algorithm->params.size()) continue;
    if (s.by_key.emplace(p.key(), &e).second) s.points.push_back(std::move(p));
  }
  return s;
}

class ReplayMeasure : public Measure {
 public:
  ReplayMeasure(const ReplaySpace& space, std::int64_t max_evals) : space_(space), max_evals_(max_evals) {}
  bool out_of_budget() const override { return std::int64_t(seen_.size()) >= max_evals_; }
  const Evaluation* evaluate(const Point& point) override {
    const std::string key = point.key();
    const auto hit = space_.by_key.find(key);
    if (hit == space_.by_key.end()) return &missing_;  // outside the recorded space: never proposed by strategies
    if (seen_.count(key)) return hit->second;
    if (out_of_budget()) return nullptr;
    seen_.insert(key);
    const Evaluation* e = hit->second;
    if (e->ok) best_ = std::min(best_, e->time_ms);
    return e;
  }
  const Evaluation* recall(const Point& point) const override {
    const std::string key = point.key();
    const auto hit = space_.by_key.find(key);
    return hit != space_.by_key.end() && seen_.count(key) ? hit->second : nullptr;
  }
  std::int64_t expected_evaluations() const override {
    return std::max<std::int64_t>(0, max_evals_ - std::int64_t(seen_.size()));
  }
  double best() const { return best_; }

 private:
  const ReplaySpace& space_;
  std::int64_t max_evals_;
  std::set<std::string> seen_;
  double best_ = std::numeric_limits<double>::infinity();
  Evaluation missing_{"", {}, false, "not in the recording", 0, true};
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool selected(const std::vector<std::string>& filter, const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

}  // namespace

std::vector<ReplayClassResult> replay(const Recording& recording, const ReplayOptions& options) {
  std::vector<ReplayClassResult> results;
  for (const RecordedClass& rc : recording.classes) {
    if (!selected(options.kernels, rc.kernel) || !selected(options.classes, rc.shape_class)) continue;
    const ReplaySpace space = build_space(rc);
    ReplayClassResult r;
    r.kernel = rc.kernel;
    r.shape_class = rc.shape_class;
    r.problem = rc.problem;
    r.space_size = space.points.size();
    r.dropped = space.dropped;
    r.optimum_ms = std::numeric_limits<double>::infinity();
    for (const Point& p : space.points) {
      const Evaluation* e = space.by_key.at(p.key());
      if (!e->ok) continue;
      ++r.verified;
      if (e->time_ms < r.optimum_ms) {
        r.optimum_ms = e->time_ms;
        r.optimum = p.key();
      }
    }
    if (r.verified == 0) continue;
    const Point* builtin = nullptr;
    if (const KernelFamily* family = find_family(rc.kernel); family != nullptr && options.builtin_first) {
      try {
        const BuiltinChoice b = family->builtin_point(rc.shape_class);
        const std::string key = b.algorithm + " " + format_params(b.params);
        for (const Point& p : space.points)
          if (p.key() == key) builtin = &p;
      } catch (const Error&) {
        // A class or algorithm the current tables no longer have: no built-in to start from.
      }
    }
    r.max_evals = options.max_evals > 0
                      ? options.max_evals
                      : std::max<std::int64_t>(1, std::int64_t(options.max_evals_fraction * double(r.space_size)));
    for (Strategy strategy : options.strategies) {
      ReplayStrategyResult sr;
      sr.strategy = strategy;
      for (int s = 0; s < options.seeds; ++s) {
        std::mt19937_64 rng(options.seed + std::uint64_t(s));
        ReplayMeasure measure(space, r.max_evals);
        // As `tune` does: the class's built-in default first (when the recording has it).
        if (builtin != nullptr) measure.evaluate(*builtin);
        run_strategy(strategy, space.points, measure, rng);
        const double gap = std::isfinite(measure.best()) ? measure.best() / r.optimum_ms - 1 : 1e9;
        sr.gaps.push_back(gap);
        if (gap <= options.within + 1e-12) ++sr.within;
      }
      sr.median_gap = median(sr.gaps);
      r.strategies.push_back(std::move(sr));
    }
    results.push_back(std::move(r));
  }
  if (results.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "the recording has no class with a verified point that matches the filters");
  return results;
}

void print_replay(std::ostream& out, const std::vector<ReplayClassResult>& results, const ReplayOptions& options) {
  out << "Replay: " << options.seeds << " seeds per strategy; budget "
      << (options.max_evals > 0 ? std::to_string(options.max_evals) + " evaluations"
                                : std::to_string(int(options.max_evals_fraction * 100 + 0.5)) + "% of each space")
      << "; gap = best found / recorded optimum - 1 (median over seeds); within = seeds within " << options.within * 100
      << "%\n\n";
  out << std::left << std::setw(14) << "kernel" << std::setw(13) << "class" << std::right << std::setw(7) << "space"
      << std::setw(7) << "evals" << std::setw(12) << "optimum ms";
  for (const ReplayStrategyResult& s : results.front().strategies)
    out << std::setw(12) << (std::string(to_string(s.strategy)) + " gap") << std::setw(8) << "within";
  out << "\n";
  for (const ReplayClassResult& r : results) {
    out << std::left << std::setw(14) << r.kernel << std::setw(13) << r.shape_class << std::right << std::setw(7)
        << r.space_size << std::setw(7) << r.max_evals << std::fixed << std::setprecision(4) << std::setw(12)
        << r.optimum_ms;
    for (const ReplayStrategyResult& s : r.strategies)
      out << std::setprecision(1) << std::setw(11) << s.median_gap * 100 << "%" << std::setw(5) << s.within << "/"
          << std::setw(2) << options.seeds;
    out << "\n";
  }
  for (const ReplayClassResult& r : results)
    if (r.dropped > 0)
      out << r.kernel << "/" << r.shape_class << ": " << r.dropped
          << " recorded points of algorithms this ocltk no longer has were left out\n";
}

void print_replay_json(std::ostream& out, const std::vector<ReplayClassResult>& results, const ReplayOptions& options,
                       const Recording& recording) {
  out << "{\n  \"device\": " << json_string(recording.device) << ", \"driver\": " << json_string(recording.driver)
      << ",\n  \"seeds\": " << options.seeds << ", \"within\": " << options.within << ",\n  \"classes\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const ReplayClassResult& r = results[i];
    out << (i ? "," : "") << "\n    {\"kernel\": " << json_string(r.kernel)
        << ", \"class\": " << json_string(r.shape_class) << ", \"problem\": " << json_problem(r.problem)
        << ", \"space_size\": " << r.space_size << ", \"dropped\": " << r.dropped << ", \"verified\": " << r.verified
        << ", \"max_evals\": " << r.max_evals << ", \"optimum_ms\": " << std::setprecision(6) << r.optimum_ms
        << ", \"optimum\": " << json_string(r.optimum) << ", \"strategies\": {";
    for (std::size_t j = 0; j < r.strategies.size(); ++j) {
      const ReplayStrategyResult& s = r.strategies[j];
      out << (j ? ", " : "") << json_string(to_string(s.strategy)) << ": {\"median_gap\": " << s.median_gap
          << ", \"within\": " << s.within << ", \"gaps\": [";
      for (std::size_t k = 0; k < s.gaps.size(); ++k) out << (k ? ", " : "") << s.gaps[k];
      out << "]}";
    }
    out << "}}";
  }
  out << "\n  ]\n}\n";
}

}  // namespace ocltk::tuner

// `ocltk tune --replay FILE`: search strategies run against a recorded space instead of a
// device. Every point a strategy asks for is looked up in the recording (the time it
// measured, or why it was rejected), so strategies are compared offline, quickly and
// deterministically, on exactly the landscape a device produced.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "record.hpp"
#include "search.hpp"

namespace ocltk::tuner {

struct ReplayOptions {
  std::vector<Strategy> strategies{Strategy::kGuided, Strategy::kLocal, Strategy::kRandom};
  std::int64_t max_evals = 0;        // per class; 0: use max_evals_fraction
  double max_evals_fraction = 0.15;  // of the recorded space
  int seeds = 20;                    // runs per strategy, seeds seed .. seed + seeds - 1
  std::uint64_t seed = 1;
  double within = 0.05;              // a run succeeds when its best is within this of the optimum
  std::vector<std::string> kernels;  // empty: every kernel in the recording
  std::vector<std::string> classes;  // empty: every class
  // Measure the class's built-in default first, as `tune` does (it counts against the
  // budget); a recording without it starts from the strategy alone.
  bool builtin_first = true;
};

struct ReplayStrategyResult {
  Strategy strategy;
  std::vector<double> gaps;  // per seed: best found / recorded optimum - 1
  double median_gap = 0;
  int within = 0;  // seeds whose gap is at most options.within
};

struct ReplayClassResult {
  std::string kernel, shape_class;
  Problem problem;
  std::size_t space_size = 0;  // recorded points of the kernel's current algorithms
  std::size_t dropped = 0;     // recorded points of algorithms it no longer has, left out
  std::size_t verified = 0;    // of them, verified with a time
  std::int64_t max_evals = 0;
  double optimum_ms = 0;
  std::string optimum;  // "algorithm P=v ..."
  std::vector<ReplayStrategyResult> strategies;
};

// Throws Error(kInvalidArgument) when the filters select nothing.
std::vector<ReplayClassResult> replay(const Recording& recording, const ReplayOptions& options);

void print_replay(std::ostream& out, const std::vector<ReplayClassResult>& results, const ReplayOptions& options);
void print_replay_json(std::ostream& out, const std::vector<ReplayClassResult>& results, const ReplayOptions& options,
                       const Recording& recording);

}  // namespace ocltk::tuner

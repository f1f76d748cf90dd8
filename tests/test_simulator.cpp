// Every kernel family's algorithms on tiny problems, checked against the CPU reference, for
// Oclgrind to watch: tests/simulator.cmake runs this binary under it twice, with data-race
// and API checks, and with uninitialised-value checks on programs built at -cl-opt-disable,
// and fails on any report (docs/robustness.md). It also runs on any device by itself.
//
// Nothing here lists kernels: the families and their algorithms come from the runtime's
// tables (kernel_families()), the problems and the references from the tuner's workloads
// (tunable_families()), so an algorithm or family added later joins, and a family without
// a workload fails. The points of each algorithm: its defaults, the built-in choices that
// name it and OCLTK_SIMULATOR_EXTRA (default 1) more drawn from its legal space with a
// fixed seed, each on an aligned and a ragged tiny problem (fast and general paths), and the
// entries of each shipped profile (configs/) that name it, with the parameters the runtime
// would run on this device, on the aligned one (where tuned points differ); each point
// once. Points the device cannot hold are skipped and listed. OCLTK_SIMULATOR_POINTS=smallest
// runs each algorithm at its smallest legal point instead (fewest work-items, then least
// local memory), on both problems: for the uninitialised-value pass, whose unoptimised
// programs run several times slower.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ocltk/ocltk.hpp"
#include "record.hpp"
#include "workload.hpp"

namespace {

using namespace ocltk;
using tuner::FamilyTuning;
using tuner::Problem;

Runtime& runtime() {
  static Runtime* rt = [] {
    RuntimeOptions options;
    options.cache_dir = "-";  // every program built (and checked) by the simulator itself
    options.use_profiles = false;
    options.verbose = 0;
    options.exclude_algorithms = "-";
    Result<Runtime> opened = Runtime::open(options);
    if (!opened) {
      std::cerr << "cannot open the device: " << opened.status().message() << "\n";
      std::exit(1);
    }
    return new Runtime(std::move(opened.value()));
  }();
  return *rt;
}

// A problem dimension's tiny size, aligned (whole tiles, blocks and 64-wide steps: the fast
// paths) and ragged (tails everywhere: the general paths); a dimension not named here gets 4.
struct TinySize {
  std::int64_t aligned, ragged;
};
const std::map<std::string, TinySize> kTinySizes = {
    {"m", {4, 3}}, {"n", {16, 9}}, {"k", {64, 40}}, {"experts", {2, 3}}, {"rows", {3, 5}}, {"block_size", {64, 32}},
};
// Keys of a problem that select a variant rather than a size: left out (their defaults).
const std::set<std::string> kVariantKeys = {"input_bits", "top_k"};

// The aligned problem, then the ragged one.
std::vector<Problem> tiny_problems(const FamilyTuning& f) {
  std::vector<Problem> out;
  for (bool ragged : {false, true}) {
    Problem p;
    for (const std::string& key : f.problem_keys) {
      if (kVariantKeys.count(key)) continue;
      const auto it = kTinySizes.find(key);
      p[key] = it == kTinySizes.end() ? 4 : (ragged ? it->second.ragged : it->second.aligned);
    }
    out.push_back(p);
  }
  return out;
}

bool smallest_only() {
  const char* v = std::getenv("OCLTK_SIMULATOR_POINTS");
  return v != nullptr && std::string(v) == "smallest";
}

int extra_points() {
  const char* v = std::getenv("OCLTK_SIMULATOR_EXTRA");
  return v != nullptr && *v != '\0' ? std::atoi(v) : 1;
}

// The shipped profiles' entries for one family and algorithm, as the runtime would run them.
std::vector<Params> shipped_points(const KernelFamily& family, const AlgorithmSpec& algorithm) {
  std::vector<Params> out;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(OCLTK_CONFIGS_DIR))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    for (const Profile& p : read_profile_file(file).device_profiles())
      for (const ProfileEntry& e : p.entries) {
        if (e.kernel != family.name || e.algorithm != algorithm.name) continue;
        Params params = algorithm.complete(e.params);
        adapt_params_to_device(algorithm, runtime().device(), params);
        out.push_back(params);
      }
  }
  return out;
}

// A point and whether it also runs on the ragged problem.
struct Point {
  Params params;
  bool ragged_too;
};

std::vector<Point> points_of(const KernelFamily& family, const AlgorithmSpec& algorithm) {
  // Oclgrind counts the local arrays of every kernel of a program against each launch, and
  // the gemm_nt programs hold two kernels (gemm_nt, gemm_nt_accum): a point may use half.
  DeviceLimits limits = DeviceLimits::of(runtime().device());
  limits.local_mem_bytes /= 2;
  std::vector<Point> candidates;
  if (smallest_only()) {
    std::vector<Params> space = algorithm.legal_space(&limits);
    const auto cost = [&](const Params& p) {
      return std::make_pair(algorithm.work_group_size(p), algorithm.local_mem_bytes(p, limits));
    };
    const auto smallest = std::min_element(space.begin(), space.end(),
                                           [&](const Params& a, const Params& b) { return cost(a) < cost(b); });
    if (smallest != space.end()) candidates.push_back({*smallest, true});
  } else {
    candidates.push_back({algorithm.defaults(), true});
    for (const BuiltinChoice& b : family.builtin)
      if (b.algorithm == algorithm.name) candidates.push_back({algorithm.complete(b.params), true});
    const std::vector<Params> space = algorithm.legal_space(&limits);
    std::mt19937_64 rng(std::hash<std::string>()(family.name + "/" + algorithm.name));
    for (int i = 0; i < extra_points() && !space.empty(); ++i)
      candidates.push_back({space[std::uniform_int_distribution<std::size_t>(0, space.size() - 1)(rng)], true});
    for (Params& p : shipped_points(family, algorithm)) candidates.push_back({std::move(p), false});
  }
  std::vector<Point> points;
  std::set<Params> seen;
  for (const Point& p : candidates) {
    if (!seen.insert(p.params).second) continue;
    if (const auto why = algorithm.violation(p.params, &limits)) {
      std::cout << "[ SKIPPED  ] " << family.name << "/" << algorithm.name << " {" << format_params(p.params)
                << "}: " << *why << "\n";
      continue;
    }
    points.push_back(p);
  }
  return points;
}

class AlgorithmUnderSimulator : public ::testing::Test {
 public:
  AlgorithmUnderSimulator(const FamilyTuning* tuning, const AlgorithmSpec* algorithm)
      : tuning_(tuning), algorithm_(algorithm) {}
  void TestBody() override {
    const KernelFamily& family = *tuning_->family;
    const std::vector<Point> points = points_of(family, *algorithm_);
    ASSERT_FALSE(points.empty()) << "no point of " << family.name << "/" << algorithm_->name << " fits the device";
    std::mt19937_64 rng(1);
    bool ragged = false;
    for (Problem problem : tiny_problems(*tuning_)) {
      // gemm_nt's tc and tcs never multiply exact f32 (they would round to TF32): their problems are
      // 16-bit, the width they serve in every class.
      if (family.name == "gemm_nt" && gemm_nt_tensor_core_algorithm(algorithm_->name)) problem["input_bits"] = 16;
      std::unique_ptr<tuner::Workload> workload = tuning_->make_for(runtime(), problem, rng);
      for (const Point& p : points) {
        if (ragged && !p.ragged_too) continue;
        Choice choice;
        choice.kernel = family.name;
        choice.shape_class = tuning_->class_of(problem);
        choice.algorithm = algorithm_->name;
        choice.params = p.params;
        SCOPED_TRACE(family.name + "/" + algorithm_->name + " {" + format_params(p.params) + "} on " +
                     tuner::format_problem(problem));
        workload->poison();
        ASSERT_NO_THROW(workload->run(choice));
        EXPECT_EQ(workload->verify(), "");
        ++runs_;
      }
      ragged = true;
    }
    std::cout << "[ RUNS     ] " << family.name << "/" << algorithm_->name << ": " << points.size() << " points, "
              << runs_ << " runs\n";
  }

 private:
  const FamilyTuning* tuning_;
  const AlgorithmSpec* algorithm_;
  int runs_ = 0;
};

// Every family has a workload to run it by.
TEST(Simulator, EveryKernelFamilyHasAWorkload) {
  for (const KernelFamily* f : kernel_families()) {
    const auto& tunings = tuner::tunable_families();
    EXPECT_TRUE(std::any_of(tunings.begin(), tunings.end(), [&](const FamilyTuning& t) { return t.family == f; }))
        << f->name << " has no workload in the tuner's families (tuner/families.cpp): the simulator cannot run it";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (const FamilyTuning& tuning : tuner::tunable_families()) {
    for (const AlgorithmSpec& algorithm : tuning.family->algorithms) {
      const FamilyTuning* t = &tuning;
      const AlgorithmSpec* a = &algorithm;
      ::testing::RegisterTest("Simulator", (tuning.family->name + "_" + algorithm.name).c_str(), nullptr, nullptr,
                              __FILE__, __LINE__,
                              [=]() -> ::testing::Test* { return new AlgorithmUnderSimulator(t, a); });
    }
  }
  return RUN_ALL_TESTS();
}

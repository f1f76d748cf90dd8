// ocltk_bench_profiles: several profiles of one device, measured in one run on the problems
// `ocltk tune` tunes (each family's class problems, built by the tuner's own workloads, so
// every family the tuner knows is covered). Per kernel, class and profile one benchmark row,
// OP/CLASS/PROFILE, timed as the tuner times a candidate (OpenCL events, from the launch's
// first command's start to its last's end) after the choice was verified against the CPU
// reference: the workload's own check, which at large problems compares a sample of output
// rows (the first and last among them; counters `checked_rows` of `output_rows`), so the
// references cost seconds, not the minutes of whole 4096^3 products. bench/first_tune.sh
// compares a first tune with the best known point this way; run with
// --benchmark_enable_random_interleaving=true so that the profiles' repetitions alternate.
// --ocltk_paired_with=NAME adds per class a row OP/CLASS/OTHER~NAME for each other profile:
// both choices timed launch by launch in alternation (A B, B A, ...), each repetition's
// counter `ratio` OTHER's time over NAME's. On a shared machine the time of a point drifts
// by more than close points differ (1.7-3.1 ms for one NF4 point on the 2-core PoCL host,
// within one run); two points timed a launch apart see the same moment, and their ratio is
// far steadier than that of their separate rows (the same point: 0.98-1.03 a repetition,
// against 0.81-1.30 between the fastest repetitions of its two rows).
//
//   ocltk_bench_profiles --ocltk_profiles=best=A.yaml,first=B.yaml [--ocltk_paired_with=best]
//                        [--ocltk_device=SEL] [--ocltk_max_iterations=N] [--benchmark_* flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/gemm_nt.hpp"
#include "ocltk/profile.hpp"
#include "ocltk/runtime.hpp"
#include "record.hpp"
#include "workload.hpp"

namespace {

using ocltk::Choice;
using ocltk::Profile;
using ocltk::ProfileEntry;
using ocltk::Runtime;
using ocltk::tuner::FamilyTuning;
using ocltk::tuner::Workload;

struct Flags {
  std::vector<std::pair<std::string, std::string>> profiles;  // (name, file)
  std::string device;
  std::string paired_with;               // a profile whose choice each other profile's is timed in alternation with
  std::int64_t max_iterations = 100000;  // per repetition; 0: Google Benchmark's own count
};

const char* const kHelp =
    "ocltk_bench_profiles flags (before Google Benchmark's own --benchmark_* flags):\n"
    "  --ocltk_profiles=NAME=FILE[,NAME=FILE...]  the profiles to measure (at least one)\n"
    "  --ocltk_paired_with=NAME                   per class, each other profile's choice timed in\n"
    "                                             alternation with NAME's: rows OP/CLASS/OTHER~NAME, counter\n"
    "                                             `ratio` (OTHER's time over NAME's in the repetition)\n"
    "  --ocltk_device=SELECTOR                    device index or name substring (env OCLTK_DEVICE)\n"
    "  --ocltk_max_iterations=N                   timed runs per repetition: enough for 0.5 s of device time\n"
    "                                             or of wall time, whichever is first, at most N (default\n"
    "                                             100000; 0: Google Benchmark's own count, 0.5 s of device time)\n";

// Removes --ocltk_* flags from argv; nullopt after printing one sentence for a bad one.
std::optional<Flags> take_flags(int& argc, char** argv) {
  Flags f;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--ocltk_profiles=", 0) == 0) {
      std::stringstream list(arg.substr(17));
      for (std::string item; std::getline(list, item, ',');) {
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
          std::fprintf(stderr, "ocltk_bench_profiles: --ocltk_profiles item '%s': expected NAME=FILE\n%s", item.c_str(),
                       kHelp);
          return std::nullopt;
        }
        f.profiles.push_back({item.substr(0, eq), item.substr(eq + 1)});
      }
    } else if (arg.rfind("--ocltk_paired_with=", 0) == 0) {
      f.paired_with = arg.substr(20);
      if (f.paired_with.empty()) {
        std::fprintf(stderr, "ocltk_bench_profiles: --ocltk_paired_with needs a profile name\n%s", kHelp);
        return std::nullopt;
      }
    } else if (arg.rfind("--ocltk_device=", 0) == 0) {
      f.device = arg.substr(15);
    } else if (arg.rfind("--ocltk_max_iterations=", 0) == 0) {
      const std::string value = arg.substr(23);
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 0) {
        std::fprintf(stderr, "ocltk_bench_profiles: --ocltk_max_iterations must be a count >= 0, got '%s'\n%s",
                     value.c_str(), kHelp);
        return std::nullopt;
      }
      f.max_iterations = n;
    } else if (arg.rfind("--ocltk_", 0) == 0) {
      std::fprintf(stderr, "ocltk_bench_profiles: unknown flag %s\n%s", arg.c_str(), kHelp);
      return std::nullopt;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (f.profiles.empty()) {
    std::fprintf(stderr, "ocltk_bench_profiles: --ocltk_profiles is required\n%s", kHelp);
    return std::nullopt;
  }
  if (!f.paired_with.empty() &&
      std::none_of(f.profiles.begin(), f.profiles.end(), [&](const auto& p) { return p.first == f.paired_with; })) {
    std::fprintf(stderr, "ocltk_bench_profiles: --ocltk_paired_with=%s names no profile of --ocltk_profiles\n%s",
                 f.paired_with.c_str(), kHelp);
    return std::nullopt;
  }
  for (const auto& [name, file] : f.profiles)
    if (name.find_first_of("~/") != std::string::npos) {
      std::fprintf(stderr, "ocltk_bench_profiles: profile name '%s' holds '~' or '/' (row names use them)\n%s",
                   name.c_str(), kHelp);
      return std::nullopt;
    }
  return f;
}

// One class's workload, shared by the profiles' rows, and whether each choice was verified.
struct ClassCase {
  const FamilyTuning* tuning;
  std::string shape_class;
  std::unique_ptr<Workload> workload;
  std::map<std::string, std::string> verified;  // choice key -> "" when correct, else why not
};

// A profile's choice in a class and its iterations a repetition (iterations_for).
struct ProfileChoice {
  std::string profile;
  Choice choice;
  std::int64_t iterations = 0;
};

std::string key_of(const Choice& choice) { return choice.algorithm + " " + ocltk::format_params(choice.params); }

// "" where the choice's output matched the reference (checked once per choice), else why not.
const std::string& verify_choice(ClassCase& c, const Choice& choice) {
  const std::string key = key_of(choice);
  auto found = c.verified.find(key);
  if (found != c.verified.end()) return found->second;
  std::string why;
  try {
    c.workload->poison();
    c.workload->run(choice);
    why = c.workload->verify();
    if (!why.empty()) why = "wrong result: " + why;
  } catch (const std::exception& e) {
    why = e.what();
  }
  return c.verified.emplace(key, why).first->second;
}

// The iterations of each repetition: about 0.5 s of device time (Google Benchmark's own
// minimum), or of wall time where launching and waiting take longer than the kernel runs, at
// most `max_iterations`; from one timed run after verifying and a warm-up. 0 where that run
// fails (the row then says why). Google Benchmark's own count reaches 0.5 s of device time,
// which for a kernel of microseconds is 10^5 launches, each waited for (wait_for_event):
// LoRA decode took 63,000 iterations, about 6 s, a repetition on PoCL, and the step of
// bench/first_tune.sh took 10 minutes there and more than the 10-minute call on the H200.
std::int64_t iterations_for(ClassCase& c, const Choice& choice, std::int64_t max_iterations) {
  if (!verify_choice(c, choice).empty()) return 0;
  try {
    c.workload->run(choice);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    const double ms = c.workload->run(choice);
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const double per_run = std::max({ms, wall_ms, 1e-6});
    return std::clamp<std::int64_t>(std::int64_t(std::ceil(500 / per_run)), 1, max_iterations);
  } catch (const std::exception&) {
    return 0;
  }
}

void run_case(benchmark::State& state, ClassCase& c, const Choice& choice) {
  const std::string key = key_of(choice);
  try {
    if (const std::string& why = verify_choice(c, choice); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    c.workload->run(choice);  // warm-up
    for (auto _ : state) state.SetIterationTime(c.workload->run(choice) * 1e-3);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["verified"] = 1;
  // How: these output rows against the double-precision reference (every element of each).
  const Workload::CheckedRows checked = c.workload->checked_rows();
  state.counters["checked_rows"] = double(checked.checked);
  state.counters["output_rows"] = double(checked.rows);
  state.counters["GFLOP/s"] =
      benchmark::Counter(c.workload->flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(key);
}

// A pair of profiles' choices timed launch by launch in alternation (A B, then B A, ...), so
// that both see the same moment of a shared machine; counters: `ratio`, B's total time over
// A's in this repetition, and `pair_median`, the median of the launches' ratios B/A.
void run_pair(benchmark::State& state, ClassCase& c, const Choice& a, const Choice& b) {
  std::vector<double> ratios;
  double total_a = 0, total_b = 0;
  try {
    for (const Choice* choice : {&a, &b})
      if (const std::string& why = verify_choice(c, *choice); !why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
    c.workload->run(a);  // warm-up
    c.workload->run(b);
    bool a_first = true;
    for (auto _ : state) {
      double ms_a = 0, ms_b = 0;
      if (a_first) {
        ms_a = c.workload->run(a);
        ms_b = c.workload->run(b);
      } else {
        ms_b = c.workload->run(b);
        ms_a = c.workload->run(a);
      }
      a_first = !a_first;
      total_a += ms_a;
      total_b += ms_b;
      if (ms_a > 0) ratios.push_back(ms_b / ms_a);
      state.SetIterationTime((ms_a + ms_b) * 1e-3);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.counters["verified"] = 1;
  if (total_a > 0) state.counters["ratio"] = total_b / total_a;  // none where A's times read 0
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    state.counters["pair_median"] = ratios[ratios.size() / 2];
  }
  state.SetLabel(key_of(b) + " / " + key_of(a));
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Flags> flags = take_flags(argc, argv);
  if (!flags) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  std::vector<std::pair<std::string, Profile>> profiles;
  for (const auto& [name, file] : flags->profiles) {
    try {
      profiles.push_back({name, ocltk::read_profile(file)});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ocltk_bench_profiles: %s\n", e.what());
      return 2;
    }
  }
  ocltk::RuntimeOptions options;
  options.device = flags->device;
  options.use_profiles = false;  // every row runs an explicit choice
  ocltk::Result<Runtime> opened = Runtime::open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "ocltk_bench_profiles: cannot open the device: %s\n", opened.status().message().c_str());
    return 1;
  }
  Runtime& rt = opened.value();
  benchmark::AddCustomContext("ocltk_device", rt.device().name);
  for (const auto& [name, file] : flags->profiles) benchmark::AddCustomContext("ocltk_profile_" + name, file);

  // One row, timed by the workload's own event times, N iterations a repetition (0: Google
  // Benchmark's own count).
  const auto add_row = [](const std::string& name, std::int64_t n, std::function<void(benchmark::State&)> run) {
    benchmark::internal::Benchmark* b =
        benchmark::RegisterBenchmark(name.c_str(), std::move(run))->UseManualTime()->Unit(benchmark::kMillisecond);
    if (n > 0) b->Iterations(n);
  };
  // Every class of every family, its workload built now (the same seed as a tune's first).
  std::vector<std::unique_ptr<ClassCase>> cases;
  std::mt19937_64 rng(1);
  for (const FamilyTuning& tuning : ocltk::tuner::tunable_families()) {
    for (const ocltk::ShapeClassSpec& spec : tuning.family->classes) {
      auto c = std::make_unique<ClassCase>();
      c->tuning = &tuning;
      c->shape_class = spec.name;
      c->workload = tuning.make(rt, spec.name, rng);
      c->workload->timeout_seconds = 60;
      const ocltk::tuner::Problem problem = c->workload->problem();
      std::vector<ProfileChoice> choices;  // the profiles' choices in this class
      for (const auto& [name, profile] : profiles) {
        const ProfileEntry* entry = profile.find(tuning.family->name, spec.name, &problem);
        // A gemm_nt TF32 class the profile lacks runs its exact class's entry, as the runtime
        // serves it (Runtime::choose_gemm_nt).
        if (entry == nullptr && tuning.family->name == "gemm_nt")
          entry = profile.find(tuning.family->name, ocltk::gemm_nt_exact_class(spec.name), &problem);
        if (entry == nullptr) continue;  // a profile without the class: no row
        Choice choice;
        choice.kernel = tuning.family->name;
        choice.shape_class = spec.name;
        choice.algorithm = entry->algorithm;
        choice.params = entry->params;
        const std::int64_t n = flags->max_iterations > 0 ? iterations_for(*c, choice, flags->max_iterations) : 0;
        ClassCase* raw = c.get();
        add_row(tuning.family->name + "/" + spec.name + "/" + name, n,
                [raw, choice](benchmark::State& state) { run_case(state, *raw, choice); });
        choices.push_back({name, choice, n});
      }
      // The paired rows: each other profile's choice in alternation with the reference's, half
      // the iterations of the slower of the two alone a repetition (about as long as its row's).
      const auto ref = std::find_if(choices.begin(), choices.end(),
                                    [&](const ProfileChoice& p) { return p.profile == flags->paired_with; });
      for (const ProfileChoice& other : choices) {
        if (ref == choices.end() || other.profile == flags->paired_with) continue;
        ClassCase* raw = c.get();
        const std::int64_t n = ref->iterations > 0 && other.iterations > 0
                                   ? std::max<std::int64_t>(1, std::min(ref->iterations, other.iterations) / 2)
                                   : 0;
        add_row(tuning.family->name + "/" + spec.name + "/" + other.profile + "~" + ref->profile, n,
                [raw, a = ref->choice, b = other.choice](benchmark::State& state) { run_pair(state, *raw, a, b); });
      }
      cases.push_back(std::move(c));
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#include "tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <sstream>

#include "ocltk/family.hpp"
#include "workload.hpp"

namespace ocltk::tuner {
namespace {

std::string json_string(const std::string& text) {
  std::ostringstream out;
  out << '"';
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(c) << std::dec << std::setfill(' ');
    } else {
      out << c;
    }
  }
  out << '"';
  return out.str();
}

std::string json_choice(const Evaluation& e) {
  std::ostringstream out;
  out << "{\"algorithm\": " << json_string(e.algorithm) << ", \"params\": {";
  bool first = true;
  for (const auto& [name, value] : e.params) {
    out << (first ? "" : ", ") << json_string(name) << ": " << value;
    first = false;
  }
  out << "}, \"ok\": " << (e.ok ? "true" : "false");
  if (e.ok) out << ", \"time_ms\": " << std::setprecision(6) << e.time_ms;
  if (!e.ok) out << ", \"rejected\": " << json_string(e.rejected);
  out << "}";
  return out.str();
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Point {
  const AlgorithmSpec* algorithm;
  Params params;
  std::string key() const { return algorithm->name + " " + format_params(params); }
};

// Runs, verifies, then times a candidate; stops timing early when the first timed run is
// already three times slower than the best so far.
Evaluation evaluate_candidate(Workload& w, const Choice& choice, int repeats, double best_ms) {
  Evaluation e;
  e.algorithm = choice.algorithm;
  e.params = choice.params;
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
  } catch (const BuildError& err) {
    e.rejected = std::string("build failed: ") + err.what();
  } catch (const std::exception& err) {
    e.rejected = err.what();
  }
  return e;
}

std::string format_problem(const std::map<std::string, std::int64_t>& problem) {
  std::ostringstream out;
  for (const auto& [key, value] : problem) out << (out.tellp() ? " " : "") << key << "=" << value;
  return out.str();
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string sanitize(const std::string& name) {
  std::string out;
  for (char ch : name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
    out += keep ? char(std::tolower(static_cast<unsigned char>(ch))) : '-';
  }
  while (out.find("--") != std::string::npos) out.replace(out.find("--"), 2, "-");
  return out.empty() ? "device" : out;
}

class Progress {
 public:
  Progress(const TuneOptions& o) : out_(o.progress), tty_(o.progress_is_terminal) {}
  void update(const std::string& line) {
    if (out_ == nullptr) return;
    if (tty_) {
      *out_ << "\r\033[K" << line << std::flush;
    } else {
      *out_ << line << "\n" << std::flush;
    }
  }
  void finish_line() {
    if (out_ != nullptr && tty_) *out_ << "\n" << std::flush;
  }

 private:
  std::ostream* out_;
  bool tty_;
};

}  // namespace

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::kLocal:
      return "local";
    case Strategy::kRandom:
      return "random";
    case Strategy::kExhaustive:
      return "exhaustive";
  }
  return "local";
}

std::optional<Strategy> parse_strategy(const std::string& name) {
  if (name == "local") return Strategy::kLocal;
  if (name == "random") return Strategy::kRandom;
  if (name == "exhaustive") return Strategy::kExhaustive;
  return std::nullopt;
}

std::string default_profile_path(const DeviceInfo& device) {
  const std::string dir = user_profile_dir();
  const std::string file = sanitize(device.name) + ".yaml";
  return dir.empty() ? file : dir + "/" + file;
}

TuneResult tune(Runtime& rt, const TuneOptions& options) {
  const DeviceInfo& device = rt.device();
  const DeviceLimits limits = DeviceLimits::of(device);
  const auto start = Clock::now();
  std::mt19937_64 rng(options.seed);
  Progress progress(options);

  struct Job {
    const FamilyTuning* tuning;
    std::string shape_class;
  };
  std::vector<Job> jobs;
  for (const std::string& k : options.kernels) {
    const bool known = std::any_of(tunable_families().begin(), tunable_families().end(),
                                   [&](const FamilyTuning& f) { return f.family->name == k; });
    if (!known) throw Error(ErrorCode::kInvalidArgument, "no tunable kernel named '" + k + "'");
  }
  for (const std::string& c : options.classes) {
    const bool known = std::any_of(tunable_families().begin(), tunable_families().end(),
                                   [&](const FamilyTuning& f) { return f.family->find_class(c) != nullptr; });
    if (!known) throw Error(ErrorCode::kInvalidArgument, "no kernel has a shape class named '" + c + "'");
  }
  for (const FamilyTuning& f : tunable_families()) {
    if (!options.kernels.empty() &&
        std::find(options.kernels.begin(), options.kernels.end(), f.family->name) == options.kernels.end())
      continue;
    for (const ShapeClassSpec& c : f.family->classes)
      if (options.classes.empty() ||
          std::find(options.classes.begin(), options.classes.end(), c.name) != options.classes.end())
        jobs.push_back({&f, c.name});
  }

  ProfileSelection prior;
  if (options.warm_start) {
    try {
      prior = find_profiles(device, RuntimeOptions{});
    } catch (const std::exception&) {
      // An unreadable profile only costs the warm start.
    }
  }

  TuneResult result;
  result.profile.device = profile_device_of(device);
  result.profile.tuner_version = version();

  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    const KernelFamily& family = *jobs[ji].tuning->family;
    const std::string& shape_class = jobs[ji].shape_class;
    const auto class_start = Clock::now();
    const double remaining = options.budget_seconds - seconds_since(start);
    const double class_budget = std::max(0.0, remaining / double(jobs.size() - ji));

    std::vector<Point> space;
    for (const AlgorithmSpec& algorithm : family.algorithms)
      for (Params& p : algorithm.legal_space(&limits)) space.push_back({&algorithm, std::move(p)});

    ClassResult cr;
    cr.kernel = family.name;
    cr.shape_class = shape_class;
    cr.space_size = space.size();
    std::unique_ptr<Workload> workload = jobs[ji].tuning->make(rt, shape_class, rng);
    cr.problem = workload->problem();
    cr.flops = workload->flops();
    std::map<std::string, Evaluation> seen;
    Evaluation best;
    best.time_ms = std::numeric_limits<double>::infinity();
    const std::string prefix =
        "[" + std::to_string(ji + 1) + "/" + std::to_string(jobs.size()) + " " + family.name + "/" + shape_class + "]";

    auto out_of_budget = [&] {
      return seconds_since(class_start) >= class_budget ||
             (options.max_evals > 0 && cr.evaluations >= options.max_evals);
    };
    auto evaluate = [&](const Point& point) -> const Evaluation* {
      const std::string key = point.key();
      if (auto it = seen.find(key); it != seen.end()) return &it->second;
      Choice choice;
      choice.kernel = family.name;
      choice.shape_class = shape_class;
      choice.algorithm = point.algorithm->name;
      choice.params = point.params;
      Evaluation e = evaluate_candidate(*workload, choice, options.repeats, best.ok ? best.time_ms : 0);
      ++cr.evaluations;
      if (!e.ok) ++cr.rejected;
      if (e.ok && e.time_ms < best.time_ms) best = e;
      std::ostringstream line;
      line << prefix << " " << cr.evaluations << " evals (" << cr.rejected << " rejected), best " << std::fixed
           << std::setprecision(3) << (best.ok ? best.time_ms : 0) << " ms (" << std::setprecision(1)
           << (best.ok ? cr.flops / best.time_ms * 1e-6 : 0) << " GFLOP/s), " << std::setprecision(0)
           << std::max(0.0, class_budget - seconds_since(class_start)) << " s left | " << point.algorithm->name << " "
           << format_params(point.params) << ": "
           << (e.ok ? std::to_string(e.time_ms) + " ms" : "rejected: " + e.rejected);
      progress.update(line.str());
      if (options.record != nullptr) {
        std::ostringstream problem;
        for (const auto& [key, value] : cr.problem)
          problem << (problem.tellp() ? ", " : "") << json_string(key) << ": " << value;
        *options.record << "{\"kernel\": " << json_string(family.name) << ", \"class\": " << json_string(shape_class)
                        << ", \"problem\": {" << problem.str() << "}, \"choice\": " << json_choice(e) << "}\n"
                        << std::flush;
      }
      return &seen.emplace(key, std::move(e)).first->second;
    };

    // The built-in default is always measured: it is the baseline of the speed-up.
    const BuiltinChoice builtin = family.builtin_for(shape_class);
    const AlgorithmSpec* builtin_algorithm = family.find_algorithm(builtin.algorithm);
    cr.builtin = *evaluate({builtin_algorithm, builtin_algorithm->complete(builtin.params)});

    // Warm start: the choices of the profiles that already fit this device (an earlier
    // run's, or a shipped one for the same device or vendor) are measured next, so a
    // repeated `tune` starts from its last answer instead of from scratch.
    for (const ProfileCandidate& candidate : prior.candidates) {
      const ProfileEntry* entry = candidate.profile.find(family.name, shape_class);
      const AlgorithmSpec* algorithm = entry ? family.find_algorithm(entry->algorithm) : nullptr;
      if (algorithm == nullptr || algorithm->violation(entry->params, &limits) || out_of_budget()) continue;
      evaluate({algorithm, entry->params});
    }

    std::vector<std::size_t> order(space.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (options.strategy != Strategy::kExhaustive) std::shuffle(order.begin(), order.end(), rng);

    if (options.strategy == Strategy::kLocal) {
      // A small random sample finds good basins; coordinate descent then walks each
      // algorithm's best point (algorithms have different basins: a GPU's best gemv and
      // best large square rarely share one), changing one parameter at a time and moving
      // on the first improvement of over 1%.
      const std::size_t sample = std::min<std::size_t>(order.size(), 8);
      for (std::size_t i = 0; i < sample && !out_of_budget(); ++i) evaluate(space[order[i]]);
      auto best_of = [&](const AlgorithmSpec& algorithm) -> std::optional<Evaluation> {
        std::optional<Evaluation> found;
        for (const auto& [key, e] : seen)
          if (e.ok && e.algorithm == algorithm.name && (!found || e.time_ms < found->time_ms)) found = e;
        return found;
      };
      // The most promising algorithm is walked first, so a short budget goes to it.
      std::vector<const AlgorithmSpec*> walk_order;
      for (const AlgorithmSpec& algorithm : family.algorithms) walk_order.push_back(&algorithm);
      auto sampled_ms = [&](const AlgorithmSpec* a) {
        const auto e = best_of(*a);
        return e ? e->time_ms : std::numeric_limits<double>::infinity();
      };
      std::stable_sort(walk_order.begin(), walk_order.end(),
                       [&](const AlgorithmSpec* x, const AlgorithmSpec* y) { return sampled_ms(x) < sampled_ms(y); });
      for (const AlgorithmSpec* walked : walk_order) {
        const AlgorithmSpec& algorithm = *walked;
        std::optional<Evaluation> start_point = best_of(algorithm);
        if (!start_point) {
          // Never sampled (or every sample failed): start from the table's defaults.
          const Params defaults = algorithm.defaults();
          if (algorithm.violation(defaults, &limits) || out_of_budget()) continue;
          evaluate({&algorithm, defaults});
          start_point = best_of(algorithm);
          if (!start_point) continue;
        }
        Evaluation current = *start_point;
        bool improved = true;
        while (improved && !out_of_budget()) {
          improved = false;
          std::vector<Point> neighbours;
          for (const ParamSpec& spec : algorithm.params) {
            for (int v : spec.allowed) {
              if (v == current.params.at(spec.name)) continue;
              Params p = current.params;
              p[spec.name] = v;
              if (!algorithm.violation(p, &limits)) neighbours.push_back({&algorithm, p});
            }
          }
          std::shuffle(neighbours.begin(), neighbours.end(), rng);
          for (const Point& n : neighbours) {
            if (out_of_budget()) break;
            const Evaluation* e = evaluate(n);
            if (e->ok && e->time_ms < 0.99 * current.time_ms) {
              current = *e;
              improved = true;
              break;
            }
          }
        }
      }
    } else {
      for (std::size_t i : order) {
        if (out_of_budget()) break;
        evaluate(space[i]);
      }
    }
    progress.finish_line();
    cr.best = best.ok ? best : cr.builtin;
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
      result.profile.entries.push_back(entry);
    }
    result.classes.push_back(std::move(cr));
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
      << "GFLOP/s" << std::setw(10) << "speed-up" << std::setw(8) << "evals" << std::setw(8) << "secs"
      << "  best choice\n";
  for (const ClassResult& c : result.classes) {
    out << std::left << std::setw(14) << c.kernel << std::setw(13) << c.shape_class << std::setw(int(problem_width))
        << format_problem(c.problem) << std::right << std::fixed << std::setprecision(3) << std::setw(12)
        << (c.builtin.ok ? c.builtin.time_ms : 0.0) << std::setw(12) << (c.best.ok ? c.best.time_ms : 0.0)
        << std::setprecision(1) << std::setw(10) << (c.best.ok ? c.flops / c.best.time_ms * 1e-6 : 0.0)
        << std::setprecision(2) << std::setw(9) << c.speedup() << "x" << std::setw(8) << c.evaluations
        << std::setprecision(0) << std::setw(8) << c.seconds << "  "
        << (c.best.ok ? c.best.algorithm + " " + format_params(c.best.params) : "none verified") << "\n";
  }
  out << "tuned in " << std::fixed << std::setprecision(1) << result.seconds << " s\n";
}

void write_record_header(std::ostream& out, const DeviceInfo& device) {
  out << "{\"record\": 1, \"ocltk\": " << json_string(version()) << ", \"device\": " << json_string(device.name)
      << ", \"vendor\": " << json_string(device.vendor) << ", \"driver\": " << json_string(device.driver) << "}\n"
      << std::flush;
}

void print_summary_json(std::ostream& out, const TuneResult& result, const std::string& profile_path) {
  const ProfileDevice& d = result.profile.device;
  out << "{\n  \"device\": {\"name\": " << json_string(d.name) << ", \"vendor\": " << json_string(d.vendor)
      << ", \"driver\": " << json_string(d.driver) << ", \"platform\": " << json_string(d.platform) << "},\n"
      << "  \"profile\": " << json_string(profile_path) << ",\n  \"seconds\": " << std::setprecision(6)
      << result.seconds << ",\n  \"classes\": [";
  for (std::size_t i = 0; i < result.classes.size(); ++i) {
    const ClassResult& c = result.classes[i];
    out << (i ? "," : "") << "\n    {\"kernel\": " << json_string(c.kernel)
        << ", \"class\": " << json_string(c.shape_class) << ", \"problem\": {";
    bool first = true;
    for (const auto& [key, value] : c.problem) {
      out << (first ? "" : ", ") << json_string(key) << ": " << value;
      first = false;
    }
    out << "}, \"space_size\": " << c.space_size << ", \"evaluations\": " << c.evaluations
        << ", \"rejected\": " << c.rejected << ", \"seconds\": " << std::setprecision(6) << c.seconds
        << ", \"speedup\": " << c.speedup() << ",\n     \"default\": " << json_choice(c.builtin)
        << ",\n     \"best\": " << json_choice(c.best) << "}";
  }
  out << "\n  ]\n}\n";
}

}  // namespace ocltk::tuner

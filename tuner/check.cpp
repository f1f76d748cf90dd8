#include "check.hpp"

#include <iomanip>
#include <ostream>
#include <random>
#include <sstream>

#include "record.hpp"

namespace ocltk::tuner {
namespace {

EntryCheck run_entry(Runtime& rt, const std::vector<FamilyTuning>& families, const std::string& section,
                     const ProfileEntry& entry, double timeout_seconds, std::mt19937_64& rng) {
  EntryCheck check;
  check.section = section;
  check.entry = entry;
  check.problem = entry.problem;
  const FamilyTuning* tuning = nullptr;
  for (const FamilyTuning& f : families)
    if (f.family->name == entry.kernel) tuning = &f;
  const AlgorithmSpec* algorithm = tuning ? tuning->family->find_algorithm(entry.algorithm) : nullptr;
  if (algorithm == nullptr) {
    check.failure = "this ocltk has no " + entry.kernel + " algorithm '" + entry.algorithm + "' to run";
    return check;
  }
  Choice choice;
  choice.kernel = entry.kernel;
  choice.shape_class = entry.shape_class;
  choice.algorithm = entry.algorithm;
  choice.params = algorithm->complete(entry.params);
  check.adjusted = adapt_params_to_device(*algorithm, rt.device(), choice.params);
  const DeviceLimits limits = DeviceLimits::of(rt.device());
  if (const auto why = algorithm->violation(choice.params, &limits)) {
    check.failure = "illegal on this device: " + *why;
    return check;
  }
  try {
    std::unique_ptr<Workload> workload = entry.problem.empty() ? tuning->make(rt, entry.shape_class, rng)
                                         : tuning->make_for_class
                                             ? tuning->make_for_class(rt, entry.shape_class, entry.problem, rng)
                                             : tuning->make_for(rt, entry.problem, rng);
    check.problem = workload->problem();
    workload->timeout_seconds = timeout_seconds;
    workload->poison();
    check.time_ms = workload->run(choice);
    check.failure = workload->verify();
    check.ok = check.failure.empty();
    if (!check.ok) check.failure = "wrong result: " + check.failure;
  } catch (const BuildError& e) {
    check.failure = std::string("build failed: ") + e.what();
  } catch (const std::exception& e) {
    check.failure = e.what();
  }
  return check;
}

}  // namespace

std::vector<EntryCheck> check_profile_entries(Runtime& rt, const ProfileFile& file,
                                              const std::vector<FamilyTuning>* families, double timeout_seconds,
                                              std::ostream* progress) {
  const std::vector<FamilyTuning>& known = families ? *families : tunable_families();
  std::mt19937_64 rng(1);
  std::vector<EntryCheck> checks;
  const auto run = [&](const std::string& section, const ProfileEntry& entry) {
    checks.push_back(run_entry(rt, known, section, entry, timeout_seconds, rng));
    if (progress != nullptr) *progress << describe(checks.back()) << "\n" << std::flush;
  };
  if (file.schema == kProfileSchema) {
    for (const ProfileEntry& e : file.profile.entries) run("", e);
    return checks;
  }
  for (const Profile& p : file.database.profiles)
    for (const ProfileEntry& e : p.entries) run(device_label(p.device), e);
  for (const DerivedProfile& d : file.database.derived)
    for (const DerivedEntry& e : d.entries) run(d.describe(), e.choice);
  return checks;
}

std::string describe(const EntryCheck& c) {
  std::ostringstream out;
  out << (c.ok ? "ok    " : "FAIL  ");
  if (!c.section.empty()) out << "[" << c.section << "] ";
  out << c.entry.kernel << "/" << c.entry.shape_class << " " << c.entry.algorithm << " {"
      << format_params(c.entry.params) << "} on " << format_problem(c.problem);
  if (!c.adjusted.empty()) out << " (" << c.adjusted << ")";
  if (c.ok)
    out << std::fixed << std::setprecision(3) << " (" << c.time_ms << " ms)";
  else
    out << ": " << c.failure;
  return out.str();
}

}  // namespace ocltk::tuner

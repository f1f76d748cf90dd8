// `ocltk profile check`: every entry of a profile (or database) run once on this device and
// checked against the CPU reference, as the tuner checks a candidate. For a profile carried
// to another driver or device: an entry its compiler gets wrong is reported by name, so it
// can be re-tuned or its algorithm excluded (OCLTK_EXCLUDE_ALGORITHMS).
#pragma once

#include <string>
#include <vector>

#include "ocltk/profile_db.hpp"
#include "ocltk/runtime.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

struct EntryCheck {
  std::string section;  // the database section (device_label or DerivedProfile::describe); "" in a profile
  ProfileEntry entry;
  Problem problem;       // what it ran on: the entry's problem, else its class's (the tuner's)
  std::string adjusted;  // what the runtime changes on this device (adapt_params_to_device), "" for nothing
  bool ok = false;
  std::string failure;  // why not: illegal here, build failure, launch error, hang, wrong result
  double time_ms = 0;   // of the one run
};

// Runs each entry of `file` on the runtime's device with the parameters the runtime would
// use there; `families`: the workloads (nullptr: tunable_families(); tests inject their own).
// An entry of a kernel no family knows fails, saying so. A run still going after
// `timeout_seconds` counts as a hang. `progress`, where given, gets a line per entry as it
// finishes.
std::vector<EntryCheck> check_profile_entries(Runtime& rt, const ProfileFile& file,
                                              const std::vector<FamilyTuning>* families = nullptr,
                                              double timeout_seconds = 60, std::ostream* progress = nullptr);

// "ok    nf4_forward/decode  stream {RL=2 ...} on experts=8 ... (0.41 ms)" or
// "FAIL  ...: why", with the section and the adjustment where there are.
std::string describe(const EntryCheck& check);

}  // namespace ocltk::tuner

// `ocltk profile show|validate|merge|diff|check` and the profile lines of `ocltk devices`:
// the command-line front end of profiles and profile databases (runtime/profile*.hpp).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ocltk/runtime.hpp"

namespace ocltk::cli {

// args: the tokens after `profile`. Returns the exit status: 0 success; for `diff`, 0
// when the files agree and 1 when they differ (as diff(1)); for `check`, 1 when an entry
// failed on the device. Bad usage or input throws
// ocltk::Error (kInvalidArgument, kProfile, kIo), which main maps to exit status 2;
// `merge` writes its output atomically and only after every input was read.
int run_profile_command(const std::vector<std::string>& args);

const char* profile_help();

// The "profile:" line of `ocltk devices`: which file (and database section) serves the
// device first and at which step, then one "fallback:" line per further candidate.
void print_profile_selection(std::ostream& out, const ProfileSelection& selection);

}  // namespace ocltk::cli

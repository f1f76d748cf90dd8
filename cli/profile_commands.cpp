#include "profile_commands.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "args.hpp"
#include "check.hpp"
#include "ocltk/ocltk.hpp"
#include "tuner.hpp"

namespace ocltk::cli {
namespace {

const char* const kProfileHelp = R"(Usage: ocltk profile show FILE
       ocltk profile validate FILE...
       ocltk profile merge FILE... -o DB.yaml
       ocltk profile diff A B
       ocltk profile check FILE [--device SEL]

show      prints the device header and one line per kernel and shape class, with where
          the entry came from where it says (provenance); for a profile database, each
          device profile and each derived section
validate  checks the schema, the device header(s) and every entry against the kernels'
          parameter tables, of each FILE: prints a line per valid file and, for a file that
          is not, one line on stderr naming it and what is wrong (file:line:column where the
          YAML says), and goes on with the next; exits 0 when all are valid, 2 otherwise
merge     writes a profile database (schema 2) holding every input's device profiles,
          one per device name + driver (for the same device + driver the entry with the
          later tuner date wins, per kernel and class), and entries derived per
          architecture and per vendor: per kernel and class, the choice the most of the
          group's devices picked (docs/profile-schema.md). Inputs may be profiles or
          databases (their derived sections are recomputed). The runtime reads the
          database from OCLTK_PROFILE_PATH, the user folder or --profile.
            -o, --out DB.yaml   the database to write (atomically; may be an input)
diff      prints, per kernel and shape class (and per database section), entries only in
          one file, changed algorithm or parameters, and time and GFLOP/s changes where
          both measured the same problem, and a changed provenance; a class with
          several entries (tune --shapes) is compared entry by entry, matched by problem. Exit status 0 when the files
          agree, 1 when they differ, 2 on bad input.
check     runs every entry of FILE (a profile or a database: its device profiles and derived
          sections) once on this device, with the parameters the runtime would use here, on
          the entry's own problem (its class's where it names none), and checks the result
          against the CPU reference as `tune` checks a candidate; prints one line per entry
          (ok, or FAIL and why: a wrong result, a build or launch failure, a hang, parameters
          illegal here) and exits 1 if any failed, 0 if none did. For a profile carried to
          another driver or device; a failing algorithm can then be excluded with
          OCLTK_EXCLUDE_ALGORITHMS (docs/robustness.md). Entries of excluded algorithms are
          checked too.
            --device SEL        device index or name substring (default: OCLTK_DEVICE, else
                                the first GPU, else the first device)
)";

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

// Positional arguments, plus -o/--out for merge; any other option is a usage error.
struct ProfileArgs {
  std::vector<std::string> files;
  std::optional<std::string> out;  // merge only; given empty is refused by name
  std::string device;              // check only
};

ProfileArgs parse_args(const std::vector<std::string>& tokens, const std::string& verb) {
  const std::string command = "ocltk profile " + verb;
  ProfileArgs args;
  const bool takes_out = verb == "merge", takes_device = verb == "check";
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (takes_out && (t == "-o" || t == "--out")) {
      if (i + 1 >= tokens.size()) usage(t + " needs a value (`" + command + " --help`)");
      args.out = tokens[++i];
    } else if (takes_out && t.rfind("--out=", 0) == 0) {
      args.out = t.substr(6);
    } else if (takes_device && t == "--device") {
      if (i + 1 >= tokens.size()) usage(t + " needs a value (`" + command + " --help`)");
      args.device = tokens[++i];
    } else if (takes_device && t.rfind("--device=", 0) == 0) {
      args.device = t.substr(9);
    } else if (t.size() > 1 && t[0] == '-') {
      usage("unknown option " + t + " for `" + command + "` (see `ocltk profile --help`)");
    } else {
      args.files.push_back(t);
    }
  }
  return args;
}

std::string problem_text(const ProfileEntry& e) {
  std::ostringstream text;
  for (const auto& [key, value] : e.problem) text << (text.tellp() ? " " : "") << key << "=" << value;
  return text.str();
}

void print_entries(std::ostream& out, const std::vector<ProfileEntry>& entries) {
  std::size_t kernel_w = 8, class_w = 7, problem_w = 9, algo_w = 6;
  for (const ProfileEntry& e : entries) {
    kernel_w = std::max(kernel_w, e.kernel.size() + 2);
    class_w = std::max(class_w, e.shape_class.size() + 2);
    problem_w = std::max(problem_w, problem_text(e).size() + 2);
    algo_w = std::max(algo_w, e.algorithm.size() + 2);
  }
  out << std::left << std::setw(int(kernel_w)) << "kernel" << std::setw(int(class_w)) << "class"
      << std::setw(int(problem_w)) << "problem" << std::setw(int(algo_w)) << "algo" << std::right << std::setw(10)
      << "ms" << std::setw(10) << "GFLOP/s" << std::setw(10) << "vs dflt"
      << "  params\n";
  for (const ProfileEntry& e : entries) {
    // "vs dflt" (as tune's summary writes it) where the default's time is today's default's
    // (default_time_counts, false without a time); an entry
    // whose tune timed a stand-in or an older default says which point it timed instead.
    const bool counts = default_time_counts(e);
    const std::string other_default = e.default_time_ms > 0 && !counts
                                          ? "  (its default time is of " + e.default_algorithm + " " +
                                                format_params(e.default_params) + ", not today's built-in default)"
                                          : "";
    out << std::left << std::setw(int(kernel_w)) << e.kernel << std::setw(int(class_w)) << e.shape_class
        << std::setw(int(problem_w)) << problem_text(e) << std::setw(int(algo_w)) << e.algorithm << std::right
        << std::setprecision(3) << std::setw(10) << e.time_ms << std::setprecision(1) << std::setw(10) << e.gflops
        << ocltk::tuner::summary_cell(counts && e.time_ms > 0, e.default_time_ms / e.time_ms, 2, 10, "x") << "  "
        << format_params(e.params) << (e.provenance.empty() ? "" : "  (" + describe(e.provenance) + ")")
        << other_default << "\n";
  }
}

void print_profile(std::ostream& out, const Profile& p) {
  out << "device  " << p.device.name << " | vendor " << p.device.vendor << " | driver " << p.device.driver
      << " | platform " << p.device.platform << " | architecture "
      << (p.device.architecture.empty() ? "-" : p.device.architecture) << " | " << p.device.compute_units
      << " compute units\n";
  out << std::fixed;
  if (!p.tuner_version.empty() || !p.date.empty())
    out << "tuner   " << p.tuner_version << ", " << p.date << ", " << std::setprecision(1) << p.tuning_seconds
        << " s\n";
  out << "\n";
  print_entries(out, p.entries);
}

void print_derived(std::ostream& out, const DerivedProfile& g) {
  out << g.describe() << ", from";
  for (const std::string& d : g.devices) out << (&d == &g.devices.front() ? " " : ", ") << d;
  out << "\n\n";
  std::size_t kernel_w = 8, class_w = 7, algo_w = 6;
  for (const DerivedEntry& e : g.entries) {
    kernel_w = std::max(kernel_w, e.choice.kernel.size() + 2);
    class_w = std::max(class_w, e.choice.shape_class.size() + 2);
    algo_w = std::max(algo_w, e.choice.algorithm.size() + 2);
  }
  out << std::left << std::setw(int(kernel_w)) << "kernel" << std::setw(int(class_w)) << "class"
      << std::setw(int(algo_w)) << "algo" << std::setw(12) << "chosen by"
      << "params\n";
  for (const DerivedEntry& e : g.entries) {
    const std::string votes = std::to_string(e.chosen_by.size()) + " of " + std::to_string(e.measured);
    out << std::left << std::setw(int(kernel_w)) << e.choice.kernel << std::setw(int(class_w)) << e.choice.shape_class
        << std::setw(int(algo_w)) << e.choice.algorithm << std::setw(12) << votes << format_params(e.choice.params)
        << "\n";
  }
}

std::size_t entry_count(const ProfileFile& f) {
  std::size_t n = 0;
  for (const Profile& p : f.device_profiles()) n += p.entries.size();
  for (const DerivedProfile& g : f.database.derived) n += g.entries.size();
  return n;
}

// Each file checked in turn, the bad ones named on stderr: exit 0 when all are valid, 2 otherwise.
int validate(const ProfileArgs& args) {
  if (args.files.empty()) usage("`ocltk profile validate` needs at least one FILE");
  int status = 0;
  for (const std::string& path : args.files) {
    ProfileFile f;
    try {
      f = read_profile_file(path);
    } catch (const Error& e) {
      std::cerr << "ocltk: " << e.what() << "\n";
      status = 2;
      continue;
    }
    if (f.schema == kProfileSchema)
      std::cout << f.path << ": valid (schema " << f.schema << ", device '" << f.profile.device.name << "', "
                << f.profile.entries.size() << " entries)\n";
    else
      std::cout << f.path << ": valid (schema " << f.schema << " database, " << f.database.profiles.size()
                << " device profiles, " << f.database.derived.size() << " derived sections, " << entry_count(f)
                << " entries)\n";
  }
  return status;
}

int show(const ProfileArgs& args) {
  if (args.files.size() != 1) usage("`ocltk profile show` takes exactly one FILE");
  const ProfileFile f = read_profile_file(args.files[0]);
  if (f.schema == kProfileSchema) {
    std::cout << "profile " << f.path << " (schema " << f.schema << ")\n";
    print_profile(std::cout, f.profile);
    return 0;
  }
  std::cout << "profile database " << f.path << " (schema " << f.schema << "): " << f.database.profiles.size()
            << " device profiles, " << f.database.derived.size() << " derived sections\n";
  for (const Profile& p : f.database.profiles) {
    std::cout << "\n";
    print_profile(std::cout, p);
  }
  for (const DerivedProfile& g : f.database.derived) {
    std::cout << "\n";
    print_derived(std::cout, g);
  }
  return 0;
}

int merge(const ProfileArgs& args) {
  if (args.files.empty()) usage("`ocltk profile merge` needs at least one FILE");
  if (!args.out) usage("`ocltk profile merge` needs -o DB.yaml (see `ocltk profile --help`)");
  check_output_path(*args.out, "-o");
  // Every input is read and checked before anything is written.
  std::vector<Profile> inputs;
  for (const std::string& path : args.files) {
    const ProfileFile f = read_profile_file(path);
    for (const Profile& p : f.device_profiles()) inputs.push_back(p);
  }
  const ProfileDatabase db = merge_profiles(inputs);
  write_profile_database_atomically(*args.out, db);
  std::cout << "wrote " << *args.out << ": " << db.profiles.size() << " device profiles from " << inputs.size()
            << " in " << args.files.size() << " files";
  if (inputs.size() > db.profiles.size())
    std::cout << " (" << inputs.size() - db.profiles.size() << " merged into a profile of the same device + driver)";
  std::cout << "\n";
  for (const DerivedProfile& g : db.derived)
    std::cout << "  " << g.describe() << ": " << g.entries.size() << " entries from " << g.devices.size()
              << (g.devices.size() == 1 ? " device\n" : " devices\n");
  return 0;
}

int diff(const ProfileArgs& args) {
  if (args.files.size() != 2) usage("`ocltk profile diff` takes exactly two files, A and B");
  const ProfileFile a = read_profile_file(args.files[0]);
  const ProfileFile b = read_profile_file(args.files[1]);
  const std::vector<std::string> lines = diff_profile_files(a, b);
  for (const std::string& line : lines) std::cout << line << "\n";
  return lines.empty() ? 0 : 1;
}

// Every entry run once on the device; exit 1 where any failed.
int check(const ProfileArgs& args) {
  if (args.files.size() != 1) usage("`ocltk profile check` takes exactly one FILE");
  const ProfileFile f = read_profile_file(args.files[0]);  // bad input is refused before the device opens
  RuntimeOptions options;
  options.device = args.device;
  options.use_profiles = false;      // the entries are run as given, not searched for
  options.exclude_algorithms = "-";  // every entry is checked, excluded or not
  Result<Runtime> rt = Runtime::open(options);
  rt.status().throw_if_error();
  std::cout << "checking " << f.path << " on " << rt->device().name << " (" << rt->device().platform << ", driver "
            << rt->device().driver << ")\n"
            << std::flush;
  const std::vector<tuner::EntryCheck> checks = tuner::check_profile_entries(*rt, f, nullptr, 60, &std::cout);
  std::size_t failed = 0;
  for (const tuner::EntryCheck& c : checks) failed += c.ok ? 0 : 1;
  std::cout << checks.size() << (checks.size() == 1 ? " entry" : " entries") << " checked, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace

int run_profile_command(const std::vector<std::string>& tokens) {
  if (tokens.empty()) usage("`ocltk profile` needs show, validate, merge, diff or check (see `ocltk profile --help`)");
  const std::string verb = tokens[0];
  if (verb != "show" && verb != "validate" && verb != "merge" && verb != "diff" && verb != "check")
    usage("unknown profile command '" + verb + "' (show, validate, merge, diff or check)");
  const ProfileArgs args = parse_args(std::vector<std::string>(tokens.begin() + 1, tokens.end()), verb);
  if (verb == "merge") return merge(args);
  if (verb == "diff") return diff(args);
  if (verb == "check") return check(args);
  if (verb == "validate") return validate(args);
  return show(args);
}

const char* profile_help() { return kProfileHelp; }

void print_profile_selection(std::ostream& out, const ProfileSelection& selection) {
  if (selection.candidates.empty()) {
    out << "      profile: none fits; built-in defaults\n";
  } else {
    for (std::size_t i = 0; i < selection.candidates.size(); ++i) {
      const ProfileCandidate& c = selection.candidates[i];
      out << (i == 0 ? "      profile: " : "      fallback: ") << c.where() << " (match: " << to_string(c.level)
          << ", from " << c.tier << ")\n";
    }
  }
  for (const std::string& w : selection.warnings) out << "      warning: " << w << "\n";
}

}  // namespace ocltk::cli

// Tuning profiles: YAML files, one per device, schema 1 (docs/profile-schema.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/params.hpp"

namespace ocltk {

struct DeviceInfo;

constexpr int kProfileSchema = 1;

struct ProfileDevice {
  std::string name, vendor, driver, platform, architecture, type;
  std::uint32_t compute_units = 0;
  std::uint64_t global_mem_bytes = 0, local_mem_bytes = 0;
  std::uint64_t max_work_group_size = 0;
};

// Where an entry came from, as data (docs/profile-schema.md): `tuned` (measured best by
// `ocltk tune` on its problem) or `pinned` (chosen by hand from a benchmark). `results` names
// the measurement, a file of the repository: read it with `git show COMMIT:RESULTS` where
// `commit` is given (the file may have left the tree since), else in the current tree.
struct ProfileProvenance {
  std::string kind;     // "" (not recorded), "tuned" or "pinned"
  std::string results;  // e.g. "results/h200/bench-nf4_mixtral.json"
  std::string commit;   // a git commit holding `results`, 7 to 40 hex digits
  std::string note;     // one line: what in `results` the entry rests on
  bool empty() const { return kind.empty(); }
  bool operator==(const ProfileProvenance& o) const {
    return kind == o.kind && results == o.results && commit == o.commit && note == o.note;
  }
  bool operator!=(const ProfileProvenance& o) const { return !(*this == o); }
};

// The kinds a profile may name, and a one-line description of a provenance ("pinned from
// FILE at COMMIT: NOTE"); "" for none.
bool is_provenance_kind(const std::string& kind);
std::string describe(const ProfileProvenance& provenance);

struct ProfileEntry {
  std::string kernel;                           // family, e.g. "gemm_nt"
  std::string shape_class;                      // e.g. "large"
  std::string algorithm;                        // e.g. "tiled"
  Params params;                                // complete (every parameter of the algorithm)
  std::map<std::string, std::int64_t> problem;  // the problem it was measured on
  double time_ms = 0;                           // median kernel time measured by the tuner
  double gflops = 0;
  double default_time_ms = 0;  // the built-in default on the same problem, 0 if unknown
  // The built-in default's point that default_time_ms timed (its parameters complete in the
  // tables of the code that tuned): built-in defaults change between versions, and a time
  // says what today's default would save only where the point is still today's. Empty in
  // profiles written before the field, and where no default was timed.
  std::string default_algorithm;
  Params default_params;
  ProfileProvenance provenance;  // empty in profiles written before the field
};

struct Profile {
  int schema = kProfileSchema;
  ProfileDevice device;
  std::string tuner_version, date;
  double tuning_seconds = 0;
  std::vector<ProfileEntry> entries;
  std::string path;  // where it was read from; empty for one built in memory

  // The entry for a kernel and class. A class may hold several entries, each tuned on its
  // own problem (`tune --shapes`): with `problem`, the one nearest to it in log space
  // (problem_distance); without, the first.
  const ProfileEntry* find(const std::string& kernel, const std::string& shape_class,
                           const std::map<std::string, std::int64_t>* problem = nullptr) const;
};

ProfileDevice profile_device_of(const DeviceInfo& device);

// Whether an entry's default_time_ms may be read as today's built-in default's time on its
// problem: the entry names the default's point and it is today's (KernelFamily::builtin_point,
// the point completed in today's tables), or it names none (a profile written before the
// field: taken at its word). A tune that excluded the default's algorithm timed a stand-in,
// and a built-in default may change between versions; false also without a time.
bool default_time_counts(const ProfileEntry& entry);

// nf4's input width of a problem: 32 where it has no input_bits (such a problem was measured
// on, or launches, f32 input: the tuner's).
std::int64_t input_bits_of(const std::map<std::string, std::int64_t>& problem);

// nf4's experts with rows in a problem: its `active` where it says (a launch that counted
// them from its offsets), else min(rows, experts), the rows spread evenly as the tuner and
// the benches spread them; -1 for a problem without rows and experts.
std::int64_t active_experts_of(const std::map<std::string, std::int64_t>& problem);

// The most rows on one expert that `rows` rows over `active` experts with rows allow:
// [ceil(rows / active), rows - active + 1], the first an even spread's longest segment (the
// longest holds at least the mean and leaves a row to each other expert); [0, 0] for none.
std::pair<std::int64_t, std::int64_t> max_expert_rows_range(std::int64_t rows, std::int64_t active);

// nf4's most rows on one expert in a problem: its `max_rows` where it says (a launch that
// counted them, an entry measured on routed rows), else an even spread's longest segment
// (max_expert_rows_range's first); -1 for a problem without rows and experts.
std::int64_t max_expert_rows_of(const std::map<std::string, std::int64_t>& problem);

// How far apart two problems are: the sum over their shared dimensions of
// |log2(a) - log2(b)| (a dimension one side lacks does not count; nf4's input_bits counts
// four times, since another input width takes another code path, and is 32 where a side
// lacks it: the tuner measures f32). nf4's rows count as two dimensions, the experts with
// rows (active_experts_of) and the rows per such expert: for two even spreads over as many
// experts that is |log2| of the rows' ratio, as for any dimension, while a launch whose rows
// crowd on a few experts (top-k routing) goes to entries measured at its segments' length
// and its amount of work rather than at its total rows. A third nf4 term, |log2| of the ratio
// of the two problems' crowding (max_expert_rows_of over ceil(rows / active_experts_of), the
// longest segment of an even spread: 1 for every even spread, so it is zero between even
// spreads), keeps apart an even spread and a
// routed layout of the same rows over as many experts, whose best choices differ (a kernel
// that takes 4 rows a pass runs 7 rows on one expert in two). A launch is served by the entry
// of its class whose problem is nearest.
double problem_distance(const std::map<std::string, std::int64_t>& a, const std::map<std::string, std::int64_t>& b);

// Whether two problems are the same: every dimension equal, nf4's input_bits 32 and a side
// without it alike (the tuner writes none for f32; pinned entries may say 32).
bool same_problem(const std::map<std::string, std::int64_t>& a, const std::map<std::string, std::int64_t>& b);

// Parses and validates a profile: schema version, device header, every entry's
// kernel, class and algorithm known, every parameter in its table's allowed values and
// every device-independent constraint holding. Throws Error(kProfile) whose message
// starts with "FILE:LINE:COLUMN: " (the YAML position of the fault).
Profile read_profile(const std::string& path);
Profile parse_profile(const std::string& text, const std::string& name);
std::string emit_profile(const Profile& profile);
// Temporary file in the same directory, then rename: readers never see half a file.
void write_profile_atomically(const std::string& path, const Profile& profile);

// How well a profile's device header fits a device, best first.
enum class MatchLevel { kExact = 0, kDevice = 1, kArchitecture = 2, kVendor = 3, kNone = 4 };
const char* to_string(MatchLevel level);
MatchLevel match_level(const ProfileDevice& header, const DeviceInfo& device);
// The architecture step's test: both architectures known and equal, and the vendors equal
// (case-insensitively) unless the architecture is a PoCL target (kPoclArchitecturePrefix),
// which PoCL builds the same way on any vendor's CPU.
bool same_architecture(const std::string& architecture_a, const std::string& vendor_a,
                       const std::string& architecture_b, const std::string& vendor_b);

}  // namespace ocltk

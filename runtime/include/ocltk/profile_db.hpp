// Profile databases (schema 2, docs/profile-schema.md): the profiles of a fleet's
// devices in one file, plus entries derived from them per architecture and per vendor
// for devices that have no profile of their own. Built by `ocltk profile merge`.
#pragma once

#include <string>
#include <vector>

#include "ocltk/profile.hpp"

namespace ocltk {

constexpr int kProfileDatabaseSchema = 2;

// One kernel and class of a derived section: the member devices' choice that serves the
// group (see derive_profiles), and the evidence for it.
struct DerivedEntry {
  ProfileEntry choice;                 // kernel, class, algorithm, params; no measurements
  std::vector<std::string> chosen_by;  // member devices whose own best it is
  int measured = 0;                    // member devices with an entry for this kernel and class
};

// The choices for every device of one architecture (level kArchitecture: same vendor and
// architecture) or of one vendor (kVendor).
struct DerivedProfile {
  MatchLevel level = MatchLevel::kArchitecture;
  std::string vendor, architecture;  // architecture is empty at vendor level
  std::vector<std::string> devices;  // the member devices it was derived from
  std::vector<DerivedEntry> entries;

  const DerivedEntry* find(const std::string& kernel, const std::string& shape_class) const;
  // kArchitecture or kVendor when this section serves `device` at its level, else kNone.
  MatchLevel fit(const DeviceInfo& device) const;
  // "derived architecture sm_90 (NVIDIA Corporation)" / "derived vendor NVIDIA Corporation"
  std::string describe() const;
  // As a profile with the group's header (no device name) and the chosen entries: what
  // the runtime's fallback chain ranks.
  Profile as_profile(const std::string& path) const;
};

struct ProfileDatabase {
  // One per device name + driver, ordered by name, newest tuner date first within a name.
  std::vector<Profile> profiles;
  std::vector<DerivedProfile> derived;  // architecture sections, then vendor sections
  std::string path;
};

// What a profile file holds: one device's profile (schema 1) or a database (schema 2).
struct ProfileFile {
  int schema = kProfileSchema;
  Profile profile;           // schema 1
  ProfileDatabase database;  // schema 2
  std::string path;
  // The device profiles it holds: the one profile, or the database's members.
  std::vector<Profile> device_profiles() const;
};

// Reads either kind; faults throw Error(kProfile) "FILE:LINE:COLUMN: ...", a missing file
// Error(kIo). A database is validated like a profile, item by item, and may not list one
// device + driver (or one derived group) twice.
ProfileFile read_profile_file(const std::string& path);
ProfileFile parse_profile_file(const std::string& text, const std::string& name);

// "NAME (driver DRIVER)": how messages and derived sections name a member device.
std::string device_label(const ProfileDevice& device);

// Merges device profiles into a database. Profiles of the same device name and driver
// become one member: per kernel and class the entry of the profile with the later tuner
// date wins (ISO 8601 dates compare as text; a missing date is the oldest; at equal dates
// the later input wins), and the member's header and tuner fields are the newest
// profile's. Derived sections are recomputed (derive_profiles).
ProfileDatabase merge_profiles(const std::vector<Profile>& inputs);

// The derived sections of a set of members: one per (vendor, architecture) with a known
// architecture and one per vendor (vendors compare case-insensitively). Per kernel and
// class, among the choices (algorithm + params) that the group's devices picked as their
// own best, the one picked by the most devices wins; a device name counts once (its
// newest member with an entry). Ties go to the choice with the larger geometric-mean
// speed-up over the built-in default on the devices that picked it (default_time_ms /
// time_ms where default_time_counts, 1 where unknown), then to the first in (algorithm,
// params) order.
std::vector<DerivedProfile> derive_profiles(const std::vector<Profile>& members);

std::string emit_profile_database(const ProfileDatabase& database);
// Temporary file in the same directory, then rename, as write_profile_atomically.
void write_profile_database_atomically(const std::string& path, const ProfileDatabase& database);

// Differences between two profile files, one line each (empty when they agree): per
// section (the one profile of a schema-1 file; each member and derived section of a
// database, matched by device + driver or group) and per kernel and class, entries only
// on one side, a different algorithm or parameters, and on the same problem a change of
// time and GFLOP/s. Two schema-1 files are compared with each other whatever their
// devices, and a different device header is one more line.
std::vector<std::string> diff_profile_files(const ProfileFile& a, const ProfileFile& b);

}  // namespace ocltk

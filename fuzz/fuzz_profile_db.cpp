// libFuzzer target: the profile database reader (parse_profile_file, schema 1 or 2,
// runtime/src/profile_db.cpp) on arbitrary text, then what `profile merge` and `profile
// diff` do with what it accepts. Bad input must end in ocltk::Error; an accepted file must
// merge without error, and diff against itself as equal.
#include <cstdint>
#include <string>

#include "ocltk/profile_db.hpp"
#include "ocltk/status.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ocltk::ProfileFile file;
  try {
    file = ocltk::parse_profile_file(text, "fuzz.yaml");
  } catch (const ocltk::Error&) {
    return 0;
  }
  if (!ocltk::diff_profile_files(file, file).empty()) __builtin_trap();
  const ocltk::ProfileDatabase db = ocltk::merge_profiles(file.device_profiles());
  const ocltk::ProfileFile merged = ocltk::parse_profile_file(ocltk::emit_profile_database(db), "merged.yaml");
  if (merged.database.profiles.size() != db.profiles.size()) __builtin_trap();
  return 0;
}

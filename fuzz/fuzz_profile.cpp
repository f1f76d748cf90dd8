// libFuzzer target: the profile loader (parse_profile, runtime/src/profile.cpp) on arbitrary
// text. Bad input must end in ocltk::Error, never another exception, a crash or a sanitizer
// report; a profile it accepts must emit as text that parses back to the same entries.
#include <cstdint>
#include <string>

#include "ocltk/profile.hpp"
#include "ocltk/status.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ocltk::Profile profile;
  try {
    profile = ocltk::parse_profile(text, "fuzz.yaml");
  } catch (const ocltk::Error&) {
    return 0;
  }
  const ocltk::Profile again = ocltk::parse_profile(ocltk::emit_profile(profile), "emitted.yaml");
  if (again.entries.size() != profile.entries.size()) __builtin_trap();
  for (std::size_t i = 0; i < again.entries.size(); ++i) {
    const ocltk::ProfileEntry &a = profile.entries[i], &b = again.entries[i];
    if (a.kernel != b.kernel || a.shape_class != b.shape_class || a.algorithm != b.algorithm || a.params != b.params ||
        a.problem != b.problem || a.default_algorithm != b.default_algorithm || a.default_params != b.default_params)
      __builtin_trap();
  }
  return 0;
}

// libFuzzer target: the `tune --shapes` file reader (parse_shapes, tuner/shapes.cpp) on
// arbitrary text, with the tuner's real families (their problem keys, class rules and model
// derivations). Bad input must end in ocltk::Error; every problem it accepts has a class of
// its family.
#include <cstdint>
#include <string>

#include "ocltk/status.hpp"
#include "shapes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const ocltk::tuner::UserShape& s :
         ocltk::tuner::parse_shapes(text, "fuzz.yaml", ocltk::tuner::tunable_families()))
      if (s.tuning == nullptr || s.tuning->family->find_class(s.shape_class) == nullptr) __builtin_trap();
  } catch (const ocltk::Error&) {
  }
  return 0;
}

// ocltk.h from C++, as an engine written in C++ may include it: compiled with -pedantic
// -Werror beside test_capi.c, which calls this to check the C linkage works from both sides.
#include <cstring>

#include "ocltk/ocltk.h"

extern "C" int capi_from_cxx(void) {
  static_assert(
      OCLTK_VERSION_NUMBER == OCLTK_MAKE_VERSION(OCLTK_VERSION_MAJOR, OCLTK_VERSION_MINOR, OCLTK_VERSION_PATCH),
      "version macros");
  ocltk_runtime* none = nullptr;
  const ocltk_status s = ocltk_runtime_wrap(nullptr, nullptr, nullptr, nullptr, &none);
  return ocltk_version() == OCLTK_VERSION_NUMBER && s == OCLTK_INVALID_ARGUMENT && none == nullptr &&
         std::strstr(ocltk_last_error(), "context is NULL") != nullptr;
}

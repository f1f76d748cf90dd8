#include "user_dirs.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace ocltk::detail {

std::string home_dir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return home;
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(std::size_t(size > 0 ? size : 16384));
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr ||
      found->pw_dir == nullptr || found->pw_dir[0] != '/')
    return "";
  return found->pw_dir;
}

std::string xdg_base_dir(const char* variable, const char* under_home) {
  if (const char* v = std::getenv(variable); v != nullptr && v[0] == '/') return v;
  const std::string home = home_dir();
  return home.empty() ? "" : (std::filesystem::path(home) / under_home).string();
}

}  // namespace ocltk::detail

// Internal to the runtime (and the tuner through user_profile_dir): the user's folders as
// the XDG Base Directory specification defines them.
#pragma once

#include <string>

namespace ocltk::detail {

// The user's home folder: $HOME where it is set and not empty, else the home folder the
// password database gives the user (getpwuid_r, where a login shell would have taken HOME
// from); "" where there is neither.
std::string home_dir();

// $`variable` (XDG_CONFIG_HOME, XDG_CACHE_HOME) where it holds an absolute path (the spec
// calls a relative one invalid, to be ignored), else home_dir()/`under_home` (".config",
// ".cache"); "" where there is no home folder either.
std::string xdg_base_dir(const char* variable, const char* under_home);

}  // namespace ocltk::detail

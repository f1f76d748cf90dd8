// `ocltk run nf4-forward`, `run nf4-backward`, `quantize nf4` and `dequantize nf4`:
// the command-line front end of the nf4 family (a thin layer over runtime/nf4).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ocltk/nf4.hpp"

namespace ocltk::cli {

// Bad usage or bad input: main maps it to exit status 2, as ocltk::Error with
// kInvalidArgument / kNotFound / kProfile / kIo and npy::Error.
struct Nf4UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// sub: "nf4-forward", "nf4-backward" (after `run`), "quantize", "dequantize" (the
// `quantize nf4` / `dequantize nf4` commands); args: the tokens after those words.
// Returns 0 on success; throws Nf4UsageError, npy::Error or ocltk::Error otherwise.
// Outputs are written atomically, and only after every check passed.
int run_nf4_command(const std::string& sub, const std::vector<std::string>& args);

// The flags of a sub-command as given, each once and known to it (parsing only, nothing
// read): what run_nf4_command starts with. Throws Nf4UsageError.
using Nf4Flags = std::map<std::string, std::string>;
Nf4Flags parse_nf4_flags(const std::string& sub, const std::vector<std::string>& args);

// The window geometry the flags give (--experts, optional where `experts_optional`: 1;
// --out-features, --in-features, --block-size, --element-offset), validated; throws
// Nf4UsageError naming the flag or the fault.
Nf4Geometry nf4_geometry_of(const Nf4Flags& flags, const std::string& command, bool experts_optional);

// The --help text of a sub-command (same `sub` values), or "" for an unknown one.
const char* nf4_help(const std::string& sub);

}  // namespace ocltk::cli

// `ocltk run lora`: the command-line front end of the LoRA apply (a thin layer over
// runtime/lora; docs/lora.md).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ocltk::cli {

// Bad usage or bad input: main maps it to exit status 2.
struct LoraUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// args: the tokens after `run lora`. Returns 0 on success; throws LoraUsageError, npy::Error
// or ocltk::Error otherwise. Every input is read and checked before the device is opened;
// --out is written atomically, and only after the launch succeeded.
int run_lora_command(const std::vector<std::string>& args);

// The --help text.
const char* lora_help();

}  // namespace ocltk::cli

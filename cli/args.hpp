// The command line's parsing, shared by the commands of `ocltk` (and read by the fuzz
// target fuzz/fuzz_cli_args.cpp): options, numbers, lists and output paths. Every fault is a
// UsageError naming the option, which main maps to exit status 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ocltk::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The options one command takes: those with a value ("--name value" or "--name=value") and
// flags ("--name").
struct CommandSyntax {
  std::string command;  // "ocltk tune", named in the errors
  std::set<std::string> with_value, flags;
};
extern const CommandSyntax kDevicesSyntax, kTuneSyntax, kRunGemmNtSyntax;

// Options of one command. Tokens not starting with "--" (and "--" itself) are positional.
class Args {
 public:
  Args(const std::vector<std::string>& tokens, const CommandSyntax& syntax);
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string required(const std::string& name) const;  // throws UsageError naming it when absent
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

// The whole of `text` as an integer in [min_value, max_value], else UsageError naming `option`.
long long parse_int(const std::string& text, const std::string& option, long long min_value, long long max_value);
// The whole of `text` as a number, else UsageError naming `option`.
double parse_double(const std::string& text, const std::string& option);
// --max-evals: "N" (1 .. 10^9 candidates; fraction 0) or "P%" (0 < P <= 100; count 0).
void parse_max_evals(const std::string& text, std::int64_t& count, double& fraction);
// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_list(const std::string& text);

// Refuses now, with a UsageError naming `option`, an output path that could not be written
// later: empty, naming a folder (a trailing '/', ".", ".."), or something that exists and
// is not a regular file (a folder, a device, a FIFO: replacing /dev/null is not writing a
// file); then creates its folder if missing and makes and removes a probe file beside it.
void check_output_path(const std::string& path, const std::string& option);

}  // namespace ocltk::cli

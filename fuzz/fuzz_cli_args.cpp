// libFuzzer target: the command line's parsing (cli/args.cpp, the nf4 commands' flags and
// geometry, OCLTK_EXCLUDE_ALGORITHMS' list). The input is NUL-separated tokens; its first
// byte picks the command whose syntax parses them, and every value goes through the parsers
// the commands use on it. Bad input must end in a usage error (exit 2 in the CLI), never
// another exception or a crash. Nothing here reads or writes a file or opens a device.
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "nf4_commands.hpp"
#include "ocltk/family.hpp"
#include "ocltk/status.hpp"

namespace {

using namespace ocltk::cli;

std::vector<std::string> tokens_of(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> tokens(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      tokens.emplace_back();
    else
      tokens.back().push_back(char(data[i]));
  }
  return tokens;
}

// What cmd_tune and cmd_run_gemm_nt do with the values, short of files and devices.
void parse_values(const Args& args) {
  std::int64_t count = 0;
  double fraction = 0;
  if (auto v = args.get("--max-evals")) parse_max_evals(*v, count, fraction);
  for (const char* name : {"--budget", "--timeout", "--alpha"})
    if (auto v = args.get(name)) parse_double(*v, name);
  if (auto v = args.get("--repeats")) parse_int(*v, "--repeats", 1, 1000);
  if (auto v = args.get("--seed")) parse_int(*v, "--seed", 0, 1LL << 62);
  if (auto v = args.get("--seeds")) parse_int(*v, "--seeds", 1, 100000);
  if (auto v = args.get("--jobs")) parse_int(*v, "--jobs", 0, 256);
  for (const char* name : {"--kernels", "--classes", "--strategy"})
    if (auto v = args.get(name)) split_list(*v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string> tokens = tokens_of(data + 1, size - 1);
  try {
    switch (data[0] % 6) {
      case 0:
        parse_values(Args(tokens, kTuneSyntax));
        break;
      case 1:
        parse_values(Args(tokens, kRunGemmNtSyntax));
        break;
      case 2:
        Args(tokens, kDevicesSyntax);
        break;
      case 3:
      case 4: {
        const char* sub = data[0] % 6 == 3 ? "nf4-forward" : "dequantize";
        const Nf4Flags flags = parse_nf4_flags(sub, tokens);
        nf4_geometry_of(flags, sub, data[0] % 6 == 4);
        break;
      }
      case 5:
        for (const std::string& t : tokens) ocltk::AlgorithmExclusions::parse(t);
        break;
    }
  } catch (const UsageError&) {
  } catch (const Nf4UsageError&) {
  } catch (const ocltk::Error& e) {
    if (e.code() != ocltk::ErrorCode::kInvalidArgument) __builtin_trap();  // main would call it a device failure
  }
  return 0;
}

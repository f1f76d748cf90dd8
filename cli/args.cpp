#include "args.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace ocltk::cli {

const CommandSyntax kDevicesSyntax{"ocltk devices", {}, {}};
const CommandSyntax kTuneSyntax{
    "ocltk tune",
    {"--device",  "--out",    "--budget", "--strategy", "--max-evals", "--kernels",       "--classes",
     "--repeats", "--seed",   "--record", "--replay",   "--seeds",     "--jobs",          "--timeout",
     "--cache",   "--report", "--shapes", "--priors",   "--builders",  "--derive-priors", "--top"},
    {"--quiet", "--cold", "--json", "--no-resume", "--build-worker"}};
const CommandSyntax kRunGemmNtSyntax{"ocltk run gemm-nt",
                                     {"--lhs", "--rhs", "--out", "--alpha", "--device", "--profile", "--precision"},
                                     {"--accumulate"}};

Args::Args(const std::vector<std::string>& tokens, const CommandSyntax& syntax) : command_(syntax.command) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.rfind("--", 0) != 0 || t == "--") {
      positional_.push_back(t);
      continue;
    }
    std::string name = t, value;
    bool has_value = false;
    if (const auto eq = t.find('='); eq != std::string::npos) {
      name = t.substr(0, eq);
      value = t.substr(eq + 1);
      has_value = true;
    }
    if (syntax.flags.count(name)) {
      if (has_value) throw UsageError(name + " takes no value (`" + command_ + "`)");
      flags_.insert(name);
    } else if (syntax.with_value.count(name)) {
      if (!has_value) {
        if (i + 1 >= tokens.size()) throw UsageError(name + " needs a value (`" + command_ + " --help`)");
        value = tokens[++i];
      }
      values_[name] = value;
    } else {
      throw UsageError("unknown option " + name + " for `" + command_ + "` (see `" + command_ + " --help`)");
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string Args::required(const std::string& name) const {
  if (auto v = get(name)) return *v;
  throw UsageError("`" + command_ + "` needs " + name + " (see `" + command_ + " --help`)");
}

long long parse_int(const std::string& text, const std::string& option, long long min_value, long long max_value) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= min_value && v <= max_value) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(option + " expects an integer from " + std::to_string(min_value) + " to " +
                   std::to_string(max_value) + ", got '" + text + "'");
}

double parse_double(const std::string& text, const std::string& option) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(option + " expects a number, got '" + text + "'");
}

void parse_max_evals(const std::string& text, std::int64_t& count, double& fraction) {
  if (!text.empty() && text.back() == '%') {
    const double percent = parse_double(text.substr(0, text.size() - 1), "--max-evals");
    if (!(percent > 0 && percent <= 100)) throw UsageError("--max-evals P% needs 0 < P <= 100, got '" + text + "'");
    fraction = percent / 100;
    count = 0;
  } else {
    count = parse_int(text, "--max-evals", 1, 1000000000);
    fraction = 0;
  }
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

void check_output_path(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UsageError(option + " is empty: it needs a file name");
  const fs::path target(path);
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..")
    throw UsageError(option + " " + path + " names a folder, not a file");
  std::error_code ec;
  const fs::file_status status = fs::status(target, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) throw UsageError(option + " " + path + " is a folder, not a file");
    if (!fs::is_regular_file(status))
      throw UsageError(option + " " + path + " exists and is not a regular file (a device, FIFO or socket)");
  }
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) throw UsageError(option + " " + path + " cannot be written (" + std::strerror(errno) + ")");
  std::fclose(f);
  fs::remove(probe, ec);
}

}  // namespace ocltk::cli

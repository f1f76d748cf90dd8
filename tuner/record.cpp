#include "record.hpp"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "ocltk/bounded_file.hpp"
#include "ocltk/program_cache.hpp"
#include "ocltk/runtime.hpp"
#include "ocltk/status.hpp"

namespace ocltk::tuner {
namespace {

std::string hex64(std::uint64_t v) {
  std::ostringstream out;
  out << std::hex << std::setw(16) << std::setfill('0') << v;
  return out.str();
}

std::string entry_key(const std::string& shape_class, const Problem& problem, const std::string& point_key) {
  return shape_class + " | " + format_problem(problem) + " | " + point_key;
}

// One parsed body line: kernel, class, problem, evaluation. Throws std::runtime_error.
struct Line {
  std::string kernel, shape_class;
  Problem problem;
  Evaluation e;
};

Line parse_line(const YAML::Node& node) {
  Line line;
  line.kernel = node["kernel"].as<std::string>();
  line.shape_class = node["class"].as<std::string>();
  for (const auto& kv : node["problem"]) line.problem[kv.first.as<std::string>()] = kv.second.as<std::int64_t>();
  const YAML::Node choice = node["choice"];
  if (!choice || !choice.IsMap()) throw std::runtime_error("no \"choice\" object");
  line.e.algorithm = choice["algorithm"].as<std::string>();
  for (const auto& kv : choice["params"]) line.e.params[kv.first.as<std::string>()] = kv.second.as<int>();
  line.e.ok = choice["ok"].as<bool>();
  if (line.e.ok) {
    line.e.time_ms = choice["time_ms"].as<double>();
    if (!(line.e.time_ms > 0)) throw std::runtime_error("time_ms must be positive");
  } else {
    line.e.rejected = choice["rejected"] ? choice["rejected"].as<std::string>() : "rejected";
  }
  return line;
}

}  // namespace

std::string file_name_of(const std::string& name) {
  std::string out;
  for (char ch : name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
    out += keep ? char(std::tolower(static_cast<unsigned char>(ch))) : '-';
  }
  while (out.find("--") != std::string::npos) out.replace(out.find("--"), 2, "-");
  return out.empty() ? "device" : out;
}

std::string json_string(const std::string& text) {
  std::ostringstream out;
  out << '"';
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(c) << std::dec << std::setfill(' ');
    } else {
      out << c;
    }
  }
  out << '"';
  return out.str();
}

std::string json_strings(const std::vector<std::string>& texts) {
  std::string out = "[";
  for (std::size_t i = 0; i < texts.size(); ++i) out += (i ? ", " : "") + json_string(texts[i]);
  return out + "]";
}

std::string json_problem(const Problem& problem) {
  std::ostringstream out;
  out << "{";
  bool first = true;
  for (const auto& [key, value] : problem) {
    out << (first ? "" : ", ") << json_string(key) << ": " << value;
    first = false;
  }
  out << "}";
  return out.str();
}

std::string json_choice(const Evaluation& e) {
  std::ostringstream out;
  out << "{\"algorithm\": " << json_string(e.algorithm) << ", \"params\": {";
  bool first = true;
  for (const auto& [name, value] : e.params) {
    out << (first ? "" : ", ") << json_string(name) << ": " << value;
    first = false;
  }
  out << "}, \"ok\": " << (e.ok ? "true" : "false");
  if (e.ok) out << ", \"time_ms\": " << std::setprecision(6) << e.time_ms;
  if (!e.ok) out << ", \"rejected\": " << json_string(e.rejected);
  out << "}";
  return out.str();
}

std::string format_problem(const Problem& problem) {
  std::ostringstream out;
  for (const auto& [key, value] : problem) out << (out.tellp() ? " " : "") << key << "=" << value;
  return out.str();
}

void write_record_header(std::ostream& out, const DeviceInfo& device) {
  out << "{\"record\": 1, \"ocltk\": " << json_string(version()) << ", \"device\": " << json_string(device.name)
      << ", \"vendor\": " << json_string(device.vendor) << ", \"driver\": " << json_string(device.driver)
      << ", \"platform\": " << json_string(device.platform)
      << ", \"architecture\": " << json_string(device.architecture) << ", \"type\": " << json_string(device.type)
      << "}\n"
      << std::flush;
}

void write_record_line(std::ostream& out, const std::string& kernel, const std::string& shape_class,
                       const Problem& problem, const Evaluation& e) {
  out << "{\"kernel\": " << json_string(kernel) << ", \"class\": " << json_string(shape_class)
      << ", \"problem\": " << json_problem(problem) << ", \"choice\": " << json_choice(e) << "}\n"
      << std::flush;
}

Recording read_recording(const std::string& path) {
  std::istringstream in(read_bounded_file(path, kMaxRecordingBytes, "recording"));
  return read_recording(in, path);
}

Recording read_recording(std::istream& in, const std::string& path) {
  Recording rec;
  std::map<std::string, std::size_t> class_index;
  std::map<std::string, bool> seen;
  std::string text;
  bool header_seen = false;
  for (int line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const YAML::Node node = YAML::Load(text);
      if (!node.IsMap()) throw std::runtime_error("not a JSON object");
      if (node["record"]) {
        const std::string device = node["device"].as<std::string>();
        if (header_seen && device != rec.device)
          throw std::runtime_error("a run on another device (" + device + ") was appended to this recording of " +
                                   rec.device);
        rec.device = device;
        rec.vendor = node["vendor"] ? node["vendor"].as<std::string>() : "";
        rec.driver = node["driver"] ? node["driver"].as<std::string>() : "";
        rec.platform = node["platform"] ? node["platform"].as<std::string>() : "";
        rec.architecture = node["architecture"] ? node["architecture"].as<std::string>() : "";
        rec.type = node["type"] ? node["type"].as<std::string>() : "";
        header_seen = true;
        continue;
      }
      if (!header_seen) throw std::runtime_error("a measured point before the header line");
      Line line = parse_line(node);
      const std::string cls = line.kernel + " | " + line.shape_class + " | " + format_problem(line.problem);
      auto it = class_index.find(cls);
      if (it == class_index.end()) {
        it = class_index.emplace(cls, rec.classes.size()).first;
        rec.classes.push_back({line.kernel, line.shape_class, line.problem, {}});
      }
      const std::string key = cls + " | " + line.e.algorithm + " " + format_params(line.e.params);
      if (seen.emplace(key, true).second) rec.classes[it->second].points.push_back(std::move(line.e));
    } catch (const std::exception& err) {
      throw Error(ErrorCode::kInvalidArgument, path + ":" + std::to_string(line_no) + ": " + err.what());
    }
  }
  if (!header_seen) throw Error(ErrorCode::kInvalidArgument, path + ": no header line; not an ocltk recording");
  return rec;
}

std::uint64_t search_space_hash(const KernelFamily& family, const DeviceLimits& limits) {
  std::uint64_t h = fnv1a64(family.name);
  for (const AlgorithmSpec& a : family.algorithms) {
    h = fnv1a64(a.name.data(), a.name.size(), h);
    std::string source = a.source_name;  // a family whose source is not embedded (tests) hashes its name
    try {
      source = kernel_source(a.source_name);
    } catch (const Error&) {
    }
    h = fnv1a64(source.data(), source.size(), h);
    // The tuner builds every point with the variant's options too (e.g. tc's element type).
    h = fnv1a64(a.tuned_variant.data(), a.tuned_variant.size(), h);
    for (const Params& p : a.search_space(&limits)) {
      const std::string options = a.build_options(p);
      h = fnv1a64(options.data(), options.size(), h);
    }
  }
  return h;
}

std::string TuneCache::default_dir() {
  const char* env = std::getenv("OCLTK_CACHE_DIR");
  const std::string base = env != nullptr && *env != '\0' ? std::string(env) : ProgramCache::default_directory();
  if (base == "-") return "";
  return (std::filesystem::path(base) / "tune").string();
}

std::string TuneCache::path_for(const std::string& dir, const DeviceInfo& device, const std::string& kernel,
                                std::uint64_t space_hash) {
  return (std::filesystem::path(dir) / (file_name_of(device.name) + "-" + kernel + "-" + hex64(space_hash) + ".jsonl"))
      .string();
}

TuneCache::TuneCache(const std::string& path, const DeviceInfo& device, const std::string& kernel,
                     std::uint64_t space_hash, std::ostream& warnings)
    : path_(path), kernel_(kernel), warnings_(&warnings) {
  namespace fs = std::filesystem;
  const std::string want_space = hex64(space_hash);
  auto refuse = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "refusing tune cache " + path + ": " + why +
                                                  "; delete it, or run with --no-resume to tune from scratch");
  };
  std::error_code ec;
  std::string text;
  if (fs::exists(path, ec)) text = read_bounded_file(path, kMaxCacheBytes, "tune cache");
  // Nothing but blanks: a header write that never reached the disk (older versions wrote it
  // in place); nothing was measured into it, so it is started afresh.
  const bool fresh = text.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!fresh) {
    std::istringstream in(text);
    std::string line;
    bool header_seen = false;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      YAML::Node node;
      try {
        node = YAML::Load(line);
      } catch (const std::exception&) {
        continue;  // a line cut short by a crash or a full disk: that point is measured again
      }
      if (!header_seen) {
        if (!node.IsMap() || !node["tune_cache"]) throw refuse("line 1 is not a tune cache header");
        const auto field = [&](const char* name) { return node[name] ? node[name].as<std::string>() : ""; };
        if (field("device") != device.name)
          throw refuse("it was written on device '" + field("device") + "', this is '" + device.name + "'");
        if (field("driver") != device.driver)
          throw refuse("it was written with driver " + field("driver") + ", this is " + device.driver);
        if (field("kernel") != kernel) throw refuse("it holds kernel " + field("kernel") + ", not " + kernel);
        if (field("space") != want_space)
          throw refuse("its search space " + field("space") + " differs from this build's " + want_space +
                       " (kernel sources or parameter tables changed)");
        header_seen = true;
        continue;
      }
      try {
        Line parsed = parse_line(node);
        if (parsed.kernel != kernel) continue;
        parsed.e.cached = true;
        entries_[entry_key(parsed.shape_class, parsed.problem,
                           parsed.e.algorithm + " " + format_params(parsed.e.params))] = parsed.e;
      } catch (const std::exception&) {
        continue;
      }
    }
    if (!header_seen) throw refuse("it has no header line");
  }
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (fresh) {
    // The header goes in whole or not at all (a temporary file, then rename): a full disk
    // leaves no cache rather than one the next run refuses.
    std::ostringstream header;
    header << "{\"tune_cache\": 1, \"ocltk\": " << json_string(version())
           << ", \"device\": " << json_string(device.name) << ", \"vendor\": " << json_string(device.vendor)
           << ", \"driver\": " << json_string(device.driver) << ", \"kernel\": " << json_string(kernel)
           << ", \"space\": " << json_string(want_space) << "}\n";
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    bool written = false;
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << header.str() << std::flush;
      written = bool(out);
    }
    const int err = errno;
    if (written) fs::rename(tmp, path, ec);
    if (!written || ec) {
      fs::remove(tmp, ec);
      disable(std::string("cannot create it (") + std::strerror(written ? ec.value() : err) + ")");
      return;
    }
  }
  out_.open(path, std::ios::app);
  if (!out_) {
    disable(std::string("cannot open it for appending (") + std::strerror(errno) + ")");
    return;
  }
  if (!fresh && text.back() != '\n') out_ << "\n";  // a crash cut the last line short
}

void TuneCache::disable(const std::string& why) {
  if (disabled_) return;
  disabled_ = true;
  out_.close();
  *warnings_ << "ocltk tune: warning: tune cache " << path_ << ": " << why
             << "; this run goes on without keeping its measurements for a resume (what the cache already holds "
                "stays valid)\n"
             << std::flush;
}

const Evaluation* TuneCache::find(const std::string& shape_class, const Problem& problem,
                                  const std::string& point_key) const {
  const auto it = entries_.find(entry_key(shape_class, problem, point_key));
  return it == entries_.end() ? nullptr : &it->second;
}

void TuneCache::append(const std::string& shape_class, const Problem& problem, const Evaluation& e) {
  entries_[entry_key(shape_class, problem, e.algorithm + " " + format_params(e.params))] = e;
  if (disabled_) return;
  errno = 0;
  write_record_line(out_, kernel_, shape_class, problem, e);
  // A line cut short (a full disk) is skipped by the next run's reader, which also starts a
  // fresh line after it; the lines before it stay valid.
  if (!out_) disable(std::string("a write failed (") + std::strerror(errno != 0 ? errno : EIO) + ")");
}

}  // namespace ocltk::tuner

#include "ocltk/profile.hpp"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "ocltk/bounded_file.hpp"
#include "ocltk/device.hpp"
#include "ocltk/family.hpp"
#include "ocltk/profile_db.hpp"
#include "ocltk/status.hpp"
#include "profile_yaml.hpp"

namespace ocltk {
namespace detail {
namespace {

ProfileDevice decode_device(const Decoder& d, const YAML::Node& n) {
  if (!n.IsMap()) d.fail(n, "'device' must be a mapping");
  ProfileDevice dev;
  dev.name = d.scalar<std::string>(n, "name", true);
  dev.vendor = d.scalar<std::string>(n, "vendor", true);
  dev.driver = d.scalar<std::string>(n, "driver", false);
  dev.platform = d.scalar<std::string>(n, "platform", false);
  dev.architecture = d.scalar<std::string>(n, "architecture", false);
  dev.type = d.scalar<std::string>(n, "type", false);
  dev.compute_units = d.scalar<std::uint32_t>(n, "compute_units", false);
  dev.global_mem_bytes = d.scalar<std::uint64_t>(n, "global_mem_bytes", false);
  dev.local_mem_bytes = d.scalar<std::uint64_t>(n, "local_mem_bytes", false);
  dev.max_work_group_size = d.scalar<std::uint64_t>(n, "max_work_group_size", false);
  return dev;
}

// nf4's counts of a problem's segments, where it names them: `active` (experts with rows) in
// [1, min(rows, experts)] (0 for zero rows), `max_rows` (the most rows on one of them) in
// [ceil(rows / A), rows - A + 1] for A = active_experts_of; both need `rows`, and `active`
// needs `experts`. A layout outside them cannot exist, and its distance would be wrong.
void check_segment_counts(const Decoder& d, const YAML::Node& node, const std::map<std::string, std::int64_t>& p) {
  const bool has_active = p.count("active") != 0, has_max = p.count("max_rows") != 0;
  if (!has_active && !has_max) return;
  const auto rows = p.find("rows");
  if (rows == p.end())
    d.fail(node, std::string("problem names '") + (has_active ? "active" : "max_rows") + "' but no 'rows'");
  const std::int64_t r = rows->second;
  if (has_active) {
    const auto experts = p.find("experts");
    if (experts == p.end()) d.fail(node, "problem names 'active' but no 'experts'");
    const std::int64_t a = p.at("active"), lo = r > 0 ? 1 : 0, hi = std::min(r, experts->second);
    if (a < lo || a > hi)
      d.fail(node, "problem active = " + std::to_string(a) + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "] (" + std::to_string(r) + " rows over " +
                       std::to_string(experts->second) + " experts)");
  }
  if (has_max) {
    const std::int64_t a = active_experts_of(p), m = p.at("max_rows");
    if (a < 0) d.fail(node, "problem names 'max_rows' but neither 'active' nor 'experts'");
    const auto [lo, hi] = max_expert_rows_range(r, a);
    if (m < lo || m > hi)
      d.fail(node, "problem max_rows = " + std::to_string(m) + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "] (" + std::to_string(r) + " rows over " + std::to_string(a) +
                       " experts with rows)");
  }
}

// An entry's `provenance`: a mapping of kind (required), results, commit and note. Unknown
// keys are faults, so that a misspelt field is not silently dropped.
ProfileProvenance decode_provenance(const Decoder& d, const YAML::Node& n) {
  if (!n.IsMap()) d.fail(n, "'provenance' must be a mapping (kind, results, commit, note)");
  for (const auto& kv : n) {
    const std::string key = d.key(kv.first);
    if (key != "kind" && key != "results" && key != "commit" && key != "note")
      d.fail(kv.first, "provenance has no field '" + key + "' (kind, results, commit, note)");
  }
  ProfileProvenance p;
  const YAML::Node kind = d.child(n, "kind", true);
  p.kind = d.scalar<std::string>(n, "kind", true);
  if (!is_provenance_kind(p.kind)) d.fail(kind, "provenance kind '" + p.kind + "' is neither tuned nor pinned");
  p.results = d.scalar<std::string>(n, "results", false);
  if (!p.results.empty() && (p.results.front() == '/' || p.results.find("..") != std::string::npos))
    d.fail(n["results"], "provenance results '" + p.results + "' is not a path inside the repository");
  p.commit = d.scalar<std::string>(n, "commit", false);
  const bool hex = std::all_of(p.commit.begin(), p.commit.end(), [](unsigned char c) { return std::isxdigit(c); });
  if (!p.commit.empty() && (!hex || p.commit.size() < 7 || p.commit.size() > 40))
    d.fail(n["commit"], "provenance commit '" + p.commit + "' is not a git commit (7 to 40 hex digits)");
  if (!p.commit.empty() && p.results.empty()) d.fail(n, "provenance names a commit but no 'results' file");
  p.note = d.scalar<std::string>(n, "note", false);
  return p;
}

// A measured time or rate: a finite number, not negative. YAML reads ".inf" and ".nan" as
// numbers, but the profile's writer has no spelling for them that reads back.
double measurement(const Decoder& d, const YAML::Node& n, const char* key) {
  const double v = d.scalar<double>(n, key, false);
  if (!std::isfinite(v) || v < 0)
    d.fail(d.child(n, key, true), std::string("'") + key + "' must be a finite number >= 0");
  return v;
}

// The built-in default's point an entry's default_time_ms timed: `default_algorithm` and
// `default_params`, both or neither. Not checked against today's tables: the point of an
// older default may name an algorithm or parameters they no longer have, and says only
// that the time is not today's default's.
void decode_default_point(const Decoder& d, const YAML::Node& n, ProfileEntry& e) {
  const YAML::Node algorithm = d.child(n, "default_algorithm", false);
  const YAML::Node params = d.child(n, "default_params", false);
  if (!algorithm && !params) return;
  if (!params) d.fail(algorithm, "'default_algorithm' needs 'default_params' beside it");
  if (!algorithm) d.fail(params, "'default_params' needs 'default_algorithm' beside it");
  e.default_algorithm = d.scalar<std::string>(n, "default_algorithm", true);
  if (!Decoder::plain_characters(e.default_algorithm))
    d.fail(algorithm, "'default_algorithm' must name an algorithm (letters, digits and '_')");
  if (!params.IsMap()) d.fail(params, "'default_params' must be a mapping of parameter names to integers");
  for (const auto& kv : params) {
    const std::string name = d.key(kv.first);
    if (e.default_params.count(name)) d.fail(kv.first, "parameter " + name + " is listed twice");
    try {
      e.default_params[name] = kv.second.as<int>();
    } catch (const YAML::Exception&) {
      d.fail(kv.second, "parameter " + name + " must be an integer");
    }
  }
}

ProfileEntry decode_entry(const Decoder& d, const KernelFamily& family, const std::string& shape_class,
                          const YAML::Node& n) {
  ProfileEntry e;
  e.kernel = family.name;
  e.shape_class = shape_class;
  if (!n.IsMap()) d.fail(n, "entry " + family.name + "/" + shape_class + " must be a mapping");
  const YAML::Node algo_node = d.child(n, "algorithm", true);
  e.algorithm = d.scalar<std::string>(n, "algorithm", true);
  const AlgorithmSpec* algorithm = family.find_algorithm(e.algorithm);
  if (algorithm == nullptr) d.fail(algo_node, "kernel " + family.name + " has no algorithm '" + e.algorithm + "'");
  const YAML::Node params = d.child(n, "params", true);
  if (!params.IsMap()) d.fail(params, "'params' must be a mapping of parameter names to integers");
  Params partial;
  for (const auto& kv : params) {
    const std::string name = d.key(kv.first);
    if (partial.count(name)) d.fail(kv.first, "parameter " + name + " is listed twice");
    if (algorithm->find(name) == nullptr)
      d.fail(kv.first, "unknown parameter " + name + " for " + family.name + "/" + e.algorithm);
    int value = 0;
    try {
      value = kv.second.as<int>();
    } catch (const YAML::Exception&) {
      d.fail(kv.second, "parameter " + name + " must be an integer");
    }
    try {
      algorithm->complete({{name, value}});
    } catch (const Error& err) {
      d.fail(kv.second, err.what());
    }
    partial[name] = value;
  }
  e.params = algorithm->complete(partial);
  if (const auto bad = algorithm->violation(e.params, nullptr))
    d.fail(params, family.name + "/" + e.algorithm + " parameters " + format_params(e.params) +
                       " break the constraint " + *bad);
  if (const YAML::Node problem = d.child(n, "problem", false)) {
    if (!problem.IsMap()) d.fail(problem, "'problem' must be a mapping");
    for (const auto& kv : problem) {
      const std::string name = d.key(kv.first);
      e.problem[name] = d.scalar<std::int64_t>(problem, name.c_str(), true);
    }
    check_segment_counts(d, problem, e.problem);
  }
  e.time_ms = measurement(d, n, "time_ms");
  e.gflops = measurement(d, n, "gflops");
  e.default_time_ms = measurement(d, n, "default_time_ms");
  decode_default_point(d, n, e);
  if (const YAML::Node provenance = d.child(n, "provenance", false)) e.provenance = decode_provenance(d, provenance);
  return e;
}

}  // namespace

std::string short_number(double v) {
  std::ostringstream out;
  out << std::setprecision(6) << v;
  return out.str();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

YAML::Node load_document(const Decoder& d, const std::string& text, int* schema, YAML::Node* schema_node) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    d.fail(e.mark, "malformed YAML: " + e.msg);
  }
  if (!root || !root.IsMap()) d.fail(root ? root.Mark() : YAML::Mark(), "a profile must be a YAML mapping");
  *schema_node = d.child(root, "schema", true);
  *schema = d.scalar<int>(root, "schema", true);
  return root;
}

std::vector<ProfileEntry> decode_kernels(const Decoder& d, const YAML::Node& kernels,
                                         const std::function<void(const ProfileEntry&, const YAML::Node&)>& each) {
  if (!kernels.IsMap()) d.fail(kernels, "'kernels' must be a mapping of kernel names to shape classes");
  std::vector<ProfileEntry> entries;
  std::set<std::string> kernels_seen;
  for (const auto& kv : kernels) {
    const std::string kernel = d.key(kv.first);
    const KernelFamily* family = find_family(kernel);
    if (family == nullptr) d.fail(kv.first, "unknown kernel '" + kernel + "'");
    if (!kernels_seen.insert(kernel).second) d.fail(kv.first, "kernel " + kernel + " is listed twice");
    if (!kv.second.IsMap()) d.fail(kv.second, "kernel " + kernel + " must map shape classes to entries");
    std::set<std::string> classes_seen;
    for (const auto& cls : kv.second) {
      const std::string shape_class = d.key(cls.first);
      if (!classes_seen.insert(shape_class).second)
        d.fail(cls.first, "shape class '" + shape_class + "' is listed twice for kernel " + kernel);
      if (family->find_class(shape_class) == nullptr)
        d.fail(cls.first, "kernel " + kernel + " has no shape class '" + shape_class + "'");
      if (!cls.second.IsSequence()) {
        entries.push_back(decode_entry(d, *family, shape_class, cls.second));
        if (each) each(entries.back(), cls.second);
        continue;
      }
      // Several entries of one class (tune --shapes): each names the problem it was
      // tuned on, and no two the same one.
      std::set<std::map<std::string, std::int64_t>> problems;
      for (const YAML::Node& item : cls.second) {
        entries.push_back(decode_entry(d, *family, shape_class, item));
        if (entries.back().problem.empty())
          d.fail(item, "each entry of a list under " + kernel + "/" + shape_class + " needs its 'problem'");
        if (!problems.insert(entries.back().problem).second)
          d.fail(item, "two entries of " + kernel + "/" + shape_class + " have the same problem");
        if (each) each(entries.back(), item);
      }
    }
  }
  return entries;
}

Profile decode_profile_body(const Decoder& d, const YAML::Node& n) {
  Profile profile;
  profile.device = decode_device(d, d.child(n, "device", true));
  if (const YAML::Node tuner = d.child(n, "tuner", false)) {
    profile.tuner_version = d.scalar<std::string>(tuner, "version", false);
    profile.date = d.scalar<std::string>(tuner, "date", false);
    profile.tuning_seconds = measurement(d, tuner, "seconds");
  }
  profile.entries = decode_kernels(d, d.child(n, "kernels", true));
  return profile;
}

YAML::Node encode_device(const ProfileDevice& dev) {
  YAML::Node n;
  n["name"] = dev.name;
  n["vendor"] = dev.vendor;
  n["driver"] = dev.driver;
  n["platform"] = dev.platform;
  n["architecture"] = dev.architecture;
  n["type"] = dev.type;
  n["compute_units"] = dev.compute_units;
  n["global_mem_bytes"] = dev.global_mem_bytes;
  n["local_mem_bytes"] = dev.local_mem_bytes;
  n["max_work_group_size"] = dev.max_work_group_size;
  return n;
}

YAML::Node encode_params(const Params& params) {
  YAML::Node n(YAML::NodeType::Map);
  n.SetStyle(YAML::EmitterStyle::Flow);
  for (const auto& [name, value] : params) n[name] = value;
  return n;
}

YAML::Node encode_entry(const ProfileEntry& e) {
  YAML::Node n;
  n["algorithm"] = e.algorithm;
  n["params"] = encode_params(e.params);
  if (!e.problem.empty()) {
    YAML::Node problem(YAML::NodeType::Map);
    problem.SetStyle(YAML::EmitterStyle::Flow);
    for (const auto& [k, v] : e.problem) problem[k] = v;
    n["problem"] = problem;
  }
  n["time_ms"] = short_number(e.time_ms);
  n["gflops"] = short_number(e.gflops);
  if (e.default_time_ms > 0) n["default_time_ms"] = short_number(e.default_time_ms);
  if (!e.default_algorithm.empty()) {
    n["default_algorithm"] = e.default_algorithm;
    n["default_params"] = encode_params(e.default_params);
  }
  if (!e.provenance.empty()) {
    YAML::Node p(YAML::NodeType::Map);
    p.SetStyle(YAML::EmitterStyle::Flow);
    p["kind"] = e.provenance.kind;
    if (!e.provenance.results.empty()) p["results"] = e.provenance.results;
    if (!e.provenance.commit.empty()) p["commit"] = e.provenance.commit;
    if (!e.provenance.note.empty()) p["note"] = e.provenance.note;
    n["provenance"] = p;
  }
  return n;
}

YAML::Node encode_profile_body(const Profile& profile) {
  YAML::Node n;
  n["device"] = encode_device(profile.device);
  // A profile assembled by hand (entries pinned from benchmarks) has no tuning run to name.
  if (!profile.tuner_version.empty() || !profile.date.empty() || profile.tuning_seconds > 0) {
    n["tuner"]["version"] = profile.tuner_version;
    n["tuner"]["date"] = profile.date;
    n["tuner"]["seconds"] = short_number(profile.tuning_seconds);
  }
  YAML::Node kernels(YAML::NodeType::Map);
  std::map<std::pair<std::string, std::string>, int> per_class;
  for (const ProfileEntry& e : profile.entries) ++per_class[{e.kernel, e.shape_class}];
  for (const ProfileEntry& e : profile.entries) {
    if (per_class[{e.kernel, e.shape_class}] == 1) {
      kernels[e.kernel][e.shape_class] = encode_entry(e);
    } else {
      kernels[e.kernel][e.shape_class].push_back(encode_entry(e));  // several tuned problems
    }
  }
  n["kernels"] = kernels;
  return n;
}

void write_text_atomically(const std::string& path, const std::string& text, const std::string& what) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(ErrorCode::kIo, path + ": cannot write " + what + " (cannot create " + tmp + ")");
    out << text;
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      throw Error(ErrorCode::kIo, path + ": cannot write " + what + " (write to " + tmp + " failed)");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorCode::kIo, path + ": cannot write " + what + " (rename failed: " + ec.message() + ")");
  }
}

}  // namespace detail

bool default_time_counts(const ProfileEntry& entry) {
  if (!(entry.default_time_ms > 0)) return false;
  if (entry.default_algorithm.empty()) return true;
  const KernelFamily* family = find_family(entry.kernel);
  if (family == nullptr || family->find_class(entry.shape_class) == nullptr) return false;
  const AlgorithmSpec* algorithm = family->find_algorithm(entry.default_algorithm);
  if (algorithm == nullptr) return false;
  Params point;
  try {
    point = algorithm->complete(entry.default_params);  // a parameter added since at its default
  } catch (const Error&) {
    return false;  // a parameter or value today's table does not have
  }
  return family->is_builtin_point(entry.shape_class, entry.default_algorithm, point);
}

using detail::Decoder;
using detail::lower;

bool is_provenance_kind(const std::string& kind) { return kind == "tuned" || kind == "pinned"; }

std::string describe(const ProfileProvenance& p) {
  if (p.empty()) return "";
  std::string text = p.kind;
  if (!p.results.empty()) text += " from " + p.results;
  if (!p.commit.empty()) text += " at " + p.commit;
  if (!p.note.empty()) text += ": " + p.note;
  return text;
}

std::int64_t input_bits_of(const std::map<std::string, std::int64_t>& problem) {
  const auto it = problem.find("input_bits");
  return it == problem.end() ? std::int64_t(32) : it->second;
}

std::int64_t active_experts_of(const std::map<std::string, std::int64_t>& problem) {
  if (const auto it = problem.find("active"); it != problem.end()) return it->second;
  const auto rows = problem.find("rows"), experts = problem.find("experts");
  if (rows == problem.end() || experts == problem.end()) return -1;
  return std::min(rows->second, experts->second);
}

std::pair<std::int64_t, std::int64_t> max_expert_rows_range(std::int64_t rows, std::int64_t active) {
  if (active <= 0) return {0, 0};
  return {(rows + active - 1) / active, rows - (active - 1)};
}

std::int64_t max_expert_rows_of(const std::map<std::string, std::int64_t>& problem) {
  if (const auto it = problem.find("max_rows"); it != problem.end()) return it->second;
  const auto rows = problem.find("rows");
  const std::int64_t active = active_experts_of(problem);
  if (rows == problem.end() || active < 0) return -1;
  return max_expert_rows_range(rows->second, active).first;
}

double problem_distance(const std::map<std::string, std::int64_t>& a, const std::map<std::string, std::int64_t>& b) {
  const auto lg = [](double v) { return std::log2(std::max(1.0, v)); };
  double d = 0;
  for (const auto& [name, value] : a) {
    const auto it = b.find(name);
    if (name != "input_bits" && name != "rows" && name != "active" && name != "max_rows" && it != b.end())
      d += std::fabs(lg(double(value)) - lg(double(it->second)));
  }
  const auto ra = a.find("rows"), rb = b.find("rows");
  if (ra != a.end() && rb != b.end()) {
    const std::int64_t aa = active_experts_of(a), ab = active_experts_of(b);
    if (aa > 0 && ab > 0) {
      // nf4's segments: experts with rows and rows per such expert (the same as the rows'
      // distance for two even spreads of as many experts), and how crowded the longest segment
      // is (max_rows over an even spread's longest, ceil(rows / active): 1 for every even
      // spread, so two even spreads differ in the first two terms alone).
      d += std::fabs(lg(double(aa)) - lg(double(ab)));
      d += std::fabs(lg(double(ra->second) / double(aa)) - lg(double(rb->second) / double(ab)));
      const auto crowding = [&](const std::map<std::string, std::int64_t>& p, std::int64_t rows, std::int64_t active) {
        const std::int64_t even = max_expert_rows_range(rows, active).first;
        return lg(double(max_expert_rows_of(p)) / double(std::max<std::int64_t>(even, 1)));
      };
      d += std::fabs(crowding(a, ra->second, aa) - crowding(b, rb->second, ab));
    } else {
      d += std::fabs(lg(double(ra->second)) - lg(double(rb->second)));
    }
  }
  // Another input width (nf4's: 32 or 16) takes another code path: it weighs as much as a
  // 16-fold difference of a size.
  return d + 4.0 * std::fabs(lg(input_bits_of(a)) - lg(input_bits_of(b)));
}

bool same_problem(const std::map<std::string, std::int64_t>& a, const std::map<std::string, std::int64_t>& b) {
  auto without_bits = [](std::map<std::string, std::int64_t> p) {
    p.erase("input_bits");
    return p;
  };
  return input_bits_of(a) == input_bits_of(b) && without_bits(a) == without_bits(b);
}

const ProfileEntry* Profile::find(const std::string& kernel, const std::string& shape_class,
                                  const std::map<std::string, std::int64_t>* problem) const {
  const ProfileEntry* found = nullptr;
  double best = 0;
  for (const ProfileEntry& e : entries) {
    if (e.kernel != kernel || e.shape_class != shape_class) continue;
    if (problem == nullptr || problem->empty()) return &e;
    const double d = problem_distance(*problem, e.problem);
    if (found == nullptr || d < best) {
      found = &e;
      best = d;
    }
  }
  return found;
}

Profile parse_profile_checked(const std::string& text, const std::string& name);

ProfileDevice profile_device_of(const DeviceInfo& device) {
  ProfileDevice d;
  d.name = device.name;
  d.vendor = device.vendor;
  d.driver = device.driver;
  d.platform = device.platform;
  d.architecture = device.architecture;
  d.type = device.type;
  d.compute_units = device.compute_units;
  d.global_mem_bytes = device.global_mem_bytes;
  d.local_mem_bytes = device.local_mem_bytes;
  d.max_work_group_size = device.max_work_group_size;
  return d;
}

Profile parse_profile(const std::string& text, const std::string& name) {
  try {
    return parse_profile_checked(text, name);
  } catch (const YAML::Exception& e) {
    Decoder(name).fail(e.mark, e.msg);
  }
}

Profile parse_profile_checked(const std::string& text, const std::string& name) {
  const Decoder d(name);
  int schema = 0;
  YAML::Node schema_node;
  const YAML::Node root = detail::load_document(d, text, &schema, &schema_node);
  if (schema == kProfileDatabaseSchema)
    d.fail(schema_node, "a profile database (schema " + std::to_string(schema) +
                            "), not one device's profile (schema 1): read it with read_profile_file");
  if (schema != kProfileSchema)
    d.fail(schema_node, "unsupported schema " + std::to_string(schema) + " (this ocltk reads schema " +
                            std::to_string(kProfileSchema) + " profiles and schema " +
                            std::to_string(kProfileDatabaseSchema) + " databases)");
  Profile profile = detail::decode_profile_body(d, root);
  profile.schema = schema;
  profile.path = name;
  return profile;
}

Profile read_profile(const std::string& path) {
  return parse_profile(read_bounded_file(path, kMaxYamlFileBytes, "profile"), path);
}

std::string emit_profile(const Profile& profile) {
  YAML::Node root;
  root["schema"] = profile.schema;
  for (const auto& kv : detail::encode_profile_body(profile)) root[kv.first.Scalar()] = kv.second;
  YAML::Emitter out;
  out << YAML::Comment("ocltk tuning profile, schema 1: see docs/profile-schema.md") << YAML::Newline << root;
  return std::string(out.c_str()) + "\n";
}

void write_profile_atomically(const std::string& path, const Profile& profile) {
  detail::write_text_atomically(path, emit_profile(profile), "profile");
}

const char* to_string(MatchLevel level) {
  switch (level) {
    case MatchLevel::kExact:
      return "device+driver";
    case MatchLevel::kDevice:
      return "device";
    case MatchLevel::kArchitecture:
      return "architecture";
    case MatchLevel::kVendor:
      return "vendor";
    case MatchLevel::kNone:
      return "none";
  }
  return "none";
}

bool same_architecture(const std::string& architecture_a, const std::string& vendor_a,
                       const std::string& architecture_b, const std::string& vendor_b) {
  if (architecture_a.empty() || architecture_a != architecture_b) return false;
  return architecture_a.rfind(kPoclArchitecturePrefix, 0) == 0 || lower(vendor_a) == lower(vendor_b);
}

MatchLevel match_level(const ProfileDevice& header, const DeviceInfo& device) {
  if (header.name == device.name) return header.driver == device.driver ? MatchLevel::kExact : MatchLevel::kDevice;
  if (same_architecture(header.architecture, header.vendor, device.architecture, device.vendor))
    return MatchLevel::kArchitecture;
  if (!header.vendor.empty() && lower(header.vendor) == lower(device.vendor)) return MatchLevel::kVendor;
  return MatchLevel::kNone;
}

}  // namespace ocltk

#include "ocltk/profile_db.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "ocltk/bounded_file.hpp"
#include "ocltk/device.hpp"
#include "ocltk/status.hpp"
#include "profile_yaml.hpp"

namespace ocltk {
namespace {

using detail::Decoder;
using detail::lower;
using detail::short_number;

const char* step_name(MatchLevel level) { return level == MatchLevel::kArchitecture ? "architecture" : "vendor"; }

std::string member_key(const ProfileDevice& d) { return d.name + '\n' + d.driver; }
std::string group_key(const DerivedProfile& g) {
  return std::string(step_name(g.level)) + '\n' + lower(g.vendor) + '\n' + g.architecture;
}

std::vector<std::string> decode_names(const Decoder& d, const YAML::Node& parent, const char* key) {
  std::vector<std::string> names;
  const YAML::Node n = d.child(parent, key, false);
  if (!n) return names;
  if (!n.IsSequence()) d.fail(n, std::string("'") + key + "' must be a list of device names");
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) d.fail(item, std::string("'") + key + "' must be a list of device names");
    names.push_back(item.Scalar());
  }
  return names;
}

DerivedProfile decode_derived(const Decoder& d, const YAML::Node& n) {
  if (!n.IsMap()) d.fail(n, "each item of 'derived' must be a mapping");
  DerivedProfile g;
  const YAML::Node step = d.child(n, "step", true);
  const std::string step_text = d.scalar<std::string>(n, "step", true);
  if (step_text == "architecture")
    g.level = MatchLevel::kArchitecture;
  else if (step_text == "vendor")
    g.level = MatchLevel::kVendor;
  else
    d.fail(step, "'step' must be architecture or vendor, got '" + step_text + "'");
  g.vendor = d.scalar<std::string>(n, "vendor", true);
  if (g.vendor.empty()) d.fail(d.child(n, "vendor", true), "'vendor' must not be empty");
  if (g.level == MatchLevel::kArchitecture) {
    g.architecture = d.scalar<std::string>(n, "architecture", true);
    if (g.architecture.empty())
      d.fail(d.child(n, "architecture", true), "'architecture' must not be empty at step architecture");
  } else if (const YAML::Node arch = d.child(n, "architecture", false)) {
    d.fail(arch, "a derived section of step vendor has no architecture");
  }
  g.devices = decode_names(d, n, "devices");
  // The entries themselves come back through the callback, with their extra keys.
  (void)detail::decode_kernels(d, d.child(n, "kernels", true), [&](const ProfileEntry& e, const YAML::Node& node) {
    DerivedEntry derived;
    derived.choice = e;
    derived.chosen_by = decode_names(d, node, "chosen_by");
    derived.measured = d.scalar<int>(node, "measured", false);
    g.entries.push_back(std::move(derived));
  });
  return g;
}

ProfileDatabase decode_database(const Decoder& d, const YAML::Node& root) {
  ProfileDatabase db;
  const YAML::Node profiles = d.child(root, "profiles", true);
  if (!profiles.IsSequence()) d.fail(profiles, "'profiles' must be a list of device profiles");
  std::set<std::string> members;
  for (const YAML::Node& item : profiles) {
    if (!item.IsMap()) d.fail(item, "each item of 'profiles' must be a mapping with device, tuner and kernels");
    Profile p = detail::decode_profile_body(d, item);
    if (!members.insert(member_key(p.device)).second)
      d.fail(d.child(item, "device", true), "device " + device_label(p.device) + " is listed twice in 'profiles'");
    p.path = d.name();
    db.profiles.push_back(std::move(p));
  }
  if (const YAML::Node derived = d.child(root, "derived", false)) {
    if (!derived.IsSequence()) d.fail(derived, "'derived' must be a list of derived sections");
    std::set<std::string> groups;
    for (const YAML::Node& item : derived) {
      DerivedProfile g = decode_derived(d, item);
      if (!groups.insert(group_key(g)).second) d.fail(item, g.describe() + " is listed twice in 'derived'");
      db.derived.push_back(std::move(g));
    }
  }
  db.path = d.name();
  return db;
}

ProfileFile parse_checked(const std::string& text, const std::string& name) {
  const Decoder d(name);
  int schema = 0;
  YAML::Node schema_node;
  const YAML::Node root = detail::load_document(d, text, &schema, &schema_node);
  ProfileFile file;
  file.schema = schema;
  file.path = name;
  if (schema == kProfileSchema) {
    file.profile = detail::decode_profile_body(d, root);
    file.profile.path = name;
  } else if (schema == kProfileDatabaseSchema) {
    file.database = decode_database(d, root);
  } else {
    d.fail(schema_node, "unsupported schema " + std::to_string(schema) + " (this ocltk reads schema " +
                            std::to_string(kProfileSchema) + " profiles and schema " +
                            std::to_string(kProfileDatabaseSchema) + " databases)");
  }
  return file;
}

// One device name's vote for a derived choice: the entry it picked as its own best.
struct Tally {
  const ProfileEntry* entry = nullptr;
  std::vector<std::string> chosen_by;
  double log_speedup = 0;  // sum over chosen_by of log(default_time_ms / time_ms)
};

bool same_choice(const ProfileEntry& a, const ProfileEntry& b) {
  return a.algorithm == b.algorithm && a.params == b.params;
}

// Geometric-mean speed-up over the built-in default compares by its log, the mean.
bool better_tally(const Tally& a, const Tally& b) {
  if (a.chosen_by.size() != b.chosen_by.size()) return a.chosen_by.size() > b.chosen_by.size();
  const double ma = a.log_speedup / double(a.chosen_by.size()), mb = b.log_speedup / double(b.chosen_by.size());
  if (std::abs(ma - mb) > 1e-12) return ma > mb;
  if (a.entry->algorithm != b.entry->algorithm) return a.entry->algorithm < b.entry->algorithm;
  return a.entry->params < b.entry->params;
}

DerivedEntry derive_entry(const std::vector<const Profile*>& members, const std::string& kernel,
                          const std::string& shape_class) {
  std::vector<Tally> tallies;
  std::set<std::string> counted;  // device names: one vote each, from its newest member
  int measured = 0;
  for (const Profile* m : members) {
    const ProfileEntry* e = m->find(kernel, shape_class);
    if (e == nullptr || !counted.insert(m->device.name).second) continue;
    ++measured;
    auto it = std::find_if(tallies.begin(), tallies.end(), [&](const Tally& t) { return same_choice(*t.entry, *e); });
    if (it == tallies.end()) it = tallies.insert(tallies.end(), Tally{e, {}, 0});
    it->chosen_by.push_back(m->device.name);
    if (e->time_ms > 0 && default_time_counts(*e)) it->log_speedup += std::log(e->default_time_ms / e->time_ms);
  }
  const Tally& best = *std::min_element(tallies.begin(), tallies.end(), better_tally);
  DerivedEntry out;
  out.choice.kernel = kernel;
  out.choice.shape_class = shape_class;
  out.choice.algorithm = best.entry->algorithm;
  out.choice.params = best.entry->params;
  out.chosen_by = best.chosen_by;
  out.measured = measured;
  return out;
}

DerivedProfile derive_group(MatchLevel level, const std::string& vendor, const std::string& architecture,
                            const std::vector<const Profile*>& members) {
  DerivedProfile g;
  g.level = level;
  g.vendor = vendor;
  g.architecture = architecture;
  std::vector<std::pair<std::string, std::string>> keys;  // (kernel, class) in first-seen order
  for (const Profile* m : members) {
    if (std::find(g.devices.begin(), g.devices.end(), m->device.name) == g.devices.end())
      g.devices.push_back(m->device.name);
    for (const ProfileEntry& e : m->entries)
      if (std::find(keys.begin(), keys.end(), std::make_pair(e.kernel, e.shape_class)) == keys.end())
        keys.emplace_back(e.kernel, e.shape_class);
  }
  for (const auto& [kernel, shape_class] : keys) g.entries.push_back(derive_entry(members, kernel, shape_class));
  return g;
}

YAML::Node flow_list(const std::vector<std::string>& items) {
  YAML::Node n(YAML::NodeType::Sequence);
  n.SetStyle(YAML::EmitterStyle::Flow);
  for (const std::string& item : items) n.push_back(item);
  return n;
}

// ---------------------------------------------------------------------------------------
// diff

std::string problem_text(const std::map<std::string, std::int64_t>& problem) {
  std::string text;
  for (const auto& [k, v] : problem) text += (text.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return text.empty() ? "unknown problem" : text;
}

std::string percent_change(double from, double to) {
  if (!(from > 0)) return "";
  std::ostringstream out;
  out << " (" << std::showpos << std::fixed << std::setprecision(1) << 100.0 * (to - from) / from << "%)";
  return out.str();
}

std::string choice_text(const ProfileEntry& e) { return e.algorithm + " {" + format_params(e.params) + "}"; }

// One side of a compared entry: the entry, and for a derived one its support.
struct Row {
  const ProfileEntry* entry = nullptr;
  std::string support;  // "chosen by 2 of 3" for derived entries, else empty
};

std::vector<std::string> entry_changes(const ProfileEntry& a, const ProfileEntry& b, const std::string& support_a,
                                       const std::string& support_b) {
  std::vector<std::string> parts;
  if (a.algorithm != b.algorithm) {
    parts.push_back(choice_text(a) + " -> " + choice_text(b));
  } else if (a.params != b.params) {
    std::string changed;
    std::set<std::string> names;
    for (const auto& kv : a.params) names.insert(kv.first);
    for (const auto& kv : b.params) names.insert(kv.first);
    for (const std::string& name : names) {
      const auto ia = a.params.find(name), ib = b.params.find(name);
      const std::string va = ia == a.params.end() ? "-" : std::to_string(ia->second);
      const std::string vb = ib == b.params.end() ? "-" : std::to_string(ib->second);
      if (va != vb) changed += (changed.empty() ? "" : ", ") + name + " " + va + " -> " + vb;
    }
    parts.push_back(a.algorithm + ": " + changed);
  }
  const bool timed_a = a.time_ms > 0, timed_b = b.time_ms > 0;
  if (timed_a && timed_b && !same_problem(a.problem, b.problem)) {
    parts.push_back("measured on different problems (" + problem_text(a.problem) + " vs " + problem_text(b.problem) +
                    ")");
  } else if (timed_a && timed_b && (a.time_ms != b.time_ms || a.gflops != b.gflops)) {
    parts.push_back(short_number(a.time_ms) + " ms -> " + short_number(b.time_ms) + " ms" +
                    percent_change(a.time_ms, b.time_ms) + ", " + short_number(a.gflops) + " -> " +
                    short_number(b.gflops) + " GFLOP/s" + percent_change(a.gflops, b.gflops));
  } else if (timed_a != timed_b) {
    parts.push_back(timed_a ? "timed only in the first" : "timed only in the second");
  }
  if (a.provenance != b.provenance) {
    const auto text = [](const ProfileProvenance& p) { return p.empty() ? std::string("none") : describe(p); };
    parts.push_back("provenance " + text(a.provenance) + " -> " + text(b.provenance));
  }
  if (support_a != support_b) {
    const std::string prefix = "chosen by ";
    const bool both = support_a.rfind(prefix, 0) == 0 && support_b.rfind(prefix, 0) == 0;
    parts.push_back(support_a + " -> " + (both ? support_b.substr(prefix.size()) : support_b));
  }
  if (!parts.empty() && a.algorithm == b.algorithm && a.params == b.params) parts.insert(parts.begin(), "same choice");
  return parts;
}

// Entries are matched per kernel and class: by problem where either file has several entries
// of the class (tune --shapes), else the class's one entry in each file.
void diff_rows(const std::vector<std::pair<std::string, Row>>& a, const std::vector<std::pair<std::string, Row>>& b,
               const std::string& prefix, const std::string& name_a, const std::string& name_b,
               std::vector<std::string>& lines) {
  using Rows = std::vector<std::pair<std::string, Row>>;
  auto count = [](const Rows& rows, const std::string& key) {
    return std::count_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == key; });
  };
  auto several = [&](const std::string& key) { return count(a, key) > 1 || count(b, key) > 1; };
  auto counterpart = [&](const Rows& rows, const std::string& key, const ProfileEntry& entry) -> const Row* {
    for (const auto& [k, row] : rows)
      if (k == key && (!several(key) || same_problem(row.entry->problem, entry.problem))) return &row;
    return nullptr;
  };
  auto label = [&](const std::string& key, const ProfileEntry& entry) {
    return prefix + key + (several(key) ? " (" + problem_text(entry.problem) + ")" : "");
  };
  for (const auto& [key, row] : a) {
    const Row* other = counterpart(b, key, *row.entry);
    if (other == nullptr) {
      lines.push_back(label(key, *row.entry) + ": only in " + name_a + ": " + choice_text(*row.entry));
      continue;
    }
    const std::vector<std::string> parts = entry_changes(*row.entry, *other->entry, row.support, other->support);
    if (parts.empty()) continue;
    std::string line = label(key, *row.entry) + ": ";
    for (std::size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
    lines.push_back(line);
  }
  for (const auto& [key, row] : b)
    if (counterpart(a, key, *row.entry) == nullptr)
      lines.push_back(label(key, *row.entry) + ": only in " + name_b + ": " + choice_text(*row.entry));
}

std::vector<std::pair<std::string, Row>> rows_of(const Profile& p) {
  std::vector<std::pair<std::string, Row>> rows;
  for (const ProfileEntry& e : p.entries) rows.push_back({e.kernel + "/" + e.shape_class, Row{&e, ""}});
  return rows;
}

std::vector<std::pair<std::string, Row>> rows_of(const DerivedProfile& g) {
  std::vector<std::pair<std::string, Row>> rows;
  for (const DerivedEntry& e : g.entries)
    rows.push_back(
        {e.choice.kernel + "/" + e.choice.shape_class,
         Row{&e.choice, "chosen by " + std::to_string(e.chosen_by.size()) + " of " + std::to_string(e.measured)}});
  return rows;
}

// A database's sections (or a profile file's one), keyed for matching across files.
struct Section {
  std::string key, label;
  std::vector<std::pair<std::string, Row>> rows;
};

std::vector<Section> sections_of(const ProfileFile& file) {
  std::vector<Section> sections;
  if (file.schema == kProfileSchema) {
    sections.push_back(
        {"device\n" + member_key(file.profile.device), device_label(file.profile.device), rows_of(file.profile)});
    return sections;
  }
  for (const Profile& p : file.database.profiles)
    sections.push_back({"device\n" + member_key(p.device), device_label(p.device), rows_of(p)});
  for (const DerivedProfile& g : file.database.derived) sections.push_back({group_key(g), g.describe(), rows_of(g)});
  return sections;
}

void diff_headers(const ProfileDevice& a, const ProfileDevice& b, std::vector<std::string>& lines) {
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"name", {a.name, b.name}},
      {"vendor", {a.vendor, b.vendor}},
      {"driver", {a.driver, b.driver}},
      {"architecture", {a.architecture, b.architecture}}};
  std::string changed;
  for (const auto& [field, values] : fields)
    if (values.first != values.second)
      changed +=
          (changed.empty() ? "" : ", ") + std::string(field) + " '" + values.first + "' -> '" + values.second + "'";
  if (!changed.empty()) lines.push_back("device: " + changed);
}

}  // namespace

const DerivedEntry* DerivedProfile::find(const std::string& kernel, const std::string& shape_class) const {
  for (const DerivedEntry& e : entries)
    if (e.choice.kernel == kernel && e.choice.shape_class == shape_class) return &e;
  return nullptr;
}

MatchLevel DerivedProfile::fit(const DeviceInfo& device) const {
  if (level == MatchLevel::kArchitecture)
    return same_architecture(architecture, vendor, device.architecture, device.vendor) ? MatchLevel::kArchitecture
                                                                                       : MatchLevel::kNone;
  return !vendor.empty() && lower(vendor) == lower(device.vendor) ? MatchLevel::kVendor : MatchLevel::kNone;
}

std::string DerivedProfile::describe() const {
  if (level == MatchLevel::kArchitecture) return "derived architecture " + architecture + " (" + vendor + ")";
  return "derived vendor " + vendor;
}

Profile DerivedProfile::as_profile(const std::string& path) const {
  Profile p;
  p.device.vendor = vendor;
  p.device.architecture = architecture;
  for (const DerivedEntry& e : entries) p.entries.push_back(e.choice);
  p.path = path;
  return p;
}

std::vector<Profile> ProfileFile::device_profiles() const {
  return schema == kProfileSchema ? std::vector<Profile>{profile} : database.profiles;
}

std::string device_label(const ProfileDevice& device) {
  return device.name + " (driver " + (device.driver.empty() ? "unknown" : device.driver) + ")";
}

ProfileFile parse_profile_file(const std::string& text, const std::string& name) {
  try {
    return parse_checked(text, name);
  } catch (const YAML::Exception& e) {
    Decoder(name).fail(e.mark, e.msg);
  }
}

ProfileFile read_profile_file(const std::string& path) {
  return parse_profile_file(read_bounded_file(path, kMaxYamlFileBytes, "profile"), path);
}

ProfileDatabase merge_profiles(const std::vector<Profile>& inputs) {
  ProfileDatabase db;
  for (const Profile& p : inputs) {
    auto same = std::find_if(db.profiles.begin(), db.profiles.end(),
                             [&](const Profile& m) { return member_key(m.device) == member_key(p.device); });
    if (same == db.profiles.end()) {
      db.profiles.push_back(p);
      db.profiles.back().schema = kProfileSchema;
      continue;
    }
    // The later date wins; at equal dates (or none) the later input.
    const bool incoming_newer = !(p.date < same->date);
    Profile merged = incoming_newer ? p : *same;
    const Profile& older = incoming_newer ? *same : p;
    for (const ProfileEntry& e : older.entries)
      if (std::none_of(merged.entries.begin(), merged.entries.end(), [&](const ProfileEntry& m) {
            return m.kernel == e.kernel && m.shape_class == e.shape_class && m.problem == e.problem;
          }))
        merged.entries.push_back(e);
    merged.schema = kProfileSchema;
    *same = std::move(merged);
  }
  std::stable_sort(db.profiles.begin(), db.profiles.end(), [](const Profile& a, const Profile& b) {
    if (a.device.name != b.device.name) return a.device.name < b.device.name;
    if (a.date != b.date) return a.date > b.date;
    return a.device.driver < b.device.driver;
  });
  db.derived = derive_profiles(db.profiles);
  return db;
}

std::vector<DerivedProfile> derive_profiles(const std::vector<Profile>& members) {
  // Keyed by lower-case vendor (and architecture).
  std::map<std::pair<std::string, std::string>, std::vector<const Profile*>> architectures;
  std::map<std::string, std::vector<const Profile*>> vendors;
  for (const Profile& m : members) {
    if (m.device.vendor.empty()) continue;
    const std::string v = lower(m.device.vendor);
    vendors[v].push_back(&m);
    if (!m.device.architecture.empty()) architectures[{v, m.device.architecture}].push_back(&m);
  }
  // A group is named by the vendor spelling most of its members use (the first on a tie).
  auto spelling = [](const std::vector<const Profile*>& group) {
    std::map<std::string, int> count;
    for (const Profile* m : group) ++count[m->device.vendor];
    std::string best = group.front()->device.vendor;
    for (const Profile* m : group)
      if (count[m->device.vendor] > count[best]) best = m->device.vendor;
    return best;
  };
  std::vector<DerivedProfile> derived;
  for (const auto& [key, group] : architectures)
    derived.push_back(derive_group(MatchLevel::kArchitecture, spelling(group), key.second, group));
  for (const auto& [key, group] : vendors)
    derived.push_back(derive_group(MatchLevel::kVendor, spelling(group), "", group));
  return derived;
}

std::string emit_profile_database(const ProfileDatabase& database) {
  YAML::Node root;
  root["schema"] = kProfileDatabaseSchema;
  YAML::Node profiles(YAML::NodeType::Sequence);
  for (const Profile& p : database.profiles) profiles.push_back(detail::encode_profile_body(p));
  root["profiles"] = profiles;
  YAML::Node derived(YAML::NodeType::Sequence);
  for (const DerivedProfile& g : database.derived) {
    YAML::Node n;
    n["step"] = step_name(g.level);
    n["vendor"] = g.vendor;
    if (g.level == MatchLevel::kArchitecture) n["architecture"] = g.architecture;
    n["devices"] = flow_list(g.devices);
    YAML::Node kernels(YAML::NodeType::Map);
    for (const DerivedEntry& e : g.entries) {
      YAML::Node entry;
      entry["algorithm"] = e.choice.algorithm;
      entry["params"] = detail::encode_params(e.choice.params);
      entry["chosen_by"] = flow_list(e.chosen_by);
      entry["measured"] = e.measured;
      kernels[e.choice.kernel][e.choice.shape_class] = entry;
    }
    n["kernels"] = kernels;
    derived.push_back(n);
  }
  root["derived"] = derived;
  YAML::Emitter out;
  out << YAML::Comment(
             "ocltk profile database, schema 2: see docs/profile-schema.md\n"
             "written by `ocltk profile merge`; the derived sections are recomputed on every merge")
      << YAML::Newline << root;
  return std::string(out.c_str()) + "\n";
}

void write_profile_database_atomically(const std::string& path, const ProfileDatabase& database) {
  detail::write_text_atomically(path, emit_profile_database(database), "profile database");
}

std::vector<std::string> diff_profile_files(const ProfileFile& a, const ProfileFile& b) {
  std::vector<std::string> lines;
  if (a.schema == kProfileSchema && b.schema == kProfileSchema) {
    diff_headers(a.profile.device, b.profile.device, lines);
    diff_rows(rows_of(a.profile), rows_of(b.profile), "", a.path, b.path, lines);
    return lines;
  }
  const std::vector<Section> sa = sections_of(a), sb = sections_of(b);
  auto find = [](const std::vector<Section>& sections, const std::string& key) -> const Section* {
    for (const Section& s : sections)
      if (s.key == key) return &s;
    return nullptr;
  };
  for (const Section& s : sa) {
    if (const Section* other = find(sb, s.key))
      diff_rows(s.rows, other->rows, s.label + ": ", a.path, b.path, lines);
    else
      lines.push_back(s.label + ": only in " + a.path + " (" + std::to_string(s.rows.size()) + " entries)");
  }
  for (const Section& s : sb)
    if (find(sa, s.key) == nullptr)
      lines.push_back(s.label + ": only in " + b.path + " (" + std::to_string(s.rows.size()) + " entries)");
  return lines;
}

}  // namespace ocltk

#include "priors.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "ocltk/family.hpp"
#include "ocltk/runtime.hpp"
#include "ocltk/status.hpp"

namespace ocltk::tuner {
namespace detail {
// configs/*.yaml and configs/priors/*.jsonl as (file name, text), generated at build time
// by cmake/embed_files.cmake.
const std::vector<std::pair<std::string, std::string>>& embedded_prior_files();
}  // namespace detail

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// `e` in today's tables: its algorithm known, its parameters complete and within the
// constraints that do not depend on a device; nullopt for a point of an algorithm or value
// since removed.
std::optional<Evaluation> in_todays_tables(const std::string& kernel, const Evaluation& e) {
  const KernelFamily* family = find_family(kernel);
  const AlgorithmSpec* algorithm = family ? family->find_algorithm(e.algorithm) : nullptr;
  if (algorithm == nullptr) return std::nullopt;
  Evaluation out = e;
  try {
    out.params = algorithm->complete(e.params);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (algorithm->violation(out.params, nullptr)) return std::nullopt;
  out.cached = true;
  return out;
}

bool is_builtin(const std::string& kernel, const std::string& shape_class, const Evaluation& e) {
  const KernelFamily* family = find_family(kernel);
  if (family == nullptr || family->find_class(shape_class) == nullptr) return false;
  return family->is_builtin_point(shape_class, e.algorithm, e.params);
}

void sort_fastest_first(std::vector<Evaluation>& points) {
  std::stable_sort(points.begin(), points.end(),
                   [](const Evaluation& a, const Evaluation& b) { return a.time_ms < b.time_ms; });
}

// The class of `device` for kernel, class and problem, added where missing.
PriorClass& class_of(PriorDevice& device, const std::string& kernel, const std::string& shape_class,
                     const Problem& problem) {
  for (PriorClass& c : device.classes)
    if (c.kernel == kernel && c.shape_class == shape_class && same_problem(c.problem, problem)) return c;
  device.classes.push_back({kernel, shape_class, problem, {}, 0});
  return device.classes.back();
}

void add_point(PriorClass& c, const Evaluation& e) {
  const std::string key = e.key();
  for (const Evaluation& have : c.points)
    if (have.key() == key) return;
  c.points.push_back(e);
  sort_fastest_first(c.points);
}

// Whether `e`'s figure in class `c` of `device` is its profile entry's: the entry for the
// class and problem names the same point at the same time.
bool profile_figure(const PriorDevice& device, const PriorClass& c, const Evaluation& e) {
  for (const ProfileEntry& entry : device.chosen.entries)
    if (entry.kernel == c.kernel && entry.shape_class == c.shape_class && same_problem(entry.problem, c.problem) &&
        entry.algorithm == e.algorithm && entry.params == e.params && entry.time_ms == e.time_ms)
      return true;
  return false;
}

// A recorded point: a recording's figures were measured in one run, beside each other, and
// rank its points; a profile entry's figure of the same point comes from another run, under
// another load, and gives way (the Xeon's nf4_backward decode entry, 1.67 ms, ranked fifth
// of its recording's points, where the recording measured it first at 1.45 ms).
void add_recorded_point(PriorDevice& device, PriorClass& c, const Evaluation& e) {
  const std::string key = e.key();
  for (Evaluation& have : c.points)
    if (have.key() == key) {
      if (profile_figure(device, c, have)) {
        have.time_ms = e.time_ms;
        sort_fastest_first(c.points);
      }
      return;
    }
  add_point(c, e);
}

PriorDevice& device_named(std::vector<PriorDevice>& known, const std::string& name) {
  for (PriorDevice& d : known)
    if (d.device.name == name) return d;
  known.push_back({});
  known.back().device.name = name;
  return known.back();
}

// Fills the header fields a device lacks (a recording's header names fewer than a profile's).
void fill_header(ProfileDevice& to, const ProfileDevice& from) {
  for (auto field : {&ProfileDevice::vendor, &ProfileDevice::driver, &ProfileDevice::platform,
                     &ProfileDevice::architecture, &ProfileDevice::type})
    if ((to.*field).empty()) to.*field = from.*field;
}

void add_profile(std::vector<PriorDevice>& known, const std::string& name, const std::string& text) {
  const Profile profile = parse_profile(text, name);
  PriorDevice& device = device_named(known, profile.device.name);
  fill_header(device.device, profile.device);
  device.sources.push_back(name);
  for (const ProfileEntry& entry : profile.entries) {
    Evaluation e;
    e.algorithm = entry.algorithm;
    e.params = entry.params;
    e.ok = true;
    e.time_ms = entry.time_ms;
    const std::optional<Evaluation> point = in_todays_tables(entry.kernel, e);
    if (!point) continue;
    device.chosen.entries.push_back(entry);
    device.chosen.entries.back().params = point->params;
    if (!(entry.time_ms > 0)) continue;  // pinned by hand, never measured: no time to rank it by
    PriorClass& c = class_of(device, entry.kernel, entry.shape_class, entry.problem);
    add_point(c, *point);
    // An entry's default time where it says it is today's default's (default_time_counts): the
    // H200 entries of tunes that excluded the default's algorithm had timed stand-ins, at
    // 0.21-11x what the H200's own first tune measured of today's defaults on the same problems
    // (0.73-1.30x for the others), and one of them had called the H100's gemm_nt
    // lora_expand_half near; configs/nvidia-h200.yaml names its first tune's points and times.
    if (c.builtin_ms == 0 && default_time_counts(entry)) c.builtin_ms = entry.default_time_ms;
  }
}

void add_recording(std::vector<PriorDevice>& known, const std::string& name, const std::string& text) {
  std::istringstream in(text);
  const Recording rec = read_recording(in, name);
  PriorDevice& device = device_named(known, rec.device);
  ProfileDevice header;
  header.vendor = rec.vendor;
  header.driver = rec.driver;
  header.platform = rec.platform;
  header.architecture = rec.architecture;
  header.type = rec.type;
  fill_header(device.device, header);
  device.sources.push_back(name);
  for (const RecordedClass& rc : rec.classes) {
    for (const Evaluation& recorded : rc.points) {
      if (!recorded.ok) continue;
      const std::optional<Evaluation> point = in_todays_tables(rc.kernel, recorded);
      if (!point) continue;
      PriorClass& c = class_of(device, rc.kernel, rc.shape_class, rc.problem);
      add_recorded_point(device, c, *point);
      // A recording's built-in default was measured beside its other points: it wins over a
      // profile's figure, which may be from another run.
      if (is_builtin(rc.kernel, rc.shape_class, *point)) c.builtin_ms = point->time_ms;
    }
  }
}

void add_file(std::vector<PriorDevice>& known, const std::string& name, const std::string& text) {
  if (ends_with(name, ".yaml") || ends_with(name, ".yml")) {
    add_profile(known, name, text);
  } else if (ends_with(name, ".jsonl")) {
    add_recording(known, name, text);
  } else {
    throw Error(ErrorCode::kInvalidArgument,
                name + ": not a prior file (a profile, .yaml, or a recording of best points, .jsonl)");
  }
}

// Drops classes without a point and devices without a class or a profile entry.
void drop_empty(std::vector<PriorDevice>& known) {
  for (PriorDevice& d : known)
    d.classes.erase(
        std::remove_if(d.classes.begin(), d.classes.end(), [](const PriorClass& c) { return c.points.empty(); }),
        d.classes.end());
  known.erase(std::remove_if(known.begin(), known.end(),
                             [](const PriorDevice& d) { return d.classes.empty() && d.chosen.entries.empty(); }),
              known.end());
}

// What `device`'s profiles choose for the problem (the runtime's pick, Profile::find; its
// entries are in today's tables, add_profile); nullopt where they have no entry for the class.
std::optional<Evaluation> chosen_for(const PriorDevice& device, const std::string& kernel,
                                     const std::string& shape_class, const Problem* problem) {
  const ProfileEntry* entry = device.chosen.find(kernel, shape_class, problem);
  if (entry == nullptr) return std::nullopt;
  Evaluation e;
  e.algorithm = entry->algorithm;
  e.params = entry->params;
  e.ok = true;
  e.time_ms = entry->time_ms > 0 ? entry->time_ms : 0;
  e.cached = true;
  return e;
}

}  // namespace

const char* to_string(PriorUse use) {
  switch (use) {
    case PriorUse::kAll:
      return "all";
    case PriorUse::kOthers:
      return "others";
    case PriorUse::kNone:
      return "none";
  }
  return "all";
}

std::optional<PriorUse> parse_prior_use(const std::string& name) {
  for (PriorUse u : {PriorUse::kAll, PriorUse::kOthers, PriorUse::kNone})
    if (name == to_string(u)) return u;
  return std::nullopt;
}

int prior_distance(const ProfileDevice& known, const DeviceInfo& device) {
  if (known.name == device.name) return 0;
  const bool same_kind = !known.type.empty() && known.type == device.type;
  const bool same_vendor = !known.vendor.empty() && lower(known.vendor) == lower(device.vendor);
  if (same_architecture(known.architecture, known.vendor, device.architecture, device.vendor)) return 1;
  if (!same_kind) return -1;
  if (same_vendor) return 2;
  if (!known.platform.empty() && known.platform == device.platform) return 3;
  return 4;
}

std::vector<PriorDevice> read_priors(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<PriorDevice> known;
  for (const auto& [name, text] : files) add_file(known, name, text);
  drop_empty(known);
  return known;
}

const std::vector<PriorDevice>& embedded_priors() {
  static const std::vector<PriorDevice> known = [] {
    std::vector<PriorDevice> out;
    for (const auto& [name, text] : detail::embedded_prior_files()) {
      try {
        add_file(out, name, text);
      } catch (const std::exception&) {
        // A shipped file today's tables refuse only costs its priors.
      }
    }
    drop_empty(out);
    return out;
  }();
  return known;
}

namespace {

// Whether the device's recorded class `c` timed `chosen`'s algorithm over kOutrunRatio behind
// its best point, one of another algorithm (an algorithm the recording never timed: no).
bool outrun_by_recording(const PriorClass* c, const Evaluation& chosen) {
  if (c == nullptr || c->points.empty() || c->points.front().algorithm == chosen.algorithm) return false;
  for (const Evaluation& e : c->points)  // fastest first
    if (e.algorithm == chosen.algorithm) return e.time_ms > kOutrunRatio * c->points.front().time_ms;
  return false;
}

}  // namespace

std::optional<ClassPrior> class_prior(const std::vector<PriorDevice>& known, const DeviceInfo& device, PriorUse use,
                                      const std::string& kernel, const std::string& shape_class,
                                      const Problem* problem) {
  if (use == PriorUse::kNone) return std::nullopt;
  // Each device's class nearest to the problem (null where only its profile knows the class,
  // by an entry pinned without a time) and its profile's choice: (distance, device name,
  // class, choice).
  struct Found {
    int distance;
    const PriorDevice* device;
    const PriorClass* c;
    std::optional<Evaluation> chosen;
  };
  std::vector<Found> found;
  for (const PriorDevice& d : known) {
    const int distance = prior_distance(d.device, device);
    if (distance < 0 || (distance == 0 && use == PriorUse::kOthers)) continue;
    const PriorClass* nearest = nullptr;
    double nearest_distance = 0;
    for (const PriorClass& c : d.classes) {
      if (c.kernel != kernel || c.shape_class != shape_class) continue;
      const double dp = problem ? problem_distance(c.problem, *problem) : 0;
      if (nearest == nullptr || dp < nearest_distance) {
        nearest = &c;
        nearest_distance = dp;
      }
    }
    std::optional<Evaluation> chosen = chosen_for(d, kernel, shape_class, problem);
    if (nearest != nullptr || chosen) found.push_back({distance, &d, nearest, std::move(chosen)});
  }
  if (found.empty()) return std::nullopt;
  ClassPrior out;
  out.distance = std::min_element(found.begin(), found.end(), [](const Found& a, const Found& b) {
                   return a.distance < b.distance;
                 })->distance;
  std::vector<const PriorClass*> nearest;
  std::vector<const PriorDevice*> full;  // those whose class lists kFullList points or more
  std::set<std::string> known_here;      // the algorithms they list or chose for the class
  for (const Found& f : found)
    if (f.distance == out.distance) {
      if (f.c != nullptr) nearest.push_back(f.c);
      if (f.c != nullptr && f.c->points.size() >= kFullList) full.push_back(f.device);
      if (f.chosen) known_here.insert(f.chosen->algorithm);
      if (f.chosen && !outrun_by_recording(f.c, *f.chosen)) out.chosen.push_back(*f.chosen);
      out.devices.push_back(f.device->device.name);
    }
  // Where no nearest device lists kFullList points of the class (they know it by their
  // profiles' entries, or by a short recording), the nearest devices further on that list as
  // many lend their lists: their points after all of the nearest's, for the guided model and as
  // near ties and contenders, and the algorithms their lists leave out count as outrun. How near
  // a class is stays judged by the nearest devices alone (best_ratio). On the 2-core AVX-512
  // EPYC, seeded by the Xeon's profile entry for lora_expand decode, a first tune tried TR 2
  // only with CB 256 or CN 8, far from where the Zen 2's recording of the class has its best
  // (CB 1024-4096, CW 4, VA 1, small workgroups), and kept a point 1.35x the long tune's best,
  // which lies there; lent that recording, two first tunes kept 1.15x and 1.08x.
  const std::size_t own = nearest.size();
  if (out.distance > 0 && full.empty()) {
    const auto lends = [](const Found& f) { return f.c != nullptr && f.c->points.size() >= kFullList; };
    int lender = -1;
    for (const Found& f : found)
      if (f.distance > out.distance && lends(f) && (lender < 0 || f.distance < lender)) lender = f.distance;
    for (const Found& f : found)
      if (f.distance == lender && lends(f)) {
        nearest.push_back(f.c);
        full.push_back(f.device);
        if (f.chosen) known_here.insert(f.chosen->algorithm);  // none of outrun, as a nearest's
        out.lenders.push_back(f.device->device.name);
        out.lender_distance = lender;
      }
  }
  // Where the nearest devices share the architecture but not the vendor (PoCL's compiler
  // targets), the vendor's devices further on add their choices (ClassPrior::vendor_chosen).
  if (out.distance == 1 && std::all_of(found.begin(), found.end(), [&device](const Found& f) {
        return f.distance != 1 || lower(f.device->device.vendor) != lower(device.vendor);
      }))
    for (const Found& f : found)
      if (f.distance == 2 && f.chosen && !outrun_by_recording(f.c, *f.chosen)) {
        const std::string key = f.chosen->key();
        const auto same = [&key](const Evaluation& e) { return e.key() == key; };
        if (std::none_of(out.chosen.begin(), out.chosen.end(), same) &&
            std::none_of(out.vendor_chosen.begin(), out.vendor_chosen.end(), same)) {
          out.vendor_chosen.push_back(*f.chosen);
          out.vendor_devices.push_back(f.device->device.name);
        }
      }
  // The lists interleaved by rank, the nearest devices' first, then the lenders'.
  std::set<std::string> taken;
  for (const auto& [from, to] : {std::pair<std::size_t, std::size_t>{0, own}, {own, nearest.size()}})
    for (std::size_t rank = 0;; ++rank) {
      bool any = false;
      for (std::size_t i = from; i < to; ++i) {
        const PriorClass* c = nearest[i];
        if (rank >= c->points.size()) continue;
        any = true;
        if (taken.insert(c->points[rank].key()).second) out.points.push_back(c->points[rank]);
      }
      if (!any) break;
    }
  double log_sum = 0;
  int ratios = 0;
  for (std::size_t i = 0; i < own; ++i)
    if (const PriorClass* c = nearest[i]; c->builtin_ms > 0) {
      log_sum += std::log(c->points.front().time_ms / c->builtin_ms);
      ++ratios;
    }
  if (ratios > 0) out.best_ratio = std::exp(log_sum / ratios);
  if (out.distance > 0)
    for (const PriorClass* c : nearest) {
      const Evaluation& best = c->points.front();
      std::set<std::string> algorithms = {best.algorithm};
      for (const Evaluation& e : c->points)
        if (e.time_ms <= kContenderMargin * best.time_ms) {
          out.near_ties.push_back(e);
          if (algorithms.insert(e.algorithm).second) out.contenders.push_back(e);
        }
    }
  for (const Evaluation& e : out.points) known_here.insert(e.algorithm);  // every point of their classes
  for (const PriorDevice* d : full)
    for (const PriorClass& other : d->classes)
      if (other.kernel == kernel)
        for (const Evaluation& e : other.points)
          if (!known_here.count(e.algorithm)) out.outrun.insert(e.algorithm);
  if (out.distance == 0 && problem != nullptr)
    for (const PriorClass* c : nearest)
      if (same_problem(c->problem, *problem)) out.best_ms = c->points.front().time_ms;
  return out;
}

std::vector<PointElsewhere> algorithm_elsewhere(const std::vector<PriorDevice>& known, const DeviceInfo& device,
                                                PriorUse use, int distance, const std::string& kernel,
                                                const std::string& shape_class, const Problem& problem,
                                                const std::string& algorithm) {
  if (use == PriorUse::kNone || distance < 0 || (distance == 0 && use == PriorUse::kOthers)) return {};
  std::vector<std::pair<double, PointElsewhere>> found;  // (class distance, point)
  for (const PriorDevice& d : known) {
    if (prior_distance(d.device, device) != distance) continue;
    for (const PriorClass& c : d.classes) {
      if (c.kernel != kernel || c.shape_class == shape_class) continue;
      const double apart = problem_distance(c.problem, problem);
      if (apart > kElsewhereReach) continue;
      for (const Evaluation& e : c.points)  // fastest first
        if (e.algorithm == algorithm) {
          if (e.time_ms <= kElsewhereMargin * c.points.front().time_ms) found.push_back({apart, {e, c.shape_class}});
          break;
        }
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PointElsewhere> out;
  std::set<std::string> taken;
  for (auto& [apart, e] : found)
    if (taken.insert(e.point.key()).second) out.push_back(std::move(e));
  return out;
}

void write_priors(std::ostream& out, const std::vector<Recording>& recordings, std::size_t top) {
  if (recordings.empty()) throw Error(ErrorCode::kInvalidArgument, "no recording to derive priors from");
  Recording header = recordings.front();
  for (const Recording& r : recordings) {
    if (r.device != header.device)
      throw Error(ErrorCode::kInvalidArgument, "the recordings are of several devices ('" + header.device + "' and '" +
                                                   r.device + "'); a prior file describes one");
    for (auto field :
         {&Recording::vendor, &Recording::driver, &Recording::platform, &Recording::architecture, &Recording::type})
      if ((header.*field).empty()) header.*field = r.*field;
  }
  out << "{\"record\": 1, \"ocltk\": " << json_string(version()) << ", \"device\": " << json_string(header.device)
      << ", \"vendor\": " << json_string(header.vendor) << ", \"driver\": " << json_string(header.driver)
      << ", \"platform\": " << json_string(header.platform)
      << ", \"architecture\": " << json_string(header.architecture) << ", \"type\": " << json_string(header.type)
      << "}\n";
  // Classes of all recordings, merged by kernel, class and problem, in order of first appearance.
  std::vector<PriorDevice> merged(1);
  for (const Recording& r : recordings)
    for (const RecordedClass& rc : r.classes)
      for (const Evaluation& recorded : rc.points) {
        if (!recorded.ok) continue;
        const std::optional<Evaluation> point = in_todays_tables(rc.kernel, recorded);
        if (!point) continue;
        PriorClass& c = class_of(merged[0], rc.kernel, rc.shape_class, rc.problem);
        add_point(c, *point);
        if (is_builtin(rc.kernel, rc.shape_class, *point)) c.builtin_ms = point->time_ms;
      }
  for (const PriorClass& c : merged[0].classes) {
    bool builtin_written = false;
    for (std::size_t i = 0; i < c.points.size() && i < top; ++i) {
      write_record_line(out, c.kernel, c.shape_class, c.problem, c.points[i]);
      builtin_written = builtin_written || is_builtin(c.kernel, c.shape_class, c.points[i]);
    }
    if (!builtin_written && c.builtin_ms > 0)
      for (const Evaluation& e : c.points)
        if (is_builtin(c.kernel, c.shape_class, e)) write_record_line(out, c.kernel, c.shape_class, c.problem, e);
  }
}

}  // namespace ocltk::tuner

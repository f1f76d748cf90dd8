// Measured points as JSON lines: the --record file, the resume cache, and the recorded
// spaces that `tune --replay` and the tests search offline. One format for all three:
//
//   {"record": 1, "ocltk": "0.1.0", "device": "...", "vendor": "...", "driver": "..."}   (header)
//   {"kernel": "gemm_nt", "class": "gemv", "problem": {"k": 4096, "m": 1, "n": 4096},
//    "choice": {"algorithm": "reduce", "params": {...}, "ok": true, "time_ms": 0.0243}}
//
// A resume cache's header also names the kernel and the hash of its search space.
#pragma once

#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "ocltk/device.hpp"
#include "ocltk/family.hpp"
#include "search.hpp"

namespace ocltk::tuner {

using Problem = std::map<std::string, std::int64_t>;

// A device name as a file name: lower case, runs of other characters as one '-'.
std::string file_name_of(const std::string& name);

std::string json_string(const std::string& text);
std::string json_strings(const std::vector<std::string>& texts);  // ["a", "b"]
std::string json_problem(const Problem& problem);
std::string json_choice(const Evaluation& e);
std::string format_problem(const Problem& problem);  // "k=4096 m=1 n=4096"

// The first line a run appends to a --record file: format version, ocltk version, device.
void write_record_header(std::ostream& out, const DeviceInfo& device);
void write_record_line(std::ostream& out, const std::string& kernel, const std::string& shape_class,
                       const Problem& problem, const Evaluation& e);

// Every point of one class in a recording, in the order measured (first measurement of
// a point kept).
struct RecordedClass {
  std::string kernel, shape_class;
  Problem problem;
  std::vector<Evaluation> points;
};
struct Recording {
  std::string device, vendor, driver;
  // Written by headers since the tuner seeds a device nobody tuned from the nearest ones
  // (priors.hpp); empty in older recordings.
  std::string platform, architecture, type;
  std::vector<RecordedClass> classes;
};
// Reads a --record file (several runs may have appended to it; their headers must name
// the same device). Throws Error(kInvalidArgument) naming FILE:LINE for a malformed line, and
// Error(kIo / kNotFound) for a file that is missing, not a regular file or larger than
// kMaxRecordingBytes.
constexpr std::uint64_t kMaxRecordingBytes = std::uint64_t(1) << 30;
Recording read_recording(const std::string& path);
// The same from text already read; `name` stands for the file in messages.
Recording read_recording(std::istream& in, const std::string& name);

// The hash of a kernel family's search space on a device: algorithm names, their kernel
// source text, the variant the tuner builds them with and every point's build options. A
// change of any makes old measurements meaningless, so a resume cache keyed on it is never
// reused across such changes.
std::uint64_t search_space_hash(const KernelFamily& family, const DeviceLimits& limits);

// The most bytes a resume cache may hold (a whole exhaustive search is a few MB).
constexpr std::uint64_t kMaxCacheBytes = std::uint64_t(1) << 30;

// Append-only cache of one kernel's measurements on one device, driver and search space
// (<dir>/<device>-<kernel>-<hash>.jsonl). An interrupted `tune` (Ctrl-C, crash, budget)
// run again finds every point it already measured here and goes on from there.
class TuneCache {
 public:
  // Loads the file if it exists; throws Error(kInvalidArgument) when its header names
  // another device, driver, kernel or space ("refusing cache FILE: ...").
  // A cache that cannot be written (a full disk, a read-only folder) is not an error: the
  // run goes on without it after one line on `warnings`, and never leaves a file the next
  // run refuses (the header is written whole or not at all; a line cut short is skipped).
  TuneCache(const std::string& path, const DeviceInfo& device, const std::string& kernel, std::uint64_t space_hash,
            std::ostream& warnings = std::cerr);
  const Evaluation* find(const std::string& shape_class, const Problem& problem, const std::string& point_key) const;
  void append(const std::string& shape_class, const Problem& problem, const Evaluation& e);
  const std::string& path() const { return path_; }
  std::size_t size() const { return entries_.size(); }
  bool writable() const { return !disabled_; }  // false after a failed write (warned once)

  static std::string path_for(const std::string& dir, const DeviceInfo& device, const std::string& kernel,
                              std::uint64_t space_hash);
  static std::string default_dir();  // <program cache folder>/tune, "" when disabled

 private:
  void disable(const std::string& why);  // warns once and stops writing

  std::string path_, kernel_;
  std::ostream* warnings_;
  bool disabled_ = false;
  std::ofstream out_;
  std::map<std::string, Evaluation> entries_;  // class + problem + point key
};

}  // namespace ocltk::tuner

// Compiled programs, cached in memory per context and on disk as binaries.
//
// A disk entry is keyed by a hash of (source, build options, platform, device name,
// driver version) and holds that key text and a checksum of the binary; an entry whose
// key text, checksum or header does not match, or whose binary the driver refuses, is
// rebuilt from source and overwritten, never trusted.
//
// A register target (max_registers > 0, the REGS parameter of params.hpp) rebuilds the
// program from its PTX with `.maxnreg` added to every kernel: on NVIDIA's OpenCL, whose
// binaries are PTX. The cache keeps the rewritten PTX under a key that names the target.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "ocltk/cl.hpp"

namespace ocltk {

struct ProgramCacheStats {
  std::uint64_t memory_hits = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t builds = 0;            // compiled from source
  std::uint64_t rejected_entries = 0;  // disk entries found corrupt or stale
};

class ProgramCache {
 public:
  // `directory` empty: $XDG_CACHE_HOME/ocltk, else ~/.cache/ocltk. "-" disables the
  // disk cache (OCLTK_CACHE_DIR=- does the same).
  explicit ProgramCache(std::string directory = "");

  // Returns a built program; throws BuildError with the log when the source does not
  // compile. Thread-safe: different programs build concurrently (the tuner compiles
  // candidates on a thread pool); a caller asking for a program another thread is
  // building waits for that build instead of starting a second one.
  // With max_registers > 0 it also throws BuildError where the device's binaries are not
  // PTX, or where the driver refuses the rewritten PTX.
  boost::compute::program get(const boost::compute::context& context, const boost::compute::device& device,
                              const std::string& source, const std::string& options, int max_registers = 0);

  // Where a given program's binary lives (or would live) on disk; empty when disabled.
  std::string entry_path(const boost::compute::device& device, const std::string& source, const std::string& options,
                         int max_registers = 0) const;
  const std::string& directory() const { return directory_; }
  // Whether a program built from source is written to the disk cache (entries already there
  // are read either way). Writing asks the driver for the program's binary, which on PoCL
  // compiles every kernel for any workgroup size, a cost paid again at the first launch
  // for the launch's own size: that made a build take several times as long, while PoCL
  // keeps its own cache of both (POCL_CACHE_DIR), so a program rebuilt from source in a
  // later process takes a small part of the first build's time. The tuner, which builds
  // thousands of programs it measures once, turns writing off there.
  void set_writes_to_disk(bool writes);
  bool writes_to_disk() const;
  ProgramCacheStats stats() const;
  void clear_memory();

  static std::string default_directory();

 private:
  std::string directory_;
  bool writes_to_disk_ = true;
  mutable std::mutex mutex_;
  using MemoryKey = std::tuple<cl_context, cl_device_id, std::uint64_t>;
  std::map<MemoryKey, boost::compute::program> memory_;
  std::set<MemoryKey> building_;  // keys some thread is building now
  std::condition_variable built_;
  ProgramCacheStats stats_;
};

// `ptx` with `.maxnreg registers` among the performance directives of every `.entry` (in
// place of any `.maxnreg` there); nullopt when `ptx` is not PTX text with an entry.
std::optional<std::string> ptx_with_max_registers(const std::string& ptx, int registers);

std::uint64_t fnv1a64(const void* data, std::size_t size, std::uint64_t seed = 0xcbf29ce484222325ull);
std::uint64_t fnv1a64(const std::string& text);

}  // namespace ocltk

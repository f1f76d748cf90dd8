#include "ocltk/program_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string_view>

#include "ocltk/status.hpp"
#include "user_dirs.hpp"

namespace ocltk {
namespace fs = std::filesystem;
namespace {

// Disk entry: magic line, key-text length, key text, binary length, binary checksum,
// binary. Everything is checked before the binary reaches the driver.
constexpr char kMagic[] = "OCLTK-PROGRAM-1\n";

std::string key_text(const boost::compute::device& device, const std::string& source, const std::string& options,
                     int max_registers) {
  const boost::compute::platform platform(device.platform());
  std::ostringstream key;
  key << "platform=" << platform.name() << " " << platform.version() << "\ndevice=" << device.name()
      << "\ndriver=" << device.driver_version() << "\noptions=" << options << "\nsource-hash=" << std::hex
      << fnv1a64(source) << "\nsource-size=" << std::dec << source.size() << "\n";
  if (max_registers > 0) key << "max-registers=" << max_registers << "\n";
  return key.str();
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

template <class T>
bool read_pod(std::istream& in, T& v) {
  return bool(in.read(reinterpret_cast<char*>(&v), sizeof v));
}

// Returns the binary when the entry is whole and made for `key`; empty otherwise.
std::vector<unsigned char> read_entry(const std::string& path, const std::string& key, bool& existed) {
  std::ifstream in(path, std::ios::binary);
  existed = bool(in);
  if (!in) return {};
  char magic[sizeof kMagic - 1];
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) return {};
  std::uint64_t key_size = 0, bin_size = 0, checksum = 0;
  if (!read_pod(in, key_size) || key_size != key.size()) return {};
  std::string stored_key(key_size, '\0');
  if (!in.read(stored_key.data(), std::streamsize(key_size)) || stored_key != key) return {};
  if (!read_pod(in, bin_size) || !read_pod(in, checksum) || bin_size == 0 || bin_size > (1ull << 30)) return {};
  std::vector<unsigned char> binary(bin_size);
  if (!in.read(reinterpret_cast<char*>(binary.data()), std::streamsize(bin_size))) return {};
  if (in.peek() != std::char_traits<char>::eof()) return {};
  if (fnv1a64(binary.data(), binary.size()) != checksum) return {};
  return binary;
}

void write_entry(const std::string& path, const std::string& key, const std::vector<unsigned char>& binary) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;  // a read-only cache folder only costs rebuilds
    const std::uint64_t key_size = key.size(), bin_size = binary.size(),
                        checksum = fnv1a64(binary.data(), binary.size());
    out.write(kMagic, sizeof kMagic - 1);
    out.write(reinterpret_cast<const char*>(&key_size), sizeof key_size);
    out.write(key.data(), std::streamsize(key.size()));
    out.write(reinterpret_cast<const char*>(&bin_size), sizeof bin_size);
    out.write(reinterpret_cast<const char*>(&checksum), sizeof checksum);
    out.write(reinterpret_cast<const char*>(binary.data()), std::streamsize(binary.size()));
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

bool looks_like_ptx(const std::string& binary) {
  return binary.find(".version ") != std::string::npos && binary.find(".target ") != std::string::npos;
}

// Builds `program` with `options`; on failure throws BuildError: `failure`, the OpenCL status
// and the log's first line (the whole log in the error).
void build_or_throw(const boost::compute::program& program, const std::string& options, const std::string& failure) {
  const cl_int status = clBuildProgram(program.get(), 0, nullptr, options.c_str(), nullptr, nullptr);
  if (status == CL_SUCCESS) return;
  std::string log;
  try {
    log = program.build_log();
  } catch (const std::exception&) {
  }
  const std::string first_line = log.substr(0, log.find('\n'));
  throw BuildError(
      failure + " (OpenCL status " + std::to_string(status) + ")" + (first_line.empty() ? "" : ": " + first_line), log,
      status);
}

boost::compute::program build_from_source(const boost::compute::context& context, const std::string& source,
                                          const std::string& options) {
  boost::compute::program program = boost::compute::program::create_with_source(source, context);
  build_or_throw(program, options, "kernel build failed with options '" + options + "'");
  return program;
}

// The program `built` again from its PTX with a register target.
boost::compute::program rebuild_with_max_registers(const boost::compute::context& context,
                                                   const boost::compute::program& built, const std::string& options,
                                                   int max_registers) {
  const std::vector<unsigned char> binary = built.binary();
  const std::string text(binary.begin(), binary.end());
  const std::optional<std::string> ptx = ptx_with_max_registers(text, max_registers);
  const std::string target = "a register target of " + std::to_string(max_registers) + " (REGS)";
  if (!ptx && !looks_like_ptx(text))
    throw BuildError(target + " needs PTX program binaries (NVIDIA's OpenCL); this device's are not PTX", "",
                     CL_INVALID_BINARY);
  if (!ptx)
    throw BuildError(target +
                         ": the program's PTX has no kernel entry laid out as expected (`.entry NAME(`, its "
                         "parameters and directives, then a line opening the body with `{`)",
                     "", CL_INVALID_BINARY);
  boost::compute::program program =
      boost::compute::program::create_with_binary(std::vector<unsigned char>(ptx->begin(), ptx->end()), context);
  build_or_throw(program, options, "the driver refused the PTX with " + target);
  return program;
}

}  // namespace

std::optional<std::string> ptx_with_max_registers(const std::string& ptx, int registers) {
  if (registers <= 0 || !looks_like_ptx(ptx)) return std::nullopt;
  const std::string directive = ".maxnreg " + std::to_string(registers);
  std::string out;
  out.reserve(ptx.size() + 64);
  bool in_header = false;  // from an entry's first line to the line that opens its body
  std::size_t entries = 0;
  for (std::size_t at = 0; at < ptx.size();) {
    const std::size_t newline = ptx.find('\n', at);
    const std::size_t end = newline == std::string::npos ? ptx.size() : newline + 1;
    const std::string_view line(ptx.data() + at, end - at);
    // The line without its indent and without its ending ("\n", "\r\n" or none).
    std::string_view text = line.substr(std::min(line.find_first_not_of(" \t"), line.size()));
    std::size_t length = text.size();
    while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == '\r')) --length;
    const std::string_view ending = text.substr(length);
    text = text.substr(0, length);
    at = end;
    if (!in_header)
      in_header = text.rfind(".entry ", 0) == 0 || text.rfind(".visible .entry ", 0) == 0 ||
                  text.rfind(".weak .entry ", 0) == 0;
    if (in_header) {
      text = text.substr(0, text.find("//"));  // what a comment says is not read
      while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
      if (text.rfind("{", 0) == 0) {
        out.append(directive).append(ending.empty() ? std::string_view("\n") : ending);
        ++entries;
        in_header = false;
      } else if (text.find('{') != std::string_view::npos) {
        return std::nullopt;  // a body opened on another line's end: not the layout rewritten here
      } else if (!text.empty() && text.back() == ';') {
        in_header = false;  // a declaration: no body, nothing to add
      } else if (text.rfind(".maxnreg", 0) == 0) {
        continue;  // replaced by ours
      }
    }
    out.append(line);
  }
  if (in_header || entries == 0) return std::nullopt;
  return out;
}

std::uint64_t fnv1a64(const void* data, std::size_t size, std::uint64_t seed) {
  std::uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t fnv1a64(const std::string& text) { return fnv1a64(text.data(), text.size()); }

std::string ProgramCache::default_directory() {
  if (const char* env = std::getenv("OCLTK_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  const std::string base = detail::xdg_base_dir("XDG_CACHE_HOME", ".cache");
  if (!base.empty()) return (fs::path(base) / "ocltk").string();
  // Said once per process: without it every process would rebuild every program silently.
  static std::once_flag warned;
  std::call_once(warned, [] {
    std::cerr << "ocltk: warning: no program cache on disk: XDG_CACHE_HOME and HOME are unset and the user has no "
                 "home folder; set OCLTK_CACHE_DIR to keep compiled programs between runs\n";
  });
  return "-";
}

ProgramCache::ProgramCache(std::string directory)
    : directory_(directory.empty() ? default_directory() : std::move(directory)) {}

std::string ProgramCache::entry_path(const boost::compute::device& device, const std::string& source,
                                     const std::string& options, int max_registers) const {
  if (directory_ == "-") return "";
  return (fs::path(directory_) / (hex64(fnv1a64(key_text(device, source, options, max_registers))) + ".bin")).string();
}

boost::compute::program ProgramCache::get(const boost::compute::context& context, const boost::compute::device& device,
                                          const std::string& source, const std::string& options, int max_registers) {
  const std::string key = key_text(device, source, options, max_registers);
  const MemoryKey memory_key = std::make_tuple(context.get(), device.id(), fnv1a64(key));
  {
    std::unique_lock<std::mutex> lock(mutex_);
    built_.wait(lock, [&] { return building_.count(memory_key) == 0; });
    if (const auto it = memory_.find(memory_key); it != memory_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
    building_.insert(memory_key);
  }
  // Built outside the lock; whatever happens, the key leaves `building_` and waiters wake.
  struct Done {
    ProgramCache& cache;
    const MemoryKey& key;
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(cache.mutex_);
        cache.building_.erase(key);
      }
      cache.built_.notify_all();
    }
  } done{*this, memory_key};
  auto remember = [&](const boost::compute::program& program, std::uint64_t ProgramCacheStats::*counter) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(stats_.*counter);
    memory_.emplace(memory_key, program);
  };
  const std::string path = entry_path(device, source, options, max_registers);
  if (!path.empty()) {
    bool existed = false;
    const std::vector<unsigned char> binary = read_entry(path, key, existed);
    if (!binary.empty()) {
      try {
        boost::compute::program program = boost::compute::program::create_with_binary(binary, context);
        if (clBuildProgram(program.get(), 0, nullptr, options.c_str(), nullptr, nullptr) == CL_SUCCESS) {
          remember(program, &ProgramCacheStats::disk_hits);
          return program;
        }
      } catch (const std::exception&) {
        // The driver refused the binary: fall through and rebuild.
      }
    }
    if (existed) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.rejected_entries;
    }
  }
  boost::compute::program program = build_from_source(context, source, options);
  if (max_registers > 0) program = rebuild_with_max_registers(context, program, options, max_registers);
  bool writes = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    writes = writes_to_disk_;
  }
  if (!path.empty() && writes) {
    try {
      write_entry(path, key, program.binary());
    } catch (const std::exception&) {
      // No binary to store (some drivers): the in-memory cache still serves.
    }
  }
  remember(program, &ProgramCacheStats::builds);
  return program;
}

void ProgramCache::set_writes_to_disk(bool writes) {
  std::lock_guard<std::mutex> lock(mutex_);
  writes_to_disk_ = writes;
}

bool ProgramCache::writes_to_disk() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writes_to_disk_;
}

ProgramCacheStats ProgramCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void ProgramCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
}

}  // namespace ocltk

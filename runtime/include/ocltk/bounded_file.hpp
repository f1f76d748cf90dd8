// Reading a file a user names without trusting what it is: profiles, profile databases,
// shapes files and .npy arrays are read only from regular files of a bounded size. A device
// (/dev/zero never ends), a FIFO (blocks until a writer comes) or a socket is refused before
// it is read, and so is a file larger than its kind ever needs, so that bad input costs one
// clear sentence rather than gigabytes of memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace ocltk {

// The most bytes a YAML file the library reads may hold (profiles, databases, shapes):
// the largest shipped profile is under 100 KiB.
constexpr std::uint64_t kMaxYamlFileBytes = std::uint64_t(64) << 20;

// A regular file opened for reading, its size known. Move-only; closes on destruction.
class BoundedFile {
 public:
  // Opens `path` for reading if it is a regular file of at most `max_bytes`; otherwise
  // throws Error(kIo) (kNotFound where it does not exist) whose message starts with
  // "PATH: " and names `what` ("profile", "shapes file", ...) and the fault. Opening never
  // blocks: the type is checked before open(2), and again on the descriptor.
  BoundedFile(const std::string& path, std::uint64_t max_bytes, const std::string& what);
  std::FILE* get() const { return file_.get(); }
  std::uint64_t size() const { return size_; }  // at open time
  const std::string& path() const { return path_; }
  // The rest of the file; throws Error(kIo) on a read error, or where it has grown past the
  // limit since it was opened.
  std::string read_all();

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::uint64_t size_ = 0, max_bytes_ = 0;
  std::string path_, what_;
};

// The whole text of a regular file of at most `max_bytes` (BoundedFile's checks).
std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes, const std::string& what);

}  // namespace ocltk

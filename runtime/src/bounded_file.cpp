#include "ocltk/bounded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ocltk/status.hpp"

namespace ocltk {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string human(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t(1) << 20) && bytes % (std::uint64_t(1) << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

BoundedFile::BoundedFile(const std::string& path, std::uint64_t max_bytes, const std::string& what)
    : max_bytes_(max_bytes), path_(path), what_(what) {
  const auto fail = [&](ErrorCode code, const std::string& why) { throw Error(code, path + ": " + why); };
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0) {
    const int err = errno;
    fail(err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kIo,
         "cannot open " + what + " (" + std::strerror(err) + ")");
  }
  // Checked before open(2): opening a FIFO or some devices can block or have effects.
  if (!S_ISREG(before.st_mode))
    fail(ErrorCode::kIo, "cannot read " + what + ": it is " + kind_of(before.st_mode) + ", not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::kIo, "cannot open " + what + " (" + std::strerror(errno) + ")");
  struct stat opened {};
  if (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_dev != before.st_dev ||
      opened.st_ino != before.st_ino) {
    ::close(fd);
    fail(ErrorCode::kIo, "cannot read " + what + ": it was replaced by something else while being opened");
  }
  if (std::uint64_t(opened.st_size) > max_bytes) {
    ::close(fd);
    fail(ErrorCode::kIo, "cannot read " + what + ": " + std::to_string(opened.st_size) + " bytes, more than the " +
                             human(max_bytes) + " such a file may have");
  }
  size_ = std::uint64_t(opened.st_size);
  file_.reset(::fdopen(fd, "rb"));
  if (!file_) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::kIo, "cannot open " + what + " (" + std::strerror(err) + ")");
  }
}

std::string BoundedFile::read_all() {
  std::string text;
  text.reserve(std::size_t(size_));
  char chunk[1 << 16];
  while (true) {
    const std::size_t got = std::fread(chunk, 1, sizeof chunk, file_.get());
    if (got > 0) {
      if (text.size() + got > max_bytes_)
        throw Error(ErrorCode::kIo, path_ + ": cannot read " + what_ + ": it grew past the " + human(max_bytes_) +
                                        " such a file may have while being read");
      text.append(chunk, got);
    }
    if (got < sizeof chunk) {
      if (std::ferror(file_.get()))
        throw Error(ErrorCode::kIo, path_ + ": cannot read " + what_ + " (" + std::strerror(errno) + ")");
      return text;
    }
  }
}

std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes, const std::string& what) {
  return BoundedFile(path, max_bytes, what).read_all();
}

}  // namespace ocltk

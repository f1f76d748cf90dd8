// libFuzzer target: the .npy reader (cli/npy.cpp) on arbitrary bytes. Bad input must end in
// npy::Error, never a crash, a sanitizer report or an allocation far beyond the input; an
// array it accepts must be one the writer writes back and the reader reads again alike.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "npy.hpp"

namespace {

// The reader takes a path (it refuses anything but a regular file): one file per process, in
// memory where /dev/shm exists (a file on disk per input costs most of the time).
const std::string& input_path() {
  static const std::string path = (std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                             : std::filesystem::temp_directory_path()) /
                                  ("ocltk_fuzz_npy_" + std::to_string(::getpid()) + ".npy");
  return path;
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_file(input_path(), data, size);
  ocltk::npy::Array a;
  try {
    a = ocltk::npy::read(input_path());
  } catch (const ocltk::npy::Error&) {
    return 0;
  }
  // Accepted: the writer's file of it reads back as the same array.
  const std::string again = input_path() + ".again";
  ocltk::npy::write_atomically(again, a);
  const ocltk::npy::Array b = ocltk::npy::read(again);
  std::remove(again.c_str());
  if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data) __builtin_trap();
  return 0;
}

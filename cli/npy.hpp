// NumPy .npy reader and writer (format versions 1.0, 2.0 and 3.0; little-endian, C order only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ocltk::npy {

// bf16_as_u16 is written as "<u2" (numpy has no bfloat16); the parser yields u16 for such files.
enum class DType { f32, f16, bf16_as_u16, u8, u16, u32, i32, i64, f64 };

struct Array {
  DType dtype = DType::f32;
  std::vector<std::size_t> shape;  // C order
  std::vector<std::uint8_t> data;  // raw little-endian bytes, size == count() * itemsize(dtype)
  std::size_t count() const;       // product of shape (1 for a 0-d array)
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
};

// Messages start with the offending path, e.g. "A.npy: expected float32 data, got float64 ('<f8')".
class Error : public std::runtime_error {
  using runtime_error::runtime_error;
};

Array read(const std::string& path);
// Writes `path + ".tmp.<pid>"` in the same directory, then renames it over `path`. On failure the temp file is
// removed and `path` is left untouched.
void write_atomically(const std::string& path, const Array& a);

std::size_t itemsize(DType);
std::string descr(DType);  // "<f4", "<f2", "|u1", ...
const char* name(DType);   // "float32", "float16", "uint8", ...

// Requires a float32, 2-D, C-order array; errors name `what` (e.g. "--lhs"), the path, and expected vs got.
Array read_matrix_f32(const std::string& path, const char* what);

// Helpers.
std::string shape_str(const std::vector<std::size_t>& shape);  // Python tuple repr: "()", "(5,)", "(3, 4)"
std::string temp_path_for(const std::string& path);            // path + ".tmp.<pid>", as used by write_atomically
std::vector<std::uint8_t> encode_header(const Array& a);       // magic + version + header, exactly as numpy writes

}  // namespace ocltk::npy

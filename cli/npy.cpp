#include "npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "ocltk/bounded_file.hpp"
#include "ocltk/status.hpp"

#ifdef _WIN32
#include <process.h>
#define OCLTK_GETPID _getpid
#else
#include <unistd.h>
#define OCLTK_GETPID getpid
#endif

namespace ocltk::npy {
namespace {

using ocltk::BoundedFile;

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kArrayAlign = 64;
constexpr std::size_t kGrowthAxisMaxDigits = 21;  // numpy pads so shape[0] can grow in place
constexpr std::size_t kMaxHeaderLen = 1 << 20;    // real headers are < 4 KiB; anything huge is corruption
constexpr std::size_t kReadChunk = std::size_t{64} << 20;
constexpr int kMaxNesting = 32;

struct DescrEntry {
  DType dtype;
  const char* descr;
};
// Parser lookup order matters only in that bf16_as_u16 is absent: "<u2" maps to u16.
constexpr DescrEntry kDescrs[] = {
    {DType::f32, "<f4"}, {DType::f16, "<f2"}, {DType::u8, "|u1"},  {DType::u16, "<u2"},
    {DType::u32, "<u4"}, {DType::i32, "<i4"}, {DType::i64, "<i8"}, {DType::f64, "<f8"},
};

[[noreturn]] void fail(const std::string& path, const std::string& msg) { throw Error(path + ": " + msg); }

std::string errno_message(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string py_quote(std::string_view s) { return "'" + std::string(s) + "'"; }

bool mul_overflows(std::size_t a, std::size_t b, std::size_t* out) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) return true;
  *out = a * b;
  return false;
}

// Returns false on overflow. A zero dimension makes the product 0 regardless of the others.
bool checked_count(const std::vector<std::size_t>& shape, std::size_t* out) {
  if (std::find(shape.begin(), shape.end(), std::size_t{0}) != shape.end()) {
    *out = 0;
    return true;
  }
  std::size_t n = 1;
  for (std::size_t d : shape) {
    if (mul_overflows(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// A minimal parser for the Python literal subset found in .npy headers.

struct PyValue {
  enum class Kind { kStr, kNumber, kBool, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kNone;
  std::string text;  // kStr: decoded string; kNumber: token as written
  bool boolean = false;
  std::vector<PyValue> items;  // kTuple/kList elements; kDict alternating key, value
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  PyValue parse_document() {
    PyValue v = parse_value(0);
    skip_ws();
    // numpy terminates the header with '\n'; tolerate NUL padding from other writers as well.
    while (pos_ < s_.size() && s_[pos_] == '\0') ++pos_;
    if (pos_ != s_.size()) error("unexpected text after the dictionary");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    throw std::runtime_error(what + " at offset " + std::to_string(pos_));
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool consume(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  static bool is_word_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
           c == '+' || c == '-';
  }

  PyValue parse_value(int depth) {
    if (depth > kMaxNesting) error("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) error("unexpected end of header");
    char c = s_[pos_];
    if (c == '\'' || c == '"') return parse_string();
    if (c == '(') return parse_sequence(PyValue::Kind::kTuple, ')', depth);
    if (c == '[') return parse_sequence(PyValue::Kind::kList, ']', depth);
    if (c == '{') return parse_dict(depth);
    if (is_word_char(c)) return parse_word();
    error(std::string("unexpected character '") + c + "'");
  }

  PyValue parse_string() {
    char quote = s_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::kStr;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      char c = s_[pos_++];
      if (c == quote) break;
      if (c == '\n') error("unterminated string");
      if (c == '\\') {
        if (pos_ >= s_.size()) error("unterminated string");
        c = s_[pos_++];
      }
      v.text.push_back(c);
    }
    return v;
  }

  PyValue parse_word() {
    std::size_t start = pos_;
    while (pos_ < s_.size() && is_word_char(s_[pos_])) ++pos_;
    std::string_view w = s_.substr(start, pos_ - start);
    PyValue v;
    if (w == "True" || w == "False") {
      v.kind = PyValue::Kind::kBool;
      v.boolean = (w == "True");
    } else if (w == "None") {
      v.kind = PyValue::Kind::kNone;
    } else if ((w[0] >= '0' && w[0] <= '9') || w[0] == '-' || w[0] == '+' || w[0] == '.') {
      v.kind = PyValue::Kind::kNumber;
      v.text = std::string(w);
    } else {
      pos_ = start;
      error("unexpected name '" + std::string(w) + "'");
    }
    return v;
  }

  PyValue parse_sequence(PyValue::Kind kind, char close, int depth) {
    ++pos_;
    PyValue v;
    v.kind = kind;
    bool saw_comma = false;
    while (!consume(close)) {
      if (!v.items.empty() && !saw_comma) error(std::string("expected ',' or '") + close + "'");
      v.items.push_back(parse_value(depth + 1));
      saw_comma = consume(',');
    }
    // "(5)" is just the integer 5 in Python, not a tuple.
    if (kind == PyValue::Kind::kTuple && v.items.size() == 1 && !saw_comma) return std::move(v.items[0]);
    return v;
  }

  PyValue parse_dict(int depth) {
    ++pos_;
    PyValue v;
    v.kind = PyValue::Kind::kDict;
    bool saw_comma = false;
    while (!consume('}')) {
      if (!v.items.empty() && !saw_comma) error("expected ',' or '}'");
      v.items.push_back(parse_value(depth + 1));
      if (!consume(':')) error("expected ':' after dictionary key");
      v.items.push_back(parse_value(depth + 1));
      saw_comma = consume(',');
    }
    return v;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

// Parses a non-negative Python integer literal (optionally with a Python 2 'L' suffix).
bool parse_dim(const std::string& text, std::size_t* out, bool* overflow) {
  std::string_view t = text;
  if (!t.empty() && (t.back() == 'L' || t.back() == 'l')) t.remove_suffix(1);
  if (t.empty()) return false;
  std::size_t v = 0;
  *overflow = false;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
    std::size_t digit = static_cast<std::size_t>(c - '0');
    if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10) *overflow = true;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

const char* supported_list() {
  return "supported: float32 '<f4', float16 '<f2', uint8 '|u1', uint16 '<u2', uint32 '<u4', int32 '<i4', "
         "int64 '<i8', float64 '<f8'";
}

DType dtype_from_descr(const std::string& path, const std::string& d) {
  char order = 0;
  std::string code = d;
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    order = d[0];
    code = d.substr(1);
  }
  if (code == "O") fail(path, "object arrays (dtype 'O') are not supported; save plain numeric arrays");
  for (const DescrEntry& e : kDescrs) {
    if (code != e.descr + 1) continue;
    if (itemsize(e.dtype) == 1) return e.dtype;
    if (order == '<') return e.dtype;
    if (order == '>') {
      fail(path, "big-endian data (" + py_quote(d) + ") is not supported; convert with a.astype(" +
                     py_quote(std::string("<") + code) + ")");
    }
    fail(path, "dtype " + py_quote(d) + " has no explicit little-endian byte order ('<' expected)");
  }
  fail(path, "unsupported dtype " + py_quote(d) + " (" + supported_list() + ")");
}

struct Header {
  DType dtype;
  std::vector<std::size_t> shape;
};

Header interpret_header(const std::string& path, const std::string& text) {
  PyValue root;
  try {
    root = HeaderParser(text).parse_document();
  } catch (const std::runtime_error& e) {
    fail(path, std::string("malformed .npy header (") + e.what() + ")");
  }
  if (root.kind != PyValue::Kind::kDict) fail(path, "malformed .npy header (not a dictionary)");

  const PyValue* descr_v = nullptr;
  const PyValue* fortran_v = nullptr;
  const PyValue* shape_v = nullptr;
  for (std::size_t i = 0; i + 1 < root.items.size(); i += 2) {
    const PyValue& k = root.items[i];
    if (k.kind != PyValue::Kind::kStr) fail(path, "malformed .npy header (dictionary key is not a string)");
    const PyValue** slot = k.text == "descr"           ? &descr_v
                           : k.text == "fortran_order" ? &fortran_v
                           : k.text == "shape"         ? &shape_v
                                                       : nullptr;
    if (slot == nullptr) fail(path, "malformed .npy header (unexpected key " + py_quote(k.text) + ")");
    if (*slot != nullptr) fail(path, "malformed .npy header (duplicate key " + py_quote(k.text) + ")");
    *slot = &root.items[i + 1];
  }
  if (descr_v == nullptr) fail(path, "malformed .npy header (missing key 'descr')");
  if (fortran_v == nullptr) fail(path, "malformed .npy header (missing key 'fortran_order')");
  if (shape_v == nullptr) fail(path, "malformed .npy header (missing key 'shape')");

  Header h;
  if (descr_v->kind == PyValue::Kind::kList) fail(path, "structured (record) dtypes are not supported");
  if (descr_v->kind != PyValue::Kind::kStr) fail(path, "malformed .npy header ('descr' is not a string)");
  h.dtype = dtype_from_descr(path, descr_v->text);

  if (fortran_v->kind != PyValue::Kind::kBool) fail(path, "malformed .npy header ('fortran_order' is not a bool)");

  if (shape_v->kind != PyValue::Kind::kTuple) fail(path, "malformed .npy header ('shape' is not a tuple)");
  for (const PyValue& d : shape_v->items) {
    std::size_t dim = 0;
    bool overflow = false;
    if (d.kind != PyValue::Kind::kNumber || !parse_dim(d.text, &dim, &overflow)) {
      fail(path, "malformed .npy header ('shape' must contain non-negative integers)");
    }
    if (overflow) fail(path, "shape dimension " + d.text + " is too large (overflow)");
    h.shape.push_back(dim);
  }
  if (fortran_v->boolean) {
    fail(path, "Fortran-order arrays are not supported; save with np.save(path, np.ascontiguousarray(a))");
  }
  return h;
}

// Reads up to n bytes; returns how many were read. Throws on a read error (not on EOF).
std::size_t read_some(const std::string& path, std::FILE* f, void* buf, std::size_t n) {
  errno = 0;
  std::size_t got = std::fread(buf, 1, n, f);
  if (got < n && std::ferror(f)) fail(path, "read error: " + errno_message(errno != 0 ? errno : EIO));
  return got;
}

std::uint32_t load_le(const std::uint8_t* p, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

std::string header_dict(const Array& a) {
  std::string h =
      "{'descr': " + py_quote(descr(a.dtype)) + ", 'fortran_order': False, 'shape': " + shape_str(a.shape) + ", }";
  if (!a.shape.empty()) h.append(kGrowthAxisMaxDigits - std::to_string(a.shape[0]).size(), ' ');
  return h;
}

bool write_all(std::FILE* f, const void* p, std::size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; }

}  // namespace

// -----------------------------------------------------------------------------------------------------------------

std::size_t Array::count() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

std::size_t itemsize(DType t) {
  switch (t) {
    case DType::u8:
      return 1;
    case DType::f16:
    case DType::bf16_as_u16:
    case DType::u16:
      return 2;
    case DType::f32:
    case DType::u32:
    case DType::i32:
      return 4;
    case DType::i64:
    case DType::f64:
      return 8;
  }
  throw Error("invalid npy::DType value " + std::to_string(static_cast<int>(t)));
}

std::string descr(DType t) {
  if (t == DType::bf16_as_u16) return "<u2";
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == t) return e.descr;
  }
  throw Error("invalid npy::DType value " + std::to_string(static_cast<int>(t)));
}

const char* name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f16:
      return "float16";
    case DType::bf16_as_u16:
      return "bfloat16";
    case DType::u8:
      return "uint8";
    case DType::u16:
      return "uint16";
    case DType::u32:
      return "uint32";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::f64:
      return "float64";
  }
  return "invalid";
}

std::string shape_str(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::string temp_path_for(const std::string& path) {
  return path + ".tmp." + std::to_string(static_cast<long long>(OCLTK_GETPID()));
}

std::vector<std::uint8_t> encode_header(const Array& a) {
  const std::string dict = header_dict(a);
  // Same as numpy's _wrap_header_guess_version: version 1.0 unless the length does not fit in a u16.
  for (int major : {1, 2}) {
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    const std::size_t prefix = kMagicLen + 2 + len_bytes;
    const std::size_t hlen = dict.size() + 1;
    const std::size_t padlen = kArrayAlign - (prefix + hlen) % kArrayAlign;  // 1..64, as numpy does
    const std::size_t total = hlen + padlen;
    if (major == 1 && total > 0xFFFF) continue;
    std::vector<std::uint8_t> out(kMagic, kMagic + kMagicLen);
    out.push_back(static_cast<std::uint8_t>(major));
    out.push_back(0);
    for (std::size_t i = 0; i < len_bytes; ++i) out.push_back(static_cast<std::uint8_t>((total >> (8 * i)) & 0xFF));
    out.insert(out.end(), dict.begin(), dict.end());
    out.insert(out.end(), padlen, ' ');
    out.push_back('\n');
    return out;
  }
  throw Error("npy header too large");  // unreachable: a version 2.0 header has a u32 length
}

Array read(const std::string& path) {
  // Regular files only (a device or FIFO is refused before it is opened): the size is then
  // known, so corrupt headers are reported without allocating huge buffers.
  std::optional<BoundedFile> opened;
  try {
    opened.emplace(path, std::numeric_limits<std::uint64_t>::max(), ".npy file");
  } catch (const ocltk::Error& e) {
    throw Error(e.what());
  }
  std::FILE* const file = opened->get();
  bool size_known = true;
  const std::uintmax_t file_size = opened->size();

  std::uint8_t pre[12];
  std::size_t got = read_some(path, file, pre, 8);
  if (got == 0) fail(path, "not a .npy file (the file is empty)");
  if (std::memcmp(pre, kMagic, std::min(got, kMagicLen)) != 0) {
    fail(path, "not a .npy file (bad magic bytes; expected \\x93NUMPY)");
  }
  if (got < 8) fail(path, "truncated header (file is only " + std::to_string(got) + " bytes long)");

  const int major = pre[6];
  const int minor = pre[7];
  if (minor != 0 || major < 1 || major > 3) {
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  got = read_some(path, file, pre + 8, len_bytes);
  if (got < len_bytes) {
    fail(path, "truncated header (file is only " + std::to_string(8 + got) + " bytes long)");
  }
  const std::size_t hlen = load_le(pre + 8, len_bytes);
  const std::size_t prefix = 8 + len_bytes;
  if (size_known && file_size < prefix) size_known = false;
  if (size_known && file_size - prefix < hlen) {
    fail(path, "truncated header (expected " + std::to_string(hlen) + " header bytes, found " +
                   std::to_string(file_size - prefix) + ")");
  }
  if (hlen > kMaxHeaderLen) fail(path, "header length " + std::to_string(hlen) + " is implausibly large (corrupt)");
  std::string header(hlen, '\0');
  got = read_some(path, file, header.data(), hlen);
  if (got < hlen) {
    fail(path,
         "truncated header (expected " + std::to_string(hlen) + " header bytes, found " + std::to_string(got) + ")");
  }

  Header h = interpret_header(path, header);
  Array a;
  a.dtype = h.dtype;
  a.shape = std::move(h.shape);
  std::size_t count = 0, nbytes = 0;
  if (!checked_count(a.shape, &count) || mul_overflows(count, itemsize(a.dtype), &nbytes)) {
    fail(path, "shape " + shape_str(a.shape) + " is too large (element count overflows)");
  }

  if (size_known) {
    const std::uintmax_t avail = file_size - prefix - hlen;
    if (avail < nbytes) {
      fail(path, "expected " + std::to_string(nbytes) + " bytes of data for " + name(a.dtype) + " shape " +
                     shape_str(a.shape) + ", found " + std::to_string(avail) + " (file truncated)");
    }
    if (avail > nbytes) {
      fail(path, "found " + std::to_string(avail - nbytes) + " unexpected trailing bytes after the " +
                     std::to_string(nbytes) + " bytes of data (file corrupt)");
    }
    a.data.reserve(nbytes);
  }

  std::size_t have = 0;
  while (have < nbytes) {
    const std::size_t chunk = std::min(nbytes - have, kReadChunk);
    a.data.resize(have + chunk);
    const std::size_t n = read_some(path, file, a.data.data() + have, chunk);
    have += n;
    if (n < chunk) break;
  }
  if (have < nbytes) {
    fail(path, "expected " + std::to_string(nbytes) + " bytes of data for " + name(a.dtype) + " shape " +
                   shape_str(a.shape) + ", found " + std::to_string(have) + " (file truncated)");
  }
  std::uint8_t extra[4096];
  std::size_t trailing = 0;
  while (std::size_t n = read_some(path, file, extra, sizeof extra)) trailing += n;
  if (trailing > 0) {
    fail(path, "found " + std::to_string(trailing) + " unexpected trailing bytes after the " + std::to_string(nbytes) +
                   " bytes of data (file corrupt)");
  }
  return a;
}

void write_atomically(const std::string& path, const Array& a) {
  std::size_t count = 0, nbytes = 0;
  if (!checked_count(a.shape, &count) || mul_overflows(count, itemsize(a.dtype), &nbytes)) {
    fail(path, "cannot write: shape " + shape_str(a.shape) + " is too large");
  }
  if (a.data.size() != nbytes) {
    fail(path, "cannot write: " + std::string(name(a.dtype)) + " array of shape " + shape_str(a.shape) + " needs " +
                   std::to_string(nbytes) + " bytes of data, but has " + std::to_string(a.data.size()));
  }
  const std::vector<std::uint8_t> header = encode_header(a);

  const std::string tmp = temp_path_for(path);
  errno = 0;
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    fail(path, "cannot create temporary file " + py_quote(tmp) + ": " + errno_message(errno != 0 ? errno : EIO));
  }
  errno = 0;
  bool ok =
      write_all(f, header.data(), header.size()) && write_all(f, a.data.data(), a.data.size()) && std::fflush(f) == 0;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, "cannot write temporary file " + py_quote(tmp) + ": " + errno_message(err != 0 ? err : EIO));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, "cannot rename temporary file " + py_quote(tmp) + " into place: " + ec.message());
  }
}

Array read_matrix_f32(const std::string& path, const char* what) {
  Array a;
  try {
    a = read(path);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (reading " + what + ")");
  }
  if (a.dtype != DType::f32) {
    fail(path, std::string("expected float32 data for ") + what + ", got " + name(a.dtype) + " (" +
                   py_quote(descr(a.dtype)) + ")");
  }
  if (a.shape.size() != 2) {
    fail(path, std::string("expected a 2-D float32 matrix for ") + what + ", got a " + std::to_string(a.shape.size()) +
                   "-D array of shape " + shape_str(a.shape));
  }
  return a;
}

}  // namespace ocltk::npy

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "npy.hpp"

namespace fs = std::filesystem;
using ocltk::npy::Array;
using ocltk::npy::DType;

namespace {

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("ocltk_npy_" + std::string(info->name()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << p;
  }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Builds a .npy file by hand: magic, version major.0, little-endian header length, header text padded to 64.
  static std::string make_npy(int major, const std::string& dict, const std::string& data, bool pad = true) {
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    std::string header = dict;
    if (pad) {
      while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
      header += '\n';
    }
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
    return out + header + data;
  }

  // Expects read(p) to throw npy::Error whose message starts with the path and contains `phrase`.
  static void expect_read_error(const std::string& p, const std::string& phrase) {
    try {
      ocltk::npy::read(p);
      ADD_FAILURE() << "expected npy::Error for " << p;
    } catch (const ocltk::npy::Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << "missing '" << phrase << "' in: " << msg;
    }
  }

  void expect_bad_file(const std::string& bytes, const std::string& phrase) {
    const std::string p = path("bad.npy");
    write_bytes(p, bytes);
    expect_read_error(p, phrase);
  }

  // Entries in the test dir other than `keep`.
  std::vector<std::string> stray_files(const std::string& keep = "") const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != keep) out.push_back(e.path().filename().string());
    }
    return out;
  }

  fs::path dir_;
};

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

Array random_array(DType t, std::vector<std::size_t> shape, std::mt19937_64& rng) {
  Array a;
  a.dtype = t;
  a.shape = std::move(shape);
  a.data.resize(a.count() * ocltk::npy::itemsize(t));
  for (auto& b : a.data) b = static_cast<std::uint8_t>(rng());
  return a;
}

TEST_F(NpyTest, RoundTripAllDTypesAndShapes) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const DType dtypes[] = {DType::f32, DType::f16, DType::u8,  DType::u16,
                          DType::u32, DType::i32, DType::i64, DType::f64};
  const std::vector<std::vector<std::size_t>> shapes = {{}, {1}, {7}, {3, 4}, {0, 5}, {2, 3, 5}, {1, 1, 1, 17}};
  for (DType t : dtypes) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(std::string(ocltk::npy::name(t)) + " " + ocltk::npy::shape_str(shape));
      const Array a = random_array(t, shape, rng);
      const std::string p = path("rt.npy");
      ocltk::npy::write_atomically(p, a);
      const std::string bytes = read_bytes(p);
      const std::size_t preamble = bytes.size() - a.data.size();
      EXPECT_EQ(preamble % 64, 0u);
      EXPECT_EQ(bytes[preamble - 1], '\n');
      const Array b = ocltk::npy::read(p);
      EXPECT_EQ(b.dtype, t);
      EXPECT_EQ(b.shape, shape);
      EXPECT_EQ(b.count(), a.count());
      EXPECT_EQ(b.data, a.data);
    }
  }
  EXPECT_EQ(stray_files("rt.npy"), std::vector<std::string>{});
}

TEST_F(NpyTest, CountAndAs) {
  Array a;
  a.dtype = DType::f32;
  EXPECT_EQ(a.count(), 1u);
  a.shape = {2, 3};
  EXPECT_EQ(a.count(), 6u);
  const std::string raw = f32_bytes({1.5f, -2.0f, 0, 0, 0, 42.0f});
  a.data.assign(raw.begin(), raw.end());
  EXPECT_EQ(a.as<float>()[0], 1.5f);
  EXPECT_EQ(a.as<float>()[5], 42.0f);
}

TEST_F(NpyTest, DTypeNamesAndDescrs) {
  EXPECT_EQ(ocltk::npy::descr(DType::f32), "<f4");
  EXPECT_EQ(ocltk::npy::descr(DType::f16), "<f2");
  EXPECT_EQ(ocltk::npy::descr(DType::u8), "|u1");
  EXPECT_EQ(ocltk::npy::descr(DType::u16), "<u2");
  EXPECT_EQ(ocltk::npy::descr(DType::bf16_as_u16), "<u2");
  EXPECT_EQ(ocltk::npy::descr(DType::u32), "<u4");
  EXPECT_EQ(ocltk::npy::descr(DType::i32), "<i4");
  EXPECT_EQ(ocltk::npy::descr(DType::i64), "<i8");
  EXPECT_EQ(ocltk::npy::descr(DType::f64), "<f8");
  EXPECT_STREQ(ocltk::npy::name(DType::f32), "float32");
  EXPECT_STREQ(ocltk::npy::name(DType::f16), "float16");
  EXPECT_STREQ(ocltk::npy::name(DType::u8), "uint8");
  EXPECT_STREQ(ocltk::npy::name(DType::i64), "int64");
  EXPECT_EQ(ocltk::npy::itemsize(DType::u8), 1u);
  EXPECT_EQ(ocltk::npy::itemsize(DType::bf16_as_u16), 2u);
  EXPECT_EQ(ocltk::npy::itemsize(DType::f64), 8u);
}

TEST_F(NpyTest, Bf16IsWrittenAsUint16AndReadBackAsUint16) {
  std::mt19937_64 rng(std::random_device{}());
  const Array a = random_array(DType::bf16_as_u16, {4, 2}, rng);
  const std::string p = path("bf16.npy");
  ocltk::npy::write_atomically(p, a);
  EXPECT_NE(read_bytes(p).find("'descr': '<u2'"), std::string::npos);
  const Array b = ocltk::npy::read(p);
  EXPECT_EQ(b.dtype, DType::u16);
  EXPECT_EQ(b.data, a.data);
}

TEST_F(NpyTest, Float32MatrixIsByteIdenticalToNumpy) {
  std::mt19937_64 rng(std::random_device{}());
  const Array a = random_array(DType::f32, {3, 4}, rng);
  const std::string p = path("numpy.npy");
  ocltk::npy::write_atomically(p, a);

  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  ASSERT_EQ(header.size(), 118u);
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += header;
  expected.append(a.data.begin(), a.data.end());
  EXPECT_EQ(read_bytes(p), expected);
}

TEST_F(NpyTest, EncodeHeaderMatchesNumpyGrowthPadding) {
  // numpy >= 1.23 appends 21 - len(str(shape[0])) spaces before aligning, which can push a header to 192 bytes.
  Array a;
  a.dtype = DType::f64;
  a.shape = {1, 100000, 100000, 100000, 100000, 100000, 100000};
  const auto h = ocltk::npy::encode_header(a);
  const std::string dict =
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 100000, 100000, 100000, 100000, "
      "100000, 100000), }";
  ASSERT_EQ(h.size(), 192u);
  EXPECT_EQ(std::string(h.begin() + 10, h.end()), dict + std::string(192 - 10 - dict.size() - 1, ' ') + "\n");
  EXPECT_EQ(h[8] | (h[9] << 8), 182);

  a.shape = {};
  const auto h0 = ocltk::npy::encode_header(a);
  EXPECT_EQ(std::string(h0.begin() + 10, h0.end()),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + std::string(62, ' ') + "\n");
}

TEST_F(NpyTest, ReadsVersion2Header) {
  const std::string p = path("v2.npy");
  write_bytes(p, make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_bytes({1.0f, 2.5f})));
  const Array a = ocltk::npy::read(p);
  EXPECT_EQ(a.dtype, DType::f32);
  EXPECT_EQ(a.shape, std::vector<std::size_t>{2});
  EXPECT_EQ(a.as<float>()[1], 2.5f);
}

TEST_F(NpyTest, ReadsVersion3Header) {
  const std::string p = path("v3.npy");
  write_bytes(p, make_npy(3, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "abc"));
  const Array a = ocltk::npy::read(p);
  EXPECT_EQ(a.dtype, DType::u8);
  EXPECT_EQ(std::string(a.data.begin(), a.data.end()), "abc");
}

TEST_F(NpyTest, ReadsDoubleQuotedKeysInAnyOrder) {
  const std::string p = path("dq.npy");
  write_bytes(p, make_npy(1, R"({"shape": (1, 2), "fortran_order": False, "descr": "<i4"})", std::string(8, '\x01')));
  const Array a = ocltk::npy::read(p);
  EXPECT_EQ(a.dtype, DType::i32);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(a.as<std::int32_t>()[1], 0x01010101);
}

TEST_F(NpyTest, ReadsOddWhitespaceUnpaddedHeaderAndLongSuffix) {
  const std::string p = path("ws.npy");
  write_bytes(p, make_npy(1, "{ 'fortran_order' :False,'descr':'<u2' ,\t'shape':( 2L ,3 ,) ,}\n", std::string(12, 0),
                          /*pad=*/false));
  const Array a = ocltk::npy::read(p);
  EXPECT_EQ(a.dtype, DType::u16);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
}

TEST_F(NpyTest, ReadsZeroDimensionalArray) {
  const std::string p = path("scalar.npy");
  write_bytes(p, make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", std::string(8, '\0')));
  const Array a = ocltk::npy::read(p);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.count(), 1u);
  EXPECT_EQ(a.data.size(), 8u);
}

TEST_F(NpyTest, RejectsMissingFile) { expect_read_error(path("nope.npy"), "cannot open"); }

TEST_F(NpyTest, RejectsBadMagic) { expect_bad_file("PK\x03\x04 this is a zip file", "not a .npy file"); }

TEST_F(NpyTest, RejectsEmptyFile) { expect_bad_file("", "not a .npy file"); }

TEST_F(NpyTest, RejectsUnsupportedVersion) {
  std::string bytes = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32_bytes({1}));
  bytes[6] = 4;
  expect_bad_file(bytes, "unsupported .npy format version 4.0");
}

TEST_F(NpyTest, RejectsTruncatedHeader) {
  const std::string full = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_bytes({1, 2}));
  expect_bad_file(full.substr(0, 7), "truncated header");
  expect_bad_file(full.substr(0, 9), "truncated header");
  expect_bad_file(full.substr(0, 40), "truncated header");
  const std::string v2 = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "");
  expect_bad_file(v2.substr(0, 11), "truncated header");
}

TEST_F(NpyTest, RejectsBigEndian) {
  expect_bad_file(make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f32_bytes({1})),
                  "big-endian data ('>f4') is not supported");
}

TEST_F(NpyTest, RejectsObjectArrays) {
  expect_bad_file(make_npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
                  "object arrays");
}

TEST_F(NpyTest, RejectsOtherDTypesNamingTheDescr) {
  expect_bad_file(make_npy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
                  "unsupported dtype '<c8'");
  expect_bad_file(make_npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f32_bytes({1})),
                  "structured");
}

TEST_F(NpyTest, RejectsFortranOrder) {
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", std::string(16, '\0')),
                  "Fortran-order arrays are not supported; save with np.save(path, np.ascontiguousarray(a))");
}

TEST_F(NpyTest, RejectsShapeOverflow) {
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
                  "too large");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", ""),
                  "too large");
  // count fits in size_t but count * itemsize does not.
  expect_bad_file(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", ""),
                  "too large");
}

TEST_F(NpyTest, RejectsTruncatedData) {
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", std::string(40, '\0')),
                  "expected 48 bytes of data for float32 shape (3, 4), found 40");
}

TEST_F(NpyTest, RejectsTrailingBytes) {
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", std::string(9, '\0')),
                  "found 1 unexpected trailing bytes");
}

TEST_F(NpyTest, RejectsMalformedHeaders) {
  const std::string d = std::string(4, '\0');
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False}", d), "missing key 'shape'");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", d),
                  "unexpected key 'x'");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", d), "malformed .npy header");
  expect_bad_file(make_npy(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", d), "malformed .npy header");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", d), "'fortran_order'");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", d), "'shape'");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", d), "'shape'");
  expect_bad_file(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}", d), "'shape'");
  expect_bad_file(make_npy(1, "garbage", d), "malformed .npy header");
  expect_bad_file(make_npy(1, std::string(100, '(') + std::string(100, ')'), d), "malformed .npy header");
}

TEST_F(NpyTest, ReadMatrixF32) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string p = path("A.npy");
  ocltk::npy::write_atomically(p, random_array(DType::f32, {5, 6}, rng));
  const Array a = ocltk::npy::read_matrix_f32(p, "--lhs");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{5, 6}));

  auto expect_matrix_error = [&](const std::string& file, const std::string& phrase) {
    try {
      ocltk::npy::read_matrix_f32(file, "--lhs");
      ADD_FAILURE() << "expected npy::Error";
    } catch (const ocltk::npy::Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find("--lhs"), std::string::npos) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    }
  };
  const std::string f64 = path("B.npy");
  ocltk::npy::write_atomically(f64, random_array(DType::f64, {5, 6}, rng));
  expect_matrix_error(f64, "expected float32 data for --lhs, got float64 ('<f8')");
  const std::string cube = path("C.npy");
  ocltk::npy::write_atomically(cube, random_array(DType::f32, {2, 3, 4}, rng));
  expect_matrix_error(cube, "expected a 2-D float32 matrix for --lhs, got a 3-D array of shape (2, 3, 4)");
  expect_matrix_error(path("missing.npy"), "cannot open");
}

TEST_F(NpyTest, WriteIntoMissingDirectoryThrowsAndLeavesNothing) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string p = path("no/such/dir/out.npy");
  try {
    ocltk::npy::write_atomically(p, random_array(DType::f32, {2, 2}, rng));
    ADD_FAILURE() << "expected npy::Error";
  } catch (const ocltk::npy::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(p + ": ", 0), 0u) << e.what();
  }
  EXPECT_FALSE(fs::exists(path("no")));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(NpyTest, FailedWriteDoesNotTouchExistingFile) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string p = path("out.npy");
  const Array original = random_array(DType::i64, {3}, rng);
  ocltk::npy::write_atomically(p, original);
  const std::string before = read_bytes(p);

  // Inconsistent array: data size does not match the shape.
  Array bad = random_array(DType::f32, {4, 4}, rng);
  bad.data.pop_back();
  EXPECT_THROW(ocltk::npy::write_atomically(p, bad), ocltk::npy::Error);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_EQ(stray_files("out.npy"), std::vector<std::string>{});

  // The temp file cannot be created (a directory occupies its name).
  const std::string tmp = ocltk::npy::temp_path_for(p);
  fs::create_directory(tmp);
  EXPECT_THROW(ocltk::npy::write_atomically(p, random_array(DType::f32, {4, 4}, rng)), ocltk::npy::Error);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_TRUE(fs::is_directory(tmp));  // not ours, left alone
  fs::remove(tmp);
  EXPECT_EQ(ocltk::npy::read(p).data, original.data);
}

TEST_F(NpyTest, FailedRenameRemovesTempFile) {
  std::mt19937_64 rng(std::random_device{}());
  // A non-empty directory at the target makes the final rename fail.
  const std::string p = path("target.npy");
  fs::create_directories(fs::path(p) / "child");
  EXPECT_THROW(ocltk::npy::write_atomically(p, random_array(DType::u8, {10}, rng)), ocltk::npy::Error);
  EXPECT_TRUE(fs::is_directory(fs::path(p) / "child"));
  EXPECT_FALSE(fs::exists(ocltk::npy::temp_path_for(p)));
  EXPECT_EQ(stray_files("target.npy"), std::vector<std::string>{});
}

TEST_F(NpyTest, OverwritesExistingFileAtomically) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string p = path("x.npy");
  ocltk::npy::write_atomically(p, random_array(DType::f32, {100}, rng));
  const Array b = random_array(DType::u32, {2, 2}, rng);
  ocltk::npy::write_atomically(p, b);
  const Array r = ocltk::npy::read(p);
  EXPECT_EQ(r.dtype, DType::u32);
  EXPECT_EQ(r.data, b.data);
  EXPECT_EQ(stray_files("x.npy"), std::vector<std::string>{});
}

}  // namespace

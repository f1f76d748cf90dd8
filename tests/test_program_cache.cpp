// Program cache: memory and disk hits, and every kind of damaged disk entry rebuilt
// from source rather than trusted.
#include <cstring>
#include <fstream>

#include "fixture.hpp"

namespace {

using ocltk::ProgramCache;
using ocltk::ProgramCacheStats;

// A kernel of our own, so the tests do not depend on the gemm sources.
const std::string kScaleSource = R"CL(
__kernel void scale(__global float* x, const float factor) {
  const size_t i = get_global_id(0);
  x[i] = x[i] * factor + OFFSET;
}
)CL";
const std::string kScaleOptions = "-DOFFSET=0.5f";

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

void expect_stats(const ProgramCacheStats& s, std::uint64_t memory, std::uint64_t disk, std::uint64_t builds,
                  std::uint64_t rejected) {
  EXPECT_EQ(s.memory_hits, memory);
  EXPECT_EQ(s.disk_hits, disk);
  EXPECT_EQ(s.builds, builds);
  EXPECT_EQ(s.rejected_entries, rejected);
}

class ProgramCacheTest : public ocltk_test::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    dir_ = ocltk_test::make_temp_dir("program_cache");
  }
  void TearDown() override {
    std::error_code ec;
    ocltk_test::fs::remove_all(dir_, ec);
    RuntimeTest::TearDown();
  }

  static const boost::compute::context& context() { return runtime().context(); }
  static const boost::compute::device& device() { return runtime().device().handle; }

  boost::compute::program get(ProgramCache& cache) {
    return cache.get(context(), device(), kScaleSource, kScaleOptions);
  }

  // Fills the cache folder with a valid entry and returns its path.
  std::string prime() {
    ProgramCache cache(dir_);
    get(cache);
    return cache.entry_path(device(), kScaleSource, kScaleOptions);
  }

  // Runs `scale` from `program` over fresh inputs and checks every result.
  void expect_scale_runs(boost::compute::program program) {
    boost::compute::kernel kernel = program.create_kernel("scale");
    const std::vector<float> x = ocltk_test::random_floats(rng(), 1000);
    boost::compute::buffer buf = ocltk_test::upload(runtime(), x);
    kernel.set_arg(0, buf);
    kernel.set_arg(1, -2.0f);
    runtime().queue().enqueue_1d_range_kernel(kernel, 0, x.size(), 0);
    const std::vector<float> y = ocltk_test::download(runtime(), buf, x.size());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] * -2.0f + 0.5f) << "element " << i;
  }

  // A fresh cache on the damaged folder rebuilds, counts the rejection, and leaves an
  // entry that the next fresh cache takes as a disk hit.
  void expect_rebuilt_and_repaired(const std::string& how) {
    SCOPED_TRACE(how);
    {
      ProgramCache cache(dir_);
      expect_scale_runs(get(cache));
      expect_stats(cache.stats(), 0, 0, 1, 1);
    }
    {
      ProgramCache cache(dir_);
      expect_scale_runs(get(cache));
      expect_stats(cache.stats(), 0, 1, 0, 0);
    }
  }

  std::string dir_;
};

TEST_F(ProgramCacheTest, BuildThenDiskHitThenMemoryHit) {
  ProgramCache first(dir_);
  EXPECT_EQ(first.directory(), dir_);
  const std::string entry = first.entry_path(device(), kScaleSource, kScaleOptions);
  ASSERT_FALSE(entry.empty());
  EXPECT_EQ(ocltk_test::fs::path(entry).parent_path(), ocltk_test::fs::path(dir_));
  EXPECT_FALSE(ocltk_test::fs::exists(entry));
  expect_scale_runs(get(first));
  expect_stats(first.stats(), 0, 0, 1, 0);
  EXPECT_TRUE(ocltk_test::fs::exists(entry));
  EXPECT_GT(ocltk_test::fs::file_size(entry), 0u);

  expect_scale_runs(get(first));  // same instance: memory
  expect_stats(first.stats(), 1, 0, 1, 0);

  ProgramCache second(dir_);
  expect_scale_runs(get(second));  // a kernel from a disk hit runs
  expect_stats(second.stats(), 0, 1, 0, 0);
  get(second);
  expect_stats(second.stats(), 1, 1, 0, 0);

  // clear_memory forgets the programs, not the disk.
  second.clear_memory();
  get(second);
  expect_stats(second.stats(), 1, 2, 0, 0);

  // Other options or other source: another entry.
  EXPECT_NE(first.entry_path(device(), kScaleSource, "-DOFFSET=1.5f"), entry);
  EXPECT_NE(first.entry_path(device(), kScaleSource + "\n", kScaleOptions), entry);
  std::size_t files = 0;
  for (const auto& e : ocltk_test::fs::directory_iterator(dir_)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u) << "a temporary file was left next to the entry";
}

TEST_F(ProgramCacheTest, TruncatedEntryIsRebuilt) {
  const std::string entry = prime();
  const std::string bytes = read_bytes(entry);
  ASSERT_GT(bytes.size(), 100u);
  write_bytes(entry, bytes.substr(0, bytes.size() / 2));
  expect_rebuilt_and_repaired("truncated to half");
  write_bytes(entry, bytes.substr(0, 10));
  expect_rebuilt_and_repaired("truncated inside the header");
  write_bytes(entry, "");
  expect_rebuilt_and_repaired("empty");
  write_bytes(entry, bytes + "trailing");
  expect_rebuilt_and_repaired("bytes after the binary");
}

TEST_F(ProgramCacheTest, FlippedBinaryBytesAreRebuilt) {
  const std::string entry = prime();
  std::string bytes = read_bytes(entry);
  // Layout: 16-byte magic, u64 key size, key, u64 binary size, u64 checksum, binary.
  std::uint64_t key_size = 0;
  std::memcpy(&key_size, bytes.data() + 16, sizeof key_size);
  const std::size_t binary_at = 16 + 8 + key_size + 16;
  ASSERT_LT(binary_at, bytes.size());
  const std::size_t middle = binary_at + (bytes.size() - binary_at) / 2;
  for (std::size_t i = middle; i < middle + 4; ++i) bytes[i] = char(~bytes[i]);
  write_bytes(entry, bytes);
  expect_rebuilt_and_repaired("four bytes flipped in the middle of the binary");

  bytes = read_bytes(entry);
  bytes.back() = char(bytes.back() ^ 0x01);
  write_bytes(entry, bytes);
  expect_rebuilt_and_repaired("one bit flipped in the last byte");
}

TEST_F(ProgramCacheTest, GarbageEntryIsRebuilt) {
  const std::string entry = prime();
  std::string garbage(4096, '\0');
  std::mt19937 bytes_rng(seed());
  for (char& c : garbage) c = char(bytes_rng());
  write_bytes(entry, garbage);
  expect_rebuilt_and_repaired("random bytes");
  write_bytes(entry, "not a program at all\n");
  expect_rebuilt_and_repaired("text");
}

TEST_F(ProgramCacheTest, StaleEntryIsRebuilt) {
  // A whole, checksummed entry made for other options, found under this key's name.
  const std::string entry = prime();
  ProgramCache other(dir_);
  other.get(context(), device(), kScaleSource, "-DOFFSET=7.0f");
  const std::string other_entry = other.entry_path(device(), kScaleSource, "-DOFFSET=7.0f");
  ASSERT_TRUE(ocltk_test::fs::exists(other_entry));
  ocltk_test::fs::copy_file(other_entry, entry, ocltk_test::fs::copy_options::overwrite_existing);
  expect_rebuilt_and_repaired("entry of another key");

  // Same length key text with one character changed (e.g. another driver version).
  std::string bytes = read_bytes(entry);
  const std::size_t at = bytes.find("driver=");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 7] = bytes[at + 7] == 'x' ? 'y' : 'x';
  write_bytes(entry, bytes);
  expect_rebuilt_and_repaired("key text differs");
}

TEST_F(ProgramCacheTest, BuildFailureCarriesTheLog) {
  ProgramCache cache(dir_);
  const std::string broken = "__kernel void broken(__global float* x) { x[0] = undefined_name; }\n";
  try {
    cache.get(context(), device(), broken, "");
    FAIL() << "a broken kernel built";
  } catch (const ocltk::BuildError& e) {
    EXPECT_EQ(e.code(), ocltk::ErrorCode::kBuild);
    EXPECT_NE(e.cl_status(), 0);
    EXPECT_FALSE(e.log().empty());
    EXPECT_NE(e.log().find("undefined_name"), std::string::npos) << e.log();
  }
  EXPECT_FALSE(ocltk_test::fs::exists(cache.entry_path(device(), broken, "")));
  EXPECT_EQ(cache.stats().builds, 0u);
  // A failed build poisons nothing: the next program builds.
  expect_scale_runs(get(cache));
}

// A register target rebuilds the program from its PTX with `.maxnreg` added: on NVIDIA's
// OpenCL the program runs and its cached binary carries the directive; on a device whose
// binaries are not PTX (PoCL) the request fails with a clear error and caches nothing.
TEST_F(ProgramCacheTest, RegisterTargetRebuildsFromPtxOrFailsClearly) {
  ProgramCache cache(dir_);
  const std::string plain = cache.entry_path(device(), kScaleSource, kScaleOptions);
  const std::string capped = cache.entry_path(device(), kScaleSource, kScaleOptions, 128);
  EXPECT_EQ(cache.entry_path(device(), kScaleSource, kScaleOptions, 0), plain);
  EXPECT_NE(capped, plain);
  EXPECT_NE(cache.entry_path(device(), kScaleSource, kScaleOptions, 96), capped);
  if (runtime().device().platform == "NVIDIA CUDA") {
    expect_scale_runs(cache.get(context(), device(), kScaleSource, kScaleOptions, 128));
    EXPECT_NE(read_bytes(capped).find(".maxnreg 128\n"), std::string::npos);
    ProgramCache again(dir_);
    expect_scale_runs(again.get(context(), device(), kScaleSource, kScaleOptions, 128));
    expect_stats(again.stats(), 0, 1, 0, 0);
    return;
  }
  try {
    cache.get(context(), device(), kScaleSource, kScaleOptions, 128);
    FAIL() << "a register target was accepted on " << runtime().device().platform;
  } catch (const ocltk::BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("register target of 128"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not PTX"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ocltk_test::fs::exists(capped));
  EXPECT_EQ(cache.stats().builds, 0u);
  expect_scale_runs(get(cache));  // the same program without a target still builds
}

TEST_F(ProgramCacheTest, DashDisablesTheDisk) {
  ProgramCache first("-");
  EXPECT_EQ(first.entry_path(device(), kScaleSource, kScaleOptions), "");
  expect_scale_runs(get(first));
  expect_stats(first.stats(), 0, 0, 1, 0);
  ProgramCache second("-");
  get(second);
  expect_stats(second.stats(), 0, 0, 1, 0);

  ocltk_test::ScopedEnv env("OCLTK_CACHE_DIR", "-");
  EXPECT_EQ(ProgramCache::default_directory(), "-");
  EXPECT_EQ(ProgramCache("").directory(), "-");
  ocltk_test::ScopedEnv env2("OCLTK_CACHE_DIR", dir_);
  EXPECT_EQ(ProgramCache("").directory(), dir_);
}

// With writes off (the tuner on PoCL, whose binary fetch compiles every kernel again), a build
// leaves no entry; an entry already there is still read; writes back on store again.
TEST_F(ProgramCacheTest, WritesOffLeaveNoEntryButStillRead) {
  {
    ProgramCache off(dir_);
    EXPECT_TRUE(off.writes_to_disk());
    off.set_writes_to_disk(false);
    EXPECT_FALSE(off.writes_to_disk());
    expect_scale_runs(get(off));
    expect_stats(off.stats(), 0, 0, 1, 0);
    EXPECT_FALSE(ocltk_test::fs::exists(off.entry_path(device(), kScaleSource, kScaleOptions)));
  }
  const std::string entry = prime();
  ASSERT_TRUE(ocltk_test::fs::exists(entry));
  const std::string bytes = read_bytes(entry);
  ProgramCache reader(dir_);
  reader.set_writes_to_disk(false);
  expect_scale_runs(get(reader));
  expect_stats(reader.stats(), 0, 1, 0, 0);
  EXPECT_EQ(read_bytes(entry), bytes);
}

// ptx_with_max_registers on PTX as NVIDIA's OpenCL writes it: every .entry gets the
// directive after its parameter list and its other directives, replacing one it had;
// functions, comments, declarations and the rest of the text are untouched.
TEST(PtxWithMaxRegisters, AddsTheDirectiveToEveryEntry) {
  const std::string head =
      "//\n// Generated by NVIDIA NVVM Compiler\n.version 9.0\n.target sm_90, texmode_independent\n";
  const std::string func = ".func (.param .b32 r) helper(\n\t.param .b32 a\n)\n{\n\tret;\n}\n";
  const std::string ptx = head + func +
                          ".entry first(\n\t.param .u32 first_param_0,\n\t.param .u64 first_param_1\n)\n"
                          ".reqntid 128, 1, 1\n.maxnreg 64\n{\n\tret;\n}\n"
                          ".visible .entry second()\n{\n\tret;\n}\n";
  const std::optional<std::string> got = ocltk::ptx_with_max_registers(ptx, 168);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, head + func +
                      ".entry first(\n\t.param .u32 first_param_0,\n\t.param .u64 first_param_1\n)\n"
                      ".reqntid 128, 1, 1\n.maxnreg 168\n{\n\tret;\n}\n"
                      ".visible .entry second()\n.maxnreg 168\n{\n\tret;\n}\n");
  // A trailing NUL (as drivers return binaries) stays at the end.
  const std::optional<std::string> with_nul = ocltk::ptx_with_max_registers(ptx + std::string(1, '\0'), 96);
  ASSERT_TRUE(with_nul.has_value());
  EXPECT_EQ(with_nul->back(), '\0');
  EXPECT_EQ(ocltk::ptx_with_max_registers(*with_nul, 96), with_nul) << "rewriting twice changes nothing more";

  // Text that only mentions an entry (a comment), an entry declared without a body and the
  // functions after them get nothing; the entry after those gets its directive once, and a
  // comment in its header is not read (its ';' ends nothing, its '{' opens nothing).
  const std::string noted = head + "// note: .entry points follow\n" + func +
                            ".entry declared(\n\t.param .u32 p\n);\n" + func +
                            ".weak .entry third(\n\t.param .u32 p // in;\n)\n.reqntid 64, 1, 1 // {\n{\n\tret;\n}\n";
  EXPECT_EQ(ocltk::ptx_with_max_registers(noted, 128),
            head + "// note: .entry points follow\n" + func + ".entry declared(\n\t.param .u32 p\n);\n" + func +
                ".weak .entry third(\n\t.param .u32 p // in;\n)\n.reqntid 64, 1, 1 // {\n.maxnreg 128\n{\n\tret;\n}\n");
  // An entry cut off before its body, even after a whole one, is not rewritten.
  EXPECT_FALSE(ocltk::ptx_with_max_registers(head + ".entry whole()\n{\n\tret;\n}\n.entry cut(\n\t.param .u32 p\n", 128)
                   .has_value());
  // Windows line endings are kept, the directive's included.
  const std::string crlf = head + ".entry fourth(\r\n)\r\n.maxnreg 32\r\n{\r\n\tret;\r\n}\r\n";
  EXPECT_EQ(ocltk::ptx_with_max_registers(crlf, 255),
            head + ".entry fourth(\r\n)\r\n.maxnreg 255\r\n{\r\n\tret;\r\n}\r\n");
  // A body opened at the end of another line is not a layout this rewrites.
  EXPECT_FALSE(ocltk::ptx_with_max_registers(head + ".entry fifth() {\n\tret;\n}\n", 128).has_value());

  EXPECT_FALSE(ocltk::ptx_with_max_registers(ptx, 0).has_value());
  EXPECT_FALSE(ocltk::ptx_with_max_registers("\x7f"
                                             "ELF binary .entry x()\n{\n}\n",
                                             128)
                   .has_value());
  EXPECT_FALSE(ocltk::ptx_with_max_registers(head + func, 128).has_value()) << "no entry";
  EXPECT_FALSE(ocltk::ptx_with_max_registers(head + ".entry broken(\n\t.param .u32 p\n", 128).has_value());
}

}  // namespace

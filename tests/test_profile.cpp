// Profiles: YAML round trip, atomic writes, rejections with file:line:column, match
// levels, and the fallback chain from explicit path to built-in defaults; profile
// databases: merge, derived entries, the chain through one database file, diff.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include "fixture.hpp"
#include "ocltk/bounded_file.hpp"
#include "ocltk/nf4.hpp"
#include "user_dirs.hpp"

namespace {

using ocltk::ErrorCode;
using ocltk::GemmPrecision;
using ocltk::MatchLevel;
using ocltk::Profile;
using ocltk::ProfileCandidate;
using ocltk::ProfileEntry;
using ocltk_test::ScopedEnv;
using ocltk_test::fs::path;

void write_text(const std::string& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << file;
}

std::string read_text(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "LINE:COLUMN" (1-based) of the first occurrence of `needle` in `text`.
std::string position_of(const std::string& text, const std::string& needle) {
  const std::size_t at = text.find(needle);
  if (at == std::string::npos) return "<" + needle + " not in the text>";
  const std::size_t line = std::size_t(std::count(text.begin(), text.begin() + at, '\n')) + 1;
  const std::size_t line_start = text.rfind('\n', at);
  const std::size_t column = line_start == std::string::npos ? at + 1 : at - line_start;
  return std::to_string(line) + ":" + std::to_string(column);
}

ProfileEntry entry(const std::string& shape_class, const std::string& algorithm, const ocltk::Params& partial) {
  ProfileEntry e;
  e.kernel = "gemm_nt";
  e.shape_class = shape_class;
  e.algorithm = algorithm;
  e.params = ocltk::gemm_nt_family().find_algorithm(algorithm)->complete(partial);
  return e;
}

class ProfileTest : public ocltk_test::RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    dir_ = ocltk_test::make_temp_dir("profiles");
  }
  void TearDown() override {
    std::error_code ec;
    ocltk_test::fs::remove_all(dir_, ec);
    RuntimeTest::TearDown();
  }

  // A profile whose header is this device's, with `entries`.
  static Profile profile_for_this_device(std::vector<ProfileEntry> entries) {
    Profile p;
    p.device = ocltk::profile_device_of(runtime().device());
    p.tuner_version = "test";
    p.date = "2024-01-01";
    p.entries = std::move(entries);
    return p;
  }

  std::string file(const std::string& name) const { return (path(dir_) / name).string(); }

  // A runtime that reads profiles (env vars set by the caller), sharing the test cache.
  static ocltk::Result<ocltk::Runtime> open_with_profiles(const std::string& explicit_path = "", int verbose = 0) {
    ocltk::RuntimeOptions options = ocltk_test::test_runtime_options(cache_dir());
    options.use_profiles = true;
    options.profile_path = explicit_path;
    options.verbose = verbose;
    return ocltk::Runtime::open(options);
  }

  std::string dir_;
};

TEST_F(ProfileTest, EmitParseRoundTrip) {
  Profile p = profile_for_this_device({
      entry("gemv", "reduce", {{"WGS", 64}, {"RW", 16}, {"TR", 2}}),
      entry("large", "tiled", {{"MWG", 32}, {"NWG", 16}, {"MDIMC", 4}, {"NDIMC", 2}, {"VW", 4}, {"KWG", 32}}),
      entry("lora_expand", "tiled", {{"USE_LOCAL", 0}, {"VW", 16}, {"MWG", 16}, {"NWG", 8}, {"MDIMC", 4}}),
  });
  p.device.architecture = "gfx90a";  // empty on PoCL; give every field a value
  p.tuning_seconds = 42.5;
  p.entries[0].problem = {{"m", 1}, {"n", 4096}, {"k", 4096}};
  p.entries[0].time_ms = 1.25;
  p.entries[0].gflops = 26.8435;
  p.entries[0].default_time_ms = 2.5;
  // The default's point is written as the tune timed it, whatever today's tables say of it.
  p.entries[0].default_algorithm = "reduce";
  p.entries[0].default_params = {{"KWG", 512}, {"RW", 32}, {"GONE", 3}};
  p.entries[1].time_ms = 312.5;
  p.entries[1].gflops = 6.87195;
  p.entries[1].provenance = {"pinned", "results/h200/bench-gemm_nt.json", "0d64363", "large/4096x4096x4096, call 2"};
  p.entries[2].provenance.kind = "tuned";

  const Profile q = ocltk::parse_profile(ocltk::emit_profile(p), "roundtrip.yaml");
  EXPECT_EQ(q.schema, ocltk::kProfileSchema);
  EXPECT_EQ(q.path, "roundtrip.yaml");
  EXPECT_EQ(q.device.name, p.device.name);
  EXPECT_EQ(q.device.vendor, p.device.vendor);
  EXPECT_EQ(q.device.driver, p.device.driver);
  EXPECT_EQ(q.device.platform, p.device.platform);
  EXPECT_EQ(q.device.architecture, p.device.architecture);
  EXPECT_EQ(q.device.type, p.device.type);
  EXPECT_EQ(q.device.compute_units, p.device.compute_units);
  EXPECT_EQ(q.device.global_mem_bytes, p.device.global_mem_bytes);
  EXPECT_EQ(q.device.local_mem_bytes, p.device.local_mem_bytes);
  EXPECT_EQ(q.device.max_work_group_size, p.device.max_work_group_size);
  EXPECT_EQ(q.tuner_version, p.tuner_version);
  EXPECT_EQ(q.date, p.date);
  EXPECT_DOUBLE_EQ(q.tuning_seconds, p.tuning_seconds);
  ASSERT_EQ(q.entries.size(), p.entries.size());
  for (const ProfileEntry& want : p.entries) {
    SCOPED_TRACE(want.shape_class);
    const ProfileEntry* got = q.find(want.kernel, want.shape_class);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->algorithm, want.algorithm);
    EXPECT_EQ(got->params, want.params);
    EXPECT_EQ(got->problem, want.problem);
    EXPECT_DOUBLE_EQ(got->time_ms, want.time_ms);
    EXPECT_DOUBLE_EQ(got->gflops, want.gflops);
    EXPECT_DOUBLE_EQ(got->default_time_ms, want.default_time_ms);
    EXPECT_EQ(got->default_algorithm, want.default_algorithm);
    EXPECT_EQ(got->default_params, want.default_params);
    EXPECT_EQ(got->provenance, want.provenance);
  }
  EXPECT_TRUE(q.find("gemm_nt", "gemv")->provenance.empty()) << "an entry without provenance stays without";
  EXPECT_EQ(q.find("gemm_nt", "small_batch"), nullptr);

  // A profile assembled by hand has no tuning run: no `tuner` header is written, and none read.
  p.tuner_version.clear();
  p.date.clear();
  p.tuning_seconds = 0;
  const std::string text = ocltk::emit_profile(p);
  EXPECT_EQ(text.find("tuner"), std::string::npos) << text;
  EXPECT_TRUE(ocltk::parse_profile(text, "pinned.yaml").date.empty());
}

TEST_F(ProfileTest, WriteIsAtomicAndReplaces) {
  const std::string target = file("sub/device.yaml");
  ocltk_test::fs::create_directories(path(target).parent_path());
  write_text(target, "old contents\n");
  const Profile p = profile_for_this_device({entry("large", "tiled", {{"MWG", 32}})});
  ocltk::write_profile_atomically(target, p);
  EXPECT_EQ(read_text(target), ocltk::emit_profile(p));
  std::vector<std::string> names;
  for (const auto& e : ocltk_test::fs::directory_iterator(path(target).parent_path()))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"device.yaml"}) << "a temporary file was left behind";
  const Profile back = ocltk::read_profile(target);
  ASSERT_EQ(back.entries.size(), 1u);
  EXPECT_EQ(back.entries[0].params.at("MWG"), 32);
  EXPECT_EQ(back.path, target);

  // A folder that does not exist yet is created.
  const std::string nested = file("a/b/c.yaml");
  ocltk::write_profile_atomically(nested, p);
  EXPECT_TRUE(ocltk_test::fs::exists(nested));
}

TEST_F(ProfileTest, MalformedYamlNamesFileLineAndColumn) {
  // Line 4 opens a flow sequence that is never closed.
  const std::string text =
      "schema: 1\n"
      "device:\n"
      "  name: x\n"
      "  vendor: [a, b\n"
      "kernels: {}\n";
  const std::string f = file("broken.yaml");
  write_text(f, text);
  try {
    (void)ocltk::read_profile(f);
    FAIL() << "malformed YAML was accepted";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProfile);
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(f + ":", 0), 0u) << message;
    // yaml-cpp notices the unclosed flow sequence at the ':' of line 5.
    EXPECT_EQ(message.rfind(f + ":5:8: ", 0), 0u) << message;
    EXPECT_NE(message.find("malformed YAML"), std::string::npos) << message;
  }

  // A tab where indentation is expected: line 4, column 1.
  const std::string tabbed = "schema: 1\ndevice:\n  name: x\n\tvendor: y\n";
  try {
    (void)ocltk::parse_profile(tabbed, "tabbed.yaml");
    FAIL() << "malformed YAML was accepted";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProfile);
    EXPECT_EQ(std::string(e.what()).rfind("tabbed.yaml:4:1: ", 0), 0u) << e.what();
  }

  EXPECT_THROW((void)ocltk::read_profile(file("absent.yaml")), ocltk::Error);
}

// Every semantic fault is rejected at load with the position of the offending node.
TEST_F(ProfileTest, RejectsBadContentAtItsPosition) {
  const std::string good =
      "schema: 1\n"
      "device:\n"
      "  name: \"Some Device\"\n"
      "  vendor: \"Some Vendor\"\n"
      "kernels:\n"
      "  gemm_nt:\n"
      "    large:\n"
      "      algorithm: tiled\n"
      "      params: {MWG: 32, MDIMC: 4}\n"
      "    gemv:\n"
      "      algorithm: reduce\n"
      "      params: {TR: 2}\n"
      "      time_ms: 0.5\n"
      "      gflops: 2.5\n"
      "      default_time_ms: 4\n"
      "      default_algorithm: reduce\n"
      "      default_params: {KWG: 512, TR: 1}\n"
      "      provenance: {kind: pinned, results: results/x/bench.json, commit: 0123abc}\n";
  ASSERT_NO_THROW((void)ocltk::parse_profile(good, "good.yaml"));

  struct Case {
    std::string what, from, to;  // replace `from` by `to` in the good text
    std::string at;              // the token whose position the message must give
    std::string named;           // a word the message must contain
  };
  const Case cases[] = {
      {"wrong schema", "schema: 1", "schema: 3", "3", "schema"},
      {"unknown kernel", "  gemm_nt:", "  gemm_tn:", "gemm_tn", "gemm_tn"},
      {"unknown class", "    large:", "    huge:", "huge", "huge"},
      {"unknown algorithm", "algorithm: tiled", "algorithm: tiles", "tiles", "tiles"},
      {"unknown parameter", "{MWG: 32, MDIMC: 4}", "{MWG: 32, FOO: 4}", "FOO", "FOO"},
      {"value outside the table", "{MWG: 32, MDIMC: 4}", "{MWG: 48, MDIMC: 4}", "48", "MWG"},
      {"value outside the table (reduce)", "{TR: 2}", "{TR: 3}", "3}", "TR"},
      {"constraint violated", "{MWG: 32, MDIMC: 4}", "{MWG: 128, MDIMC: 8}", "{MWG: 128", "MWG / MDIMC"},
      {"missing device name", "  name: \"Some Device\"\n", "", "device:", "name"},
      {"non-integer parameter", "{TR: 2}", "{TR: two}", "two", "TR"},
      {"unknown provenance kind", "kind: pinned", "kind: guessed", "guessed", "guessed"},
      {"provenance without kind", "kind: pinned, ", "", "{results", "kind"},
      {"unknown provenance field", "commit: 0123abc}", "comit: 0123abc}", "comit", "comit"},
      {"provenance commit not hex", "0123abc", "0123abz", "0123abz", "commit"},
      {"provenance commit too short", "0123abc", "0123", "0123}", "commit"},
      {"provenance results outside the tree", "results/x/bench.json", "/tmp/bench.json", "/tmp", "results"},
      {"provenance results above the tree", "results/x/bench.json", "../x.json", "../x", "results"},
      {"provenance commit without results", "results: results/x/bench.json, ", "", "{kind", "commit"},
      {"provenance not a mapping", "{kind: pinned, results: results/x/bench.json, commit: 0123abc}", "pinned",
       "pinned\n", "mapping"},
      // Found by fuzzing: values and layouts the writer cannot write back as they were read.
      {"infinite time", "time_ms: 0.5", "time_ms: -.INF", "-.INF", "time_ms"},
      {"negative time", "time_ms: 0.5", "time_ms: -1", "-1", "time_ms"},
      {"rate not a number", "gflops: 2.5", "gflops: .nan", ".nan", "gflops"},
      {"default point without its params", "      default_params: {KWG: 512, TR: 1}\n", "", "reduce\n      prov",
       "needs 'default_params'"},
      {"default point without its algorithm", "      default_algorithm: reduce\n", "", "{KWG: 512, TR",
       "needs 'default_algorithm'"},
      {"default algorithm not a name", "default_algorithm: reduce", "default_algorithm: \"re duce\"", "\"re duce\"",
       "default_algorithm"},
      {"default algorithm not a scalar", "default_algorithm: reduce", "default_algorithm: [reduce]", "[reduce]",
       "default_algorithm"},
      {"default parameter not a name", "{KWG: 512, TR: 1}", "{K-WG: 512, TR: 1}", "K-WG", "plain name"},
      {"default algorithm empty", "default_algorithm: reduce", "default_algorithm: \"\"", "\"\"", "default_algorithm"},
      {"default params not a mapping", "default_params: {KWG: 512, TR: 1}", "default_params: 512", "512\n",
       "default_params"},
      {"default parameter not an integer", "{KWG: 512, TR: 1}", "{KWG: big, TR: 1}", "big", "KWG"},
      {"default parameter listed twice", "{KWG: 512, TR: 1}", "{KWG: 512, KWG: 1}", "KWG: 1", "twice"},
      {"kernel listed twice", "  gemm_nt:\n    large:",
       "  gemm_nt:\n    small_batch:\n      algorithm: reduce\n      params: {}\n  gemm_nt:\n    large:",
       "gemm_nt:\n    large", "twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string text = good;
    const std::size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, c.from.size(), c.to);
    const std::string f = file("bad.yaml");
    write_text(f, text);
    try {
      (void)ocltk::read_profile(f);
      ADD_FAILURE() << "accepted:\n" << text;
    } catch (const ocltk::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProfile);
      std::string where = position_of(text, c.at);
      if (c.what == "missing device name") where = "3:3";  // the device mapping's first key
      const std::string prefix = f + ":" + where + ": ";
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << "want prefix " << prefix << "\ngot " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos) << e.what();
    }
  }
}

// nf4's counts of a problem's segments must describe a layout that can exist: `active` (the
// experts with rows) in [1, min(rows, experts)], `max_rows` (the most rows on one) in
// [ceil(rows / A), rows - A + 1]; the error names the count, its range and the entry's line.
TEST_F(ProfileTest, Nf4SegmentCountsOutsideTheirRangeAreRejected) {
  const std::string head =
      "schema: 1\ndevice: {name: x, vendor: y}\nkernels:\n  nf4_forward:\n    decode:\n"
      "      algorithm: stream\n      params: {}\n      problem: ";
  const std::string fine = "{experts: 8, rows: 32, active: 8, max_rows: 7}";
  ASSERT_NO_THROW((void)ocltk::parse_profile(head + fine + "\n", "counts.yaml"));
  ASSERT_NO_THROW((void)ocltk::parse_profile(head + "{experts: 8, rows: 32, max_rows: 4}\n", "counts.yaml"));
  struct Case {
    std::string problem, message;
  };
  const Case cases[] = {
      {"{experts: 8, rows: 32, active: 9}", "problem active = 9 is outside [1, 8] (32 rows over 8 experts)"},
      {"{experts: 8, rows: 4, active: 0}", "problem active = 0 is outside [1, 4]"},
      {"{experts: 8, rows: 32, active: 8, max_rows: 3}",
       "problem max_rows = 3 is outside [4, 25] (32 rows over 8 experts with rows)"},
      {"{experts: 8, rows: 32, active: 8, max_rows: 26}", "problem max_rows = 26 is outside [4, 25]"},
      {"{experts: 8, rows: 32, max_rows: 40}", "problem max_rows = 40 is outside [4, 25]"},
      {"{experts: 8, active: 2}", "problem names 'active' but no 'rows'"},
      {"{rows: 8, active: 2}", "problem names 'active' but no 'experts'"},
      {"{rows: 8, max_rows: 2}", "problem names 'max_rows' but neither 'active' nor 'experts'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.problem);
    try {
      (void)ocltk::parse_profile(head + c.problem + "\n", "counts.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const ocltk::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProfile);
      EXPECT_EQ(std::string(e.what()).rfind("counts.yaml:8:", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Mapping keys that are not scalars (a YAML sequence used as a key) must be a profile
// error with a position like every other fault, not a yaml-cpp exception escaping
// parse_profile (and from there Runtime::open, which returns a Status).
TEST_F(ProfileTest, NonScalarKeysAreProfileErrors) {
  const std::string head = "schema: 1\ndevice: {name: x, vendor: y}\nkernels:\n";
  struct Case {
    std::string what, body, where;
  };
  const Case cases[] = {
      {"kernel key", "  ? [a, b]\n  : {}\n", "4:5"},
      {"class key", "  gemm_nt:\n    ? [large]\n    : {algorithm: tiled, params: {}}\n", "5:7"},
      {"parameter key", "  gemm_nt:\n    large:\n      algorithm: tiled\n      params: {[MWG]: 32}\n", "7:16"},
      {"problem key",
       "  gemm_nt:\n    large:\n      algorithm: tiled\n      params: {MWG: 32}\n      problem: {[m]: 1}\n", "8:17"},
      // Found by fuzz_profile: a key with control bytes, which emitted and parsed back as another.
      {"problem key with control bytes",
       "  gemm_nt:\n    large:\n      algorithm: tiled\n      params: {MWG: 32}\n      problem: {m: 1, \"n:\\x08k\": "
       "2}\n",
       "8:23"},
      {"problem key with a space",
       "  gemm_nt:\n    large:\n      algorithm: tiled\n      params: {MWG: 32}\n      problem: {\"rows per\": 2}\n",
       "8:17"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      (void)ocltk::parse_profile(head + c.body, "keys.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const ocltk::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProfile);
      EXPECT_EQ(std::string(e.what()).rfind("keys.yaml:" + c.where + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "parse_profile let a non-ocltk exception escape: " << e.what();
    }
  }
}

TEST_F(ProfileTest, RuntimeOpenReturnsAStatusForAnyBadProfile) {
  const std::string f = file("keys.yaml");
  write_text(f, "schema: 1\ndevice: {name: x, vendor: y}\nkernels:\n  ? [a, b]\n  : {}\n");
  try {
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles(f);
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.status().code(), ErrorCode::kProfile) << rt.status().message();
    EXPECT_EQ(rt.status().message().rfind(f + ":", 0), 0u) << rt.status().message();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "Runtime::open threw with an explicit bad profile: " << e.what();
  }
  // On the search path the same file is skipped with a warning.
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  try {
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    ASSERT_FALSE(rt->profiles().warnings.empty());
    EXPECT_NE(rt->profiles().warnings[0].find(f), std::string::npos) << rt->profiles().warnings[0];
  } catch (const std::exception& e) {
    ADD_FAILURE() << "Runtime::open threw for a bad profile on OCLTK_PROFILE_PATH: " << e.what();
  }
}

// yaml-cpp keeps both of two equal keys; a profile naming one class twice would then
// silently use the first entry and ignore the second.
TEST_F(ProfileTest, DuplicateClassIsRejected) {
  const std::string text =
      "schema: 1\n"
      "device: {name: x, vendor: y}\n"
      "kernels:\n"
      "  gemm_nt:\n"
      "    large:\n"
      "      algorithm: tiled\n"
      "      params: {MWG: 32}\n"
      "    large:\n"
      "      algorithm: tiled\n"
      "      params: {MWG: 16}\n";
  try {
    const Profile p = ocltk::parse_profile(text, "dup.yaml");
    ADD_FAILURE() << "accepted with " << p.entries.size()
                  << " entries; large -> MWG=" << p.find("gemm_nt", "large")->params.at("MWG");
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProfile);
    EXPECT_EQ(std::string(e.what()).rfind("dup.yaml:8:5: ", 0), 0u) << e.what();
  }
}

TEST_F(ProfileTest, MatchLevels) {
  const ocltk::DeviceInfo& device = runtime().device();
  ocltk::ProfileDevice header = ocltk::profile_device_of(device);
  EXPECT_EQ(ocltk::match_level(header, device), MatchLevel::kExact);
  header.driver = "some other driver";
  EXPECT_EQ(ocltk::match_level(header, device), MatchLevel::kDevice);
  header.name = "some other device";
  if (!device.architecture.empty()) {  // PoCL names its compiler's target
    EXPECT_EQ(ocltk::match_level(header, device), MatchLevel::kArchitecture);
    header.architecture.clear();
  }
  EXPECT_EQ(ocltk::match_level(header, device), MatchLevel::kVendor);
  header.vendor = "some other vendor";
  EXPECT_EQ(ocltk::match_level(header, device), MatchLevel::kNone);

  // Architecture needs a device that reports one; DeviceInfo is plain data.
  ocltk::DeviceInfo gpu;
  gpu.name = "AMD Instinct MI210";
  gpu.vendor = "Advanced Micro Devices, Inc.";
  gpu.driver = "3581.0";
  gpu.architecture = "gfx90a";
  ocltk::ProfileDevice same_arch;
  same_arch.name = "AMD Instinct MI250X";
  same_arch.vendor = "advanced micro devices, inc.";  // vendors compare case-insensitively
  same_arch.architecture = "gfx90a";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kArchitecture);
  same_arch.vendor = "Another Vendor";  // a GPU architecture stays tied to its vendor
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kNone);
  same_arch.vendor = "advanced micro devices, inc.";
  same_arch.architecture = "gfx942";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kVendor);
  same_arch.architecture = "";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kVendor);
  same_arch.vendor = "";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kNone);
  EXPECT_STREQ(ocltk::to_string(MatchLevel::kNone), "none");
}

// PoCL builds the same code for its target on any vendor's CPU: a profile tuned through it on
// an Intel CPU serves an AMD one at the architecture step, and none of another target.
TEST_F(ProfileTest, PoclTargetMatchesAcrossVendors) {
  const ocltk::DeviceInfo& here = runtime().device();
  if (here.platform == "Portable Computing Language") {
    const std::size_t h = here.version.find("HSTR: ");
    ASSERT_NE(h, std::string::npos) << here.version;
    EXPECT_EQ(here.architecture,
              std::string("pocl:") + here.version.substr(h + 6, here.version.find(' ', h + 6) - h - 6));
  }
  ocltk::DeviceInfo epyc;
  epyc.name = "pthread-skylake-avx512-AMD EPYC";
  epyc.vendor = "AuthenticAMD";
  epyc.architecture = "pocl:pthread-x86_64-pc-linux-gnu-skylake-avx512";
  ocltk::ProfileDevice xeon;
  xeon.name = "pthread-skylake-avx512-Intel(R) Xeon(R) Processor";
  xeon.vendor = "GenuineIntel";
  xeon.architecture = epyc.architecture;
  EXPECT_EQ(ocltk::match_level(xeon, epyc), MatchLevel::kArchitecture);
  xeon.architecture = "pocl:pthread-x86_64-pc-linux-gnu-znver4";
  EXPECT_EQ(ocltk::match_level(xeon, epyc), MatchLevel::kNone);
  // (A GPU architecture stays tied to its vendor: MatchLevels.)
  // Derived sections of a database follow the same rule.
  Profile intel = profile_for_this_device({entry("gemv", "reduce", {{"WGS", 64}, {"RW", 16}})});
  intel.device.name = xeon.name;
  intel.device.vendor = xeon.vendor;
  intel.device.architecture = epyc.architecture;
  const ocltk::ProfileDatabase db = ocltk::merge_profiles({intel});
  bool arch_section = false;
  for (const ocltk::DerivedProfile& g : db.derived)
    if (g.level == MatchLevel::kArchitecture) {
      arch_section = true;
      EXPECT_EQ(g.fit(epyc), MatchLevel::kArchitecture) << g.describe();
    } else {
      EXPECT_EQ(g.fit(epyc), MatchLevel::kNone) << g.describe();
    }
  EXPECT_TRUE(arch_section);
}

// exact device + driver beats device name beats vendor; within a level, the
// OCLTK_PROFILE_PATH tier beats the user folder.
TEST_F(ProfileTest, FallbackChainPrefersTheClosestMatch) {
  const std::string env_dir = file("env"), user_root = file("xdg");
  const std::string user_dir = (path(user_root) / "ocltk" / "profiles").string();
  ocltk_test::fs::create_directories(env_dir);
  ocltk_test::fs::create_directories(user_dir);
  ScopedEnv env_path("OCLTK_PROFILE_PATH", env_dir);
  ScopedEnv xdg("XDG_CONFIG_HOME", user_root);
  ASSERT_EQ(ocltk::user_profile_dir(), user_dir);

  Profile exact = profile_for_this_device({entry("large", "tiled", {{"MWG", 8}, {"MDIMC", 1}})});
  Profile device = profile_for_this_device({entry("large", "tiled", {{"MWG", 16}, {"MDIMC", 2}})});
  device.device.driver = "another driver";
  Profile vendor = profile_for_this_device({entry("large", "tiled", {{"MWG", 32}, {"MDIMC", 4}})});
  vendor.device.name = "another device of the same vendor";
  vendor.device.driver = "";
  vendor.device.architecture = "";  // not known: the vendor step
  // File names sort against the preference, so order on disk cannot be what decides.
  ocltk::write_profile_atomically((path(env_dir) / "a_vendor.yaml").string(), vendor);
  ocltk::write_profile_atomically((path(env_dir) / "b_device.yaml").string(), device);
  ocltk::write_profile_atomically((path(env_dir) / "c_exact.yaml").string(), exact);

  struct Step {
    std::string removed_before;  // file removed before this step
    int mwg;
    MatchLevel level;
  };
  const Step steps[] = {{"", 8, MatchLevel::kExact},
                        {"c_exact.yaml", 16, MatchLevel::kDevice},
                        {"b_device.yaml", 32, MatchLevel::kVendor}};
  for (const Step& step : steps) {
    SCOPED_TRACE("after removing '" + step.removed_before + "'");
    if (!step.removed_before.empty()) ocltk_test::fs::remove(path(env_dir) / step.removed_before);
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    const ocltk::Choice c = rt->choose("gemm_nt", "large");
    EXPECT_EQ(c.params.at("MWG"), step.mwg) << c.describe();
    EXPECT_EQ(c.level, step.level) << c.describe();
    EXPECT_NE(c.source.find(env_dir), std::string::npos) << c.describe();
    const auto& candidates = rt->profiles().candidates;
    ASSERT_FALSE(candidates.empty());
    for (std::size_t i = 1; i < candidates.size(); ++i) EXPECT_LE(candidates[i - 1].level, candidates[i].level);
    EXPECT_EQ(candidates.front().tier, "OCLTK_PROFILE_PATH");
  }

  // Same level in two tiers: OCLTK_PROFILE_PATH comes before the user folder.
  Profile user_vendor = vendor;
  user_vendor.entries = {entry("large", "tiled", {{"MWG", 64}})};
  ocltk::write_profile_atomically((path(user_dir) / "user.yaml").string(), user_vendor);
  {
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    EXPECT_EQ(rt->choose("gemm_nt", "large").params.at("MWG"), 32);
    ASSERT_EQ(rt->profiles().candidates.size(), 2u);
    EXPECT_EQ(rt->profiles().candidates[1].tier, "user");
  }
  // Across tiers the closer match still wins (README, "Profiles"): an exact profile in
  // the user folder beats a vendor profile on OCLTK_PROFILE_PATH.
  ocltk::write_profile_atomically((path(user_dir) / "user_exact.yaml").string(),
                                  profile_for_this_device({entry("large", "tiled", {{"MWG", 128}, {"MDIMC", 16}})}));
  {
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    const ocltk::Choice c = rt->choose("gemm_nt", "large");
    EXPECT_EQ(c.params.at("MWG"), 128) << c.describe();
    EXPECT_EQ(c.level, MatchLevel::kExact);
    EXPECT_EQ(rt->profiles().candidates.front().tier, "user");
  }
  ocltk_test::fs::remove(path(user_dir) / "user_exact.yaml");
  // With OCLTK_PROFILE_PATH empty, the user folder serves.
  {
    ScopedEnv no_env_path("OCLTK_PROFILE_PATH", std::nullopt);
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    const ocltk::Choice c = rt->choose("gemm_nt", "large");
    EXPECT_EQ(c.params.at("MWG"), 64) << c.describe();
    EXPECT_EQ(c.level, MatchLevel::kVendor);
  }
}

// A profile entry with a register target (REGS) on a device whose binaries are not PTX
// (e.g. a profile written on NVIDIA's OpenCL, matched by name under another driver) runs
// with the compiler's choice, and the choice says so; where binaries are PTX it is kept.
TEST_F(ProfileTest, RegisterTargetOfAProfileIsDroppedWhereBinariesAreNotPtx) {
  const ocltk::AlgorithmSpec* warps = ocltk::nf4_forward_family().find_algorithm("warps");
  ASSERT_NE(warps, nullptr);
  ProfileEntry e;
  e.kernel = "nf4_forward";
  e.shape_class = "decode";
  e.algorithm = "warps";
  e.params = warps->complete({{"REGS", 168}, {"TR", 2}});
  const std::string f = file("regs.yaml");
  ocltk::write_profile_atomically(f, profile_for_this_device({e}));
  ocltk::Result<ocltk::Runtime> rt = open_with_profiles(f);
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  const ocltk::Choice c = rt->choose("nf4_forward", "decode");
  EXPECT_EQ(c.source, f);
  EXPECT_EQ(c.params.at("TR"), 2);
  if (limits().ptx_binaries) {
    EXPECT_EQ(c.params.at("REGS"), 168);
    EXPECT_TRUE(c.adjusted.empty()) << c.adjusted;
  } else {
    EXPECT_EQ(c.params.at("REGS"), 0);
    EXPECT_NE(c.describe().find("; REGS 168 -> 0: this device's program binaries are not PTX"), std::string::npos)
        << c.describe();
  }
}

TEST_F(ProfileTest, ProfileForAnotherDeviceIsNotUsed) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  Profile other = profile_for_this_device({entry("large", "tiled", {{"MWG", 8}, {"MDIMC", 1}})});
  other.device.name = "Some GPU";
  other.device.vendor = "Some Vendor";
  other.device.driver = "1.0";
  other.device.architecture = "gfx90a";
  ocltk::write_profile_atomically(file("other.yaml"), other);
  // A broken file on the search path is skipped with a warning, not fatal.
  write_text(file("broken.yaml"), "schema: [\n");

  ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  EXPECT_TRUE(rt->profiles().candidates.empty());
  EXPECT_GE(rt->profiles().searched.size(), 2u);
  bool warned_broken = false;
  for (const std::string& w : rt->profiles().warnings)
    warned_broken |= w.find(file("broken.yaml")) != std::string::npos;
  EXPECT_TRUE(warned_broken) << "no warning names the broken profile";
  const ocltk::Choice c = rt->choose("gemm_nt", "large");
  EXPECT_EQ(c.source, "built-in");
  EXPECT_EQ(c.level, MatchLevel::kNone);
  EXPECT_EQ(c.params, ocltk::gemm_nt_family().find_algorithm("tiled")->defaults());
}

TEST_F(ProfileTest, ExplicitProfileForAnotherDeviceWarnsAndUsesBuiltins) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", std::nullopt);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  Profile other = profile_for_this_device({entry("large", "tiled", {{"MWG", 8}, {"MDIMC", 1}})});
  other.device.name = "Some GPU";
  other.device.vendor = "Some Vendor";
  other.device.architecture = "gfx90a";
  const std::string f = file("other.yaml");
  ocltk::write_profile_atomically(f, other);
  ocltk::Result<ocltk::Runtime> rt = open_with_profiles(f);
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  ASSERT_EQ(rt->profiles().warnings.size(), 1u);
  EXPECT_NE(rt->profiles().warnings[0].find(f), std::string::npos) << rt->profiles().warnings[0];
  EXPECT_NE(rt->profiles().warnings[0].find("Some GPU"), std::string::npos) << rt->profiles().warnings[0];
  EXPECT_EQ(rt->choose("gemm_nt", "large").source, "built-in");
}

TEST_F(ProfileTest, ExplicitMalformedProfileFailsOpen) {
  const std::string f = file("broken.yaml");
  write_text(f, "schema: 1\ndevice: {name: x, vendor: y}\nkernels:\n  gemm_nt:\n    nope: {}\n");
  ocltk::Result<ocltk::Runtime> rt = open_with_profiles(f);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), ErrorCode::kProfile);
  EXPECT_EQ(rt.status().message().rfind(f + ":5:5: ", 0), 0u) << rt.status().message();

  ocltk::Result<ocltk::Runtime> missing = open_with_profiles(file("absent.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.yaml"), std::string::npos) << missing.status().message();
}

TEST_F(ProfileTest, MissingClassFallsBackToTheNextCandidateThenBuiltin) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  ocltk::write_profile_atomically(file("exact.yaml"),
                                  profile_for_this_device({entry("large", "tiled", {{"MWG", 8}, {"MDIMC", 1}})}));
  Profile vendor = profile_for_this_device(
      {entry("large", "tiled", {{"MWG", 32}, {"MDIMC", 4}}), entry("gemv", "reduce", {{"WGS", 64}, {"RW", 16}})});
  vendor.device.name = "another device of the same vendor";
  vendor.device.architecture = "";  // not known: the vendor step
  ocltk::write_profile_atomically(file("vendor.yaml"), vendor);

  ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  const ocltk::Choice large = rt->choose("gemm_nt", "large");
  EXPECT_EQ(large.params.at("MWG"), 8);
  EXPECT_EQ(large.source, file("exact.yaml"));
  const ocltk::Choice gemv = rt->choose("gemm_nt", "gemv");
  EXPECT_EQ(gemv.algorithm, "reduce");
  EXPECT_EQ(gemv.params.at("WGS"), 64);
  EXPECT_EQ(gemv.source, file("vendor.yaml"));
  EXPECT_EQ(gemv.level, MatchLevel::kVendor);
  const ocltk::Choice expand = rt->choose("gemm_nt", "lora_expand");
  EXPECT_EQ(expand.source, "built-in");
  const ocltk::BuiltinChoice builtin = ocltk::gemm_nt_family().builtin_for("lora_expand");
  EXPECT_EQ(expand.algorithm, builtin.algorithm);
  EXPECT_EQ(expand.params, ocltk::gemm_nt_family().find_algorithm(builtin.algorithm)->complete(builtin.params));
  EXPECT_THROW((void)rt->choose("gemm_tn", "large"), ocltk::Error);
}

// A TF32 twin's SIMT entry is at best its exact class's point (a device without tensor cores
// writes the exact class's point under the twin's name): where a profile that matches the device
// better has an entry for the exact class, that one serves a TF32 launch. A twin's tensor-core
// entry stays the twin's choice (and then falls back where the probe refuses it); so does a
// SIMT one where no nearer profile has the exact class.
TEST_F(ProfileTest, ATwinsSimtEntryGivesWayToTheExactClassOfANearerProfile) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  ocltk::write_profile_atomically(file("exact.yaml"),
                                  profile_for_this_device({entry("lora_shrink", "tiled", {{"MWG", 8}, {"MDIMC", 1}})}));
  Profile vendor = profile_for_this_device({entry("lora_shrink_tf32x3", "tiled", {{"MWG", 32}, {"MDIMC", 4}}),
                                            entry("lora_expand_tf32", "tiled", {{"MWG", 16}, {"MDIMC", 2}}),
                                            entry("large_tf32x3", "tc", {})});
  vendor.device.name = "another device of the same vendor";
  vendor.device.architecture = "";  // not known: the vendor step
  ocltk::write_profile_atomically(file("vendor.yaml"), vendor);
  ocltk::Result<ocltk::Runtime> rt = open_with_profiles();
  ASSERT_TRUE(rt.ok()) << rt.status().message();

  const ocltk::Choice shrink = rt->choose_gemm_nt({4096, 16, 4096}, ocltk::ElementType::f32, GemmPrecision::tf32x3);
  EXPECT_EQ(shrink.params.at("MWG"), 8) << shrink.describe();
  EXPECT_EQ(shrink.source, file("exact.yaml"));
  EXPECT_EQ(shrink.level, MatchLevel::kExact);
  EXPECT_NE(shrink.adjusted.find("lora_shrink_tf32x3's entry from " + file("vendor.yaml")), std::string::npos)
      << shrink.describe();
  // No nearer profile has lora_expand: the twin's entry serves.
  const ocltk::Choice expand = rt->choose_gemm_nt({4096, 4096, 16}, ocltk::ElementType::f32, GemmPrecision::tf32);
  EXPECT_EQ(expand.params.at("MWG"), 16) << expand.describe();
  EXPECT_EQ(expand.source, file("vendor.yaml"));
  // A tensor-core twin is kept; on a device whose probe refuses it the exact class's choice
  // (here the built-in) runs, saying why.
  const ocltk::Choice large = rt->choose_gemm_nt({512, 512, 512}, ocltk::ElementType::f32, GemmPrecision::tf32x3);
  if (!ocltk::DeviceLimits::of(runtime().device()).tensor_mma) {
    EXPECT_NE(large.algorithm, "tc") << large.describe();
    EXPECT_NE(large.adjusted.find("tc from " + file("vendor.yaml") + " not used"), std::string::npos)
        << large.describe();
  } else {
    EXPECT_EQ(large.algorithm, "tc") << large.describe();
  }
}

TEST_F(ProfileTest, VerboseLogsTheChoice) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  const ocltk::Params params{{"WGS", 64}, {"RW", 1}, {"TR", 4}, {"VW", 4}};  // a point test_gemm_nt also uses
  ocltk::write_profile_atomically(file("exact.yaml"), profile_for_this_device({entry("gemv", "reduce", params)}));

  const ocltk::GemmProblem p{1, 50, 40};
  auto launch_once = [&](ocltk::Runtime& rt) {
    const std::vector<float> a = ocltk_test::random_floats(rng(), p.m * p.k);
    const std::vector<float> b = ocltk_test::random_floats(rng(), p.n * p.k);
    std::vector<float> c(p.m * p.n);
    boost::compute::buffer a_buf = ocltk_test::upload(rt, a), b_buf = ocltk_test::upload(rt, b),
                           c_buf = ocltk_test::upload(rt, c);
    ocltk::GemmNtArgs args;
    args.problem = p;
    args.a = {a_buf.get(), 0, 0};
    args.b = {b_buf.get(), 0, 0};
    args.c = {c_buf.get(), 0, 0};
    const ocltk::Status s = rt.gemm_nt(args);
    EXPECT_TRUE(s.ok()) << s.message();
    rt.queue().finish();
  };

  {
    ScopedEnv verbose("OCLTK_VERBOSE", "1");
    ::testing::internal::CaptureStderr();
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles("", /*verbose=*/-1);
    if (rt.ok()) launch_once(rt.value());
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    EXPECT_NE(log.find("ocltk: profile " + file("exact.yaml")), std::string::npos) << log;
    EXPECT_NE(log.find(rt->last_choice().describe()), std::string::npos) << log;
    EXPECT_NE(log.find("gemm_nt/gemv -> reduce"), std::string::npos) << log;
    EXPECT_NE(log.find(file("exact.yaml")), std::string::npos) << log;
  }
  {
    ScopedEnv verbose("OCLTK_VERBOSE", "0");
    ::testing::internal::CaptureStderr();
    ocltk::Result<ocltk::Runtime> rt = open_with_profiles("", /*verbose=*/-1);
    if (rt.ok()) launch_once(rt.value());
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    EXPECT_EQ(log, "") << "OCLTK_VERBOSE=0 still logged";
  }
}

TEST_F(ProfileTest, ProfileEntryDrivesTheLaunch) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  const ocltk::Params tiled{{"MWG", 32}, {"NWG", 16}, {"KWG", 32}, {"MDIMC", 4}, {"NDIMC", 2}, {"VW", 4}};
  const std::string f = file("exact.yaml");
  ocltk::write_profile_atomically(f, profile_for_this_device({entry("large", "tiled", tiled)}));
  ocltk::Result<ocltk::Runtime> opened = open_with_profiles();
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  ocltk::Runtime& rt = opened.value();
  const ocltk::Params want = ocltk::gemm_nt_family().find_algorithm("tiled")->complete(tiled);
  for (bool accumulate : {false, true}) {
    ocltk_test::GemmCase c;
    c.problem = {70, 80, 90};
    c.accumulate = accumulate;
    c.alpha = accumulate ? -0.37f : 1.0f;
    EXPECT_TRUE(ocltk_test::run_gemm_case(rt, rng(), c, [&](const ocltk::GemmNtArgs& args) {
      return accumulate ? rt.gemm_nt_accum(args) : rt.gemm_nt(args);
    }));
    const ocltk::Choice& used = rt.last_choice();
    EXPECT_EQ(used.shape_class, "large");
    EXPECT_EQ(used.algorithm, "tiled");
    EXPECT_EQ(used.params, want);
    EXPECT_EQ(used.source, f);
    EXPECT_EQ(used.level, MatchLevel::kExact);
  }
}

// ---------------------------------------------------------------------------------------
// Profile databases (schema 2)

// A profile of a made-up device: name, vendor, driver, architecture, tuner date.
Profile device_profile(const std::string& name, const std::string& vendor, const std::string& driver,
                       const std::string& architecture, const std::string& date, std::vector<ProfileEntry> entries) {
  Profile p;
  p.device.name = name;
  p.device.vendor = vendor;
  p.device.driver = driver;
  p.device.architecture = architecture;
  p.device.type = "gpu";
  p.tuner_version = "test";
  p.date = date;
  p.entries = std::move(entries);
  return p;
}

// An entry with a measurement: `speedup` is default_time_ms / time_ms.
ProfileEntry timed(ProfileEntry e, double time_ms, double speedup) {
  e.problem = {{"m", 1024}, {"n", 1024}, {"k", 1024}};
  e.time_ms = time_ms;
  e.gflops = 2.0 * 1024 * 1024 * 1024 / (time_ms * 1e6);
  e.default_time_ms = time_ms * speedup;
  return e;
}

const ocltk::Params kTiledA{{"MWG", 8}, {"MDIMC", 1}};
const ocltk::Params kTiledB{{"MWG", 16}, {"MDIMC", 2}};
const ocltk::Params kTiledC{{"MWG", 32}, {"MDIMC", 4}};
const ocltk::Params kReduceA{{"WGS", 64}, {"RW", 16}};
const ocltk::Params kReduceB{{"WGS", 64}, {"RW", 16}, {"TR", 2}};
const char* const kNvidia = "NVIDIA Corporation";

ocltk::Params complete(const std::string& algorithm, const ocltk::Params& partial) {
  return ocltk::gemm_nt_family().find_algorithm(algorithm)->complete(partial);
}

const ocltk::DerivedProfile* derived_section(const ocltk::ProfileDatabase& db, MatchLevel level,
                                             const std::string& key) {
  for (const ocltk::DerivedProfile& g : db.derived)
    if (g.level == level && (level == MatchLevel::kArchitecture ? g.architecture : g.vendor) == key) return &g;
  return nullptr;
}

TEST(ProfileDatabase, MergeKeepsOneMemberPerDeviceAndDriverAndTheNewerEntryWins) {
  const Profile old_h200 = device_profile(
      "NVIDIA H200", kNvidia, "580", "sm_90", "2026-01-01T00:00:00Z",
      {timed(entry("large", "tiled", kTiledA), 4.0, 1.5), timed(entry("gemv", "reduce", kReduceA), 0.1, 1.1)});
  const Profile new_h200 = device_profile("NVIDIA H200", kNvidia, "580", "sm_90", "2026-02-01T00:00:00Z",
                                          {timed(entry("large", "tiled", kTiledB), 3.0, 2.0)});
  const Profile other_driver = device_profile("NVIDIA H200", kNvidia, "575", "sm_90", "2025-12-01T00:00:00Z",
                                              {timed(entry("large", "tiled", kTiledC), 5.0, 1.2)});
  const Profile h100 = device_profile("NVIDIA H100", kNvidia, "580", "sm_90", "2026-01-15T00:00:00Z",
                                      {timed(entry("large", "tiled", kTiledB), 3.5, 1.8)});

  // The newer profile wins whichever order the inputs come in.
  for (const bool newer_first : {true, false}) {
    SCOPED_TRACE(newer_first ? "newer first" : "older first");
    const std::vector<Profile> inputs = newer_first ? std::vector<Profile>{new_h200, other_driver, old_h200, h100}
                                                    : std::vector<Profile>{old_h200, other_driver, h100, new_h200};
    const ocltk::ProfileDatabase db = ocltk::merge_profiles(inputs);
    ASSERT_EQ(db.profiles.size(), 3u);
    // Ordered by name, newest first within a name.
    EXPECT_EQ(db.profiles[0].device.name, "NVIDIA H100");
    EXPECT_EQ(db.profiles[1].device.driver, "580");
    EXPECT_EQ(db.profiles[2].device.driver, "575");
    const Profile& merged = db.profiles[1];
    EXPECT_EQ(merged.date, "2026-02-01T00:00:00Z");
    ASSERT_NE(merged.find("gemm_nt", "large"), nullptr);
    EXPECT_EQ(merged.find("gemm_nt", "large")->params, complete("tiled", kTiledB)) << "the newer entry wins";
    EXPECT_DOUBLE_EQ(merged.find("gemm_nt", "large")->time_ms, 3.0);
    ASSERT_NE(merged.find("gemm_nt", "gemv"), nullptr) << "an entry only the older profile has is kept";
    EXPECT_EQ(merged.find("gemm_nt", "gemv")->params, complete("reduce", kReduceA));
  }

  // Equal dates: the later input wins.
  Profile same_date = new_h200;
  same_date.entries = {timed(entry("large", "tiled", kTiledC), 3.3, 1.9)};
  EXPECT_EQ(ocltk::merge_profiles({new_h200, same_date}).profiles[0].find("gemm_nt", "large")->params,
            complete("tiled", kTiledC));
  EXPECT_EQ(ocltk::merge_profiles({same_date, new_h200}).profiles[0].find("gemm_nt", "large")->params,
            complete("tiled", kTiledB));
}

// Three devices (two of sm_90, one of sm_80) plus an older driver of one of them.
std::vector<Profile> three_device_fleet() {
  return {
      device_profile(
          "NVIDIA H100", kNvidia, "580", "sm_90", "2026-01-01",
          {timed(entry("large", "tiled", kTiledA), 3.0, 1.5), timed(entry("gemv", "reduce", kReduceA), 0.1, 2.0)}),
      device_profile(
          "NVIDIA H200", kNvidia, "580", "sm_90", "2026-01-02",
          {timed(entry("large", "tiled", kTiledA), 2.5, 1.4), timed(entry("gemv", "reduce", kReduceB), 0.1, 1.2)}),
      // An older driver of the H200 disagrees on large; a device counts once (its newest member).
      device_profile("NVIDIA H200", kNvidia, "570", "sm_90", "2025-06-01",
                     {timed(entry("large", "tiled", kTiledC), 2.7, 1.3)}),
      device_profile(
          "NVIDIA A100", "nvidia corporation", "580", "sm_80", "2026-01-03",
          {timed(entry("large", "tiled", kTiledB), 6.0, 1.1), timed(entry("gemv", "reduce", kReduceB), 0.2, 1.1),
           timed(entry("lora_expand", "tiled", kTiledC), 1.0, 1.2)}),
  };
}

TEST(ProfileDatabase, DerivedEntriesTakeTheChoiceMostDevicesPicked) {
  const ocltk::ProfileDatabase db = ocltk::merge_profiles(three_device_fleet());
  ASSERT_EQ(db.profiles.size(), 4u);
  ASSERT_EQ(db.derived.size(), 3u) << "sm_80, sm_90, and one vendor (vendors compare case-insensitively)";
  const ocltk::DerivedProfile* sm90 = derived_section(db, MatchLevel::kArchitecture, "sm_90");
  const ocltk::DerivedProfile* sm80 = derived_section(db, MatchLevel::kArchitecture, "sm_80");
  const ocltk::DerivedProfile* vendor = derived_section(db, MatchLevel::kVendor, kNvidia);
  ASSERT_TRUE(sm90 && sm80 && vendor);
  EXPECT_EQ(sm90->devices, (std::vector<std::string>{"NVIDIA H100", "NVIDIA H200"}));
  EXPECT_EQ(vendor->devices, (std::vector<std::string>{"NVIDIA A100", "NVIDIA H100", "NVIDIA H200"}));

  // sm_90 large: both devices picked tiled A (the old H200 driver's C does not vote).
  const ocltk::DerivedEntry* large = sm90->find("gemm_nt", "large");
  ASSERT_NE(large, nullptr);
  EXPECT_EQ(large->choice.params, complete("tiled", kTiledA));
  EXPECT_EQ(large->chosen_by, (std::vector<std::string>{"NVIDIA H100", "NVIDIA H200"}));
  EXPECT_EQ(large->measured, 2);
  EXPECT_EQ(large->choice.time_ms, 0) << "a derived entry carries no measurement of its own";
  // sm_90 gemv: one vote each; reduce A gained 2.0x over the default where it won, B 1.2x.
  const ocltk::DerivedEntry* gemv = sm90->find("gemm_nt", "gemv");
  ASSERT_NE(gemv, nullptr);
  EXPECT_EQ(gemv->choice.params, complete("reduce", kReduceA));
  EXPECT_EQ(gemv->chosen_by.size(), 1u);
  EXPECT_EQ(gemv->measured, 2);
  EXPECT_EQ(sm90->find("gemm_nt", "lora_expand"), nullptr) << "no sm_90 device measured it";
  // sm_80 has one device: its own choices.
  EXPECT_EQ(sm80->find("gemm_nt", "large")->choice.params, complete("tiled", kTiledB));
  EXPECT_EQ(sm80->vendor, "nvidia corporation");
  // Vendor: large A (2 of 3), gemv B (H200 and A100: 2 of 3), lora_expand from the A100.
  EXPECT_EQ(vendor->find("gemm_nt", "large")->choice.params, complete("tiled", kTiledA));
  EXPECT_EQ(vendor->find("gemm_nt", "large")->measured, 3);
  EXPECT_EQ(vendor->find("gemm_nt", "gemv")->choice.params, complete("reduce", kReduceB));
  EXPECT_EQ(vendor->find("gemm_nt", "gemv")->chosen_by, (std::vector<std::string>{"NVIDIA A100", "NVIDIA H200"}));
  ASSERT_NE(vendor->find("gemm_nt", "lora_expand"), nullptr);
  EXPECT_EQ(vendor->find("gemm_nt", "lora_expand")->measured, 1);

  // Round trip through the file format.
  const ocltk::ProfileFile back = ocltk::parse_profile_file(ocltk::emit_profile_database(db), "db.yaml");
  ASSERT_EQ(back.schema, ocltk::kProfileDatabaseSchema);
  ASSERT_EQ(back.database.profiles.size(), db.profiles.size());
  for (std::size_t i = 0; i < db.profiles.size(); ++i) {
    EXPECT_EQ(back.database.profiles[i].device.name, db.profiles[i].device.name);
    EXPECT_EQ(back.database.profiles[i].device.driver, db.profiles[i].device.driver);
    EXPECT_EQ(back.database.profiles[i].date, db.profiles[i].date);
    EXPECT_EQ(back.database.profiles[i].entries.size(), db.profiles[i].entries.size());
    EXPECT_EQ(back.database.profiles[i].path, "db.yaml");
  }
  ASSERT_EQ(back.database.derived.size(), db.derived.size());
  for (std::size_t i = 0; i < db.derived.size(); ++i) {
    const ocltk::DerivedProfile &want = db.derived[i], &got = back.database.derived[i];
    EXPECT_EQ(got.describe(), want.describe());
    EXPECT_EQ(got.devices, want.devices);
    ASSERT_EQ(got.entries.size(), want.entries.size());
    for (std::size_t j = 0; j < want.entries.size(); ++j) {
      EXPECT_EQ(got.entries[j].choice.params, want.entries[j].choice.params);
      EXPECT_EQ(got.entries[j].chosen_by, want.entries[j].chosen_by);
      EXPECT_EQ(got.entries[j].measured, want.entries[j].measured);
    }
  }
  EXPECT_TRUE(ocltk::diff_profile_files(back, back).empty());
  // Merging the database again (as `merge DB.yaml -o DB.yaml` does) changes nothing.
  ocltk::ProfileFile again;
  again.schema = ocltk::kProfileDatabaseSchema;
  again.database = ocltk::merge_profiles(back.device_profiles());
  again.path = "again.yaml";
  EXPECT_TRUE(ocltk::diff_profile_files(back, again).empty());
}

// A tie of votes goes to the larger speed-up over the built-in default, counted only where the
// entry's default time is today's default's (default_time_counts): the H100's reduce A gained
// 2.0x over a stand-in its tune timed in place of the default, which says nothing; B's 1.2x wins.
TEST(ProfileDatabase, AStandInsSpeedUpDoesNotBreakATie) {
  std::vector<Profile> fleet = three_device_fleet();
  ProfileEntry& h100_gemv = fleet[0].entries.at(1);
  ASSERT_EQ(h100_gemv.shape_class, "gemv");
  const ocltk::BuiltinChoice today = ocltk::gemm_nt_family().builtin_point("gemv");
  h100_gemv.default_algorithm = today.algorithm;
  h100_gemv.default_params = today.params;
  const auto sm90_gemv = [](const std::vector<Profile>& members) {
    const ocltk::ProfileDatabase db = ocltk::merge_profiles(members);
    const ocltk::DerivedProfile* sm90 = derived_section(db, MatchLevel::kArchitecture, "sm_90");
    return sm90 == nullptr || sm90->find("gemm_nt", "gemv") == nullptr ? ocltk::Params{}
                                                                       : sm90->find("gemm_nt", "gemv")->choice.params;
  };
  EXPECT_EQ(sm90_gemv(fleet), complete("reduce", kReduceA)) << "today's default's point: its 2.0x counts";
  h100_gemv.default_algorithm = "tiled";  // a stand-in
  h100_gemv.default_params = ocltk::gemm_nt_family().find_algorithm("tiled")->defaults();
  EXPECT_EQ(sm90_gemv(fleet), complete("reduce", kReduceB));
}

// Whether an entry's default time is today's default's: the entry names today's built-in point
// (a parameter added since, at its default, left out), or names none and is taken at its word.
TEST(ProfileEntryDefault, CountsWhereItNamesTodaysDefaultOrNone) {
  const ocltk::BuiltinChoice today = ocltk::gemm_nt_family().builtin_point("lora_expand");
  ProfileEntry e;
  e.kernel = "gemm_nt";
  e.shape_class = "lora_expand";
  EXPECT_FALSE(ocltk::default_time_counts(e)) << "no time";
  e.default_time_ms = 2.0;
  EXPECT_TRUE(ocltk::default_time_counts(e)) << "a profile written before the point was";
  e.default_algorithm = today.algorithm;
  e.default_params = today.params;
  EXPECT_TRUE(ocltk::default_time_counts(e));
  const auto with = [&e](const std::string& algorithm, const ocltk::Params& params) {
    ProfileEntry other = e;
    other.default_algorithm = algorithm;
    other.default_params = params;
    return ocltk::default_time_counts(other);
  };
  ocltk::Params fewer = today.params;
  ASSERT_EQ(today.algorithm, "tiled");
  fewer.erase("VW");  // as a point written before VW was a parameter, at today's default
  EXPECT_TRUE(with(today.algorithm, fewer));
  ocltk::Params other = today.params;
  other["MWG"] = other.at("MWG") == 32 ? 64 : 32;
  EXPECT_FALSE(with(today.algorithm, other)) << "another point";
  EXPECT_FALSE(with("xgemm", ocltk::gemm_nt_family().find_algorithm("xgemm")->defaults())) << "a stand-in";
  EXPECT_FALSE(with("lanes_gone", {{"X", 1}})) << "an algorithm today's table lacks";
  ocltk::Params unknown = today.params;
  unknown["GONE"] = 1;
  EXPECT_FALSE(with(today.algorithm, unknown)) << "a parameter today's table lacks";
  e.shape_class = "huge";
  EXPECT_FALSE(ocltk::default_time_counts(e)) << "a class the kernel lacks";
}

// The first candidate with an entry serves, as Runtime::choose walks them.
std::pair<const ocltk::ProfileCandidate*, const ProfileEntry*> serving(const ocltk::ProfileSelection& selection,
                                                                       const std::string& shape_class) {
  for (const ocltk::ProfileCandidate& c : selection.candidates)
    if (const ProfileEntry* e = c.profile.find("gemm_nt", shape_class)) return {&c, e};
  return {nullptr, nullptr};
}

// Each step of device+driver -> device -> architecture -> vendor -> built-in, served from
// one database file on OCLTK_PROFILE_PATH (DeviceInfo is plain data: no device needed).
TEST_F(ProfileTest, FallbackChainRunsThroughOneDatabase) {
  const std::string db_file = file("fleet.yaml");
  ocltk::write_profile_database_atomically(db_file, ocltk::merge_profiles(three_device_fleet()));
  ScopedEnv env_path("OCLTK_PROFILE_PATH", db_file);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));

  auto device = [](const std::string& name, const std::string& vendor, const std::string& driver,
                   const std::string& architecture) {
    ocltk::DeviceInfo d;
    d.name = name;
    d.vendor = vendor;
    d.driver = driver;
    d.architecture = architecture;
    return d;
  };
  struct Step {
    ocltk::DeviceInfo device;
    std::string shape_class;
    MatchLevel level;  // kNone: built-in
    std::string section;
    ocltk::Params params;
  };
  const Step steps[] = {
      {device("NVIDIA H200", kNvidia, "580", "sm_90"), "large", MatchLevel::kExact, "NVIDIA H200 (driver 580)",
       complete("tiled", kTiledA)},
      // Newest member of that name first: the 580 one.
      {device("NVIDIA H200", kNvidia, "590", "sm_90"), "large", MatchLevel::kDevice, "NVIDIA H200 (driver 580)",
       complete("tiled", kTiledA)},
      // The H200 has no lora_expand entry, nor has sm_90: the vendor section serves.
      {device("NVIDIA H200", kNvidia, "580", "sm_90"), "lora_expand", MatchLevel::kVendor,
       "derived vendor NVIDIA Corporation", complete("tiled", kTiledC)},
      {device("NVIDIA GH200", kNvidia, "580", "sm_90"), "gemv", MatchLevel::kArchitecture,
       "derived architecture sm_90 (NVIDIA Corporation)", complete("reduce", kReduceA)},
      {device("NVIDIA L4", "NVIDIA CORPORATION", "580", "sm_89"), "gemv", MatchLevel::kVendor,
       "derived vendor NVIDIA Corporation", complete("reduce", kReduceB)},
      {device("NVIDIA L4", kNvidia, "580", "sm_89"), "small_batch", MatchLevel::kNone, "", {}},
      {device("AMD Instinct MI300X", "Advanced Micro Devices, Inc.", "3600", "gfx942"),
       "large",
       MatchLevel::kNone,
       "",
       {}},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.device.name + " " + step.device.driver + " " + step.shape_class);
    const ocltk::ProfileSelection selection = ocltk::find_profiles(step.device, ocltk::RuntimeOptions{});
    EXPECT_TRUE(selection.warnings.empty());
    for (std::size_t i = 1; i < selection.candidates.size(); ++i)
      EXPECT_LE(selection.candidates[i - 1].level, selection.candidates[i].level);
    for (const ocltk::ProfileCandidate& c : selection.candidates) {
      // A member of the database never stands in for another device.
      if (c.section.rfind("derived", 0) != 0) {
        EXPECT_EQ(c.profile.device.name, step.device.name);
      }
    }
    const auto [candidate, e] = serving(selection, step.shape_class);
    if (step.level == MatchLevel::kNone) {
      EXPECT_EQ(candidate, nullptr) << candidate->where();
      continue;
    }
    ASSERT_NE(candidate, nullptr);
    EXPECT_EQ(candidate->level, step.level);
    EXPECT_EQ(candidate->section, step.section);
    EXPECT_EQ(candidate->profile.path, db_file);
    EXPECT_EQ(candidate->where(), db_file + " [" + step.section + "]");
    EXPECT_EQ(candidate->tier, "OCLTK_PROFILE_PATH");
    EXPECT_EQ(e->params, step.params);
  }
}

// On the real device (PoCL reports no architecture): the device's own member, then the
// vendor section, then built-in, with the step and section in the choice and the log.
TEST_F(ProfileTest, RuntimeChoosesFromADatabaseAndNamesTheStep) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  const ocltk::DeviceInfo& here = runtime().device();
  Profile mine = profile_for_this_device({timed(entry("large", "tiled", kTiledA), 3.0, 1.2)});
  Profile sibling = profile_for_this_device({timed(entry("gemv", "reduce", kReduceA), 1.0, 1.5)});
  sibling.device.name = "another device of the same vendor";
  sibling.device.architecture = "";  // not known: the vendor section serves it
  const std::string db_file = file("fleet.yaml");
  ocltk::write_profile_database_atomically(db_file, ocltk::merge_profiles({mine, sibling}));
  // A schema-1 profile beside it keeps working, ranked by the same levels.
  Profile vendor_file = sibling;
  vendor_file.entries = {entry("lora_shrink", "reduce", kReduceB)};
  ocltk::write_profile_atomically(file("vendor.yaml"), vendor_file);

  ScopedEnv verbose("OCLTK_VERBOSE", "1");
  ::testing::internal::CaptureStderr();
  ocltk::Result<ocltk::Runtime> rt = open_with_profiles("", /*verbose=*/-1);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  const std::string member = ocltk::device_label(ocltk::profile_device_of(here));
  const std::string vendor = "derived vendor " + here.vendor;
  EXPECT_NE(log.find("ocltk: profile " + db_file + " [" + member + "] fits"), std::string::npos) << log;
  EXPECT_NE(log.find("ocltk: profile " + db_file + " [" + vendor + "] fits"), std::string::npos) << log;

  const ocltk::Choice large = rt->choose("gemm_nt", "large");
  EXPECT_EQ(large.level, MatchLevel::kExact);
  EXPECT_EQ(large.source, db_file);
  EXPECT_EQ(large.section, member);
  EXPECT_NE(large.describe().find("from " + db_file + " [" + member + "] (match: device+driver)"), std::string::npos)
      << large.describe();
  const ocltk::Choice gemv = rt->choose("gemm_nt", "gemv");
  EXPECT_EQ(gemv.level, MatchLevel::kVendor);
  EXPECT_EQ(gemv.params, complete("reduce", kReduceA));
  EXPECT_NE(gemv.describe().find("from " + db_file + " [" + vendor + "] (match: vendor)"), std::string::npos)
      << gemv.describe();
  const ocltk::Choice shrink = rt->choose("gemm_nt", "lora_shrink");
  EXPECT_EQ(shrink.source, file("vendor.yaml"));
  EXPECT_EQ(shrink.section, "");
  EXPECT_EQ(shrink.level, MatchLevel::kVendor);
  const ocltk::Choice expand = rt->choose("gemm_nt", "lora_expand");
  EXPECT_EQ(expand.source, "built-in");
  EXPECT_NE(expand.describe().find("from built-in (match: built-in)"), std::string::npos) << expand.describe();

  // The same database as an explicit profile: the same chain.
  ocltk::Result<ocltk::Runtime> explicit_rt = open_with_profiles(db_file);
  ASSERT_TRUE(explicit_rt.ok()) << explicit_rt.status().message();
  EXPECT_EQ(explicit_rt->choose("gemm_nt", "gemv").section, vendor);
  EXPECT_EQ(explicit_rt->choose("gemm_nt", "large").section, member);
}

TEST(ProfileDatabase, DiffNamesEachChangeAndIsEmptyForEqualFiles) {
  ocltk::ProfileFile a, b;
  a.path = "a.yaml";
  b.path = "b.yaml";
  a.profile = device_profile(
      "GPU", "V", "1", "", "2026-01-01",
      {timed(entry("large", "tiled", kTiledA), 4.0, 1.0), timed(entry("gemv", "reduce", kReduceA), 2.0, 1.0),
       timed(entry("lora_shrink", "reduce", kReduceA), 1.0, 1.0),
       timed(entry("small_batch", "tiled", kTiledA), 1.0, 1.0)});
  EXPECT_TRUE(ocltk::diff_profile_files(a, a).empty());
  b.profile = a.profile;
  b.profile.device.driver = "2";
  b.profile.entries[0] = timed(entry("large", "tiled", kTiledB), 2.0, 1.0);        // params and time
  b.profile.entries[1] = timed(entry("gemv", "tiled", kTiledA), 2.0, 1.0);         // algorithm, same time
  b.profile.entries[2].problem = {{"m", 4096}, {"n", 16}, {"k", 4096}};            // another problem
  b.profile.entries[3] = timed(entry("lora_expand", "tiled", kTiledA), 1.0, 1.0);  // small_batch only in a
  const std::vector<std::string> lines = ocltk::diff_profile_files(a, b);
  const std::vector<std::string> want = {
      "device: driver '1' -> '2'",
      "gemm_nt/large: tiled: MDIMC 1 -> 2, MWG 8 -> 16; 4 ms -> 2 ms (-50.0%), 536.871 -> 1073.74 GFLOP/s (+100.0%)",
      "gemm_nt/gemv: reduce {" + ocltk::format_params(complete("reduce", kReduceA)) + "} -> tiled {" +
          ocltk::format_params(complete("tiled", kTiledA)) + "}",
      "gemm_nt/lora_shrink: same choice; measured on different problems (k=1024 m=1024 n=1024 vs k=4096 m=4096 "
      "n=16)",
      "gemm_nt/small_batch: only in a.yaml: tiled {" + ocltk::format_params(complete("tiled", kTiledA)) + "}",
      "gemm_nt/lora_expand: only in b.yaml: tiled {" + ocltk::format_params(complete("tiled", kTiledA)) + "}",
  };
  EXPECT_EQ(lines, want);

  // Databases: sections matched by device + driver or group, named in each line.
  ocltk::ProfileFile da, db;
  da.schema = db.schema = ocltk::kProfileDatabaseSchema;
  da.path = "da.yaml";
  db.path = "db.yaml";
  std::vector<Profile> fleet = three_device_fleet();
  da.database = ocltk::merge_profiles(fleet);
  fleet[0].entries[0] = timed(entry("large", "tiled", kTiledB), 3.0, 1.5);  // H100 now agrees with the A100
  fleet.pop_back();                                                         // and the A100 is gone
  db.database = ocltk::merge_profiles(fleet);
  const std::vector<std::string> db_lines = ocltk::diff_profile_files(da, db);
  auto has = [&](const std::string& text) {
    return std::find(db_lines.begin(), db_lines.end(), text) != db_lines.end();
  };
  EXPECT_TRUE(has("NVIDIA H100 (driver 580): gemm_nt/large: tiled: MDIMC 1 -> 2, MWG 8 -> 16")) << db_lines.size();
  EXPECT_TRUE(has("NVIDIA A100 (driver 580): only in da.yaml (3 entries)"));
  EXPECT_TRUE(has("derived architecture sm_80 (nvidia corporation): only in da.yaml (3 entries)"));
  // sm_90 large is now a tie of one vote each: B gained 1.5x over the default on the H100,
  // A 1.4x on the H200, so B wins.
  EXPECT_TRUE(
      has("derived architecture sm_90 (NVIDIA Corporation): gemm_nt/large: tiled: MDIMC 1 -> 2, MWG 8 -> "
          "16; chosen by 2 of 2 -> 1 of 2"));
  // Vendor gemv is a tie too (H100: reduce A, 2.0x; H200: reduce B, 1.2x): A now wins.
  EXPECT_TRUE(has("derived vendor NVIDIA Corporation: gemm_nt/gemv: reduce: TR 2 -> 1; chosen by 2 of 3 -> 1 of 2"));
  EXPECT_EQ(db_lines.size(), 7u) << "H100 large, A100, sm_80, sm_90 large, vendor large, gemv and lora_expand";
  if (HasFailure())
    for (const std::string& line : db_lines) std::cerr << "  " << line << "\n";
}

// A changed provenance is a difference of its own, named with both sides; merge keeps it.
TEST(ProfileDatabase, DiffAndMergeKeepProvenance) {
  ocltk::ProfileFile a, b;
  a.path = "a.yaml";
  b.path = "b.yaml";
  a.profile = device_profile("GPU", "V", "1", "", "2026-01-01", {timed(entry("large", "tiled", kTiledA), 4.0, 1.0)});
  a.profile.entries[0].provenance.kind = "tuned";
  b.profile = a.profile;
  b.profile.entries[0].provenance = {"pinned", "results/gpu/bench-gemm_nt.json", "0123abc", ""};
  EXPECT_EQ(ocltk::diff_profile_files(a, b),
            std::vector<std::string>{"gemm_nt/large: same choice; provenance tuned -> pinned from "
                                     "results/gpu/bench-gemm_nt.json at 0123abc"});
  b.profile.entries[0].provenance = {};
  EXPECT_EQ(ocltk::diff_profile_files(a, b),
            std::vector<std::string>{"gemm_nt/large: same choice; provenance tuned -> none"});

  a.profile.entries[0].provenance = {"pinned", "results/gpu/bench-gemm_nt.json", "0123abc", "call 2"};
  a.profile.entries[0].default_algorithm = "tiled";  // and the default's point with it
  a.profile.entries[0].default_params = {{"MWG", 64}};
  const ocltk::ProfileDatabase db = ocltk::merge_profiles({a.profile});
  ASSERT_EQ(db.profiles.size(), 1u);
  EXPECT_EQ(db.profiles[0].entries.at(0).provenance, a.profile.entries[0].provenance);
  const ocltk::ProfileFile back = ocltk::parse_profile_file(ocltk::emit_profile_database(db), "db.yaml");
  const ProfileEntry& entry = back.database.profiles.at(0).entries.at(0);
  EXPECT_EQ(entry.provenance, a.profile.entries[0].provenance);
  EXPECT_EQ(entry.default_algorithm, "tiled");
  EXPECT_EQ(entry.default_params, (ocltk::Params{{"MWG", 64}}));
}

// Classes with several entries (tune --shapes) are compared entry by entry, matched by
// problem (input_bits 32 and none alike), each line naming its problem; entries of a problem
// only one file has are listed as such.
TEST(ProfileDatabase, DiffMatchesEntriesOfAClassByProblem) {
  ocltk::ProfileFile a, b;
  a.path = "a.yaml";
  b.path = "b.yaml";
  auto at = [](const ProfileEntry& e, const std::map<std::string, std::int64_t>& problem, double ms) {
    ProfileEntry t = timed(e, ms, 1.0);
    t.problem = problem;
    t.gflops = 2.0 * double(problem.at("m") * problem.at("n") * problem.at("k")) / (ms * 1e6);
    return t;
  };
  const std::map<std::string, std::int64_t> square{{"m", 4096}, {"n", 4096}, {"k", 4096}},
      cube{{"m", 2048}, {"n", 2048}, {"k", 2048}}, wide{{"m", 64}, {"n", 4096}, {"k", 4096}};
  a.profile = device_profile(
      "GPU", "V", "1", "", "2026-01-01",
      {at(entry("large", "tiled", kTiledA), square, 4.0), at(entry("large", "tiled", kTiledA), cube, 1.0),
       at(entry("large", "tiled", kTiledA), wide, 0.5)});
  b.profile = device_profile(
      "GPU", "V", "1", "", "2026-01-01",
      {at(entry("large", "tiled", kTiledA), square, 4.0), at(entry("large", "tiled", kTiledB), cube, 0.5)});
  const std::vector<std::string> lines = ocltk::diff_profile_files(a, b);
  const std::vector<std::string> want = {
      "gemm_nt/large (k=2048 m=2048 n=2048): tiled: MDIMC 1 -> 2, MWG 8 -> 16; 1 ms -> 0.5 ms (-50.0%), "
      "17179.9 -> 34359.7 GFLOP/s (+100.0%)",
      "gemm_nt/large (k=4096 m=64 n=4096): only in a.yaml: tiled {" + ocltk::format_params(complete("tiled", kTiledA)) +
          "}",
  };
  EXPECT_EQ(lines, want);
  EXPECT_TRUE(ocltk::diff_profile_files(b, b).empty());

  // Several entries in the second file only; a problem with input_bits 32 in one file and
  // without it in the other is the same problem (the times are compared, not the problems).
  std::map<std::string, std::int64_t> square32 = square;
  square32["input_bits"] = 32;
  a.profile.entries = {at(entry("gemv", "reduce", kReduceA), square32, 2.0)};
  b.profile.entries = {at(entry("gemv", "reduce", kReduceA), square, 1.0),
                       at(entry("gemv", "reduce", kReduceB), wide, 0.5)};
  const std::string wide_text = "k=4096 m=64 n=4096";
  EXPECT_EQ(ocltk::diff_profile_files(a, b),
            (std::vector<std::string>{
                "gemm_nt/gemv (input_bits=32 k=4096 m=4096 n=4096): same choice; 2 ms -> 1 ms (-50.0%), 68719.5 -> "
                "137439 GFLOP/s (+100.0%)",
                "gemm_nt/gemv (" + wide_text + "): only in b.yaml: reduce {" +
                    ocltk::format_params(complete("reduce", kReduceB)) + "}"}));
}

TEST(ProfileDatabase, MalformedDatabasesNameFileLineAndColumn) {
  const std::string head = "schema: 2\n";
  const std::string member =
      "  - device: {name: G, vendor: V, driver: '1'}\n"
      "    kernels:\n"
      "      gemm_nt:\n"
      "        large: {algorithm: tiled, params: {MWG: 32}}\n";
  ASSERT_NO_THROW((void)ocltk::parse_profile_file(head + "profiles:\n" + member, "ok.yaml"));
  struct Case {
    std::string what, text, where, named;
  };
  const Case cases[] = {
      {"profiles missing", head + "derived: []\n", "1:1", "profiles"},
      {"profiles not a list", head + "profiles: {a: 1}\n", "2:11", "list"},
      {"member twice", head + "profiles:\n" + member + member, "7:13", "listed twice"},
      {"member's bad parameter", head + "profiles:\n" + member.substr(0, member.find("32")) + "48}}\n", "6:49", "MWG"},
      {"unknown step", head + "profiles: []\nderived:\n  - {step: device, vendor: V, kernels: {}}\n", "4:12",
       "architecture or vendor"},
      {"architecture step without architecture",
       head + "profiles: []\nderived:\n  - {step: architecture, vendor: V, kernels: {}}\n", "4:5", "architecture"},
      {"derived bad value",
       head +
           "profiles: []\nderived:\n  - step: vendor\n    vendor: V\n    kernels: {gemm_nt: {gemv: {algorithm: reduce, "
           "params: {TR: 3}}}}\n",
       "6:64", "TR"},
      {"derived group twice",
       head + "profiles: []\nderived:\n  - {step: vendor, vendor: V, kernels: {}}\n  - {step: vendor, vendor: v, "
              "kernels: {}}\n",
       "5:5", "listed twice"},
      {"schema 3", "schema: 3\nprofiles: []\n", "1:9", "unsupported schema 3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    try {
      (void)ocltk::parse_profile_file(c.text, "db.yaml");
      ADD_FAILURE() << "accepted:\n" << c.text;
    } catch (const ocltk::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProfile);
      EXPECT_EQ(std::string(e.what()).rfind("db.yaml:" + c.where + ": ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos) << e.what();
    }
  }
  // read_profile (one device's profile) refuses a database and says what it is.
  try {
    (void)ocltk::parse_profile(head + "profiles:\n" + member, "db.yaml");
    ADD_FAILURE() << "read a database as a profile";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("db.yaml:1:9: a profile database", 0), 0u) << e.what();
  }
}

}  // namespace

// Counting nf4's rows as experts with rows and rows per such expert changes no choice among
// the shipped profiles' entries measured on even spreads (as the benches and the tuner spread
// rows) for rows spread evenly: at each such entry's geometry, 1 to 65536 rows and both input
// widths, every class's entry is the one the rows' distance alone chose (the first nearest, as
// Profile::find takes it), and so does counting the crowding of the longest segment, zero
// between even spreads. Entries that name `active` or `max_rows` were measured on routed,
// uneven segments (results/h200-2026-12-01e/ at 0d64363) and are meant to win where the total rows would
// not choose them, so they are left out of both sides.
TEST(ProfileChoice, ShippedNf4ChoicesForEvenSpreadsAreThoseOfTotalRows) {
  const auto lg = [](double v) { return std::log2(std::max(1.0, v)); };
  auto by_rows = [&](const std::map<std::string, std::int64_t>& a, const std::map<std::string, std::int64_t>& b) {
    double d = 4.0 * std::fabs(lg(double(ocltk::input_bits_of(a))) - lg(double(ocltk::input_bits_of(b))));
    for (const auto& [name, value] : a)
      if (const auto it = b.find(name); name != "input_bits" && it != b.end())
        d += std::fabs(lg(double(value)) - lg(double(it->second)));
    return d;
  };
  int launches = 0;
  int routed = 0;
  for (const char* name : {"nvidia-h200.yaml", "pocl-skylake-avx512.yaml"}) {
    Profile p = ocltk::read_profile(std::string(OCLTK_CONFIGS_DIR) + "/" + name);
    const auto is_routed = [](const ProfileEntry& e) {
      return e.problem.count("active") != 0 || e.problem.count("max_rows") != 0;
    };
    routed += int(std::count_if(p.entries.begin(), p.entries.end(), is_routed));
    p.entries.erase(std::remove_if(p.entries.begin(), p.entries.end(), is_routed), p.entries.end());
    for (const ProfileEntry& geometry : p.entries) {
      if (geometry.kernel.rfind("nf4_", 0) != 0 || geometry.problem.count("experts") == 0) continue;
      for (std::int64_t rows : {1, 2, 3, 5, 8, 12, 16, 24, 32, 64, 100, 128, 256, 512, 1000, 4096, 32768, 65536}) {
        for (std::int64_t bits : {16, 32}) {
          std::map<std::string, std::int64_t> launch = geometry.problem;
          launch["rows"] = rows;
          launch["input_bits"] = bits;
          const ProfileEntry* chosen = p.find(geometry.kernel, geometry.shape_class, &launch);
          const ProfileEntry* before = nullptr;
          double best = 0;
          for (const ProfileEntry& e : p.entries) {
            if (e.kernel != geometry.kernel || e.shape_class != geometry.shape_class) continue;
            const double d = by_rows(launch, e.problem);
            if (before == nullptr || d < best - 1e-9) {
              before = &e;
              best = d;
            }
          }
          EXPECT_EQ(chosen, before) << name << " " << geometry.kernel << "/" << geometry.shape_class << " rows " << rows
                                    << " bits " << bits;
          ++launches;
        }
      }
    }
  }
  EXPECT_GT(launches, 500);
  EXPECT_GT(routed, 0);  // the H200 profile's top-k entries (else this test checks less than it says)
}

// The H200 profile's entries for top-k routing (results/h200-2026-12-01e/ at 0d64363, call 7) serve routed
// launches at and near their problems, and even spreads keep theirs: fine-grained bf16 top-6 of
// 8 tokens (48 rows on 33 experts, at most 4 on one) takes `warps` at two tile rows, of 16
// tokens (96 rows on 54, at most 4) `tc`, as do 128 rows spread evenly (2 per expert); one row
// on each of 64 or 32 experts takes `warps` at one. Mixtral-like f32 at 32 rows takes `tc` at 8
// rows a pass for top-2 of 16 tokens (7 rows on one expert) and at 4 for 4 rows on each expert.
TEST(ProfileChoice, ShippedNf4TopKEntriesServeRoutedLaunches) {
  const Profile p = ocltk::read_profile(std::string(OCLTK_CONFIGS_DIR) + "/nvidia-h200.yaml");
  const auto chosen = [&](std::int64_t experts, std::int64_t rows, std::int64_t active, std::int64_t longest,
                          std::int64_t bits) {
    std::map<std::string, std::int64_t> launch = {
        {"block_size", 64}, {"experts", experts}, {"rows", rows}, {"input_bits", bits}};
    launch["n"] = experts == 64 ? 1408 : 14336;
    launch["k"] = experts == 64 ? 2048 : 4096;
    if (active > 0) launch["active"] = active;
    if (longest > 0) launch["max_rows"] = longest;
    const ProfileEntry* e = p.find("nf4_forward", "decode", &launch);
    if (e == nullptr) return std::string("none");
    std::string name = e->algorithm;
    for (const char* param : {"TR", "FR"})  // FR: f32 input's rows a pass (entries carry the default for bf16)
      if (const auto it = e->params.find(param); it != e->params.end() && (bits == 32 || param[0] == 'T'))
        name += std::string(" ") + param + " " + std::to_string(it->second);
    return name;
  };
  EXPECT_EQ(chosen(64, 48, 33, 4, 16), "warps TR 2");
  EXPECT_EQ(chosen(64, 50, 35, 4, 16), "warps TR 2");  // another draw of 8 tokens' top-6
  EXPECT_EQ(chosen(64, 96, 54, 4, 16), "tc");
  EXPECT_EQ(chosen(64, 128, -1, -1, 16), "tc");
  EXPECT_EQ(chosen(64, 128, 64, 2, 16), "tc") << "the even spread counted from its offsets";
  EXPECT_EQ(chosen(64, 64, -1, -1, 16), "warps TR 1");
  EXPECT_EQ(chosen(64, 32, 32, 1, 16), "warps TR 1") << "one row on each of 32: not the routed TR 2 entry";
  EXPECT_EQ(chosen(64, 48, 33, 4, 32), "warps TR 2");
  EXPECT_EQ(chosen(64, 32, 32, 1, 32), "warps TR 1");
  EXPECT_EQ(chosen(8, 32, 8, 7, 32), "tc FR 8") << "top-2 of 16 tokens";
  EXPECT_EQ(chosen(8, 32, 8, 4, 32), "tc FR 4") << "4 rows on each expert, counted";
  EXPECT_EQ(chosen(8, 32, -1, -1, 32), "tc FR 4") << "4 rows on each expert, taken as even";
  EXPECT_EQ(chosen(8, 16, 7, 4, 32), "tc FR 4") << "top-2 of 8 tokens";
}

// tune --shapes stores several entries per class, each with the problem it was tuned on;
// the runtime serves a launch from the one whose problem is nearest in log space.
TEST_F(ProfileTest, SeveralEntriesPerClassServeTheNearestProblem) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  ProfileEntry wide = entry("gemv", "reduce", {{"WGS", 128}});
  wide.problem = {{"m", 1}, {"n", 4096}, {"k", 4096}};
  ProfileEntry narrow = entry("gemv", "reduce", {{"WGS", 64}, {"RW", 1}, {"TR", 4}, {"VW", 4}});
  narrow.problem = {{"m", 1}, {"n", 50}, {"k", 40}};
  ocltk::write_profile_atomically(file("shapes.yaml"), profile_for_this_device({wide, narrow}));

  const ocltk::Profile p = ocltk::read_profile(file("shapes.yaml"));
  ASSERT_EQ(p.entries.size(), 2u);
  const std::map<std::string, std::int64_t> near_narrow{{"m", 1}, {"n", 64}, {"k", 32}};
  const std::map<std::string, std::int64_t> near_wide{{"m", 1}, {"n", 3000}, {"k", 8192}};
  EXPECT_EQ(p.find("gemm_nt", "gemv", &near_narrow)->params.at("WGS"), 64);
  EXPECT_EQ(p.find("gemm_nt", "gemv", &near_wide)->params.at("WGS"), 128);
  EXPECT_EQ(p.find("gemm_nt", "gemv")->params.at("WGS"), 128) << "without a problem: the first entry";
  EXPECT_DOUBLE_EQ(ocltk::problem_distance({{"m", 4}, {"n", 8}}, {{"m", 1}, {"n", 8}, {"k", 2}}), 2.0);
  // NF4's input width counts four times, and a side without it counts as 32 (f32): an
  // entry tuned on f32 (none written) is farther from a 16-bit launch than one pinned for
  // 16-bit input two rows-doublings away, and the other way round for an f32 launch.
  const std::map<std::string, std::int64_t> bf16_launch{{"rows", 8}, {"input_bits", 16}},
      f32_launch{{"rows", 8}, {"input_bits", 32}}, tuned{{"rows", 8}}, pinned16{{"rows", 32}, {"input_bits", 16}};
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(bf16_launch, tuned), 4.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(bf16_launch, pinned16), 2.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(f32_launch, tuned), 0.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(f32_launch, pinned16), 6.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(tuned, pinned16), 6.0) << "a launch without it counts as f32";
  // nf4's rows: the experts with rows (`active`, else min(rows, experts)) and the rows per
  // such expert. 8 rows crowded on 4 of 8 experts are nearer 16 rows spread evenly (2 per
  // expert) than 8 (1 per expert), which total rows alone would have chosen.
  const std::map<std::string, std::int64_t> even8{{"experts", 8}, {"rows", 8}}, even16{{"experts", 8}, {"rows", 16}},
      crowded8{{"experts", 8}, {"rows", 8}, {"active", 4}}, sparse8{{"experts", 64}, {"rows", 8}},
      even64{{"experts", 64}, {"rows", 64}};
  EXPECT_EQ(ocltk::active_experts_of(even16), 8);
  EXPECT_EQ(ocltk::active_experts_of(sparse8), 8);
  EXPECT_EQ(ocltk::active_experts_of(crowded8), 4);
  EXPECT_EQ(ocltk::active_experts_of({{"m", 8}}), -1);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(even8, even16), 1.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(sparse8, even64), 3.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(crowded8, even8), 2.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(crowded8, even16), 1.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(even8, {{"rows", 2}}), 2.0) << "no experts on one side: rows alone";
  // The most rows on one expert (`max_rows`, else ceil(rows / experts with rows), an even
  // spread's longest segment) counts as its ratio to that even spread's: zero between even
  // spreads, divisible or not, and log2 of how much longer a routed layout's longest is.
  const std::map<std::string, std::int64_t> even12{{"experts", 8}, {"rows", 12}},
      even12_counted{{"experts", 8}, {"rows", 12}, {"active", 8}, {"max_rows", 2}},
      routed32{{"experts", 8}, {"rows", 32}, {"active", 8}, {"max_rows", 7}}, even32{{"experts", 8}, {"rows", 32}},
      skewed32{{"experts", 8}, {"rows", 32}, {"active", 8}, {"max_rows", 16}};
  EXPECT_EQ(ocltk::max_expert_rows_of(even12), 2);
  EXPECT_EQ(ocltk::max_expert_rows_of(crowded8), 2);
  EXPECT_EQ(ocltk::max_expert_rows_of(routed32), 7);
  EXPECT_EQ(ocltk::max_expert_rows_of({{"m", 8}}), -1);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(even12, even12_counted), 0.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(even8, even12), std::log2(1.5)) << "even spreads: no crowding term";
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(routed32, even32), std::log2(7.0 / 4.0));
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(skewed32, even32), 2.0);
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(skewed32, routed32), std::log2(16.0 / 7.0));
  EXPECT_DOUBLE_EQ(ocltk::problem_distance(routed32, {{"experts", 8}, {"rows", 64}, {"max_rows", 14}}), 1.0)
      << "twice the rows and twice the longest segment: only the rows per expert differ";

  ocltk::Result<ocltk::Runtime> rt = open_with_profiles("", /*verbose=*/0);
  ASSERT_TRUE(rt.ok()) << rt.status().message();
  const ocltk::Choice small = rt->choose_gemm_nt({1, 50, 40});
  EXPECT_EQ(small.params.at("WGS"), 64);
  EXPECT_NE(small.describe().find("tuned on k=40 m=1 n=50"), std::string::npos) << small.describe();
  EXPECT_EQ(rt->choose_gemm_nt({1, 5000, 5000}).params.at("WGS"), 128);

  // A list entry must name its problem, and no two the same one.
  std::string text = ocltk::emit_profile(ocltk::read_profile(file("shapes.yaml")));
  const std::string no_problem = "        problem: {k: 40, m: 1, n: 50}\n";
  ASSERT_NE(text.find(no_problem), std::string::npos) << text;
  std::string missing = text;
  missing.erase(missing.find(no_problem), no_problem.size());
  EXPECT_THROW(ocltk::parse_profile(missing, "missing.yaml"), ocltk::Error);
  std::string twice = text;
  twice.replace(twice.find(no_problem), no_problem.size(), "        problem: {k: 4096, m: 1, n: 4096}\n");
  try {
    ocltk::parse_profile(twice, "twice.yaml");
    FAIL() << "two entries with one problem accepted";
  } catch (const ocltk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("same problem"), std::string::npos) << e.what();
  }
  // input_bits 32 is what a problem without it stands for: the same problem.
  EXPECT_TRUE(ocltk::same_problem({{"rows", 8}, {"input_bits", 32}}, {{"rows", 8}}));
  EXPECT_FALSE(ocltk::same_problem({{"rows", 8}, {"input_bits", 16}}, {{"rows", 8}}));
  EXPECT_FALSE(ocltk::same_problem({{"rows", 8}}, {{"rows", 16}}));
}

namespace {

// ---- Bounded reads, exclusions, the user's folders ----

// What every reader of a user-named file refuses: a device, a FIFO (which would block the
// read until a writer came), a folder and a file larger than its kind may be; each with
// one sentence naming the file and what it is, and without reading it.
TEST_F(ProfileTest, ReadersRefuseDevicesFifosFoldersAndOversizedFiles) {
  const std::string fifo = file("fifo.yaml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = file("big.yaml");
  {
    std::ofstream out(big);
    out << "schema: 1\n";
  }
  ocltk_test::fs::resize_file(big, ocltk::kMaxYamlFileBytes + 1);  // sparse: nothing written
  const std::pair<std::string, std::string> cases[] = {
      {"/dev/zero", "a character device"}, {fifo, "a FIFO"}, {dir_, "a folder"}, {big, "more than the 64 MiB"}};
  for (const auto& [name, what] : cases) {
    const std::string f = name;  // a structured binding cannot be captured (C++17)
    SCOPED_TRACE(f);
    for (const auto& read :
         std::vector<std::function<void()>>{[&] { ocltk::read_profile(f); }, [&] { ocltk::read_profile_file(f); }}) {
      try {
        read();
        ADD_FAILURE() << "read " << f;
      } catch (const ocltk::Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kIo);
        const std::string m = e.what();
        EXPECT_EQ(m.rfind(f + ": ", 0), 0u) << m;
        EXPECT_NE(m.find(what), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      }
    }
  }
  try {
    ocltk::read_profile(file("missing.yaml"));
    ADD_FAILURE() << "read a missing file";
  } catch (const ocltk::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("cannot open profile"), std::string::npos) << e.what();
  }
  // Within the limit a file reads whole, and a runtime given such a file as its profile
  // fails to open with that sentence rather than hanging or allocating.
  write_text(file("small.txt"), "line one\nline two\n");
  EXPECT_EQ(ocltk::read_bounded_file(file("small.txt"), 64, "note"), "line one\nline two\n");
  EXPECT_THROW(ocltk::read_bounded_file(file("small.txt"), 8, "note"), ocltk::Error);
  const ocltk::Result<ocltk::Runtime> rt = open_with_profiles(fifo);
  ASSERT_FALSE(rt.ok());
  EXPECT_NE(rt.status().message().find("a FIFO"), std::string::npos) << rt.status().message();
}

TEST(AlgorithmExclusions, ParseNamesAlgorithmsInEveryFamilyOrOne) {
  const ocltk::AlgorithmExclusions all_stream = ocltk::AlgorithmExclusions::parse(" stream , nf4_backward:tc");
  for (const char* kernel : {"nf4_forward", "nf4_backward"}) EXPECT_TRUE(all_stream.excludes(kernel, "stream"));
  EXPECT_TRUE(all_stream.excludes("nf4_backward", "tc"));
  EXPECT_FALSE(all_stream.excludes("nf4_forward", "tc"));
  EXPECT_FALSE(all_stream.excludes("gemm_nt", "tc"));
  EXPECT_FALSE(all_stream.excludes("nf4_backward", "tiled"));
  EXPECT_EQ(all_stream.describe(), "nf4_backward:stream, nf4_backward:tc, nf4_forward:stream");
  const ocltk::AlgorithmExclusions one = ocltk::AlgorithmExclusions::parse("gemm_nt:tc,lora_apply:fused");
  EXPECT_TRUE(one.excludes("gemm_nt", "tc"));
  EXPECT_FALSE(one.excludes("nf4_forward", "tc"));
  EXPECT_TRUE(one.excludes("lora_apply", "fused"));
  EXPECT_TRUE(ocltk::AlgorithmExclusions::parse("").empty());
  EXPECT_TRUE(ocltk::AlgorithmExclusions::parse(" , ").empty());
  // "tiled" is lora_shrink's and lora_expand's only algorithm: removing it everywhere leaves
  // them nothing, as removing all four of gemm_nt's does.
  for (const char* bad : {"tcc", "gemm_nt:fused", "nosuch:tiled", "tiled", "tiled,reduce,xgemm,tc"}) {
    SCOPED_TRACE(bad);
    try {
      ocltk::AlgorithmExclusions::parse(bad, "OCLTK_EXCLUDE_ALGORITHMS");
      ADD_FAILURE() << "accepted";
    } catch (const ocltk::Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()).rfind("OCLTK_EXCLUDE_ALGORITHMS", 0), 0u) << e.what();
    }
  }
}

// An excluded algorithm is never chosen: its profile entries are passed over to the next
// candidate or the built-in default, and a class whose built-in algorithm is excluded falls
// back to its family's first algorithm that is not. A bad list fails open() naming it.
TEST_F(ProfileTest, ExcludedAlgorithmsAreNeverChosen) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  ocltk::write_profile_atomically(
      file("exact.yaml"), profile_for_this_device({entry("large", "xgemm", {}), entry("gemv", "reduce", {{"WGS", 64}}),
                                                   entry("lora_expand", "tiled", {{"MWG", 8}, {"MDIMC", 1}})}));
  Profile vendor = profile_for_this_device({entry("large", "tiled", {{"MWG", 32}, {"MDIMC", 4}})});
  vendor.device.name = "another device of the same vendor";
  vendor.device.architecture = "";  // not known: the vendor step
  ocltk::write_profile_atomically(file("vendor.yaml"), vendor);

  for (const bool from_env : {false, true}) {
    SCOPED_TRACE(from_env ? "from OCLTK_EXCLUDE_ALGORITHMS" : "from RuntimeOptions");
    ScopedEnv exclude("OCLTK_EXCLUDE_ALGORITHMS",
                      from_env ? std::optional<std::string>("xgemm, gemm_nt:reduce") : std::nullopt);
    ocltk::RuntimeOptions options = ocltk_test::test_runtime_options(cache_dir());
    options.use_profiles = true;
    if (!from_env) options.exclude_algorithms = "xgemm,gemm_nt:reduce";
    ocltk::Result<ocltk::Runtime> rt = ocltk::Runtime::open(options);
    ASSERT_TRUE(rt.ok()) << rt.status().message();
    EXPECT_TRUE(rt->excluded_algorithms().excludes("gemm_nt", "xgemm"));
    const ocltk::Choice large = rt->choose("gemm_nt", "large");  // the exact profile's xgemm passed over
    EXPECT_EQ(large.algorithm, "tiled");
    EXPECT_EQ(large.params.at("MWG"), 32);
    EXPECT_EQ(large.source, file("vendor.yaml"));
    const ocltk::Choice gemv = rt->choose("gemm_nt", "gemv");  // reduce is gemv's built-in too
    EXPECT_EQ(gemv.algorithm, "tiled");
    EXPECT_EQ(gemv.source, "built-in");
    EXPECT_EQ(gemv.params, ocltk::gemm_nt_family().find_algorithm("tiled")->defaults());
    EXPECT_EQ(rt->choose("gemm_nt", "lora_expand").params.at("MWG"), 8);  // tiled is not excluded
    for (const ProfileCandidate& c : rt->profiles().candidates)
      for (const ProfileEntry& e : c.profile.entries) EXPECT_NE(e.algorithm, "xgemm") << c.where();
  }
  ocltk::RuntimeOptions bad = ocltk_test::test_runtime_options(cache_dir());
  ScopedEnv exclude("OCLTK_EXCLUDE_ALGORITHMS", "tiled,nosuch");
  const ocltk::Result<ocltk::Runtime> refused = ocltk::Runtime::open(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("'nosuch'"), std::string::npos) << refused.status().message();
  bad.exclude_algorithms = "-";  // the caller's word over the environment's
  EXPECT_TRUE(ocltk::Runtime::open(bad).ok());
}

// The user's folders follow the XDG base directory spec: an absolute XDG_CONFIG_HOME or
// XDG_CACHE_HOME wins, a relative one is ignored, and without HOME the password database's
// home folder stands in for it (where a login shell takes HOME from).
TEST(UserFolders, FollowXdgAndThePasswordDatabaseWithoutHome) {
  const passwd* pw = ::getpwuid(::getuid());
  const std::string pw_home = pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "";
  ScopedEnv no_cache_dir("OCLTK_CACHE_DIR", std::nullopt);
  {
    ScopedEnv config("XDG_CONFIG_HOME", "/tmp/xdg-config");
    ScopedEnv cache("XDG_CACHE_HOME", "/tmp/xdg-cache");
    EXPECT_EQ(ocltk::user_profile_dir(), "/tmp/xdg-config/ocltk/profiles");
    EXPECT_EQ(ocltk::ProgramCache::default_directory(), "/tmp/xdg-cache/ocltk");
  }
  {
    ScopedEnv config("XDG_CONFIG_HOME", "relative/config");
    ScopedEnv cache("XDG_CACHE_HOME", "");
    ScopedEnv home("HOME", "/tmp/some-home");
    EXPECT_EQ(ocltk::user_profile_dir(), "/tmp/some-home/.config/ocltk/profiles");
    EXPECT_EQ(ocltk::ProgramCache::default_directory(), "/tmp/some-home/.cache/ocltk");
  }
  ScopedEnv config("XDG_CONFIG_HOME", std::nullopt);
  ScopedEnv cache("XDG_CACHE_HOME", std::nullopt);
  ScopedEnv home("HOME", std::nullopt);
  EXPECT_EQ(ocltk::detail::home_dir(), pw_home);
  if (pw_home.empty()) {
    EXPECT_EQ(ocltk::user_profile_dir(), "");
    EXPECT_EQ(ocltk::ProgramCache::default_directory(), "-");
  } else {
    EXPECT_EQ(ocltk::user_profile_dir(), pw_home + "/.config/ocltk/profiles");
    EXPECT_EQ(ocltk::ProgramCache::default_directory(), pw_home + "/.cache/ocltk");
  }
}

}  // namespace

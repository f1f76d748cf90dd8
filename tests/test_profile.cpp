// Profiles: YAML round trip, atomic writes, rejections with file:line:column, match
// levels, and the fallback chain from explicit path to built-in defaults.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "fixture.hpp"

namespace {

using ocltk::ErrorCode;
using ocltk::MatchLevel;
using ocltk::Profile;
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
  p.entries[1].time_ms = 312.5;
  p.entries[1].gflops = 6.87195;

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
  }
  EXPECT_EQ(q.find("gemm_nt", "small_batch"), nullptr);
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
      "      params: {TR: 2}\n";
  ASSERT_NO_THROW((void)ocltk::parse_profile(good, "good.yaml"));

  struct Case {
    std::string what, from, to;  // replace `from` by `to` in the good text
    std::string at;              // the token whose position the message must give
    std::string named;           // a word the message must contain
  };
  const Case cases[] = {
      {"wrong schema", "schema: 1", "schema: 2", "2", "schema"},
      {"unknown kernel", "  gemm_nt:", "  gemm_tn:", "gemm_tn", "gemm_tn"},
      {"unknown class", "    large:", "    huge:", "huge", "huge"},
      {"unknown algorithm", "algorithm: tiled", "algorithm: tiles", "tiles", "tiles"},
      {"unknown parameter", "{MWG: 32, MDIMC: 4}", "{MWG: 32, FOO: 4}", "FOO", "FOO"},
      {"value outside the table", "{MWG: 32, MDIMC: 4}", "{MWG: 48, MDIMC: 4}", "48", "MWG"},
      {"value outside the table (reduce)", "{TR: 2}", "{TR: 3}", "3}", "TR"},
      {"constraint violated", "{MWG: 32, MDIMC: 4}", "{MWG: 128, MDIMC: 8}", "{MWG: 128", "MWG / MDIMC"},
      {"missing device name", "  name: \"Some Device\"\n", "", "device:", "name"},
      {"non-integer parameter", "{TR: 2}", "{TR: two}", "two", "TR"},
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
  same_arch.architecture = "gfx942";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kVendor);
  same_arch.architecture = "";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kVendor);
  same_arch.vendor = "";
  EXPECT_EQ(ocltk::match_level(same_arch, gpu), MatchLevel::kNone);
  EXPECT_STREQ(ocltk::to_string(MatchLevel::kNone), "none");
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

TEST_F(ProfileTest, ProfileForAnotherDeviceIsNotUsed) {
  ScopedEnv env_path("OCLTK_PROFILE_PATH", dir_);
  ScopedEnv xdg("XDG_CONFIG_HOME", file("empty_xdg"));
  Profile other = profile_for_this_device({entry("large", "tiled", {{"MWG", 8}, {"MDIMC", 1}})});
  other.device.name = "Some GPU";
  other.device.vendor = "Some Vendor";
  other.device.driver = "1.0";
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

}  // namespace

// End-to-end tests of the `ocltk` command: the real executable runs as a child process
// in a private folder, with a private program cache and config folder, and each test
// checks its exit status, its stdout and stderr, and what it left on disk.
//
// The contract under test (cli/main.cpp, README "Command line"): exit 0 on success, 2 on
// bad usage or input with one line on stderr naming the thing at fault, 1 on a device or
// OpenCL failure; on any error nothing is written (the --out file keeps its bytes and no
// temporary file is left behind).
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "fixture.hpp"
#include "npy.hpp"
#include "ocltk/bounded_file.hpp"
#include "ocltk/ocltk.hpp"

#ifndef OCLTK_CLI_PATH
#error "OCLTK_CLI_PATH must name the ocltk executable (tests/CMakeLists.txt sets it)"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
using ocltk_test::make_temp_dir;

// ---------------------------------------------------------------------------------------
// Host helpers

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// The lines of a captured stream, without their newlines (a final unterminated line counts).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// Every file under `dir` (relative name -> bytes): compared before and after a failing
// run, it shows both a modified --out and a stray temporary file.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[fs::relative(e.path(), dir).string()] = read_text(e.path());
  return files;
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : snapshot(dir)) names.insert(entry.first);
  return names;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return "{" + out + "}";
}

void write_matrix(const fs::path& path, std::size_t rows, std::size_t cols, const std::vector<float>& values) {
  ocltk::npy::Array a;
  a.dtype = ocltk::npy::DType::f32;
  a.shape = {rows, cols};
  a.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  ocltk::npy::write_atomically(path.string(), a);
}

std::vector<float> read_matrix(const fs::path& path, std::size_t rows, std::size_t cols) {
  const ocltk::npy::Array a = ocltk::npy::read(path.string());
  EXPECT_EQ(a.dtype, ocltk::npy::DType::f32) << path;
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{rows, cols})) << path;
  std::vector<float> values(a.count());
  if (a.dtype == ocltk::npy::DType::f32) std::memcpy(values.data(), a.data.data(), values.size() * sizeof(float));
  return values;
}

// A version 1.0 .npy file with a hand-written header dict, padded as numpy pads it.
std::string handmade_npy(const std::string& dict, const std::string& payload) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  return bytes + header + payload;
}

// The device a child opens by default (OCLTK_DEVICE is unset in its environment, so here too).
const ocltk::DeviceInfo& default_device() {
  static const ocltk::DeviceInfo device = [] {
    ocltk_test::ScopedEnv no_selector("OCLTK_DEVICE", std::nullopt);
    return ocltk::select_device("");
  }();
  return device;
}

// A valid profile for `device` with one gemm_nt entry per (class, algorithm, params).
struct EntrySpec {
  std::string shape_class, algorithm;
  ocltk::Params params;
};
std::string profile_text(const ocltk::ProfileDevice& device, const std::vector<EntrySpec>& entries) {
  ocltk::Profile p;
  p.device = device;
  p.tuner_version = ocltk::version();
  p.date = "2026-01-01T00:00:00Z";
  for (const EntrySpec& spec : entries) {
    ocltk::ProfileEntry e;
    e.kernel = "gemm_nt";
    e.shape_class = spec.shape_class;
    e.algorithm = spec.algorithm;
    e.params = spec.params;
    e.time_ms = 1.5;
    e.gflops = 2.5;
    e.default_time_ms = 3.0;
    p.entries.push_back(e);
  }
  return ocltk::emit_profile(p);
}

// A legal tiled point for lora_expand (7x65x33 falls in that class) that differs from the
// built-in default (MWG 64, MDIMC 8, USE_LOCAL 1), so a run that ignored the profile would
// not log it.
const ocltk::Params kTiledPoint = {{"KWG", 16}, {"MDIMC", 2},     {"MWG", 8}, {"NDIMC", 4},
                                   {"NWG", 16}, {"USE_LOCAL", 0}, {"VW", 1}};

// Malformed YAML whose fault sits at line 4, column 12 (the second ':' of the vendor line).
const char* const kMalformedProfile =
    "schema: 1\n"
    "device:\n"
    "  name: x\n"
    "  vendor: y: z\n"
    "kernels: {}\n";

// Well-formed YAML whose MWG (line 9, column 21: the value 7) is outside the legal values.
const char* const kIllegalParamProfile =
    "schema: 1\n"
    "device:\n"
    "  name: x\n"
    "  vendor: y\n"
    "kernels:\n"
    "  gemm_nt:\n"
    "    lora_expand:\n"
    "      algorithm: tiled\n"
    "      params: {MWG: 7, NWG: 16}\n";

// ---------------------------------------------------------------------------------------
// Running the command

struct CliResult {
  int status = -1;  // exit status; 128 + signal when killed
  std::string out, err;

  std::string describe() const {
    return "exit status " + std::to_string(status) + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err +
           "--------------";
  }
};

// Variables the child never inherits from the test's environment: they would point it at
// the user's profiles, device or cache.
const char* const kScrubbed[] = {"OCLTK_PROFILE_PATH", "OCLTK_DEVICE", "OCLTK_CACHE_DIR", "OCLTK_VERBOSE",
                                 "XDG_CONFIG_HOME"};

// One program-cache folder for the whole binary, so each kernel variant is built once;
// removed after the last test.
std::string& suite_cache_dir() {
  static std::string dir;
  return dir;
}

class SuiteCacheEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (suite_cache_dir().empty()) return;
    std::error_code ec;
    fs::remove_all(suite_cache_dir(), ec);
  }
};
::testing::Environment* const kSuiteCacheEnvironment = ::testing::AddGlobalTestEnvironment(new SuiteCacheEnvironment);

// What a child `ocltk` runs under besides its environment.
struct ChildLimits {
  // > 0: the largest file the child may write (RLIMIT_FSIZE, SIGXFSZ ignored): a write past
  // it fails with EFBIG, as on a full disk.
  long file_size_limit = 0;
  // >= 0: the user (and group) id the child runs as (the test must run as root).
  int uid = -1;
};

class CliTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (suite_cache_dir().empty()) suite_cache_dir() = make_temp_dir("cli_cache");
  }

 protected:
  void SetUp() override {
    root_ = make_temp_dir("cli");
    work_ = root_ / "work";
    config_ = root_ / "config";
    fs::create_directories(work_);
    fs::create_directories(config_);
    seed_ = ocltk_test::test_seed();
    rng_.seed(seed_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "  (random seed " << seed_ << ", replay with OCLTK_TEST_SEED)\n";
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Runs `ocltk ARGS...` in work_ with a scrubbed environment plus `env` (nullopt unsets).
  // interrupt_after > 0: sends SIGINT to the command that many seconds after it started.
  CliResult run_cli(const std::vector<std::string>& args,
                    const std::map<std::string, std::optional<std::string>>& env = {}, double interrupt_after = 0,
                    const ChildLimits& limits = {}) const {
    std::map<std::string, std::optional<std::string>> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      const std::size_t eq = entry.find('=');
      if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const char* name : kScrubbed) vars.erase(name);
    vars["OCLTK_CACHE_DIR"] = suite_cache_dir();
    vars["XDG_CONFIG_HOME"] = config_.string();
    for (const auto& [name, value] : env) vars[name] = value;

    // Everything the child needs is prepared before fork: between fork and exec it only
    // makes async-signal-safe calls.
    std::vector<std::string> env_strings, argv_strings = {OCLTK_CLI_PATH};
    for (const auto& [name, value] : vars)
      if (value) env_strings.push_back(name + "=" + *value);
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> envp, argv;
    for (std::string& s : env_strings) envp.push_back(s.data());
    for (std::string& s : argv_strings) argv.push_back(s.data());
    envp.push_back(nullptr);
    argv.push_back(nullptr);
    static int calls = 0;
    const std::string out_path = (root_ / ("stdout." + std::to_string(calls))).string();
    const std::string err_path = (root_ / ("stderr." + std::to_string(calls++))).string();
    const std::string cwd = work_.string();

    CliResult result;
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork failed";
      return result;
    }
    if (pid == 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
          ::chdir(cwd.c_str()) != 0)
        ::_exit(126);
      if (limits.file_size_limit > 0) {
        const rlimit fsize{rlim_t(limits.file_size_limit), rlim_t(limits.file_size_limit)};
        if (::setrlimit(RLIMIT_FSIZE, &fsize) != 0) ::_exit(126);
        ::signal(SIGXFSZ, SIG_IGN);  // kept across exec: the write fails with EFBIG instead
      }
      if (limits.uid >= 0 &&
          (::setgroups(0, nullptr) != 0 || ::setgid(gid_t(limits.uid)) != 0 || ::setuid(uid_t(limits.uid)) != 0))
        ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    int status = 0;
    if (interrupt_after > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(interrupt_after));
      ::kill(pid, SIGINT);
    }
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        ADD_FAILURE() << "waitpid failed";
        return result;
      }
    }
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = read_text(out_path);
    result.err = read_text(err_path);
    std::error_code ec;
    fs::remove(out_path, ec);
    fs::remove(err_path, ec);
    return result;
  }

  fs::path path(const std::string& name) const { return work_ / name; }

  std::vector<float> random_floats(std::size_t count) { return ocltk_test::random_floats(rng_, count); }

  fs::path root_, work_, config_;
  std::uint32_t seed_ = 0;
  std::mt19937 rng_;
};

// Exit 2, exactly one line on stderr ("ocltk: ...") containing each of `needles`.
::testing::AssertionResult is_usage_error(const CliResult& r, const std::vector<std::string>& needles) {
  const std::vector<std::string> lines = lines_of(r.err);
  if (r.status != 2) return ::testing::AssertionFailure() << "want exit status 2; " << r.describe();
  if (lines.size() != 1)
    return ::testing::AssertionFailure() << "want exactly one line on stderr, got " << lines.size() << "; "
                                         << r.describe();
  if (lines[0].rfind("ocltk: ", 0) != 0)
    return ::testing::AssertionFailure() << "the error line should start with 'ocltk: '; " << r.describe();
  for (const std::string& needle : needles)
    if (lines[0].find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "the error line should name '" << needle << "'; " << r.describe();
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------------------
// run gemm-nt: results

class CliRunGemmNt : public CliTest {
 protected:
  struct Operands {
    ocltk::GemmProblem problem;
    std::vector<float> a, b, c_before;
  };

  // Fresh A (MxK), B (NxK) in work_; C.npy holds `c_before`: NaN unless accumulating, so
  // an element the run does not write cannot pass.
  Operands write_operands(std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate) {
    Operands o;
    o.problem = {m, n, k};
    o.a = random_floats(std::size_t(m * k));
    o.b = random_floats(std::size_t(n * k));
    o.c_before = random_floats(std::size_t(m * n));
    if (!accumulate) ocltk_test::poison(o.c_before, 0, m, n, std::size_t(n));
    write_matrix(path("A.npy"), std::size_t(m), std::size_t(k), o.a);
    write_matrix(path("B.npy"), std::size_t(n), std::size_t(k), o.b);
    write_matrix(path("C.npy"), std::size_t(m), std::size_t(n), o.c_before);
    return o;
  }

  // The run succeeded, C.npy matches the double reference, and only A, B, C are in work_.
  void expect_correct(const CliResult& r, const Operands& o, float alpha, bool accumulate) {
    EXPECT_EQ(r.status, 0) << r.describe();
    const ocltk::GemmProblem& p = o.problem;
    const std::vector<float> c_after = read_matrix(path("C.npy"), std::size_t(p.m), std::size_t(p.n));
    EXPECT_TRUE(ocltk_test::gemm_nt_matches(p, alpha, accumulate, o.a.data(), std::size_t(p.k), o.b.data(),
                                            std::size_t(p.k), o.c_before, c_after, 0, std::size_t(p.n)));
    EXPECT_EQ(names_in(work_), (std::set<std::string>{"A.npy", "B.npy", "C.npy"}))
        << "stray files: " << joined(names_in(work_));
  }

  static std::vector<std::string> run_args(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(CliRunGemmNt, OddShapesMatchTheReference) {
  // 7x65x33 is a lora_expand launch (tiled), 1x127x7 a gemv (reduce): both leave partial
  // tiles in every dimension.
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{7, 65, 33}, {1, 127, 7}}) {
    SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const Operands o = write_operands(m, n, k, false);
    const CliResult r = run_cli(run_args());
    expect_correct(r, o, 1.0f, false);
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliRunGemmNt, AlphaScalesTheProduct) {
  const Operands o = write_operands(7, 65, 33, false);
  expect_correct(run_cli(run_args({"--alpha", "-0.75"})), o, -0.75f, false);
  const Operands o2 = write_operands(7, 65, 33, false);
  expect_correct(run_cli(run_args({"--alpha=2.5"})), o2, 2.5f, false);
}

TEST_F(CliRunGemmNt, AccumulateAddsToTheExistingOut) {
  const Operands o = write_operands(7, 65, 33, true);
  expect_correct(run_cli(run_args({"--accumulate", "--alpha", "0.5"})), o, 0.5f, true);
}

// --precision reaches the runtime: a large f32 problem is filed under large_tf32 or
// large_tf32x3, which no profile here has, so large's choice serves (the verbose line says
// so) and the result meets the f32 bound whatever the mode allowed.
TEST_F(CliRunGemmNt, PrecisionModesChooseTheirClass) {
  for (const std::string mode : {"exact", "tf32", "tf32x3"}) {
    SCOPED_TRACE("--precision " + mode);
    const Operands o = write_operands(70, 80, 72, false);
    const CliResult r = run_cli(run_args({"--precision", mode, "--alpha", "-0.5"}), {{"OCLTK_VERBOSE", "1"}});
    expect_correct(r, o, -0.5f, false);
    const bool exact = mode == "exact";
    EXPECT_EQ(r.err.find("no profile entry for large_" + mode) != std::string::npos, !exact) << r.describe();
    EXPECT_NE(r.err.find("gemm_nt/large -> "), std::string::npos) << r.describe();
  }
}

TEST_F(CliRunGemmNt, DeviceByIndexAndByNameSubstring) {
  // PoCL names its CPU device "<driver>-<cpu>-..." ("pthread-skylake-..."); the selector
  // is its first component, upper-cased to check that matching ignores case.
  const std::string name = default_device().name;
  std::string selector = name.substr(0, name.find('-'));
  std::transform(selector.begin(), selector.end(), selector.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const std::string& sel : {std::to_string(default_device().index), selector}) {
    SCOPED_TRACE("--device " + sel);
    const Operands o = write_operands(7, 65, 33, false);
    expect_correct(run_cli(run_args({"--device", sel})), o, 1.0f, false);
  }
}

TEST_F(CliRunGemmNt, ExplicitProfileForThisDeviceServes) {
  write_text(root_ / "mine.yaml",
             profile_text(ocltk::profile_device_of(default_device()), {{"lora_expand", "tiled", kTiledPoint}}));
  const Operands o = write_operands(7, 65, 33, false);
  // OCLTK_VERBOSE=1 logs the choice, so the test sees that the profile's entry served.
  const CliResult r = run_cli(run_args({"--profile", (root_ / "mine.yaml").string()}), {{"OCLTK_VERBOSE", "1"}});
  expect_correct(r, o, 1.0f, false);
  EXPECT_NE(r.err.find("gemm_nt/lora_expand -> tiled {" + ocltk::format_params(kTiledPoint) + "}"), std::string::npos)
      << r.describe();
  EXPECT_NE(r.err.find("mine.yaml"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.describe();
}

TEST_F(CliRunGemmNt, ProfileForAnotherDeviceIsIgnoredWithAWarning) {
  ocltk::ProfileDevice other;
  other.name = "NVIDIA H200";
  other.vendor = "NVIDIA Corporation";  // another vendor too, so no match level applies
  other.driver = "580.159.03";
  other.platform = "NVIDIA CUDA";
  other.architecture = "sm_90";
  other.type = "gpu";
  write_text(path("h200.yaml"), profile_text(other, {{"lora_expand", "tiled", kTiledPoint}}));
  const Operands o = write_operands(7, 65, 33, false);
  const CliResult r = run_cli(run_args({"--profile", "h200.yaml"}));
  EXPECT_EQ(r.status, 0) << r.describe();
  const std::vector<std::string> err = lines_of(r.err);
  ASSERT_EQ(err.size(), 1u) << "want one warning line; " << r.describe();
  EXPECT_NE(err[0].find("warning"), std::string::npos) << r.describe();
  EXPECT_NE(err[0].find("h200.yaml"), std::string::npos) << r.describe();
  EXPECT_NE(err[0].find("NVIDIA H200"), std::string::npos) << r.describe();
  const std::vector<float> c_after = read_matrix(path("C.npy"), 7, 65);
  EXPECT_TRUE(
      ocltk_test::gemm_nt_matches(o.problem, 1.0f, false, o.a.data(), 33, o.b.data(), 33, o.c_before, c_after, 0, 65));
  EXPECT_EQ(names_in(work_), (std::set<std::string>{"A.npy", "B.npy", "C.npy", "h200.yaml"}));
}

// ---------------------------------------------------------------------------------------
// run gemm-nt: bad input. Each case starts from valid A (7x33), B (65x33) and a C.npy of
// the right shape holding random values, breaks one thing, and expects exit 2, one
// stderr line naming the culprit, nothing on stdout, and every file in the folder
// byte-identical afterwards with no file added.

struct BadRunCase {
  std::string name;
  std::function<void(const fs::path& dir)> damage;  // breaks the valid setup
  std::vector<std::string> args;                    // after "run gemm-nt"
  std::vector<std::string> needles;                 // what the error line must name
};

void PrintTo(const BadRunCase& c, std::ostream* os) { *os << c.name; }

class CliRunRejects : public CliTest, public ::testing::WithParamInterface<BadRunCase> {};

TEST_P(CliRunRejects, WithOneLineAndLeavesTheFolderAsItWas) {
  const BadRunCase& c = GetParam();
  write_matrix(path("A.npy"), 7, 33, random_floats(7 * 33));
  write_matrix(path("B.npy"), 65, 33, random_floats(65 * 33));
  write_matrix(path("C.npy"), 7, 65, random_floats(7 * 65));
  c.damage(work_);
  const std::map<std::string, std::string> before = snapshot(work_);

  std::vector<std::string> args = {"run", "gemm-nt"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const CliResult r = run_cli(args);

  EXPECT_TRUE(is_usage_error(r, c.needles));
  EXPECT_EQ(r.out, "");
  const std::map<std::string, std::string> after = snapshot(work_);
  std::set<std::string> names_before;
  for (const auto& entry : before) names_before.insert(entry.first);
  EXPECT_EQ(names_in(work_), names_before) << "files added or removed";
  for (const auto& [name, bytes] : before) {
    const auto it = after.find(name);
    if (it != after.end()) {
      EXPECT_TRUE(it->second == bytes) << name << " was modified";
    }
  }
}

const std::vector<std::string> kAbc = {"--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy"};

std::vector<std::string> abc_and(std::vector<std::string> extra) {
  std::vector<std::string> args = kAbc;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void keep(const fs::path&) {}

std::string f32_payload(std::size_t count) { return std::string(count * 4, '\x3f'); }

const BadRunCase kBadRunCases[] = {
    {"k_mismatch",
     [](const fs::path& d) { write_matrix(d / "B.npy", 65, 34, std::vector<float>(65 * 34, 0.25f)); },
     kAbc,
     {"B.npy", "--rhs", "33", "(65, 34)"}},
    {"float64_input",
     [](const fs::path& d) {
       ocltk::npy::Array a;
       a.dtype = ocltk::npy::DType::f64;
       a.shape = {7, 33};
       a.data.assign(7 * 33 * 8, 0);
       ocltk::npy::write_atomically((d / "A.npy").string(), a);
     },
     kAbc,
     {"A.npy", "float64"}},
    {"fortran_order",
     [](const fs::path& d) {
       write_text(d / "A.npy",
                  handmade_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (7, 33), }", f32_payload(7 * 33)));
     },
     kAbc,
     {"A.npy", "Fortran"}},
    {"truncated_data",
     [](const fs::path& d) {
       const std::string bytes = read_text(d / "B.npy");
       write_text(d / "B.npy", bytes.substr(0, bytes.size() - 6));
     },
     kAbc,
     {"B.npy", "truncated"}},
    {"text_file",
     [](const fs::path& d) { write_text(d / "A.npy", "0.5,0.25\n1.0,2.0\n"); },
     kAbc,
     {"A.npy", "not a .npy file"}},
    {"three_dimensional",
     [](const fs::path& d) {
       ocltk::npy::Array a;
       a.shape = {7, 3, 11};
       a.data.assign(7 * 33 * 4, 0x3f);
       ocltk::npy::write_atomically((d / "A.npy").string(), a);
     },
     kAbc,
     {"A.npy", "2-D"}},
    {"empty_operand", [](const fs::path& d) { write_matrix(d / "A.npy", 0, 33, {}); }, kAbc, {"--lhs", "(0, 33)"}},
    {"missing_lhs_file", keep, {"--lhs", "missing.npy", "--rhs", "B.npy", "--out", "C.npy"}, {"missing.npy", "--lhs"}},
    {"lhs_is_a_folder",
     [](const fs::path& d) { fs::create_directory(d / "sub"); },
     {"--lhs", "sub", "--rhs", "B.npy", "--out", "C.npy"},
     {"sub", "--lhs"}},
    {"accumulate_out_wrong_shape",
     [](const fs::path& d) { write_matrix(d / "C.npy", 7, 64, std::vector<float>(7 * 64, 0.5f)); },
     abc_and({"--accumulate"}),
     {"C.npy", "--out", "(7, 65)", "(7, 64)"}},
    {"accumulate_out_missing",
     [](const fs::path& d) { fs::remove(d / "C.npy"); },
     abc_and({"--accumulate"}),
     {"C.npy", "--out"}},
    {"unknown_option", keep, abc_and({"--bogus", "1"}), {"--bogus"}},
    {"missing_required_option", keep, {"--lhs", "A.npy", "--out", "C.npy"}, {"--rhs"}},
    {"option_without_value", keep, {"--lhs", "A.npy", "--rhs", "B.npy", "--out"}, {"--out"}},
    {"flag_with_value", keep, abc_and({"--accumulate=yes"}), {"--accumulate"}},
    {"stray_argument", keep, abc_and({"extra"}), {"extra"}},
    {"alpha_not_a_number", keep, abc_and({"--alpha", "abc"}), {"--alpha", "abc"}},
    {"precision_unknown", keep, abc_and({"--precision", "fp32"}), {"--precision", "fp32"}},
    {"precision_without_value", keep, abc_and({"--precision"}), {"--precision"}},
    {"unknown_device_name", keep, abc_and({"--device", "nosuchdevice"}), {"nosuchdevice"}},
    {"unknown_device_index", keep, abc_and({"--device", "99"}), {"'99'"}},
    // A selector too large for an unsigned long is still bad usage, not an OpenCL failure.
    {"device_index_overflow", keep, abc_and({"--device", "99999999999999999999"}), {"99999999999999999999"}},
    {"malformed_profile",
     [](const fs::path& d) { write_text(d / "bad.yaml", kMalformedProfile); },
     abc_and({"--profile", "bad.yaml"}),
     {"bad.yaml:4:12:"}},
    {"profile_param_outside_legal_values",
     [](const fs::path& d) { write_text(d / "p.yaml", kIllegalParamProfile); },
     abc_and({"--profile", "p.yaml"}),
     {"p.yaml:9:21:", "MWG"}},
    {"missing_profile", keep, abc_and({"--profile", "nosuch.yaml"}), {"nosuch.yaml"}},
};

INSTANTIATE_TEST_SUITE_P(BadInput, CliRunRejects, ::testing::ValuesIn(kBadRunCases),
                         [](const ::testing::TestParamInfo<BadRunCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------
// run lora

// An .npy of any shape from raw values of `dtype`.
template <class T>
void write_array(const fs::path& path, ocltk::npy::DType dtype, std::vector<std::size_t> shape,
                 const std::vector<T>& values) {
  ocltk::npy::Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  ocltk::npy::write_atomically(path.string(), a);
}

// The values of `type` (as an .npy stores them: f32, f16 bits, bf16 bits as uint16) and
// the f32 values they hold.
struct TypedValues {
  ocltk::npy::DType dtype;
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;
};

TypedValues typed(ocltk::ElementType type, const std::vector<float>& v) {
  TypedValues t;
  t.dtype = type == ocltk::ElementType::f32   ? ocltk::npy::DType::f32
            : type == ocltk::ElementType::f16 ? ocltk::npy::DType::f16
                                              : ocltk::npy::DType::u16;
  const std::size_t es = ocltk::element_size(type);
  t.bytes.resize(v.size() * es);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint32_t bits = ocltk::float_to_element(type, v[i]);
    std::memcpy(t.bytes.data() + i * es, &bits, es);
    t.values.push_back(ocltk::element_to_float(type, bits));
  }
  return t;
}

class CliRunLora : public CliTest {
 protected:
  // X (7 x 65), A (3 x 12 x 65), B (3 x 33 x 12), Y (7 x 33) in `type`; three segments with a
  // -1 one and adapter 2 twice; ranks below R; per-adapter scales.
  static constexpr std::size_t kM = 7, kN = 33, kK = 65, kL = 3, kR = 12;
  ocltk::LoraHostSegments host_;
  TypedValues x_, a_, b_, y_;

  void write_operands(ocltk::ElementType type) {
    x_ = typed(type, random_floats(kM * kK));
    a_ = typed(type, random_floats(kL * kR * kK));
    b_ = typed(type, random_floats(kL * kN * kR));
    y_ = typed(type, random_floats(kM * kN));
    write_array(path("X.npy"), x_.dtype, {kM, kK}, x_.bytes);
    write_array(path("A.npy"), a_.dtype, {kL, kR, kK}, a_.bytes);
    write_array(path("B.npy"), b_.dtype, {kL, kN, kR}, b_.bytes);
    write_array(path("Y.npy"), y_.dtype, {kM, kN}, y_.bytes);
    host_.offsets = {0, 2, 3, 7};
    host_.adapters = {2, -1, 2};
    host_.ranks = {12, 5, 7};
    host_.scales = {0.5f, -1.5f, 2.0f};
    write_array(path("O.npy"), ocltk::npy::DType::u32, {4}, host_.offsets);
    write_array(path("I.npy"), ocltk::npy::DType::i32, {3}, host_.adapters);
    write_array(path("RK.npy"), ocltk::npy::DType::i32, {3}, host_.ranks);
    write_array(path("SC.npy"), ocltk::npy::DType::f32, {3}, host_.scales);
  }

  // Y.npy matches the reference (scale, accumulating into the Y written before or not).
  void expect_correct(const CliResult& r, ocltk::ElementType type, float scale, bool accumulate) {
    ASSERT_EQ(r.status, 0) << r.describe();
    const ocltk::npy::Array y = ocltk::npy::read(path("Y.npy").string());
    ASSERT_EQ(y.dtype, type == ocltk::ElementType::bf16 ? ocltk::npy::DType::u16 : y_.dtype);
    ASSERT_EQ(y.shape, (std::vector<std::size_t>{kM, kN}));
    const ocltk::LoraProblem p{kM, kN, kK, kL, kR};
    std::vector<double> y_old(y_.values.begin(), y_.values.end()), t, t_abs, want, y_abs;
    ocltk::lora_reference(p, host_, scale, x_.values.data(), a_.values.data(), b_.values.data(),
                          accumulate ? y_old.data() : nullptr, t, t_abs, want, y_abs);
    const std::vector<std::int32_t> row_adapter = host_.row_adapters(kM);
    const std::size_t es = ocltk::element_size(type);
    for (std::size_t i = 0; i < kM * kN; ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, y.data.data() + i * es, es);
      const double got = ocltk::element_to_float(type, bits);
      const std::int32_t ad = row_adapter[i / kN];
      const std::int64_t rank = ad < 0 ? 0 : host_.ranks.empty() ? std::int64_t(kR) : host_.ranks[std::size_t(ad)];
      const double bound = ocltk::lora_error_bound(kK, rank, y_abs[i], accumulate ? y_old[i] : 0.0, want[i], type);
      ASSERT_LE(std::fabs(got - want[i]), bound) << "Y(" << i / kN << ", " << i % kN << ") " << r.describe();
    }
  }

  static std::vector<std::string> lora_args(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run",   "lora",     "--input", "X.npy", "--lora-a",
                                     "A.npy", "--lora-b", "B.npy",   "--out", "Y.npy"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
};

TEST_F(CliRunLora, ManyAdaptersInEachTypeMatchTheReference) {
  const std::vector<std::string> segments = {"--offsets", "O.npy", "--segment-adapters", "I.npy", "--ranks", "RK.npy"};
  write_operands(ocltk::ElementType::f32);
  std::vector<std::string> extra = segments;
  extra.insert(extra.end(), {"--accumulate", "--scales", "SC.npy"});
  expect_correct(run_cli(lora_args(extra)), ocltk::ElementType::f32, 1.0f, true);

  write_operands(ocltk::ElementType::bf16);
  host_.scales.clear();  // --scale instead
  extra = segments;
  extra.insert(extra.end(), {"--dtype", "bf16", "--scale", "-0.75"});
  expect_correct(run_cli(lora_args(extra)), ocltk::ElementType::bf16, -0.75f, false);

  // f16, one adapter of rank R (no segments, ranks or scales): A and B 2-D.
  write_operands(ocltk::ElementType::f16);
  write_array(path("A.npy"), a_.dtype, {kR, kK},
              std::vector<std::uint8_t>(a_.bytes.begin(), a_.bytes.begin() + kR * kK * 2));
  write_array(path("B.npy"), b_.dtype, {kN, kR},
              std::vector<std::uint8_t>(b_.bytes.begin(), b_.bytes.begin() + kN * kR * 2));
  host_ = ocltk::LoraHostSegments();
  expect_correct(run_cli(lora_args({"--accumulate"})), ocltk::ElementType::f16, 1.0f, true);
  EXPECT_EQ(names_in(work_),
            (std::set<std::string>{"A.npy", "B.npy", "I.npy", "O.npy", "RK.npy", "SC.npy", "X.npy", "Y.npy"}));
}

// run lora: bad input. Each case starts from a valid f32 setup (segments, ranks, scales,
// accumulate), breaks one thing, and expects exit 2, one stderr line naming the culprit, and
// the folder byte-identical afterwards.
struct BadLoraCase {
  std::string name;
  std::function<void(const fs::path& dir)> damage;
  std::vector<std::string> args;     // after the input/lora-a/lora-b/out flags
  std::vector<std::string> needles;  // what the error line must name
};

void PrintTo(const BadLoraCase& c, std::ostream* os) { *os << c.name; }

class CliRunLoraRejects : public CliRunLora, public ::testing::WithParamInterface<BadLoraCase> {};

TEST_P(CliRunLoraRejects, WithOneLineAndLeavesTheFolderAsItWas) {
  const BadLoraCase& c = GetParam();
  write_operands(ocltk::ElementType::f32);
  c.damage(work_);
  const std::map<std::string, std::string> before = snapshot(work_);
  const CliResult r = run_cli(lora_args(c.args));
  EXPECT_TRUE(is_usage_error(r, c.needles));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(snapshot(work_), before) << "a refused run changed the folder";
}

const std::vector<std::string> kLoraAll = {"--offsets", "O.npy",  "--segment-adapters", "I.npy", "--ranks", "RK.npy",
                                           "--scales",  "SC.npy", "--accumulate"};

std::vector<std::string> lora_all_but(const std::string& flag, std::vector<std::string> extra = {}) {
  std::vector<std::string> args;
  for (std::size_t i = 0; i < kLoraAll.size(); ++i) {
    if (kLoraAll[i] == flag) {
      if (flag != "--accumulate") ++i;
      continue;
    }
    args.push_back(kLoraAll[i]);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

template <class T>
std::function<void(const fs::path&)> write_list(const char* name, ocltk::npy::DType dtype, std::vector<T> values) {
  return [=](const fs::path& d) { write_array(d / name, dtype, {values.size()}, values); };
}

using ocltk::npy::DType;

const BadLoraCase kBadLoraCases[] = {
    {"adapter_below_minus_one",
     write_list("I.npy", DType::i32, std::vector<std::int32_t>{2, -2, 0}),
     kLoraAll,
     {"I.npy", "--segment-adapters[1] = -2"}},
    {"adapter_not_below_l",
     write_list("I.npy", DType::i32, std::vector<std::int32_t>{2, 3, 0}),
     kLoraAll,
     {"I.npy", "--segment-adapters[1] = 3"}},
    {"rank_zero",
     write_list("RK.npy", DType::i32, std::vector<std::int32_t>{12, 0, 7}),
     kLoraAll,
     {"RK.npy", "--ranks[1] = 0"}},
    {"rank_above_r",
     write_list("RK.npy", DType::u32, std::vector<std::uint32_t>{12, 13, 7}),
     kLoraAll,
     {"RK.npy", "--ranks[1] = 13", "R = 12"}},
    {"ranks_wrong_length",
     write_list("RK.npy", DType::i32, std::vector<std::int32_t>{12, 5}),
     kLoraAll,
     {"RK.npy", "--ranks", "3"}},
    {"offsets_not_from_zero",
     write_list("O.npy", DType::u32, std::vector<std::uint32_t>{1, 2, 3, 7}),
     kLoraAll,
     {"O.npy", "--offsets[0] = 1"}},
    {"offsets_not_to_m",
     write_list("O.npy", DType::u32, std::vector<std::uint32_t>{0, 2, 3, 6}),
     kLoraAll,
     {"O.npy", "M = 7"}},
    {"offsets_decreasing",
     write_list("O.npy", DType::u32, std::vector<std::uint32_t>{0, 3, 2, 7}),
     kLoraAll,
     {"O.npy", "decrease"}},
    {"offsets_not_one_longer",
     write_list("O.npy", DType::u32, std::vector<std::uint32_t>{0, 2, 7}),
     kLoraAll,
     {"O.npy", "one entry more than --segment-adapters"}},
    {"offsets_wrong_type",
     write_list("O.npy", DType::i32, std::vector<std::int32_t>{0, 2, 3, 7}),
     kLoraAll,
     {"O.npy", "uint32"}},
    {"offsets_without_adapters", keep, lora_all_but("--segment-adapters"), {"--offsets", "--segment-adapters"}},
    {"a_k_not_x_k",
     [](const fs::path& d) {
       write_array(d / "A.npy", DType::f32, {3, 12, 64}, std::vector<float>(3 * 12 * 64, 0.5f));
     },
     kLoraAll,
     {"A.npy", "K is 64", "65"}},
    {"b_rank_not_a_rank",
     [](const fs::path& d) {
       write_array(d / "B.npy", DType::f32, {3, 33, 11}, std::vector<float>(3 * 33 * 11, 0.5f));
     },
     kLoraAll,
     {"B.npy", "rank is 11", "12"}},
    {"b_adapters_not_a_adapters",
     [](const fs::path& d) {
       write_array(d / "B.npy", DType::f32, {2, 33, 12}, std::vector<float>(2 * 33 * 12, 0.5f));
     },
     kLoraAll,
     {"B.npy", "2 adapters", "3"}},
    {"a_another_type",
     [](const fs::path& d) {
       write_array(d / "A.npy", DType::f16, {3, 12, 65}, std::vector<std::uint16_t>(3 * 12 * 65, 0x3c00));
     },
     kLoraAll,
     {"A.npy", "float16", "float32"}},
    {"b_another_type",
     [](const fs::path& d) {
       write_array(d / "B.npy", DType::u16, {3, 33, 12}, std::vector<std::uint16_t>(3 * 33 * 12, 0x3f80));
     },
     kLoraAll,
     {"B.npy", "uint16"}},
    {"scales_wrong_length",
     write_list("SC.npy", DType::f32, std::vector<float>{0.5f, 1.0f}),
     kLoraAll,
     {"SC.npy", "L = 3"}},
    {"scale_and_scales", keep, lora_all_but("", {"--scale", "2"}), {"--scale", "--scales"}},
    {"accumulated_y_wrong_shape",
     [](const fs::path& d) {
       write_array(d / "Y.npy", DType::f32, {7, 32}, std::vector<float>(7 * 32, 0.5f));
     },
     kLoraAll,
     {"Y.npy", "(7, 33)", "(7, 32)"}},
    {"accumulated_y_wrong_type",
     [](const fs::path& d) {
       write_array(d / "Y.npy", DType::f16, {7, 33}, std::vector<std::uint16_t>(7 * 33, 0));
     },
     kLoraAll,
     {"Y.npy", "float16"}},
    {"dtype_disagrees_with_x", keep, lora_all_but("", {"--dtype", "bf16"}), {"X.npy", "--dtype bf16"}},
    {"uint16_x_without_dtype",
     [](const fs::path& d) {
       write_array(d / "X.npy", DType::u16, {7, 65}, std::vector<std::uint16_t>(7 * 65, 0));
     },
     kLoraAll,
     {"X.npy", "--dtype bf16"}},
    {"empty_rows",
     [](const fs::path& d) {
       write_array(d / "X.npy", DType::f32, {0, 65}, std::vector<float>());
     },
     {},
     {"empty operand"}},
    {"unknown_option", keep, lora_all_but("", {"--rank", "3"}), {"--rank"}},
};

INSTANTIATE_TEST_SUITE_P(BadInput, CliRunLoraRejects, ::testing::ValuesIn(kBadLoraCases),
                         [](const ::testing::TestParamInfo<BadLoraCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------
// Help, version, usage errors

TEST_F(CliTest, HelpGoesToStdoutWithExitZero) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--help"}, "Usage: ocltk COMMAND"},
      {{"-h"}, "Usage: ocltk COMMAND"},
      {{"help"}, "Usage: ocltk COMMAND"},
      {{"devices", "--help"}, "Usage: ocltk devices"},
      {{"devices", "-h"}, "Usage: ocltk devices"},
      {{"tune", "--help"}, "Usage: ocltk tune"},
      {{"tune", "-h"}, "Usage: ocltk tune"},
      {{"run", "gemm-nt", "--help"}, "Usage: ocltk run gemm-nt"},
      {{"run", "gemm-nt", "-h"}, "Usage: ocltk run gemm-nt"},
      {{"run", "--help"}, "Usage: ocltk run gemm-nt"},
      {{"profile", "--help"}, "Usage: ocltk profile show"},
      {{"profile", "merge", "--help"}, "ocltk profile merge FILE... -o DB.yaml"},
      {{"profile", "diff", "-h"}, "ocltk profile diff A B"},
      {{"profile", "-h"}, "Usage: ocltk profile show"},
      // --help wins over options that would otherwise be an error.
      {{"run", "gemm-nt", "--lhs", "missing.npy", "--help"}, "Usage: ocltk run gemm-nt"},
  };
  for (const auto& [args, usage] : cases) {
    std::string shown;
    for (const std::string& a : args) shown += " " + a;
    SCOPED_TRACE("ocltk" + shown);
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_NE(r.out.find(usage), std::string::npos) << r.describe();
    EXPECT_EQ(r.err, "");
  }
  EXPECT_TRUE(names_in(work_).empty());
}

TEST_F(CliTest, VersionPrintsTheLibraryVersion) {
  const CliResult r = run_cli({"--version"});
  EXPECT_EQ(r.status, 0) << r.describe();
  EXPECT_EQ(r.out, std::string("ocltk ") + ocltk::version() + "\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, UsageErrorsExitTwoWithOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{}, {"missing command"}},
      {{"frobnicate"}, {"frobnicate"}},
      {{"--frobnicate"}, {"--frobnicate"}},
      {{"run"}, {"gemm-nt"}},
      {{"run", "gemm-tn"}, {"gemm-tn"}},
      {{"profile"}, {"show", "validate"}},
      {{"profile", "frob", "x.yaml"}, {"frob"}},
      {{"profile", "show"}, {"FILE"}},
      {{"devices", "extra"}, {"devices"}},
      {{"devices", "--all"}, {"--all"}},
  };
  for (const auto& [args, needles] : cases) {
    std::string shown;
    for (const std::string& a : args) shown += " " + a;
    SCOPED_TRACE("ocltk" + shown);
    const CliResult r = run_cli(args);
    EXPECT_TRUE(is_usage_error(r, needles));
    EXPECT_EQ(r.out, "");
  }
}

// ---------------------------------------------------------------------------------------
// devices

TEST_F(CliTest, DevicesListsTheDefaultDeviceAndItsProfile) {
  const CliResult r = run_cli({"devices"});
  EXPECT_EQ(r.status, 0) << r.describe();
  EXPECT_NE(r.out.find(" *[" + std::to_string(default_device().index) + "] " + default_device().name),
            std::string::npos)
      << r.describe();
  EXPECT_NE(r.out.find("      profile: "), std::string::npos) << r.describe();
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, DevicesNamesTheProfileFromOcltkProfilePath) {
  const ocltk::ProfileDevice here = ocltk::profile_device_of(default_device());
  ocltk::ProfileDevice other_driver = here;
  other_driver.driver = here.driver + "-not-this-one";
  const fs::path exact = root_ / "exact.yaml", same_name = root_ / "same-name.yaml";
  write_text(exact, profile_text(here, {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(same_name, profile_text(other_driver, {{"lora_expand", "tiled", kTiledPoint}}));

  const std::vector<std::pair<fs::path, std::string>> cases = {{exact, "device+driver"}, {same_name, "device"}};
  for (const auto& [file, level] : cases) {
    SCOPED_TRACE(file.string());
    const CliResult r = run_cli({"devices"}, {{"OCLTK_PROFILE_PATH", file.string()}});
    EXPECT_EQ(r.status, 0) << r.describe();
    EXPECT_NE(r.out.find("profile: " + file.string() + " (match: " + level + ", from OCLTK_PROFILE_PATH)"),
              std::string::npos)
        << r.describe();
    EXPECT_EQ(r.err, "");
  }
}

// OCLTK_EXCLUDE_ALGORITHMS as `devices` reports it: the pairs a valid list removes on a last
// line; a list naming no algorithm refused as bad input, as a runtime would refuse it.
TEST_F(CliTest, DevicesReportsOrRefusesTheExcludedAlgorithms) {
  const CliResult plain = run_cli({"devices"});
  EXPECT_EQ(plain.out.find("OCLTK_EXCLUDE_ALGORITHMS"), std::string::npos) << plain.describe();

  const CliResult valid = run_cli({"devices"}, {{"OCLTK_EXCLUDE_ALGORITHMS", "gemm_nt:xgemm, tc"}});
  EXPECT_EQ(valid.status, 0) << valid.describe();
  const std::vector<std::string> lines = lines_of(valid.out);
  ASSERT_FALSE(lines.empty()) << valid.describe();
  EXPECT_EQ(lines.back().rfind("OCLTK_EXCLUDE_ALGORITHMS removes ", 0), 0u) << valid.describe();
  for (const char* pair : {"gemm_nt:xgemm", "gemm_nt:tc", "nf4_forward:tc", "nf4_backward:tc"})
    EXPECT_NE(lines.back().find(pair), std::string::npos) << pair << "\n" << valid.describe();

  const CliResult bad = run_cli({"devices"}, {{"OCLTK_EXCLUDE_ALGORITHMS", "no_such_algorithm"}});
  EXPECT_EQ(bad.status, 2) << bad.describe();
  EXPECT_EQ(bad.out, "") << bad.describe();
  EXPECT_EQ(lines_of(bad.err).size(), 1u) << bad.describe();
  EXPECT_NE(bad.err.find("no_such_algorithm"), std::string::npos) << bad.describe();
}

// "1 a device or OpenCL failure": with no OpenCL platform at all (ocl-icd reads its ICDs
// from an empty folder) both `devices` and `run` must say so and exit 1, not blame the
// user's input.
TEST_F(CliTest, NoOpenClDeviceIsADeviceFailure) {
  fs::create_directories(root_ / "no-icds");
  const std::map<std::string, std::optional<std::string>> env = {{"OCL_ICD_VENDORS", (root_ / "no-icds").string()}};
  const CliResult devices = run_cli({"devices"}, env);
  EXPECT_EQ(devices.status, 1) << devices.describe();

  write_matrix(path("A.npy"), 2, 3, random_floats(6));
  write_matrix(path("B.npy"), 4, 3, random_floats(12));
  const CliResult r = run_cli({"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy"}, env);
  EXPECT_EQ(r.status, 1) << r.describe();
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.describe();
  EXPECT_NE(r.err.find("no OpenCL device"), std::string::npos) << r.describe();
  EXPECT_EQ(names_in(work_), (std::set<std::string>{"A.npy", "B.npy"}));
}

// ---------------------------------------------------------------------------------------
// profile show / validate

TEST_F(CliTest, ProfileValidateAcceptsAValidProfile) {
  write_text(path("p.yaml"),
             profile_text(ocltk::profile_device_of(default_device()), {{"lora_expand", "tiled", kTiledPoint}}));
  const CliResult r = run_cli({"profile", "validate", "p.yaml"});
  EXPECT_EQ(r.status, 0) << r.describe();
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.describe();
  EXPECT_NE(r.out.find("p.yaml: valid"), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("1 entries"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err, "");
}

TEST_F(CliTest, ProfileValidateAcceptsTheShippedConfigs) {
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(OCLTK_SOURCE_DIR) / "configs")) {
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(e.path().string());
    const CliResult r = run_cli({"profile", "validate", e.path().string()});
    EXPECT_EQ(r.status, 0) << r.describe();
  }
}

TEST_F(CliTest, ProfileValidateRejectsBadFilesNamingFileLineColumn) {
  write_text(path("bad.yaml"), kMalformedProfile);
  write_text(path("p.yaml"), kIllegalParamProfile);
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"bad.yaml", {"bad.yaml:4:12:"}},
      {"p.yaml", {"p.yaml:9:21:", "MWG"}},
      {"nosuch.yaml", {"nosuch.yaml"}},
  };
  for (const auto& [file, needles] : cases) {
    SCOPED_TRACE(file);
    const CliResult r = run_cli({"profile", "validate", file});
    EXPECT_TRUE(is_usage_error(r, needles));
    EXPECT_EQ(r.out, "");
  }
}

// Several files: a line per valid one, one line on stderr per bad one (naming it), the rest
// still checked; exit 2 where any is bad, 0 where all are valid. None is a usage error.
TEST_F(CliTest, ProfileValidateChecksEachOfSeveralFiles) {
  write_text(path("a.yaml"),
             profile_text(ocltk::profile_device_of(default_device()), {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(path("b.yaml"), profile_text(ocltk::profile_device_of(default_device()), {}));
  write_text(path("bad.yaml"), kMalformedProfile);
  const CliResult all = run_cli({"profile", "validate", "a.yaml", "b.yaml"});
  EXPECT_EQ(all.status, 0) << all.describe();
  const std::vector<std::string> valid = lines_of(all.out);
  ASSERT_EQ(valid.size(), 2u) << all.describe();
  EXPECT_NE(valid[0].find("a.yaml: valid"), std::string::npos) << all.describe();
  EXPECT_NE(valid[1].find("b.yaml: valid"), std::string::npos) << all.describe();
  EXPECT_EQ(all.err, "");

  const CliResult some = run_cli({"profile", "validate", "a.yaml", "bad.yaml", "nosuch.yaml", "b.yaml"});
  EXPECT_EQ(some.status, 2) << some.describe();
  const std::vector<std::string> out = lines_of(some.out), err = lines_of(some.err);
  ASSERT_EQ(out.size(), 2u) << some.describe();
  EXPECT_NE(out[0].find("a.yaml: valid"), std::string::npos) << some.describe();
  EXPECT_NE(out[1].find("b.yaml: valid"), std::string::npos) << "checked after the bad ones; " << some.describe();
  ASSERT_EQ(err.size(), 2u) << some.describe();
  EXPECT_EQ(err[0].rfind("ocltk: ", 0), 0u) << some.describe();
  EXPECT_NE(err[0].find("bad.yaml:4:12:"), std::string::npos) << some.describe();
  EXPECT_NE(err[1].find("nosuch.yaml"), std::string::npos) << some.describe();

  EXPECT_TRUE(is_usage_error(run_cli({"profile", "validate"}), {"at least one FILE"}));
  EXPECT_TRUE(is_usage_error(run_cli({"profile", "show", "a.yaml", "b.yaml"}), {"exactly one FILE"}))
      << "show still takes one";
}

TEST_F(CliTest, ProfileShowPrintsEachEntry) {
  const ocltk::Params reduce_point = {{"KWG", 512}, {"RW", 8}, {"TR", 2}, {"USE_LOCAL", 0}, {"VW", 4}, {"WGS", 64}};
  write_text(path("p.yaml"), profile_text(ocltk::profile_device_of(default_device()),
                                          {{"gemv", "reduce", reduce_point}, {"lora_expand", "tiled", kTiledPoint}}));
  const CliResult r = run_cli({"profile", "show", "p.yaml"});
  EXPECT_EQ(r.status, 0) << r.describe();
  EXPECT_NE(r.out.find(default_device().name), std::string::npos) << r.describe();
  bool gemv = false, lora_expand = false;
  for (const std::string& line : lines_of(r.out)) {
    if (line.rfind("gemm_nt", 0) != 0) continue;
    if (line.find(" gemv ") != std::string::npos) {
      gemv = true;
      EXPECT_NE(line.find("reduce"), std::string::npos) << line;
      EXPECT_NE(line.find(ocltk::format_params(reduce_point)), std::string::npos) << line;
    }
    if (line.find(" lora_expand ") != std::string::npos) {
      lora_expand = true;
      EXPECT_NE(line.find("tiled"), std::string::npos) << line;
      EXPECT_NE(line.find(ocltk::format_params(kTiledPoint)), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(gemv && lora_expand) << "want one line per entry; " << r.describe();
  EXPECT_EQ(r.err, "");

  // An entry's provenance is shown on its line.
  std::string text = read_text(path("p.yaml"));
  const std::string anchor = "algorithm: reduce";
  ASSERT_NE(text.find(anchor), std::string::npos) << text;
  const std::size_t line_start = text.rfind('\n', text.find(anchor)) + 1;
  const std::string indent = text.substr(line_start, text.find(anchor) - line_start);
  text.insert(line_start, indent + "provenance: {kind: pinned, results: results/x/bench.json, commit: 0123abcd}\n");
  write_text(path("p.yaml"), text);
  const CliResult shown = run_cli({"profile", "show", "p.yaml"});
  EXPECT_EQ(shown.status, 0) << shown.describe();
  EXPECT_NE(shown.out.find("(pinned from results/x/bench.json at 0123abcd)"), std::string::npos) << shown.describe();
  const auto gemv_line = [](const std::string& out) {
    for (const std::string& line : lines_of(out))
      if (line.rfind("gemm_nt", 0) == 0 && line.find(" gemv ") != std::string::npos) return line;
    return std::string();
  };
  EXPECT_NE(gemv_line(shown.out).find(" 2.00x"), std::string::npos) << "3.0 over 1.5 ms; " << shown.describe();

  // An entry whose default time is of another point than today's built-in default (a stand-in
  // its tune timed, the default's algorithm excluded) says so, and no speed-up over it.
  text.insert(line_start, indent + "default_algorithm: tiled\n" + indent + "default_params: {MWG: 32}\n");
  write_text(path("p.yaml"), text);
  const CliResult stand_in = run_cli({"profile", "show", "p.yaml"});
  EXPECT_EQ(stand_in.status, 0) << stand_in.describe();
  const std::string line = gemv_line(stand_in.out);
  EXPECT_EQ(line.find("0.00x"), std::string::npos) << line;
  EXPECT_NE(line.find("        -   "), std::string::npos) << "no speed-up, as tune's summary writes it: " << line;
  EXPECT_NE(line.find("(its default time is of tiled "), std::string::npos) << line;
  EXPECT_NE(line.find("MWG=32"), std::string::npos) << line;
}

// ---------------------------------------------------------------------------------------
// profile merge / diff (no kernel is built: these tests only read and write YAML)

// A profile of another device of this device's vendor and another architecture (so that
// the vendor step, not the architecture step, serves it here).
ocltk::ProfileDevice sibling_device() {
  ocltk::ProfileDevice d = ocltk::profile_device_of(default_device());
  d.name = "another device of the same vendor";
  d.driver = "0.1";
  d.architecture = "another architecture";
  return d;
}

const ocltk::Params kReducePoint = {{"KWG", 512}, {"RW", 8}, {"TR", 2}, {"USE_LOCAL", 0}, {"VW", 4}, {"WGS", 64}};

TEST_F(CliTest, ProfileMergeWritesADatabaseThatDevicesAndTheRuntimeUse) {
  const ocltk::ProfileDevice here = ocltk::profile_device_of(default_device());
  write_text(path("here.yaml"), profile_text(here, {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(path("sibling.yaml"), profile_text(sibling_device(), {{"gemv", "reduce", kReducePoint}}));

  const CliResult merged = run_cli({"profile", "merge", "here.yaml", "sibling.yaml", "-o", "db.yaml"});
  ASSERT_EQ(merged.status, 0) << merged.describe();
  EXPECT_NE(merged.out.find("wrote db.yaml: 2 device profiles"), std::string::npos) << merged.describe();
  EXPECT_NE(merged.out.find("derived vendor " + here.vendor), std::string::npos) << merged.describe();
  EXPECT_EQ(merged.err, "");
  EXPECT_EQ(names_in(work_), (std::set<std::string>{"db.yaml", "here.yaml", "sibling.yaml"}));

  const CliResult valid = run_cli({"profile", "validate", "db.yaml"});
  EXPECT_EQ(valid.status, 0) << valid.describe();
  EXPECT_NE(valid.out.find("db.yaml: valid (schema 2 database, 2 device profiles"), std::string::npos)
      << valid.describe();
  const CliResult shown = run_cli({"profile", "show", "db.yaml"});
  EXPECT_EQ(shown.status, 0) << shown.describe();
  EXPECT_NE(shown.out.find("derived vendor " + here.vendor + ", from " + sibling_device().name), std::string::npos)
      << shown.describe();

  // `devices` names the file, the section and the step, then what it falls back to.
  const std::string db = path("db.yaml").string();
  const std::string member = ocltk::device_label(here), vendor = "derived vendor " + here.vendor;
  const CliResult devices = run_cli({"devices"}, {{"OCLTK_PROFILE_PATH", db}});
  EXPECT_EQ(devices.status, 0) << devices.describe();
  EXPECT_NE(devices.out.find("profile: " + db + " [" + member + "] (match: device+driver, from OCLTK_PROFILE_PATH)"),
            std::string::npos)
      << devices.describe();
  EXPECT_NE(devices.out.find("fallback: " + db + " [" + vendor + "] (match: vendor, from OCLTK_PROFILE_PATH)"),
            std::string::npos)
      << devices.describe();
  EXPECT_EQ(devices.err, "");

  // A database without this device: its vendor section serves, from the user folder too.
  const fs::path user_dir = config_ / "ocltk" / "profiles";
  fs::create_directories(user_dir);
  const std::string fleet = (user_dir / "fleet.yaml").string();
  const CliResult only_sibling = run_cli({"profile", "merge", "sibling.yaml", "--out", fleet});
  ASSERT_EQ(only_sibling.status, 0) << only_sibling.describe();
  const CliResult by_vendor = run_cli({"devices"});
  EXPECT_NE(by_vendor.out.find("profile: " + fleet + " [" + vendor + "] (match: vendor, from user)"), std::string::npos)
      << by_vendor.describe();

  // Merging the database with a profile (in place) adds the member and keeps the rest.
  const CliResult again = run_cli({"profile", "merge", fleet, "here.yaml", "-o", fleet});
  ASSERT_EQ(again.status, 0) << again.describe();
  const ocltk::ProfileFile back = ocltk::read_profile_file(fleet);
  ASSERT_EQ(back.schema, ocltk::kProfileDatabaseSchema);
  EXPECT_EQ(back.database.profiles.size(), 2u);
  EXPECT_EQ(names_in(user_dir), (std::set<std::string>{"fleet.yaml"})) << "a temporary file was left behind";
}

TEST_F(CliTest, ProfileDiffExitsZeroWhenEqualOneWhenDifferentTwoOnBadInput) {
  const ocltk::ProfileDevice here = ocltk::profile_device_of(default_device());
  write_text(path("a.yaml"), profile_text(here, {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(path("a_copy.yaml"), profile_text(here, {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(path("b.yaml"),
             profile_text(here, {{"lora_expand", "tiled", kTiledPoint}, {"gemv", "reduce", kReducePoint}}));
  write_text(path("bad.yaml"), kMalformedProfile);

  const CliResult same = run_cli({"profile", "diff", "a.yaml", "a_copy.yaml"});
  EXPECT_EQ(same.status, 0) << same.describe();
  EXPECT_EQ(same.out, "");
  EXPECT_EQ(same.err, "");

  const CliResult different = run_cli({"profile", "diff", "a.yaml", "b.yaml"});
  EXPECT_EQ(different.status, 1) << different.describe();
  EXPECT_EQ(different.out, "gemm_nt/gemv: only in b.yaml: reduce {" + ocltk::format_params(kReducePoint) + "}\n");
  EXPECT_EQ(different.err, "");

  // A database against one of its own inputs: the matching member agrees, the rest is
  // only in the database.
  ASSERT_EQ(run_cli({"profile", "merge", "a.yaml", "-o", "db.yaml"}).status, 0);
  const CliResult db_vs_member = run_cli({"profile", "diff", "db.yaml", "a.yaml"});
  EXPECT_EQ(db_vs_member.status, 1) << db_vs_member.describe();
  EXPECT_EQ(db_vs_member.out.find(ocltk::device_label(here)), std::string::npos)
      << "the member equals a.yaml; " << db_vs_member.describe();
  EXPECT_NE(db_vs_member.out.find("derived vendor " + here.vendor + ": only in db.yaml"), std::string::npos)
      << db_vs_member.describe();

  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> bad = {
      {{"profile", "diff", "a.yaml", "bad.yaml"}, {"bad.yaml:4:12:"}},
      {{"profile", "diff", "nosuch.yaml", "a.yaml"}, {"nosuch.yaml"}},
      {{"profile", "diff", "a.yaml"}, {"two files"}},
      {{"profile", "diff", "a.yaml", "b.yaml", "--brief"}, {"--brief"}},
  };
  for (const auto& [args, needles] : bad) {
    SCOPED_TRACE(args.back());
    const CliResult r = run_cli(args);
    EXPECT_TRUE(is_usage_error(r, needles));
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliTest, ProfileMergeRejectsBadInputAndLeavesTheOutputAsItWas) {
  write_text(path("good.yaml"),
             profile_text(ocltk::profile_device_of(default_device()), {{"lora_expand", "tiled", kTiledPoint}}));
  write_text(path("bad.yaml"), kMalformedProfile);
  write_text(path("p.yaml"), kIllegalParamProfile);
  write_text(path("db.yaml"), "an older database: these bytes must survive\n");
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"good.yaml", "bad.yaml", "-o", "db.yaml"}, {"bad.yaml:4:12:"}},
      {{"good.yaml", "p.yaml", "-o", "db.yaml"}, {"p.yaml:9:21:", "MWG"}},
      {{"good.yaml", "nosuch.yaml", "-o", "db.yaml"}, {"nosuch.yaml"}},
      {{"good.yaml", "db.yaml", "-o", "db.yaml"}, {"db.yaml:"}},  // not YAML of a profile
      {{"good.yaml"}, {"-o"}},
      {{"-o", "db.yaml"}, {"FILE"}},
      {{"good.yaml", "-o"}, {"-o"}},
      {{"good.yaml", "--frob", "-o", "db.yaml"}, {"--frob"}},
  };
  const std::map<std::string, std::string> before = snapshot(work_);
  for (const auto& [args, needles] : cases) {
    std::vector<std::string> argv = {"profile", "merge"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string shown;
    for (const std::string& a : args) shown += " " + a;
    SCOPED_TRACE("ocltk profile merge" + shown);
    const CliResult r = run_cli(argv);
    EXPECT_TRUE(is_usage_error(r, needles));
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(snapshot(work_), before) << "files now: " << joined(names_in(work_));
  }
}

// ---------------------------------------------------------------------------------------
// tune (kept cheap: one class, a few candidates, one timed run each)

TEST_F(CliTest, TuneWritesAValidProfileAndASummary) {
  const CliResult r =
      run_cli({"tune", "--classes", "gemv", "--max-evals", "3", "--budget", "20", "--repeats", "1", "--out", "p.yaml"});
  ASSERT_EQ(r.status, 0) << r.describe();
  bool summary_row = false;
  for (const std::string& line : lines_of(r.out))
    if (line.rfind("gemm_nt", 0) == 0 && line.find(" gemv ") != std::string::npos) summary_row = true;
  EXPECT_TRUE(summary_row) << "want a summary row for gemm_nt/gemv; " << r.describe();
  EXPECT_NE(r.out.find("profile written to p.yaml"), std::string::npos) << r.describe();
  EXPECT_EQ(names_in(work_), (std::set<std::string>{"p.yaml"})) << "stray files: " << joined(names_in(work_));

  const ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  EXPECT_EQ(p.device.name, default_device().name);
  EXPECT_EQ(p.device.driver, default_device().driver);
  ASSERT_NE(p.find("gemm_nt", "gemv"), nullptr);
  EXPECT_GT(p.find("gemm_nt", "gemv")->time_ms, 0);
  EXPECT_EQ(p.find("gemm_nt", "gemv")->provenance.kind, "tuned") << "the entry says it was tuned";
  EXPECT_EQ(p.entries.size(), 1u) << "only the requested class is tuned";
  EXPECT_TRUE(names_in(config_).empty()) << "--out given: nothing under XDG_CONFIG_HOME";
}

// How --record writes a measured gemm_nt `tiled` point (params completed with defaults):
// {"algorithm": "tiled", "params": {...}}, without the closing brace of the point.
std::string recorded_tiled_point(const ocltk::Params& params) {
  std::string text = "{\"algorithm\": \"tiled\", \"params\": {";
  bool first = true;
  for (const auto& [name, value] : ocltk::gemm_nt_family().find_algorithm("tiled")->complete(params)) {
    text += (first ? "\"" : ", \"") + name + "\": " + std::to_string(value);
    first = false;
  }
  return text + "}";
}

// A profile that fits the device seeds the search: its choice is measured right after
// the built-in default, unless --cold. --json puts only a JSON object on stdout.
TEST_F(CliTest, TuneWarmStartsFromAFittingProfileAndPrintsJson) {
  const ocltk::Params seed = {{"MWG", 8}, {"NWG", 16}, {"MDIMC", 2}, {"NDIMC", 4}, {"VW", 4}, {"USE_LOCAL", 0}};
  const fs::path prior = root_ / "prior.yaml";
  write_text(prior, profile_text(ocltk::profile_device_of(default_device()), {{"gemv", "tiled", seed}}));
  const std::string seed_text = recorded_tiled_point(seed);
  const fs::path warm_record = root_ / "warm.jsonl", cold_record = root_ / "cold.jsonl";
  std::vector<std::string> base = {"tune", "--classes", "gemv", "--max-evals", "2",      "--budget",
                                   "20",   "--repeats", "1",    "--out",       "p.yaml", "--json"};
  std::vector<std::string> warm_args = base;
  warm_args.insert(warm_args.end(), {"--record", warm_record.string()});
  const CliResult warm = run_cli(warm_args, {{"OCLTK_PROFILE_PATH", prior.string()}});
  ASSERT_EQ(warm.status, 0) << warm.describe();
  EXPECT_NE(read_text(warm_record).find(seed_text), std::string::npos)
      << "the seed was not measured; " << read_text(warm_record);
  ASSERT_FALSE(warm.out.empty());
  EXPECT_EQ(warm.out.front(), '{') << warm.describe();
  EXPECT_NE(warm.out.find("\"kernel\": \"gemm_nt\", \"class\": \"gemv\""), std::string::npos) << warm.describe();
  EXPECT_NE(warm.out.find("\"evaluations\": 2"), std::string::npos) << warm.describe();
  EXPECT_EQ(warm.out.find("profile written"), std::string::npos) << "stdout must hold only JSON";

  std::vector<std::string> cold_args = base;
  cold_args.insert(cold_args.end(), {"--cold", "--no-resume", "--record", cold_record.string()});
  const CliResult cold = run_cli(cold_args, {{"OCLTK_PROFILE_PATH", prior.string()}});
  ASSERT_EQ(cold.status, 0) << cold.describe();
  EXPECT_EQ(read_text(cold_record).find(seed_text), std::string::npos)
      << "--cold still measured the seed; " << read_text(cold_record);
}

// The profile already at --out seeds the search too, wherever it lies (not on
// OCLTK_PROFILE_PATH here), and its untuned entries are kept; --cold skips the seed.
TEST_F(CliTest, TuneWarmStartsFromTheProfileAtOut) {
  const ocltk::Params seed = {{"MWG", 8}, {"NWG", 16}, {"MDIMC", 2}, {"NDIMC", 4}, {"VW", 4}, {"USE_LOCAL", 0}};
  const ocltk::ProfileDevice device = ocltk::profile_device_of(default_device());
  const std::string seed_text = recorded_tiled_point(seed);
  const std::vector<std::string> base = {"tune",      "--classes", "gemv",    "--max-evals", "2",      "--budget", "20",
                                         "--repeats", "1",         "--quiet", "--out",       "p.yaml", "--record"};
  for (const bool cold : {false, true}) {
    SCOPED_TRACE(cold ? "--cold" : "warm");
    write_text(path("p.yaml"), profile_text(device, {{"gemv", "tiled", seed}, {"large", "tiled", kTiledPoint}}));
    const fs::path record = root_ / (cold ? "cold.jsonl" : "warm.jsonl");
    std::vector<std::string> args = base;
    args.push_back(record.string());
    if (cold) args.insert(args.end(), {"--cold", "--no-resume"});
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.status, 0) << r.describe();
    EXPECT_EQ(read_text(record).find(seed_text) != std::string::npos, !cold) << read_text(record);
    const ocltk::Profile written = ocltk::read_profile(path("p.yaml").string());
    EXPECT_NE(written.find("gemm_nt", "large"), nullptr) << "the untuned entry was dropped";
  }
}

// --record appends a header and one JSON line per measured point, across runs.
TEST_F(CliTest, TuneRecordAppendsEveryMeasuredPoint) {
  const std::vector<std::string> args = {"tune",     "--classes", "gemv",      "--max-evals", "3",
                                         "--budget", "20",        "--repeats", "1",           "--quiet",
                                         "--out",    "p.yaml",    "--record",  "points.jsonl"};
  for (int run = 1; run <= 2; ++run) {
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.status, 0) << r.describe();
    const std::vector<std::string> lines = lines_of(read_text(path("points.jsonl")));
    ASSERT_EQ(lines.size(), std::size_t(4 * run)) << "one header and three points per run";
    EXPECT_EQ(lines[4 * (run - 1)].rfind("{\"record\": 1, \"ocltk\": ", 0), 0u) << lines[4 * (run - 1)];
    for (int i = 1; i <= 3; ++i) {
      const std::string& line = lines[4 * (run - 1) + i];
      EXPECT_EQ(line.rfind("{\"kernel\": \"gemm_nt\", \"class\": \"gemv\", \"problem\": {", 0), 0u) << line;
      EXPECT_NE(line.find("\"params\": {"), std::string::npos) << line;
      EXPECT_TRUE(line.find("\"time_ms\": ") != std::string::npos || line.find("\"rejected\": ") != std::string::npos)
          << line;
    }
  }
  const CliResult bad = run_cli({"tune", "--classes", "gemv", "--budget", "5", "--quiet", "--out", "q.yaml", "--record",
                                 "/proc/ocltk-no-such/points.jsonl"});
  EXPECT_TRUE(is_usage_error(bad, {"--record"}));
}

TEST_F(CliTest, TuneDefaultOutGoesUnderXdgConfigHomeAndDevicesFindsIt) {
  const CliResult r =
      run_cli({"tune", "--classes", "gemv", "--max-evals", "1", "--budget", "20", "--repeats", "1", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.describe();
  EXPECT_EQ(r.err, "") << "--quiet: no progress";
  const fs::path dir = config_ / "ocltk" / "profiles";
  const std::set<std::string> written = names_in(config_);
  ASSERT_EQ(written.size(), 1u) << joined(written);
  const fs::path file = config_ / *written.begin();
  EXPECT_EQ(file.parent_path(), dir);
  EXPECT_EQ(file.extension(), ".yaml");
  EXPECT_NE(r.out.find("profile written to " + file.string()), std::string::npos) << r.describe();
  EXPECT_NE(ocltk::read_profile(file.string()).find("gemm_nt", "gemv"), nullptr);
  EXPECT_TRUE(names_in(work_).empty());

  // The runtime looks where tune wrote.
  const CliResult devices = run_cli({"devices"});
  EXPECT_NE(devices.out.find("profile: " + file.string() + " (match: device+driver, from user)"), std::string::npos)
      << devices.describe();
}

TEST_F(CliTest, TuneRejectsBadOptionsAndWritesNothing) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--strategy", "bogus"}, {"--strategy", "bogus"}},
      {{"--budget", "-1"}, {"--budget"}},
      {{"--budget", "soon"}, {"--budget", "soon"}},
      {{"--max-evals", "0"}, {"--max-evals"}},
      {{"--repeats", "x"}, {"--repeats"}},
      {{"--classes", "nosuch"}, {"nosuch"}},
      {{"--kernels", "nosuch"}, {"nosuch"}},
      {{"--device", "nosuchdevice"}, {"nosuchdevice"}},
      {{"--frob"}, {"--frob"}},
      {{"--max-evals", "0%"}, {"--max-evals"}},
      {{"--max-evals", "150%"}, {"--max-evals"}},
      {{"--jobs", "-1"}, {"--jobs"}},
      {{"--timeout", "0"}, {"--timeout"}},
      {{"--seeds", "3"}, {"--seeds", "--replay"}},
      {{"--cache", ""}, {"--cache"}},
      {{"--shapes", "missing.yaml"}, {"--shapes", "missing.yaml"}},
      {{"--replay", "missing.jsonl"}, {"does not apply to --replay"}},
      {{"--priors", "mine"}, {"--priors", "mine"}},
      {{"--builders", "threads"}, {"--builders", "threads"}},
      {{"--top", "3"}, {"--top", "--derive-priors"}},
  };
  for (const auto& [extra, needles] : cases) {
    std::vector<std::string> args = {"tune", "--out", "p.yaml", "--budget", "5", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());  // a repeated option: the last one counts
    SCOPED_TRACE(extra.front() + (extra.size() > 1 ? " " + extra[1] : ""));
    const CliResult r = run_cli(args);
    EXPECT_TRUE(is_usage_error(r, needles));
    EXPECT_TRUE(names_in(work_).empty()) << joined(names_in(work_));
    EXPECT_TRUE(names_in(config_).empty()) << joined(names_in(config_));
  }
}

// Tuning some classes into an existing profile of the device keeps its other entries
// (and replaces, not duplicates, the ones tuned again); a file at --out that is not a
// profile is refused before tuning and left as it was.
TEST_F(CliTest, TuneIntoAnExistingProfileKeepsTheEntriesItDidNotTune) {
  const auto tune_class = [&](const std::string& shape_class) {
    return run_cli({"tune", "--classes", shape_class, "--max-evals", "1", "--budget", "20", "--repeats", "1", "--quiet",
                    "--out", "p.yaml"});
  };
  const CliResult first = tune_class("gemv");
  ASSERT_EQ(first.status, 0) << first.describe();
  const CliResult second = tune_class("lora_expand");
  ASSERT_EQ(second.status, 0) << second.describe();
  EXPECT_NE(second.out.find("kept 1 entry of the profile not tuned in this run"), std::string::npos)
      << second.describe();
  ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  EXPECT_EQ(p.entries.size(), 2u) << read_text(path("p.yaml"));
  EXPECT_NE(p.find("gemm_nt", "gemv"), nullptr);
  EXPECT_NE(p.find("gemm_nt", "lora_expand"), nullptr);

  const CliResult again = tune_class("gemv");
  ASSERT_EQ(again.status, 0) << again.describe();
  p = ocltk::read_profile(path("p.yaml").string());
  EXPECT_EQ(p.entries.size(), 2u) << "gemv was replaced, not added twice: " << read_text(path("p.yaml"));

  write_text(path("notes.yaml"), "shopping: [eggs]\n");
  const CliResult refused = run_cli({"tune", "--classes", "gemv", "--budget", "5", "--quiet", "--out", "notes.yaml"});
  EXPECT_TRUE(is_usage_error(refused, {"--out", "notes.yaml", "not an ocltk profile"}));
  EXPECT_EQ(read_text(path("notes.yaml")), "shopping: [eggs]\n");
}

// An --out that cannot be written is refused before any tuning, not after it.
TEST_F(CliTest, TuneRefusesAnUnwritableOutBeforeTuning) {
  std::filesystem::create_directory(work_ / "folder");
  for (const std::string& out : {std::string("/proc/ocltk-no-such/p.yaml"), (work_ / "folder").string()}) {
    SCOPED_TRACE(out);
    const CliResult r = run_cli({"tune", "--classes", "gemv", "--budget", "5", "--quiet", "--out", out});
    EXPECT_TRUE(is_usage_error(r, {"--out"}));
    EXPECT_EQ(r.out.find("Tuning on"), std::string::npos) << "tuning started: " << r.out;
  }
  EXPECT_TRUE(names_in(work_).empty()) << joined(names_in(work_));
  EXPECT_TRUE(std::filesystem::is_empty(work_ / "folder"));
}

// --repeats is an int inside the tuner; a count beyond its range must be refused, not
// wrapped to a negative number of timed runs.
TEST_F(CliTest, TuneRejectsARepeatCountBeyondRange) {
  const CliResult r = run_cli({"tune", "--classes", "gemv", "--max-evals", "1", "--budget", "5", "--quiet", "--repeats",
                               "3000000000", "--out", "p.yaml"});
  EXPECT_TRUE(is_usage_error(r, {"--repeats"}));
  EXPECT_TRUE(names_in(work_).empty()) << joined(names_in(work_));
}

}  // namespace

// --shapes: the user's problems are tuned beside the class's default problem and stored
// as a list under the class; --report writes the JSON and one plot per tuned problem.
TEST_F(CliTest, TuneShapesStoresEntriesBesideTheDefaultsAndReports) {
  write_text(path("shapes.yaml"), "shapes:\n  - {kernel: gemm_nt, m: 3, n: 8, k: 64}\n");
  const CliResult r =
      run_cli({"tune", "--shapes", "shapes.yaml", "--kernels", "gemm_nt", "--classes", "lora_shrink", "--max-evals",
               "2", "--repeats", "1", "--out", "p.yaml", "--report", "rep", "--cache", "-"});
  ASSERT_EQ(r.status, 0) << r.describe();
  const ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  ASSERT_EQ(p.entries.size(), 2u) << read_text(path("p.yaml"));
  const std::map<std::string, std::int64_t> mine{{"m", 3}, {"n", 8}, {"k", 64}};
  EXPECT_EQ(p.find("gemm_nt", "lora_shrink", &mine)->problem, mine);
  EXPECT_NE(p.find("gemm_nt", "lora_shrink")->problem, mine) << "the default problem comes first";
  EXPECT_TRUE(fs::exists(path("rep") / "report.json"));
  EXPECT_TRUE(fs::exists(path("rep") / "gemm_nt-lora_shrink.svg"));
  EXPECT_NE(read_text(path("rep") / "report.json").find("\"m\": 3"), std::string::npos);
}

// input_bits 16: the NF4 problem is measured with bf16 input and its entry says so (the
// runtime prefers such entries for half-type launches); input_bits 32 is f32, stored as
// entries always were, without it. top_k: the rows are laid out as top-k routing lays them
// (nf4_problem_offsets), and the entry names the experts with rows (`active`) and the most
// rows on one of them (`max_rows`), not top_k.
TEST_F(CliTest, TuneShapesWithBf16InputOrRoutedRowsWriteTheirEntries) {
  write_text(path("shapes.yaml"),
             "shapes:\n  - {kernel: nf4_backward, experts: 2, n: 24, k: 128, rows: 6, input_bits: 16}\n"
             "  - {kernel: nf4_backward, experts: 2, n: 24, k: 128, rows: 4, input_bits: 32}\n"
             "  - {kernel: nf4_backward, experts: 6, n: 24, k: 128, rows: 8, top_k: 2}\n");
  const CliResult r = run_cli({"tune", "--shapes", "shapes.yaml", "--kernels", "nf4_backward", "--classes", "decode",
                               "--max-evals", "2", "--repeats", "1", "--out", "p.yaml", "--cache", "-"});
  ASSERT_EQ(r.status, 0) << r.describe();
  const ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  ASSERT_EQ(p.entries.size(), 4u) << read_text(path("p.yaml"));
  ocltk::Nf4Problem routed_problem;
  routed_problem.experts = 6;
  routed_problem.n = 24;
  routed_problem.k = 128;
  routed_problem.rows = 8;
  routed_problem.top_k = 2;
  const std::vector<std::uint32_t> offsets = ocltk::nf4_problem_offsets(routed_problem);
  const std::int64_t active = ocltk::nf4_active_experts(offsets.data(), offsets.size());
  ASSERT_GE(active, 2);  // 4 tokens, 2 experts each
  const std::int64_t longest = ocltk::nf4_max_expert_rows(offsets.data(), offsets.size());
  ASSERT_GE(longest, 1);
  ASSERT_LE(longest, 4);  // a token sends each expert at most one row
  const std::map<std::string, std::int64_t> routed{{"experts", 6},       {"n", 24},          {"k", 128},
                                                   {"rows", 8},          {"block_size", 64}, {"active", active},
                                                   {"max_rows", longest}};
  EXPECT_EQ(p.find("nf4_backward", "decode", &routed)->problem, routed);
  const std::map<std::string, std::int64_t> bf16{{"experts", 2}, {"n", 24},          {"k", 128},
                                                 {"rows", 6},    {"block_size", 64}, {"input_bits", 16}};
  const std::map<std::string, std::int64_t> f32{{"experts", 2}, {"n", 24}, {"k", 128}, {"rows", 4}, {"block_size", 64}};
  EXPECT_EQ(p.find("nf4_backward", "decode", &bf16)->problem, bf16);
  EXPECT_EQ(p.find("nf4_backward", "decode", &f32)->problem, f32);
}

// LoRA problems name their rank, adapters and segments, and (as gemm_nt's) input_bits 16
// for bf16: each is tuned and stored under the class the runtime files it in.
TEST_F(CliTest, TuneShapesTakesLoraAndHalfGemmProblems) {
  write_text(path("shapes.yaml"),
             "shapes:\n  - {kernel: lora_apply, m: 6, n: 40, k: 64, rank: 8, adapters: 3, segments: 3, "
             "input_bits: 16}\n  - {kernel: gemm_nt, m: 3, n: 80, k: 70, input_bits: 16}\n");
  const CliResult r = run_cli({"tune", "--shapes", "shapes.yaml", "--kernels", "lora_apply,gemm_nt", "--classes",
                               "multi_decode,small_batch_half", "--max-evals", "2", "--repeats", "1", "--out", "p.yaml",
                               "--cache", "-"});
  ASSERT_EQ(r.status, 0) << r.describe();
  const ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  const std::map<std::string, std::int64_t> lora{{"m", 6},        {"n", 40},       {"k", 64},         {"rank", 8},
                                                 {"adapters", 3}, {"segments", 3}, {"input_bits", 16}};
  const ocltk::ProfileEntry* e = p.find("lora_apply", "multi_decode", &lora);
  ASSERT_NE(e, nullptr) << read_text(path("p.yaml"));
  EXPECT_EQ(e->problem, lora);
  const std::map<std::string, std::int64_t> gemm{{"m", 3}, {"n", 80}, {"k", 70}, {"input_bits", 16}};
  e = p.find("gemm_nt", "small_batch_half", &gemm);
  ASSERT_NE(e, nullptr) << read_text(path("p.yaml"));
  EXPECT_EQ(e->problem, gemm);
  write_text(path("bad.yaml"),
             "shapes:\n  - {kernel: lora_shrink, m: 6, n: 40, k: 64, rank: 8, adapters: 3, "
             "segments: 3}\n");
  const CliResult bad = run_cli({"tune", "--shapes", "bad.yaml", "--out", "q.yaml"});
  EXPECT_TRUE(is_usage_error(bad, {"lora_shrink has no problem dimension 'n'"}));
}

TEST_F(CliTest, TuneShapesRejectsBadFilesAndWritesNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"shapes:\n  - {kernel: gemm_nt, m: 3, n: 8}\n", "shapes.yaml:2:5: shapes[0] (gemm_nt) needs 'k'"},
      {"shapes:\n  - {kernel: gemm_tn, m: 3}\n", "no tunable kernel named 'gemm_tn'"},
      {"shapes:\n  - {kernel: gemm_nt, m: 3, n: 8, k: 0}\n", "shapes[0].k = 0 must be from 1"},
      {"shapes:\n  - {kernel: gemm_nt, m: 3, n: 8, k: 4, rows: 2}\n", "has no problem dimension 'rows'"},
      {"shapes:\n  - {kernel: nf4_forward, experts: 2, n: 8, k: 64, rows: 4, block_size: 48}\n",
       "block_size = 48 must be a power of two"},
      {"shapes:\n  - {kernel: nf4_backward, experts: 2, n: 8, k: 64, rows: 4, input_bits: 8}\n",
       "shapes[0].input_bits = 8 must be 32 (f32 input) or 16 (bf16 input)"},
      {"shapes:\n  - {kernel: nf4_forward, experts: 4, n: 8, k: 64, rows: 5, top_k: 2}\n",
       "shapes[0].rows = 5 must be a multiple of top_k (2)"},
      {"shapes:\n  - {kernel: nf4_forward, experts: 2, n: 8, k: 64, rows: 6, top_k: 3}\n",
       "shapes[0].top_k = 3 exceeds the experts (2)"},
      {"model:\n  hidden: 64\n", "the model implies no problem"},
      {"model: {hidden: 64, lora_ranks: [8], colour: 3}\n", "unknown model key 'colour'"},
      {"model: [1, 2\n", "malformed YAML"},
      {"layers: 3\n", "unknown key 'layers'"},
  };
  for (const auto& [text, want] : cases) {
    write_text(path("shapes.yaml"), text);
    const CliResult r = run_cli({"tune", "--shapes", "shapes.yaml", "--out", "p.yaml"});
    EXPECT_EQ(r.status, 2) << text << r.describe();
    EXPECT_NE(r.err.find(want), std::string::npos) << "want '" << want << "' for\n" << text << r.describe();
    EXPECT_FALSE(fs::exists(path("p.yaml"))) << text;
  }
}

// Ctrl-C: the run stops after the current candidate, writes no profile, exits 130; the
// same command again recalls every measurement from the cache and goes on.
TEST_F(CliTest, TuneInterruptedByCtrlCResumesFromItsCache) {
  const std::string cache = (root_ / "tune-cache").string();
  const std::vector<std::string> args = {"tune",       "--kernels", "gemm_nt", "--classes", "gemv", "--strategy",
                                         "exhaustive", "--repeats", "1",       "--budget",  "600",  "--cold",
                                         "--cache",    cache,       "--out",   "p.yaml"};
  const CliResult first = run_cli(args, {}, 6.0);
  ASSERT_EQ(first.status, 130) << first.describe();
  EXPECT_NE(first.err.find("interrupted; p.yaml was not written"), std::string::npos) << first.describe();
  EXPECT_FALSE(fs::exists(path("p.yaml")));
  ASSERT_TRUE(fs::is_directory(cache));
  std::size_t measured = 0;
  for (const auto& f : fs::directory_iterator(cache)) {
    const std::string text = read_text(f.path());
    EXPECT_EQ(text.rfind("{\"tune_cache\": 1", 0), 0u) << text.substr(0, 200);
    measured += std::size_t(std::count(text.begin(), text.end(), '\n')) - 1;
  }
  ASSERT_GT(measured, 0u) << "nothing measured in 6 s";

  std::vector<std::string> again = args;
  again.insert(again.end(), {"--max-evals", std::to_string(measured + 1), "--json"});
  const CliResult second = run_cli(again);
  ASSERT_EQ(second.status, 0) << second.describe();
  EXPECT_NE(second.out.find("\"cached\": " + std::to_string(measured)), std::string::npos)
      << "expected " << measured << " recalled evaluations; " << second.describe();
  EXPECT_TRUE(fs::exists(path("p.yaml")));
}

// --derive-priors: the recordings' device's best points per class into one prior file; bad
// input (no recording, recordings of two devices, a missing one) exits 2 naming it and writes
// nothing.
TEST_F(CliTest, TuneDerivePriorsWritesTheBestPointsOfOneDevice) {
  const std::string header = "{\"record\": 1, \"device\": \"D\", \"vendor\": \"V\", \"driver\": \"1\"}\n";
  auto line = [](int wgs, double ms) {
    return "{\"kernel\": \"gemm_nt\", \"class\": \"gemv\", \"problem\": {\"k\": 64, \"m\": 1, \"n\": 64}, "
           "\"choice\": {\"algorithm\": \"reduce\", \"params\": {\"WGS\": " +
           std::to_string(wgs) + "}, \"ok\": true, \"time_ms\": " + std::to_string(ms) + "}}\n";
  };
  write_text(path("a.jsonl"), header + line(64, 3.0) + line(128, 1.0));
  write_text(path("b.jsonl"), header + line(32, 2.0));
  const CliResult r = run_cli({"tune", "--derive-priors", "priors.jsonl", "a.jsonl", "b.jsonl", "--top", "2"},
                              {{"OCLTK_DEVICE", "no-such-device"}});
  ASSERT_EQ(r.status, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(read_text(path("priors.jsonl")));
  ASSERT_EQ(lines.size(), 3u) << read_text(path("priors.jsonl"));
  EXPECT_NE(lines[0].find("\"device\": \"D\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"WGS\": 128"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("\"WGS\": 32"), std::string::npos) << lines[2];

  write_text(path("other.jsonl"),
             "{\"record\": 1, \"device\": \"E\", \"vendor\": \"V\", \"driver\": \"1\"}\n" + line(64, 1.0));
  const CliResult two = run_cli({"tune", "--derive-priors", "two.jsonl", "a.jsonl", "other.jsonl"});
  EXPECT_TRUE(is_usage_error(two, {"'D' and 'E'"})) << two.describe();
  const CliResult none = run_cli({"tune", "--derive-priors", "none.jsonl"});
  EXPECT_TRUE(is_usage_error(none, {"--derive-priors needs the recordings"})) << none.describe();
  const CliResult missing = run_cli({"tune", "--derive-priors", "missing-out.jsonl", "missing.jsonl"});
  EXPECT_EQ(missing.status, 2) << missing.describe();
  EXPECT_NE(missing.err.find("missing.jsonl"), std::string::npos) << missing.describe();
  for (const char* unwritten : {"two.jsonl", "none.jsonl", "missing-out.jsonl"})
    EXPECT_FALSE(fs::exists(path(unwritten))) << unwritten;
}

TEST_F(CliTest, TuneReplayComparesStrategiesWithoutADevice) {
  const std::string rec = std::string(OCLTK_SOURCE_DIR) + "/tests/data/spaces/pocl-gemm_nt-gemv.jsonl";
  const CliResult r = run_cli({"tune", "--replay", rec, "--seeds", "3", "--max-evals", "10%", "--json"},
                              {{"OCLTK_DEVICE", "no-such-device"}});
  ASSERT_EQ(r.status, 0) << r.describe();
  EXPECT_NE(r.out.find("\"guided\": {\"median_gap\""), std::string::npos) << r.describe();
  EXPECT_NE(r.out.find("\"random\": {\"median_gap\""), std::string::npos) << r.describe();
  const CliResult table = run_cli({"tune", "--replay", rec, "--strategy", "guided", "--seeds", "2"});
  ASSERT_EQ(table.status, 0) << table.describe();
  EXPECT_NE(table.out.find("guided gap"), std::string::npos) << table.describe();

  EXPECT_EQ(run_cli({"tune", "--replay", rec, "--device", "0"}).status, 2);
  EXPECT_EQ(run_cli({"tune", "--replay", rec, "--strategy", "annealing"}).status, 2);
  EXPECT_EQ(run_cli({"tune", "--replay", "missing.jsonl"}).status, 2);
  EXPECT_EQ(run_cli({"tune", "--seeds", "3"}).status, 2);
  write_text(path("bad.jsonl"), "{\"record\": 1, \"device\": \"D\"}\n{\"kernel\": 3}\n");
  const CliResult bad = run_cli({"tune", "--replay", "bad.jsonl"});
  EXPECT_EQ(bad.status, 2) << bad.describe();
  EXPECT_NE(bad.err.find("bad.jsonl:2:"), std::string::npos) << bad.describe();
}

namespace {

// ---------------------------------------------------------------------------------------
// Hardening: bounded reads, unusable outputs, HOME, full disks, exclusions, profile check,
// block-padded NF4 windows (docs/robustness.md)

// Every command that reads a user-named file refuses a device, a FIFO (a read would block
// until a writer came) and an oversized file with exit 2 and one line naming it, at once
// and without writing anything.
TEST_F(CliTest, ReadersRefuseDevicesFifosAndOversizedFiles) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const std::string big = (root_ / "big.yaml").string();  // outside work_, which is read back whole
  {
    std::ofstream out(big);
    out << "schema: 1\n";
  }
  fs::resize_file(big, ocltk::kMaxYamlFileBytes + 1);  // sparse
  write_matrix(path("A.npy"), 2, 3, random_floats(6));
  write_matrix(path("B.npy"), 4, 3, random_floats(12));
  write_text(path("p.yaml"), profile_text(ocltk::profile_device_of(default_device()), {}));
  const std::map<std::string, std::string> what = {
      {"/dev/zero", "a character device"}, {"fifo", "a FIFO"}, {big, "bytes, more than the 64 MiB"}};
  for (const auto& [bad, kind] : what) {
    const std::vector<std::vector<std::string>> commands = {
        {"profile", "validate", bad},
        {"profile", "show", bad},
        {"profile", "diff", "p.yaml", bad},
        {"profile", "merge", "p.yaml", bad, "-o", "db.yaml"},
        {"profile", "check", bad},
        {"run", "gemm-nt", "--lhs", bad, "--rhs", "B.npy", "--out", "C.npy"},
        {"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy", "--profile", bad},
        {"tune", "--shapes", bad, "--out", "q.yaml", "--budget", "60", "--quiet"},
        {"tune", "--replay", bad},
    };
    for (const std::vector<std::string>& args : commands) {
      // Not a .npy file (bad magic), and within a recording's 1 GiB: refused for their content.
      if ((args[0] == "run" && args[3] == bad) || args[1] == "--replay")
        if (bad == big) continue;
      std::string line;
      for (const std::string& a : args) line += a + " ";
      SCOPED_TRACE(line);
      const auto before = snapshot(work_);
      const auto start = std::chrono::steady_clock::now();
      const CliResult r = run_cli(args);
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
      EXPECT_TRUE(is_usage_error(r, {bad, kind}));
      EXPECT_EQ(snapshot(work_), before);
    }
  }
}

// An output that cannot become a file is refused before any work: an empty name, a name of
// a folder, a device (replacing /dev/null is not writing a file) or a FIFO.
TEST_F(CliTest, UnusableOutputPathsAreRefusedBeforeAnyWork) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directories(path("folder"));
  write_matrix(path("A.npy"), 2, 3, random_floats(6));
  write_matrix(path("B.npy"), 4, 3, random_floats(12));
  write_text(path("p.yaml"), profile_text(ocltk::profile_device_of(default_device()), {}));
  const std::vector<std::pair<std::string, std::string>> outs = {
      {"", "is empty"},          {"sub/", "names a folder"},          {".", "names a folder"},
      {"folder", "is a folder"}, {"/dev/null", "not a regular file"}, {"fifo", "not a regular file"}};
  for (const auto& [out, why] : outs) {
    const std::vector<std::vector<std::string>> commands = {
        {"tune", "--classes", "gemv", "--budget", "120", "--quiet", "--out", out},
        {"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", out},
        {"profile", "merge", "p.yaml", "-o", out},
        {"quantize", "nf4", "--weights", "A.npy", "--block-size", "64", "--packed", out, "--scales", "S.npy"},
    };
    for (const std::vector<std::string>& args : commands) {
      SCOPED_TRACE(args[0] + " " + args[1] + " -> '" + out + "'");
      const auto before = snapshot(work_);
      const auto start = std::chrono::steady_clock::now();
      const CliResult r = run_cli(args);
      // Refused before the 120 s budget (or any measuring) began.
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60);
      EXPECT_TRUE(is_usage_error(r, {why}));
      EXPECT_EQ(snapshot(work_), before);
      EXPECT_TRUE(names_in(config_).empty()) << joined(names_in(config_));
    }
  }
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// Without HOME (and XDG_CONFIG_HOME), the profile goes where the runtime looks: the password
// database's home folder (test_profile checks the folder); where the user has none, `tune`
// refuses at once saying to pass --out, and a program cache without a folder is announced,
// not silently dropped. A user id without a password entry needs root to switch to.
TEST_F(CliTest, WithoutAHomeFolderTuneRefusesAndTheCacheSaysSo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run as a user without a password entry";
  int uid = 54321;
  while (::getpwuid(uid_t(uid)) != nullptr) ++uid;
  fs::permissions(root_, fs::perms::all);
  fs::permissions(work_, fs::perms::all);
  fs::create_directories(root_ / "pocl");
  fs::permissions(root_ / "pocl", fs::perms::all);
  const std::map<std::string, std::optional<std::string>> no_home = {
      {"HOME", std::nullopt},
      {"XDG_CONFIG_HOME", std::nullopt},
      {"XDG_CACHE_HOME", std::nullopt},
      {"OCLTK_CACHE_DIR", std::nullopt},
      {"POCL_CACHE_DIR", (root_ / "pocl").string()}};  // PoCL itself needs a cache folder
  const CliResult refused = run_cli({"tune", "--classes", "gemv", "--budget", "120", "--quiet"}, no_home, 0, {0, uid});
  EXPECT_EQ(refused.status, 2) << refused.describe();
  const std::vector<std::string> err = lines_of(refused.err);
  ASSERT_FALSE(err.empty()) << refused.describe();
  EXPECT_NE(err.back().find("XDG_CONFIG_HOME and HOME are unset"), std::string::npos) << refused.describe();
  EXPECT_NE(err.back().find("pass --out FILE"), std::string::npos) << refused.describe();
  EXPECT_TRUE(names_in(work_).empty()) << joined(names_in(work_));

  write_matrix(path("A.npy"), 2, 3, random_floats(6));
  write_matrix(path("B.npy"), 4, 3, random_floats(12));
  fs::permissions(path("A.npy"), fs::perms::all);
  fs::permissions(path("B.npy"), fs::perms::all);
  const CliResult ran =
      run_cli({"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy"}, no_home, 0, {0, uid});
  EXPECT_EQ(ran.status, 0) << ran.describe();
  EXPECT_NE(ran.err.find("no program cache on disk"), std::string::npos) << ran.describe();
  EXPECT_TRUE(fs::exists(path("C.npy")));
}

// A full disk (here: RLIMIT_FSIZE, so a write past 2 KB fails with EFBIG) while the resume
// cache grows: `tune` warns once and goes on, the cache keeps a whole header and the lines
// written before, and the next run resumes from it. A cache left empty by older versions is
// started afresh, not refused.
TEST_F(CliTest, TuneCacheSurvivesAFullDiskAndResumes) {
  const std::string cache = (root_ / "tune-cache").string();
  const std::vector<std::string> args = {"tune",    "--kernels", "gemm_nt", "--classes", "gemv",  "--max-evals",
                                         "12",      "--repeats", "1",       "--budget",  "120",   "--cold",
                                         "--cache", cache,       "--out",   "p.yaml",    "--json"};
  const CliResult full = run_cli(args, {}, 0, {2048, -1});
  ASSERT_EQ(full.status, 0) << full.describe();
  const std::vector<std::string> err = lines_of(full.err);
  EXPECT_EQ(std::count_if(err.begin(), err.end(),
                          [](const std::string& l) { return l.find("warning: tune cache") != std::string::npos; }),
            1)
      << full.describe();
  EXPECT_NE(full.err.find("File too large"), std::string::npos) << full.describe();
  std::size_t kept = 0;
  for (const auto& f : fs::directory_iterator(cache)) {
    const std::string text = read_text(f.path());
    EXPECT_EQ(text.rfind("{\"tune_cache\": 1", 0), 0u) << text.substr(0, 200);
    EXPECT_LE(text.size(), 2048u);
    kept += std::size_t(std::count(text.begin(), text.end(), '\n')) - 1;  // whole lines after the header
  }
  ASSERT_GT(kept, 0u) << "nothing written before the disk filled";
  fs::remove(path("p.yaml"));
  const CliResult again = run_cli(args);
  ASSERT_EQ(again.status, 0) << again.describe();
  EXPECT_NE(again.out.find("\"cached\": " + std::to_string(kept)), std::string::npos)
      << "expected " << kept << " recalled evaluations; " << again.describe();

  for (const auto& f : fs::directory_iterator(cache)) write_text(f.path(), "");  // an older version's empty file
  const CliResult empty = run_cli(args);
  EXPECT_EQ(empty.status, 0) << empty.describe();
  for (const auto& f : fs::directory_iterator(cache)) EXPECT_EQ(read_text(f.path()).rfind("{\"tune_cache\": 1", 0), 0u);
}

// OCLTK_EXCLUDE_ALGORITHMS: `tune` never measures first, searches or writes an excluded
// algorithm (gemv's built-in reduce: the baseline becomes the family's first other one),
// and a list naming no algorithm is refused naming the variable.
TEST_F(CliTest, ExcludedAlgorithmsAreNeitherTunedNorRun) {
  const CliResult r = run_cli({"tune", "--classes", "gemv", "--max-evals", "4", "--repeats", "1", "--budget", "60",
                               "--cold", "--cache", "-", "--out", "p.yaml", "--record", "rec.jsonl"},
                              {{"OCLTK_EXCLUDE_ALGORITHMS", "reduce,xgemm,skinny"}});
  ASSERT_EQ(r.status, 0) << r.describe();
  const ocltk::Profile p = ocltk::read_profile(path("p.yaml").string());
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].algorithm, "tiled");
  const std::string record = read_text(path("rec.jsonl"));
  EXPECT_EQ(record.find("\"algorithm\": \"reduce\""), std::string::npos) << record;
  EXPECT_EQ(record.find("\"algorithm\": \"xgemm\""), std::string::npos) << record;
  EXPECT_EQ(record.find("\"algorithm\": \"skinny\""), std::string::npos) << record;
  EXPECT_NE(record.find("\"algorithm\": \"tiled\""), std::string::npos) << record;

  write_matrix(path("A.npy"), 2, 3, random_floats(6));
  write_matrix(path("B.npy"), 4, 3, random_floats(12));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "gemm-nt", "--lhs", "A.npy", "--rhs", "B.npy", "--out", "C.npy"},
        std::vector<std::string>{"tune", "--classes", "gemv", "--out", "q.yaml", "--quiet"}}) {
    const CliResult bad = run_cli(args, {{"OCLTK_EXCLUDE_ALGORITHMS", "tiled,fast"}});
    EXPECT_TRUE(is_usage_error(bad, {"OCLTK_EXCLUDE_ALGORITHMS", "'fast'"}));
  }
  EXPECT_FALSE(fs::exists(path("C.npy")));
  EXPECT_FALSE(fs::exists(path("q.yaml")));
}

// `profile check` runs every entry once against the CPU reference and prints a line each:
// here a profile of two gemm_nt entries and an nf4 one on small problems, all right (exit
// 0); bad input is exit 2. (test_tuner checks that failing entries are reported.)
TEST_F(CliTest, ProfileCheckRunsEveryEntryOnce) {
  ocltk::Profile p;
  p.device = ocltk::profile_device_of(default_device());
  p.device.name = "a device of another driver";  // checked all the same
  p.tuner_version = ocltk::version();
  const auto add = [&](const std::string& kernel, const std::string& cls, const std::string& algorithm,
                       const ocltk::Params& params, const std::map<std::string, std::int64_t>& problem) {
    ocltk::ProfileEntry e;
    e.kernel = kernel;
    e.shape_class = cls;
    e.algorithm = algorithm;
    e.params = ocltk::find_family(kernel)->find_algorithm(algorithm)->complete(params);
    e.problem = problem;
    p.entries.push_back(e);
  };
  add("gemm_nt", "gemv", "reduce", {{"WGS", 64}, {"RW", 16}}, {{"m", 1}, {"n", 40}, {"k", 300}});
  add("gemm_nt", "lora_expand", "tiled", kTiledPoint, {{"m", 7}, {"n", 65}, {"k", 33}});
  add("nf4_backward", "decode", "stream", {}, {{"experts", 3}, {"n", 40}, {"k", 128}, {"rows", 6}, {"block_size", 64}});
  ocltk::write_profile_atomically(path("p.yaml").string(), p);
  const CliResult r = run_cli({"profile", "check", "p.yaml"});
  ASSERT_EQ(r.status, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.describe();  // the device, an entry each, the count
  EXPECT_EQ(lines[0].rfind("checking p.yaml on " + default_device().name, 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("ok    gemm_nt/gemv reduce {", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find("on k=300 m=1 n=40"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].rfind("ok    gemm_nt/lora_expand tiled {", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("ok    nf4_backward/decode stream {", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4], "3 entries checked, 0 failed");

  EXPECT_TRUE(is_usage_error(run_cli({"profile", "check"}), {"exactly one FILE"}));
  EXPECT_TRUE(is_usage_error(run_cli({"profile", "check", "p.yaml", "p.yaml"}), {"exactly one FILE"}));
  EXPECT_TRUE(is_usage_error(run_cli({"profile", "check", "missing.yaml"}), {"missing.yaml"}));
  EXPECT_TRUE(is_usage_error(run_cli({"profile", "check", "p.yaml", "--frob"}), {"--frob"}));
  EXPECT_TRUE(
      is_usage_error(run_cli({"profile", "check", "p.yaml", "--device", "no-such-device"}), {"no-such-device"}));
}

// A shard cut at block boundaries holds the bytes of whole blocks: run nf4-forward,
// nf4-backward and dequantize nf4 accept any payload from the bytes the window's
// coefficients reach to those its scales' blocks cover, and refuse one byte past either end.
TEST_F(CliTest, Nf4WindowsPaddedToWholeBlocksAreAccepted) {
  // 2 experts x 3 x 20 = 120 coefficients from stream position 5: bytes 0 .. 62 are reached
  // (63), and 4 blocks of 32 are touched, whose bytes are 64.
  const std::int64_t experts = 2, n = 3, k = 20, block = 32, offset = 5, count = experts * n * k;
  const std::vector<float> stream = random_floats(std::size_t(offset + count + 3));  // a block's tail beyond
  const ocltk::Nf4Packed q = ocltk::quantize_nf4(stream.data(), stream.size(), block);
  ASSERT_EQ(q.scales.size(), 4u);
  std::vector<float> w(static_cast<std::size_t>(count));
  ocltk::dequantize_nf4(q.packed.data(), q.scales.data(), ocltk::kNf4Codebook, offset, block, w.size(), w.data());
  const auto write_payload = [&](std::size_t bytes) {
    ocltk::npy::Array a;
    a.dtype = ocltk::npy::DType::u8;
    a.shape = {bytes};
    a.data.assign(bytes, 0xA5);  // bytes past the stream's: never decoded
    std::memcpy(a.data.data(), q.packed.data(), std::min(bytes, q.packed.size()));
    ocltk::npy::write_atomically(path("P.npy").string(), a);
  };
  ocltk::npy::Array scales;
  scales.dtype = ocltk::npy::DType::f32;
  scales.shape = {q.scales.size()};
  scales.data.resize(q.scales.size() * 4);
  std::memcpy(scales.data.data(), q.scales.data(), scales.data.size());
  ocltk::npy::write_atomically(path("S.npy").string(), scales);
  const std::int64_t rows = 5;
  const std::vector<float> x = random_floats(std::size_t(rows * k)), g = random_floats(std::size_t(rows * n));
  write_matrix(path("X.npy"), std::size_t(rows), std::size_t(k), x);
  write_matrix(path("G.npy"), std::size_t(rows), std::size_t(n), g);
  ocltk::npy::Array off;
  off.dtype = ocltk::npy::DType::u32;
  off.shape = {3};
  const std::uint32_t offsets[] = {0, 2, 5};
  off.data.resize(12);
  std::memcpy(off.data.data(), offsets, 12);
  ocltk::npy::write_atomically(path("OFF.npy").string(), off);
  const std::vector<std::string> geometry = {
      "--packed",      "P.npy", "--scales",     "S.npy", "--experts",        "2", "--out-features", "3",
      "--in-features", "20",    "--block-size", "32",    "--element-offset", "5"};
  const auto command = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), geometry.begin(), geometry.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  const auto forward = command({"run", "nf4-forward"}, {"--input", "X.npy", "--offsets", "OFF.npy", "--out", "Y.npy"});
  const auto backward =
      command({"run", "nf4-backward"}, {"--grad", "G.npy", "--offsets", "OFF.npy", "--out", "DX.npy"});
  const auto dequantize = command({"dequantize", "nf4"}, {"--out", "W.npy"});
  std::vector<double> want_y(std::size_t(rows * n)), want_dx(std::size_t(rows * k));
  ocltk::nf4_forward_reference({experts, n, k, block, offset}, w.data(), x.data(), offsets, rows, want_y.data());
  ocltk::nf4_backward_reference({experts, n, k, block, offset}, w.data(), g.data(), offsets, rows, want_dx.data());
  for (const std::size_t bytes : {std::size_t(63), std::size_t(64)}) {
    SCOPED_TRACE(std::to_string(bytes) + " payload bytes");
    write_payload(bytes);
    for (const auto& args : {forward, backward, dequantize}) {
      const CliResult r = run_cli(args);
      ASSERT_EQ(r.status, 0) << r.describe();
    }
    const std::vector<float> y = read_matrix(path("Y.npy"), std::size_t(rows), std::size_t(n));
    const std::vector<float> dx = read_matrix(path("DX.npy"), std::size_t(rows), std::size_t(k));
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want_y[i], 1e-4 * (1 + std::fabs(want_y[i])));
    for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], want_dx[i], 1e-4 * (1 + std::fabs(want_dx[i])));
    const ocltk::npy::Array wa = ocltk::npy::read(path("W.npy").string());
    ASSERT_EQ(wa.count(), w.size());
    EXPECT_EQ(std::memcmp(wa.data.data(), w.data(), w.size() * 4), 0);
  }
  for (const std::size_t bytes : {std::size_t(62), std::size_t(65)}) {
    SCOPED_TRACE(std::to_string(bytes) + " payload bytes");
    write_payload(bytes);
    for (const auto& args : {forward, backward, dequantize}) {
      fs::remove(path("Y.npy"));
      fs::remove(path("DX.npy"));
      fs::remove(path("W.npy"));
      const CliResult r = run_cli(args);
      EXPECT_TRUE(is_usage_error(r, {"P.npy", "--packed holds " + std::to_string(bytes) + " bytes", "need 63 to 64"}));
      EXPECT_FALSE(fs::exists(path("Y.npy")) || fs::exists(path("DX.npy")) || fs::exists(path("W.npy")));
    }
  }
}

}  // namespace

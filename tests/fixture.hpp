// Test fixture shared by the device tests (after Boost.Compute's context_setup.hpp):
// one ocltk::Runtime per test binary, opened once on the default device with a private
// program-cache folder, plus host helpers and the gemm_nt checker.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ocltk/runtime.hpp"

namespace ocltk_test {

namespace fs = std::filesystem;

// A new, empty folder under ::testing::TempDir(), unique per process and call.
inline std::string make_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("ocltk_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  return dir.string();
}

// Sets (or unsets, with nullopt) an environment variable for one scope and restores it.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Options every test runtime starts from: default device, a private cache folder (tests
// never touch ~/.cache/ocltk), built-in defaults only, quiet.
inline ocltk::RuntimeOptions test_runtime_options(const std::string& cache_dir) {
  ocltk::RuntimeOptions options;
  options.cache_dir = cache_dir;
  options.use_profiles = false;
  options.verbose = 0;
  return options;
}

// The runtime shared by every RuntimeTest of a binary. Opened by the first test suite
// that needs it, closed (and its cache folder removed) after the last test.
struct SharedRuntime {
  std::unique_ptr<ocltk::Runtime> runtime;
  std::string cache_dir;
  std::string open_error;
};

inline SharedRuntime& shared_runtime() {
  static SharedRuntime shared;
  return shared;
}

class SharedRuntimeEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    SharedRuntime& shared = shared_runtime();
    shared.runtime.reset();
    if (!shared.cache_dir.empty()) {
      std::error_code ec;
      fs::remove_all(shared.cache_dir, ec);
    }
  }
};

inline ::testing::Environment* const kSharedRuntimeEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedRuntimeEnvironment);

// The seed of a test's random inputs: OCLTK_TEST_SEED when set (to replay a failure),
// otherwise fresh.
inline std::uint32_t test_seed() {
  if (const char* env = std::getenv("OCLTK_TEST_SEED"); env != nullptr && *env != '\0')
    return std::uint32_t(std::strtoul(env, nullptr, 10));
  return std::random_device{}();
}

// Uniform in [-1, 1], never exactly zero.
inline std::vector<float> random_floats(std::mt19937& rng, std::size_t count) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) {
    do x = dist(rng);
    while (x == 0.0f);
  }
  return v;
}

// Sets rows × cols elements at `offset` with row stride `ld` to NaN, so an element the
// kernel fails to write cannot pass.
inline void poison(std::vector<float>& data, std::size_t offset, std::int64_t rows, std::int64_t cols, std::size_t ld) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) data[offset + i * ld + j] = std::numeric_limits<float>::quiet_NaN();
}

inline boost::compute::buffer upload(ocltk::Runtime& rt, const std::vector<float>& host) {
  boost::compute::buffer buffer = rt.allocate(host.size() * sizeof(float)).value();
  rt.queue().enqueue_write_buffer(buffer, 0, host.size() * sizeof(float), host.data());
  return buffer;
}

inline std::vector<float> download(ocltk::Runtime& rt, const boost::compute::buffer& buffer, std::size_t count) {
  std::vector<float> host(count);
  rt.queue().enqueue_read_buffer(buffer, 0, count * sizeof(float), host.data());
  return host;
}

// Compares C (rows of `c_after` at c_offset with stride ldc) with gemm_nt_reference,
// element by element within gemm_nt_error_bound, and checks that every element of the
// C buffer outside the M×N slice still holds its pre-launch value.
inline ::testing::AssertionResult gemm_nt_matches(const ocltk::GemmProblem& p, float alpha, bool accumulate,
                                                  const float* a, std::size_t lda, const float* b, std::size_t ldb,
                                                  const std::vector<float>& c_before, const std::vector<float>& c_after,
                                                  std::size_t c_offset, std::size_t ldc) {
  const std::size_t m = std::size_t(p.m), n = std::size_t(p.n), k = std::size_t(p.k);
  std::vector<double> c_old(m * n), want(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) c_old[i * n + j] = c_before[c_offset + i * ldc + j];
  ocltk::gemm_nt_reference(p, alpha, accumulate, a, lda, b, ldb, c_old.data(), n, want.data(), n);

  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double abs_dot = 0;
      for (std::size_t q = 0; q < k; ++q) abs_dot += std::fabs(double(a[i * lda + q]) * double(b[j * ldb + q]));
      const double bound = ocltk::gemm_nt_error_bound(p.k, abs_dot, alpha, accumulate ? c_old[i * n + j] : 0.0);
      const double got = c_after[c_offset + i * ldc + j];
      if (!(std::fabs(got - want[i * n + j]) <= bound)) {
        if (bad++ == 0)
          first << "C(" << i << ", " << j << ") = " << got << ", want " << want[i * n + j] << " (error "
                << std::fabs(got - want[i * n + j]) << ", bound " << bound << ")";
      }
    }
  }
  // Everything outside the slice: before it, between rows (ldc > N) and after it.
  std::size_t touched = 0;
  std::ostringstream first_touched;
  for (std::size_t idx = 0; idx < c_after.size(); ++idx) {
    const bool inside = idx >= c_offset && (idx - c_offset) / ldc < m && (idx - c_offset) % ldc < n;
    if (inside) continue;
    if (!(c_after[idx] == c_before[idx])) {
      if (touched++ == 0)
        first_touched << "C buffer element " << idx << " outside the slice changed from " << c_before[idx] << " to "
                      << c_after[idx];
    }
  }
  if (bad == 0 && touched == 0) return ::testing::AssertionSuccess();
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << "M=" << p.m << " N=" << p.n << " K=" << p.k << " alpha=" << alpha << (accumulate ? " accumulate" : "")
          << ": ";
  if (bad) failure << bad << " of " << m * n << " elements out of bound, first " << first.str() << ". ";
  if (touched) failure << touched << " elements outside the slice modified, first " << first_touched.str() << ".";
  return failure;
}

// One launch to check: a problem, alpha, accumulate, and where the operands sit in
// their buffers (0 leading dimension: packed).
struct GemmCase {
  ocltk::GemmProblem problem;
  float alpha = 1.0f;
  bool accumulate = false;
  std::size_t lda = 0, ldb = 0, ldc = 0;
  std::size_t a_offset = 0, b_offset = 0, c_offset = 0;

  std::string describe() const {
    std::ostringstream out;
    out << "M=" << problem.m << " N=" << problem.n << " K=" << problem.k << " alpha=" << alpha
        << (accumulate ? " accumulate" : "") << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc
        << " offsets=" << a_offset << "," << b_offset << "," << c_offset;
    return out.str();
  }
};

using GemmLauncher = std::function<ocltk::Status(const ocltk::GemmNtArgs&)>;

// Draws fresh operands (and a random C with a few spare elements around the slice),
// poisons the C slice unless accumulating, launches, waits and checks.
inline ::testing::AssertionResult run_gemm_case(ocltk::Runtime& rt, std::mt19937& rng, const GemmCase& c,
                                                const GemmLauncher& launch) {
  const ocltk::GemmProblem& p = c.problem;
  const std::size_t lda = c.lda ? c.lda : std::size_t(p.k), ldb = c.ldb ? c.ldb : std::size_t(p.k),
                    ldc = c.ldc ? c.ldc : std::size_t(p.n);
  const std::vector<float> a = random_floats(rng, c.a_offset + (p.m - 1) * lda + p.k);
  const std::vector<float> b = random_floats(rng, c.b_offset + (p.n - 1) * ldb + p.k);
  std::vector<float> c_before = random_floats(rng, c.c_offset + (p.m - 1) * ldc + p.n + 5);
  if (!c.accumulate) poison(c_before, c.c_offset, p.m, p.n, ldc);

  boost::compute::buffer a_buf = upload(rt, a), b_buf = upload(rt, b), c_buf = upload(rt, c_before);
  ocltk::GemmNtArgs args;
  args.problem = p;
  args.alpha = c.alpha;
  args.a = {a_buf.get(), c.a_offset, c.lda};
  args.b = {b_buf.get(), c.b_offset, c.ldb};
  args.c = {c_buf.get(), c.c_offset, c.ldc};
  const ocltk::Status status = launch(args);
  if (!status.ok())
    return ::testing::AssertionFailure() << c.describe() << ": launch failed: " << ocltk::to_string(status.code())
                                         << ": " << status.message();
  rt.queue().finish();
  const std::vector<float> c_after = download(rt, c_buf, c_before.size());
  ::testing::AssertionResult result = gemm_nt_matches(p, c.alpha, c.accumulate, a.data() + c.a_offset, lda,
                                                      b.data() + c.b_offset, ldb, c_before, c_after, c.c_offset, ldc);
  if (!result) result << " [" << c.describe() << "]";
  return result;
}

// A and B stored as `in` (f32, f16 or bf16), C as `out` (their type or f32), launched under
// `precision`: sums in f32, one rounding at the store (the accumulate form reads C, adds in
// f32, rounds once), so every result is within gemm_nt_error_bound with the output's type
// and the precision. Fresh operands (and C) drawn in the types, the C slice poisoned unless
// accumulating, C outside the slice checked untouched, bit for bit. `worst_f32_ratio`, when
// given, receives the largest error over the f32 bound (the exact one) among C's elements.
inline ::testing::AssertionResult run_typed_case(ocltk::Runtime& rt, std::mt19937& rng, const GemmCase& c,
                                                 ocltk::ElementType in, ocltk::ElementType out,
                                                 const GemmLauncher& launch,
                                                 ocltk::GemmPrecision precision = ocltk::GemmPrecision::exact,
                                                 double* worst_f32_ratio = nullptr) {
  const ocltk::GemmProblem& p = c.problem;
  const std::size_t lda = c.lda ? c.lda : std::size_t(p.k), ldb = c.ldb ? c.ldb : std::size_t(p.k),
                    ldc = c.ldc ? c.ldc : std::size_t(p.n);
  const std::size_t out_size = ocltk::element_size(out);
  // Values of the type: drawn, rounded, and kept as the f32 values the device reads.
  auto draw = [&](ocltk::ElementType type, std::size_t count, std::vector<float>& values) {
    values = random_floats(rng, count);
    std::vector<std::uint8_t> bytes(count * ocltk::element_size(type));
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t bits = ocltk::float_to_element(type, values[i]);
      std::memcpy(bytes.data() + i * ocltk::element_size(type), &bits, ocltk::element_size(type));
      values[i] = ocltk::element_to_float(type, bits);
    }
    return bytes;
  };
  std::vector<float> a, b, c_before;
  const std::vector<std::uint8_t> a_bytes = draw(in, c.a_offset + (p.m - 1) * lda + p.k, a);
  const std::vector<std::uint8_t> b_bytes = draw(in, c.b_offset + (p.n - 1) * ldb + p.k, b);
  std::vector<std::uint8_t> c_bytes = draw(out, c.c_offset + (p.m - 1) * ldc + p.n + 5, c_before);
  if (!c.accumulate) {
    const std::uint32_t nan = out == ocltk::ElementType::f32   ? 0x7FC00000u
                              : out == ocltk::ElementType::f16 ? 0x7E00u
                                                               : 0x7FC0u;
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j)
        std::memcpy(c_bytes.data() + (c.c_offset + i * ldc + j) * out_size, &nan, out_size);
  }
  auto upload_bytes = [&](const std::vector<std::uint8_t>& bytes) {
    boost::compute::buffer buffer = rt.allocate(bytes.size()).value();
    rt.queue().enqueue_write_buffer(buffer, 0, bytes.size(), bytes.data());
    return buffer;
  };
  boost::compute::buffer a_buf = upload_bytes(a_bytes), b_buf = upload_bytes(b_bytes), c_buf = upload_bytes(c_bytes);
  ocltk::GemmNtArgs args;
  args.problem = p;
  args.alpha = c.alpha;
  args.a = {a_buf.get(), c.a_offset, c.lda, in};
  args.b = {b_buf.get(), c.b_offset, c.ldb, in};
  args.c = {c_buf.get(), c.c_offset, c.ldc, out};
  args.precision = precision;
  const ocltk::Status status = launch(args);
  if (!status.ok()) return ::testing::AssertionFailure() << c.describe() << ": launch failed: " << status.message();
  std::vector<std::uint8_t> after(c_bytes.size());
  rt.queue().enqueue_read_buffer(c_buf, 0, after.size(), after.data());
  if (worst_f32_ratio != nullptr) *worst_f32_ratio = 0;
  for (std::size_t idx = 0; idx < after.size() / out_size; ++idx) {
    const bool inside =
        idx >= c.c_offset && (idx - c.c_offset) / ldc < std::size_t(p.m) && (idx - c.c_offset) % ldc < std::size_t(p.n);
    std::uint32_t bits = 0;
    std::memcpy(&bits, after.data() + idx * out_size, out_size);
    const double got = ocltk::element_to_float(out, bits);
    if (!inside) {
      if (std::memcmp(after.data() + idx * out_size, c_bytes.data() + idx * out_size, out_size) != 0)
        return ::testing::AssertionFailure()
               << c.describe() << ": C buffer element " << idx << " outside the slice changed";
      continue;
    }
    const std::size_t i = (idx - c.c_offset) / ldc, j = (idx - c.c_offset) % ldc;
    double want = 0, abs_dot = 0;
    for (std::int64_t q = 0; q < p.k; ++q) {
      const double v = double(a[c.a_offset + i * lda + q]) * double(b[c.b_offset + j * ldb + q]);
      want += v;
      abs_dot += std::fabs(v);
    }
    const double old = c.accumulate ? double(c_before[idx]) : 0.0;
    want = double(c.alpha) * want + old;
    const double bound = ocltk::gemm_nt_error_bound(p.k, abs_dot, c.alpha, old, want, out, precision);
    if (worst_f32_ratio != nullptr)
      *worst_f32_ratio = std::max(
          *worst_f32_ratio, std::fabs(got - want) / ocltk::gemm_nt_error_bound(p.k, abs_dot, c.alpha, old, want, out));
    if (!(std::fabs(got - want) <= bound))
      return ::testing::AssertionFailure() << c.describe() << ": C(" << i << ", " << j << ") = " << got << ", want "
                                           << want << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

// The same through an explicit choice (Runtime::gemm_nt_with), accumulating as the case says.
inline ::testing::AssertionResult run_typed_case(ocltk::Runtime& rt, std::mt19937& rng, const GemmCase& c,
                                                 ocltk::ElementType in, ocltk::ElementType out,
                                                 const ocltk::Choice& choice,
                                                 ocltk::GemmPrecision precision = ocltk::GemmPrecision::exact,
                                                 double* worst_f32_ratio = nullptr) {
  return run_typed_case(
      rt, rng, c, in, out, [&](const ocltk::GemmNtArgs& args) { return rt.gemm_nt_with(choice, c.accumulate, args); },
      precision, worst_f32_ratio);
}

// Owns nothing itself: every test of a binary uses the one shared runtime.
class RuntimeTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    SharedRuntime& shared = shared_runtime();
    if (shared.runtime || !shared.open_error.empty()) return;
    shared.cache_dir = make_temp_dir("cache");
    ocltk::Result<ocltk::Runtime> opened = ocltk::Runtime::open(test_runtime_options(shared.cache_dir));
    if (opened.ok())
      shared.runtime = std::make_unique<ocltk::Runtime>(std::move(opened.value()));
    else
      shared.open_error = opened.status().message();
  }

 protected:
  void SetUp() override {
    ASSERT_NE(shared_runtime().runtime, nullptr) << "cannot open the default device: " << shared_runtime().open_error;
    seed_ = test_seed();
    rng_.seed(seed_);
    trace_ = std::make_unique<::testing::ScopedTrace>(
        __FILE__, __LINE__, "random seed " + std::to_string(seed_) + " (replay with OCLTK_TEST_SEED)");
  }
  void TearDown() override { trace_.reset(); }

  static ocltk::Runtime& runtime() { return *shared_runtime().runtime; }
  static const std::string& cache_dir() { return shared_runtime().cache_dir; }
  static ocltk::DeviceLimits limits() { return ocltk::DeviceLimits::of(runtime().device()); }

  std::mt19937& rng() { return rng_; }
  std::uint32_t seed() const { return seed_; }

 private:
  std::uint32_t seed_ = 0;
  std::mt19937 rng_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

}  // namespace ocltk_test

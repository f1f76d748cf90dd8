// The thread-safety contract of Runtime (runtime.hpp, docs/robustness.md): one runtime
// launched from several threads at once, all on its own queue and then each on a queue of
// its own, with choices and checks asked in between; every result checked against the CPU
// reference in double. gemm_nt (both forms, shapes of several classes, so several programs
// are fetched concurrently) and nf4_backward's stream algorithm, whose splits meet through
// per-queue scratch and a second kernel (kernels/nf4_splits.clh).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "fixture.hpp"
#include "ocltk/nf4.hpp"

namespace {

using namespace ocltk;

constexpr int kThreads = 4;
constexpr int kLaunchesPerThread = 12;

// The failures of all threads, reported by the main thread.
struct Failures {
  std::mutex mutex;
  std::vector<std::string> lines;
  void add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  }
};

boost::compute::buffer upload_bytes(Runtime& rt, boost::compute::command_queue& q, const void* data, std::size_t n) {
  boost::compute::buffer b = rt.allocate(std::max<std::size_t>(n, 4)).value();
  if (n) q.enqueue_write_buffer(b, 0, n, data);
  return b;
}

// One gemm_nt or gemm_nt_accum on `q`, checked; "" when right.
std::string gemm_on(Runtime& rt, boost::compute::command_queue& q, std::mt19937& rng) {
  std::uniform_int_distribution<int> dim(1, 40);
  const GemmProblem p{std::bernoulli_distribution(0.3)(rng) ? 1 : dim(rng), dim(rng), dim(rng) + 60};
  const bool accumulate = std::bernoulli_distribution(0.5)(rng);
  const float alpha = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  const std::vector<float> a = ocltk_test::random_floats(rng, std::size_t(p.m * p.k));
  const std::vector<float> b = ocltk_test::random_floats(rng, std::size_t(p.n * p.k));
  std::vector<float> c_before = ocltk_test::random_floats(rng, std::size_t(p.m * p.n));
  if (!accumulate) ocltk_test::poison(c_before, 0, p.m, p.n, std::size_t(p.n));
  auto abuf = upload_bytes(rt, q, a.data(), a.size() * 4), bbuf = upload_bytes(rt, q, b.data(), b.size() * 4),
       cbuf = upload_bytes(rt, q, c_before.data(), c_before.size() * 4);
  GemmNtArgs args;
  args.problem = p;
  args.alpha = alpha;
  args.a = {abuf.get()};
  args.b = {bbuf.get()};
  args.c = {cbuf.get()};
  Launch launch;
  launch.queue = q.get() == rt.queue().get() ? nullptr : q.get();
  // A choice asked for beside the launches: searched and remembered under the runtime's locks.
  (void)rt.choose_gemm_nt(p);
  const Status s = accumulate ? rt.gemm_nt_accum(args, launch) : rt.gemm_nt(args, launch);
  if (!s.ok()) return "gemm_nt launch failed: " + s.message();
  std::vector<float> c_after(c_before.size());
  q.enqueue_read_buffer(cbuf, 0, c_after.size() * 4, c_after.data());
  const ::testing::AssertionResult r =
      ocltk_test::gemm_nt_matches(p, alpha, accumulate, a.data(), std::size_t(p.k), b.data(), std::size_t(p.k),
                                  c_before, c_after, 0, std::size_t(p.n));
  return r ? "" : r.message();
}

// The weights every nf4 launch of a thread reads (uploaded once per queue).
struct Nf4Set {
  Nf4Geometry geo{3, 40, 128, 64, 0};
  std::vector<float> w;  // dequantized
  boost::compute::buffer packed, scales, codebook;
};

Nf4Set nf4_set(Runtime& rt, boost::compute::command_queue& q, std::mt19937& rng) {
  Nf4Set s;
  const std::vector<float> values = ocltk_test::random_floats(rng, std::size_t(s.geo.coefficients()));
  const Nf4Packed packed = quantize_nf4(values.data(), values.size(), s.geo.block_size);
  s.w.resize(values.size());
  dequantize_nf4(packed.packed.data(), packed.scales.data(), kNf4Codebook, 0, s.geo.block_size, s.w.size(), s.w.data());
  s.packed = upload_bytes(rt, q, packed.packed.data(), packed.packed.size());
  s.scales = upload_bytes(rt, q, packed.scales.data(), packed.scales.size() * 4);
  s.codebook = upload_bytes(rt, q, kNf4Codebook.data(), 64);
  return s;
}

// One nf4 input-gradient launch on `q` (the built-in stream algorithm: its splits meet in
// the queue's scratch), checked; "" when right.
std::string nf4_backward_on(Runtime& rt, boost::compute::command_queue& q, const Nf4Set& s, std::mt19937& rng) {
  const Nf4Geometry& g = s.geo;
  std::vector<std::uint32_t> offsets{0};
  std::uniform_int_distribution<std::uint32_t> count(0, 5);
  for (int e = 0; e < g.experts; ++e) offsets.push_back(offsets.back() + count(rng));
  const std::int64_t rows = offsets.back();
  const std::vector<float> grad = ocltk_test::random_floats(rng, std::size_t(rows * g.out_features) + 1);
  std::vector<float> dx(std::size_t(rows * g.in_features) + 1, std::numeric_limits<float>::quiet_NaN());
  auto gbuf = upload_bytes(rt, q, grad.data(), grad.size() * 4);
  auto obuf = upload_bytes(rt, q, offsets.data(), offsets.size() * 4);
  auto dxbuf = upload_bytes(rt, q, dx.data(), dx.size() * 4);
  q.finish();  // the offsets are read back on the runtime's queue
  Launch launch;
  launch.queue = q.get() == rt.queue().get() ? nullptr : q.get();
  const Nf4Weights w{g, s.packed.get(), 0, s.scales.get(), 0, s.codebook.get()};
  const Status st =
      nf4_input_backward_segmented(rt, {w, gbuf.get(), ElementType::f32, rows, obuf.get(), dxbuf.get()}, launch);
  if (!st.ok()) return "nf4_backward launch failed: " + st.message();
  q.enqueue_read_buffer(dxbuf, 0, dx.size() * 4, dx.data());
  std::vector<double> want(std::size_t(rows * g.in_features));
  nf4_backward_reference(g, s.w.data(), grad.data(), offsets.data(), rows, want.data());
  for (std::int64_t e = 0; e < g.experts; ++e)
    for (std::int64_t r = offsets[e]; r < std::int64_t(offsets[e + 1]); ++r)
      for (std::int64_t k = 0; k < g.in_features; ++k) {
        double abs_dot = 0;
        for (std::int64_t n = 0; n < g.out_features; ++n)
          abs_dot +=
              std::fabs(double(grad[r * g.out_features + n]) * s.w[(e * g.out_features + n) * g.in_features + k]);
        const std::size_t i = std::size_t(r * g.in_features + k);
        if (!(std::fabs(dx[i] - want[i]) <= gemm_nt_error_bound(g.out_features, abs_dot, 1.0, 0)))
          return "nf4_backward dx(" + std::to_string(r) + ", " + std::to_string(k) + ") = " + std::to_string(dx[i]) +
                 ", want " + std::to_string(want[i]);
      }
  if (!std::isnan(dx.back())) return "nf4_backward wrote past the rows";
  return "";
}

class RuntimeThreads : public ocltk_test::RuntimeTest {
 protected:
  // kThreads threads, each launching kLaunchesPerThread products on the queue `queue_of`
  // gives it, all started at once.
  void run_threads(const std::function<boost::compute::command_queue(int)>& queue_of) {
    Runtime& rt = runtime();
    Failures failures;
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    int launches = 0;
    std::mutex count_mutex;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(seed() + std::uint32_t(t) * 7919u);
        boost::compute::command_queue q = queue_of(t);
        const Nf4Set set = nf4_set(rt, q, rng);
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();
        for (int i = 0; i < kLaunchesPerThread; ++i) {
          const bool nf4 = i % 3 == 2;
          const std::string why = nf4 ? nf4_backward_on(rt, q, set, rng) : gemm_on(rt, q, rng);
          if (!why.empty()) failures.add("thread " + std::to_string(t) + " launch " + std::to_string(i) + ": " + why);
          const Choice last = rt.last_choice();  // some thread's latest launch: a family this test launches
          if (last.kernel != "gemm_nt" && last.kernel != "nf4_backward")
            failures.add("last_choice() names kernel '" + last.kernel + "'");
          std::lock_guard<std::mutex> lock(count_mutex);
          ++launches;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(launches, kThreads * kLaunchesPerThread);
    for (const std::string& line : failures.lines) ADD_FAILURE() << line;
  }
};

TEST_F(RuntimeThreads, LaunchesFromSeveralThreadsOnTheRuntimesQueueAreAllRight) {
  run_threads([&](int) { return runtime().queue(); });
}

TEST_F(RuntimeThreads, LaunchesFromSeveralThreadsOnTheirOwnQueuesAreAllRight) {
  Runtime& rt = runtime();
  run_threads([&](int) {
    return boost::compute::command_queue(rt.context(), rt.device().handle,
                                         boost::compute::command_queue::enable_profiling);
  });
}

}  // namespace

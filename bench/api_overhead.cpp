// ocltk_api_overhead: the host's cost of a launch through the C API (libocltk.so.0) against the
// C++ API, on one queue, at a decode-sized gemm_nt (docs/c-api.md, "Overhead").
//
// Both APIs enqueue the same problem on the same queue (the C runtime wraps the C++ runtime's
// context, device and queue). A round is, per API in alternating order: the host's time per
// launch of `--calls` launches enqueued behind a closed gate ("launch"), then the time per
// launch of `--calls` launches until they have run ("end to end", host and device overlapping
// as in an engine). Medians over `--rounds` rounds; JSON on stdout (bench/api_overhead.py adds
// the Python binding's row and prints the table).
//
//   ocltk_api_overhead [--device SEL] [--m 1] [--n 16] [--k 4096] [--calls 200] [--rounds 40]
//
// A plain loop rather than Google Benchmark: what is measured is the host's time around calls
// that enqueue asynchronously, with the two APIs interleaved round by round so that drift on a
// shared machine hits both alike.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "ocltk/ocltk.h"
#include "ocltk/ocltk.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Series {
  std::vector<double> launch_us, launch_cpu_us, end_to_end_us;
};

// The calling thread's CPU time: what a launch costs the host even where other processes
// share the cores (wall time then grows with their load; this does not).
double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

// One round of one API: `calls` launches behind a closed gate (a marker waiting on a user
// event, so that the device runs nothing meanwhile and the host's time is the API's alone, not
// shared with PoCL's threads on the same cores), then `calls` launches with the queue running,
// timed until they have all run.
void time_round(cl_context context, cl_command_queue queue, int calls, const std::function<bool()>& launch, Series& s) {
  clFinish(queue);
  cl_int err = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(context, &err);
  if (err != CL_SUCCESS || clEnqueueMarkerWithWaitList(queue, 1, &gate, nullptr) != CL_SUCCESS) std::exit(1);
  const double cpu0 = thread_cpu_us();
  auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i)
    if (!launch()) std::exit(1);
  const auto t1 = Clock::now();
  s.launch_cpu_us.push_back((thread_cpu_us() - cpu0) / calls);
  clSetUserEventStatus(gate, CL_COMPLETE);
  clReleaseEvent(gate);
  clFinish(queue);
  s.launch_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  t0 = Clock::now();
  for (int i = 0; i < calls; ++i)
    if (!launch()) std::exit(1);
  clFinish(queue);
  const auto t2 = Clock::now();
  s.end_to_end_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() / calls);
}

}  // namespace

int main(int argc, char** argv) {
  std::string device;
  long m = 1, n = 16, k = 4096;
  int calls = 200, rounds = 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device")
      device = value;
    else if (flag == "--m")
      m = std::atol(value.c_str());
    else if (flag == "--n")
      n = std::atol(value.c_str());
    else if (flag == "--k")
      k = std::atol(value.c_str());
    else if (flag == "--calls")
      calls = std::atoi(value.c_str());
    else if (flag == "--rounds")
      rounds = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "ocltk_api_overhead: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  if (m < 1 || n < 1 || k < 1 || calls < 1 || rounds < 1) {
    std::fprintf(stderr, "ocltk_api_overhead: --m, --n, --k, --calls and --rounds must be at least 1\n");
    return 2;
  }
  ocltk::RuntimeOptions options;
  options.device = device;
  auto opened = ocltk::Runtime::open(options);
  if (!opened) {
    std::fprintf(stderr, "ocltk_api_overhead: %s\n", opened.status().message().c_str());
    return 1;
  }
  ocltk::Runtime& rt = opened.value();
  cl_command_queue queue = rt.queue().get();
  cl_context context = rt.context().get();
  ocltk_runtime* crt = nullptr;
  if (ocltk_runtime_wrap(rt.context().get(), rt.device().handle.id(), queue, nullptr, &crt) != OCLTK_SUCCESS) {
    std::fprintf(stderr, "ocltk_api_overhead: %s\n", ocltk_last_error());
    return 1;
  }
  auto buffer = [&](long elements) {
    std::vector<float> host(std::size_t(elements), 0.5f);
    boost::compute::buffer b = rt.allocate(host.size() * 4).value();
    rt.queue().enqueue_write_buffer(b, 0, host.size() * 4, host.data());
    return b;
  };
  boost::compute::buffer a = buffer(m * k), b = buffer(n * k), c = buffer(m * n);
  ocltk::GemmNtArgs args;
  args.problem = {m, n, k};
  args.a = {a.get()};
  args.b = {b.get()};
  args.c = {c.get()};
  const auto cpp = [&] {
    const ocltk::Status s = rt.gemm_nt(args);
    if (!s) std::fprintf(stderr, "C++: %s\n", s.message().c_str());
    return s.ok();
  };
  const auto capi = [&] {
    const ocltk_status s = ocltk_gemm_nt(crt, OCLTK_F32, OCLTK_F32, m, n, k, 1.0f, a.get(), 0, 0, b.get(), 0, 0,
                                         c.get(), 0, 0, nullptr, 0, nullptr, nullptr);
    if (s != OCLTK_SUCCESS) std::fprintf(stderr, "C: %s\n", ocltk_last_error());
    return s == OCLTK_SUCCESS;
  };
  // Warm-up: programs built, launches prepared, both paths run once.
  Series ignored;
  time_round(context, queue, 10, cpp, ignored);
  time_round(context, queue, 10, capi, ignored);
  Series cpp_series, c_series;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      time_round(context, queue, calls, cpp, cpp_series);
      time_round(context, queue, calls, capi, c_series);
    } else {
      time_round(context, queue, calls, capi, c_series);
      time_round(context, queue, calls, cpp, cpp_series);
    }
  }
  const ocltk::Choice choice = rt.choose_gemm_nt(args.problem);
  std::printf(
      "{\"device\": \"%s\", \"m\": %ld, \"n\": %ld, \"k\": %ld, \"calls\": %d, \"rounds\": %d, \"choice\": \"%s\",\n"
      " \"cpp\": {\"launch_us\": %.3f, \"launch_cpu_us\": %.3f, \"end_to_end_us\": %.3f},\n"
      " \"c\": {\"launch_us\": %.3f, \"launch_cpu_us\": %.3f, \"end_to_end_us\": %.3f}}\n",
      rt.device().name.c_str(), m, n, k, calls, rounds, choice.describe().c_str(), median(cpp_series.launch_us),
      median(cpp_series.launch_cpu_us), median(cpp_series.end_to_end_us), median(c_series.launch_us),
      median(c_series.launch_cpu_us), median(c_series.end_to_end_us));
  ocltk_runtime_release(crt);
  return 0;
}

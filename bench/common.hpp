// What ocltk's benchmarks share: their own command-line flags, one device session (the
// queue every implementation enqueues on and the two ocltk runtimes), and the timer
// that turns OpenCL profiling events into Google Benchmark's manual time.
#pragma once

#include <CL/cl.h>
#include <benchmark/benchmark.h>
#include <clblast.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ocltk/runtime.hpp"

namespace ocltk::bench {

// How one timed iteration is measured.
//  marker: from the END of a marker enqueued just before the first command to the END
//          of the last command's event. Libraries that enqueue several kernels per call
//          (CLBlast pads and transposes, then multiplies) return only the last kernel's
//          event, so the marker is what makes their earlier kernels count.
//  kernel: the same with an empty one-work-item kernel in place of the marker, for
//          drivers whose marker events carry no usable timestamps.
//  wall:   host clock from before the first enqueue to after clFinish.
// With --ocltk_flush=MIB each call is timed alone, its clock started after a fill of MIB MiB
// of scratch memory (enqueued before the start marker, so not counted): the call finds none
// of its operands in the cache, as a launch in an engine that ran other layers before it.
// Without it, back-to-back calls on the same buffers find part of them in L2 when their
// footprint fits it (the H200's 50 MB holds a 32 MiB LoRA operand).
enum class Timer { kMarker, kKernel, kWall };

inline const char* to_string(Timer t) {
  switch (t) {
    case Timer::kMarker:
      return "marker";
    case Timer::kKernel:
      return "kernel";
    case Timer::kWall:
      return "wall";
  }
  return "?";
}

// Flags of ours; take_flags() removes them from argv before benchmark::Initialize.
struct Flags {
  std::string profile;           // --ocltk_profile=FILE: the tuned runtime's profile; "" = normal search
  std::string sizes;             // --ocltk_sizes=cpu|gpu (or OCLTK_BENCH_SIZES); "" = by device type
  std::string device;            // --ocltk_device=SELECTOR, as OCLTK_DEVICE
  Timer timer = Timer::kMarker;  // --ocltk_timer=marker|kernel|wall
  int calls = 1;                 // --ocltk_calls=N: back-to-back calls per timed iteration
  bool every_event = false;      // --ocltk_events=all: every call asks for an event (default last)
  int flush_mib = 0;             // --ocltk_flush=MIB: scratch filled before each call, timed alone (0: off)
  bool min_time_given = false;   // --benchmark_min_time on the command line (see per_call_min_time)
};

inline Flags& flags() {
  static Flags f;
  return f;
}

inline const char* kFlagsHelp =
    "ocltk_bench flags (before Google Benchmark's own --benchmark_* flags):\n"
    "  --ocltk_profile=FILE      profile for the ours_tuned runtime (default: OCLTK_PROFILE_PATH,\n"
    "                            the user folder, the installed configs/, as an engine would)\n"
    "  --ocltk_sizes=cpu|gpu     problem-size set (env OCLTK_BENCH_SIZES; default: cpu on a CPU\n"
    "                            device, gpu otherwise)\n"
    "  --ocltk_device=SELECTOR   device index or name substring (env OCLTK_DEVICE)\n"
    "  --ocltk_timer=marker|kernel|wall\n"
    "                            what starts an iteration's clock (default marker; see bench/common.hpp)\n"
    "  --ocltk_calls=N           calls enqueued back to back per timed iteration, time divided by N\n"
    "                            (default 1; larger N hides the launch gap of an idle queue). Each\n"
    "                            case then runs for about 0.5 s of calls, as Google Benchmark's\n"
    "                            default, unless --benchmark_min_time is given\n"
    "  --ocltk_events=last|all   which of an iteration's calls ask for an event: the last only\n"
    "                            (default, as an engine's hot path) or every one (each call then\n"
    "                            pays the driver's event on the host too)\n"
    "  --ocltk_flush=MIB         fill MIB MiB of scratch memory before each call (not timed) and time\n"
    "                            each call alone, so that none of its operands is in the cache\n"
    "                            (default 0: off; 1 to 4096; needs the marker or kernel timer)\n"
    "Save results with --benchmark_out=results/DEVICE-gemm_nt.json --benchmark_out_format=json.\n";

// *out = v where v is a whole decimal integer from lo to hi; false (and *out untouched) otherwise.
inline bool integer_in(const std::string& v, long lo, long hi, int* out) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < lo || n > hi) return false;
  *out = int(n);
  return true;
}

// The context lines that say how every row of a run was timed (timer, flush, calls per
// iteration), the same in each benchmark's JSON.
inline void add_timing_context() {
  const char* timer =
      flags().timer == Timer::kMarker   ? "marker: END of a marker before the call to END of its last event"
      : flags().timer == Timer::kKernel ? "kernel: END of an empty kernel before the call to END of its last event"
                                        : "wall: host clock around enqueue and clFinish";
  benchmark::AddCustomContext("ocltk_timer", timer);
  benchmark::AddCustomContext("ocltk_flush_mib", std::to_string(flags().flush_mib));
  benchmark::AddCustomContext("ocltk_calls_per_iteration", std::to_string(flags().calls));
}

// Removes --ocltk_* flags from argv. Returns false after printing one sentence for a
// malformed one.
inline bool take_flags(int* argc, char** argv) {
  Flags& f = flags();
  if (const char* env = std::getenv("OCLTK_BENCH_SIZES")) f.sizes = env;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    auto value_of = [&](const char* name, std::string* value) {
      const std::string prefix = std::string("--") + name + "=";
      if (arg.compare(0, prefix.size(), prefix) != 0) return false;
      *value = arg.substr(prefix.size());
      return true;
    };
    std::string v;
    if (value_of("ocltk_profile", &v)) {
      f.profile = v;
    } else if (value_of("ocltk_sizes", &v)) {
      f.sizes = v;
    } else if (value_of("ocltk_device", &v)) {
      f.device = v;
    } else if (value_of("ocltk_timer", &v)) {
      if (v == "marker") {
        f.timer = Timer::kMarker;
      } else if (v == "kernel") {
        f.timer = Timer::kKernel;
      } else if (v == "wall") {
        f.timer = Timer::kWall;
      } else {
        std::fprintf(stderr, "ocltk_bench: --ocltk_timer=%s: expected marker, kernel or wall\n", v.c_str());
        return false;
      }
    } else if (value_of("ocltk_events", &v)) {
      if (v != "last" && v != "all") {
        std::fprintf(stderr, "ocltk_bench: --ocltk_events=%s: expected last or all\n", v.c_str());
        return false;
      }
      f.every_event = v == "all";
    } else if (value_of("ocltk_calls", &v)) {
      if (!integer_in(v, 1, 1000, &f.calls)) {
        std::fprintf(stderr, "ocltk_bench: --ocltk_calls=%s: expected an integer from 1 to 1000\n", v.c_str());
        return false;
      }
    } else if (value_of("ocltk_flush", &v)) {
      if (!integer_in(v, 0, 4096, &f.flush_mib)) {
        std::fprintf(stderr, "ocltk_bench: --ocltk_flush=%s: expected MiB from 0 to 4096\n", v.c_str());
        return false;
      }
    } else if (arg.compare(0, 8, "--ocltk_") == 0) {
      std::fprintf(stderr, "ocltk_bench: unknown flag %s\n%s", arg.c_str(), kFlagsHelp);
      return false;
    } else {
      if (arg == "--help" || arg == "-h") std::fputs(kFlagsHelp, stdout);
      if (arg.rfind("--benchmark_min_time=", 0) == 0) f.min_time_given = true;
      argv[out++] = argv[i];
    }
  }
  if (f.flush_mib > 0 && f.timer == Timer::kWall) {
    std::fprintf(stderr,
                 "ocltk_bench: --ocltk_flush needs --ocltk_timer=marker or kernel: the wall clock would "
                 "count the fills\n");
    return false;
  }
  if (!f.sizes.empty() && f.sizes != "cpu" && f.sizes != "gpu") {
    std::fprintf(stderr, "ocltk_bench: size set '%s': expected cpu or gpu\n", f.sizes.c_str());
    return false;
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

// An iteration times `calls` calls but reports the time of one (SetIterationTime), and
// Google Benchmark runs a case until the reported times add up to its minimum time: with
// --ocltk_calls=N that would be N times its 0.5 s of device time. The per-case minimum
// divided by N keeps about 0.5 s, unless --benchmark_min_time says otherwise.
inline void per_call_min_time(benchmark::internal::Benchmark* b) {
  if (flags().calls > 1 && !flags().min_time_given) b->MinTime(0.5 / flags().calls);
}

// One device, one context, one in-order profiling queue, shared by every benchmark:
// ours_default (built-in parameters), ours_tuned (profiles) and CLBlast all enqueue on
// it and read the same buffers.
class Session {
 public:
  // Opens the device on first use; prints the reason and exits when it cannot.
  static Session& get() {
    static Session session;
    return session;
  }

  Runtime& defaults() { return *defaults_; }
  Runtime& tuned() { return *tuned_; }
  const DeviceInfo& device() const { return defaults_->device(); }
  cl_context context() const { return defaults_->context().get(); }
  cl_command_queue queue() { return defaults_->queue().get(); }
  // The kernel that does nothing (built on first use): the kernel timer's start, and the
  // launch-floor row of ocltk_bench. Exits with a sentence when it cannot be built.
  cl_kernel empty_kernel() {
    if (empty_kernel_ != nullptr) return empty_kernel_;
    const char* source = "__kernel void empty(void) {}";
    cl_int status = CL_SUCCESS;
    cl_device_id id = defaults_->device().handle.id();
    empty_program_ = clCreateProgramWithSource(context(), 1, &source, nullptr, &status);
    if (status == CL_SUCCESS) status = clBuildProgram(empty_program_, 1, &id, "", nullptr, nullptr);
    if (status == CL_SUCCESS) empty_kernel_ = clCreateKernel(empty_program_, "empty", &status);
    if (status != CL_SUCCESS) {
      std::fprintf(stderr, "ocltk_bench: cannot build the empty kernel (OpenCL status %d)\n", status);
      std::exit(1);
    }
    return empty_kernel_;
  }

  // Fills the --ocltk_flush scratch buffer (created on first use); "" or why it failed.
  std::string enqueue_flush() {
    const std::size_t bytes = std::size_t(flags().flush_mib) << 20;
    cl_int status = CL_SUCCESS;
    if (flush_ == nullptr) flush_ = clCreateBuffer(context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
    if (status != CL_SUCCESS)
      return "creating the --ocltk_flush buffer failed with OpenCL status " + std::to_string(status);
    const cl_uint pattern = ++flushes_;  // a new value each time
    status = clEnqueueFillBuffer(queue(), flush_, &pattern, sizeof pattern, 0, bytes, 0, nullptr, nullptr);
    return status == CL_SUCCESS ? "" : "the --ocltk_flush fill failed with OpenCL status " + std::to_string(status);
  }

  ~Session() {
    if (flush_ != nullptr) clReleaseMemObject(flush_);
    if (empty_kernel_ != nullptr) clReleaseKernel(empty_kernel_);
    if (empty_program_ != nullptr) clReleaseProgram(empty_program_);
  }

 private:
  Session() {
    RuntimeOptions defaults;
    defaults.device = flags().device;
    defaults.use_profiles = false;
    defaults_.emplace(open_or_exit(Runtime::open(defaults), "cannot open the device"));

    // The tuned runtime wraps the same context and queue, so both read the same buffers.
    RuntimeOptions tuned;
    tuned.device = flags().device;
    tuned.profile_path = flags().profile;
    Runtime& d = *defaults_;
    tuned_.emplace(open_or_exit(Runtime::wrap(d.context().get(), d.device().handle.id(), d.queue().get(), tuned),
                                flags().profile.empty() ? "the profiles" : "--ocltk_profile"));

    if (flags().timer == Timer::kKernel) empty_kernel();  // built before any row is timed
  }

  static Runtime open_or_exit(Result<Runtime> opened, const char* what) {
    if (!opened.ok()) {
      std::fprintf(stderr, "ocltk_bench: %s: %s\n", what, opened.status().message().c_str());
      std::exit(1);
    }
    return std::move(opened.value());
  }

  std::optional<Runtime> defaults_, tuned_;
  cl_program empty_program_ = nullptr;
  cl_kernel empty_kernel_ = nullptr;
  cl_mem flush_ = nullptr;
  cl_uint flushes_ = 0;
};

struct IterationTime {
  double seconds = 0;       // per call, by the chosen timer
  double wall_seconds = 0;  // per call, host clock around the same work and clFinish
  double last_seconds = 0;  // START to END of the last call's last command alone (0 with the wall timer)
  std::string error;        // non-empty: the iteration is not usable
};

// Enqueues one call; where `event` is not null, stores the event of its last command in
// *event (the caller releases it). Returns an error sentence, or "" on success.
using EnqueueCall = std::function<std::string(cl_event* event)>;

inline std::uint64_t event_time(cl_event event, cl_profiling_info what, cl_int* status) {
  cl_ulong t = 0;
  *status = clGetEventProfilingInfo(event, what, sizeof t, &t, nullptr);
  return t;
}

// Times `calls` back-to-back calls on the session's queue as one iteration. Only the last
// call is asked for an event (its end is the timer's; every call with --ocltk_events=all):
// the others ask for none, as an engine's hot path, so the host's time per call is that of
// the launch alone. With --ocltk_flush each call is a span of its own, after a fill and a
// start of its own; the spans are added.
inline IterationTime time_calls(Session& session, int calls, const EnqueueCall& enqueue) {
  using Clock = std::chrono::steady_clock;
  IterationTime result;
  cl_command_queue queue = session.queue();
  const Timer timer = flags().timer;
  const bool flush = flags().flush_mib > 0;
  const int spans = flush ? calls : 1, per_span = flush ? 1 : calls;
  std::vector<cl_event> starts(spans, nullptr), lasts(spans, nullptr);
  const auto wall_start = Clock::now();
  for (int s = 0; s < spans && result.error.empty(); ++s) {
    if (flush) result.error = session.enqueue_flush();
    if (!result.error.empty()) break;
    cl_int status = CL_SUCCESS;
    if (timer == Timer::kMarker) {
      status = clEnqueueMarkerWithWaitList(queue, 0, nullptr, &starts[s]);
    } else if (timer == Timer::kKernel) {
      const std::size_t one = 1;
      status = clEnqueueNDRangeKernel(queue, session.empty_kernel(), 1, nullptr, &one, &one, 0, nullptr, &starts[s]);
    }
    if (status != CL_SUCCESS)
      result.error = "enqueueing the start " + std::string(to_string(timer)) + " failed with OpenCL status " +
                     std::to_string(status);
    for (int i = 0; i < per_span && result.error.empty(); ++i) {
      const bool final_call = i == per_span - 1;
      cl_event event = nullptr;
      result.error = enqueue(final_call || flags().every_event ? &event : nullptr);
      if (event != nullptr) {
        if (lasts[s] != nullptr) clReleaseEvent(lasts[s]);
        lasts[s] = event;
      } else if ((final_call || flags().every_event) && result.error.empty()) {
        result.error = "the call returned no event";
      }
    }
  }
  const cl_int finished = clFinish(queue);
  const auto wall_end = Clock::now();
  if (finished != CL_SUCCESS && result.error.empty())
    result.error = "clFinish failed with OpenCL status " + std::to_string(finished);
  result.wall_seconds = std::chrono::duration<double>(wall_end - wall_start).count() / calls;
  for (int s = 0; s < spans && result.error.empty(); ++s) {
    cl_int execution = CL_COMPLETE;
    clGetEventInfo(lasts[s], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof execution, &execution, nullptr);
    if (execution < 0) result.error = "the last command ended with OpenCL status " + std::to_string(execution);
  }
  if (result.error.empty()) {
    if (timer == Timer::kWall) {
      result.seconds = result.wall_seconds;
    } else {
      double total = 0;
      for (int s = 0; s < spans && result.error.empty(); ++s) {
        cl_int s1 = CL_SUCCESS, s2 = CL_SUCCESS, s3 = CL_SUCCESS;
        const std::uint64_t begin = event_time(starts[s], CL_PROFILING_COMMAND_END, &s1);
        const std::uint64_t end = event_time(lasts[s], CL_PROFILING_COMMAND_END, &s2);
        const std::uint64_t last_start = event_time(lasts[s], CL_PROFILING_COMMAND_START, &s3);
        if (s1 != CL_SUCCESS || s2 != CL_SUCCESS || s3 != CL_SUCCESS) {
          const cl_int bad = s1 != CL_SUCCESS ? s1 : s2 != CL_SUCCESS ? s2 : s3;
          result.error = "profiling info unavailable (OpenCL status " + std::to_string(bad) +
                         "); try --ocltk_timer=kernel or --ocltk_timer=wall";
        } else if (end <= begin) {
          result.error = "the last command ended (" + std::to_string(end) + " ns) before the start " +
                         to_string(timer) + " (" + std::to_string(begin) +
                         " ns); timestamps unusable, try --ocltk_timer=kernel or --ocltk_timer=wall";
        } else {
          total += double(end - begin) * 1e-9;
          result.last_seconds = end > last_start ? double(end - last_start) * 1e-9 : 0;
        }
      }
      if (result.error.empty()) result.seconds = total / calls;
    }
  }
  for (cl_event e : starts)
    if (e != nullptr) clReleaseEvent(e);
  for (cl_event e : lasts)
    if (e != nullptr) clReleaseEvent(e);
  return result;
}

// Runs a case's timed iterations, each `--ocltk_calls` calls (time_calls) reported as the
// time of one (manual time). Returns the sums over the iterations of the per-call seconds,
// wall seconds and last-command seconds; an unusable iteration skips the case with its
// sentence (the caller checks state.error_occurred()).
inline IterationTime time_iterations(benchmark::State& state, Session& session, const EnqueueCall& enqueue) {
  IterationTime sums;
  for (auto _ : state) {
    const IterationTime t = time_calls(session, flags().calls, enqueue);
    if (!t.error.empty()) {
      state.SkipWithError(t.error.c_str());
      break;
    }
    state.SetIterationTime(t.seconds);
    sums.seconds += t.seconds;
    sums.wall_seconds += t.wall_seconds;
    sums.last_seconds += t.last_seconds;
  }
  return sums;
}

// Uniform in [-1, 1], reproducible from the seed.
inline std::vector<float> random_matrix(std::size_t count, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// The label of an ocltk row: which algorithm and parameters served it, and from where.
inline std::string choice_label(const Choice& c) {
  std::string where = c.source == "built-in" ? "built-in" : c.source + " (match: " + to_string(c.level) + ")";
  return "choice=" + where + " " + c.algorithm + " {" + format_params(c.params) + "}";
}

inline std::string clblast_version() {
  return std::to_string(CLBLAST_VERSION_MAJOR) + "." + std::to_string(CLBLAST_VERSION_MINOR) + "." +
         std::to_string(CLBLAST_VERSION_PATCH);
}

}  // namespace ocltk::bench

// Where `tune` builds candidates ahead of their measurement (TuneOptions::builders):
//
// - shared: threads building into the measuring runtime's own program cache, so the measuring
//   thread finds the program built in memory;
// - contexts: threads with a context of their own, whose builds reach the measuring context
//   through the driver's cache on disk: on PoCL, whose compiler works one build at a time per
//   context and compiles a kernel for its workgroup size at the first launch, a worker
//   launches the candidate once on a small problem of its family, and the measuring context
//   then finds both the program and that compiled kernel in POCL_CACHE_DIR (a first launch
//   of 0.1-0.2 s instead of 0.5-3.5 s);
// - processes: `ocltk tune --build-worker` children, each with its own context, whose
//   builds reach the measuring process through ocltk's program cache on disk and the
//   driver's (on NVIDIA, whose driver overlapped the builds of four processes, 49 s of build
//   time in 21 s, where one process built one program at a time).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/runtime.hpp"
#include "workload.hpp"

namespace ocltk::tuner {

enum class Builders { kAuto, kShared, kContexts, kProcesses };
const char* to_string(Builders b);
std::optional<Builders> parse_builders(const std::string& name);

// Whether the device compiles a kernel for its workgroup size at its first launch, and keeps
// its own cache of compiled programs on disk (PoCL): building a program then leaves most of
// the work to the launch, and asking for the program's binary compiles every kernel again for
// any workgroup size (ProgramCache::set_writes_to_disk).
bool compiles_at_first_launch(const DeviceInfo& device);

// A runtime of its own on `rt`'s device: a new context and queue, profiles unused, the disk
// cache `cache_dir` ("-": none).
Runtime open_runtime_like(const Runtime& rt, const std::string& cache_dir);

// One worker's builds, on a runtime of its own: a candidate is built as the measuring thread
// will use it. Where the device compiles at the first launch, by launching it once on its
// family's small problem (FamilyTuning::small_problem) of the job's input width; elsewhere,
// or for a family without one, through Runtime::program_for. Errors propagate (the
// measuring thread meets them again and records them).
class CandidateBuilder {
 public:
  explicit CandidateBuilder(Runtime& rt);
  void build(const FamilyTuning& tuning, const AlgorithmSpec& algorithm, const Params& params,
             const std::string& variant, int input_bits);

 private:
  Runtime& rt_;
  bool launch_;
  std::map<std::pair<std::string, int>, std::unique_ptr<Workload>> small_;  // (family, input bits)
};

// One request to a worker process: a line of tab-separated fields (family, algorithm,
// parameters as format_params writes them, variant, input bits). Its answer is a line,
// "ok" or "failed<TAB>why".
std::string build_request(const std::string& family, const std::string& algorithm, const Params& params,
                          const std::string& variant, int input_bits);

// The worker's side (`ocltk tune --build-worker`): answers requests from `in` on `out`, one
// line each, until `in` ends. A request naming an unknown family or algorithm, or a
// malformed line, is answered "failed".
void serve_build_requests(Runtime& rt, const std::vector<FamilyTuning>& families, std::istream& in, std::ostream& out);

// A child process that builds: `command` run with one end of a socket as its standard input
// and output (standard error discarded), and `environment` set on top of this process's.
class WorkerProcess {
 public:
  WorkerProcess(std::vector<std::string> command, std::vector<std::pair<std::string, std::string>> environment);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `request` and waits for the answer. Throws Error when the build failed, or when the
  // process died (a driver that crashed on a candidate: it is started again for the next).
  void build(const std::string& request);
  // Ends the process now, from any thread: a build() waiting on it returns (throwing), so
  // that a run that is over does not wait for a build nobody needs, and a build() after it
  // starts another process.
  void kill();
  // Stops the process (SIGSTOP: it keeps its state, and a build() waiting on it goes on
  // waiting) until resume(), from any thread: the build it runs leaves the CPU to a
  // candidate being timed. One started while paused is stopped as it starts.
  void pause();
  void resume();

 private:
  void start();
  void stop();
  std::vector<std::string> command_;
  std::vector<std::pair<std::string, std::string>> environment_;
  std::atomic<pid_t> pid_{-1};
  std::atomic<bool> killed_{false};  // kill() reached the process: build() starts another
  std::mutex pause_mutex_;           // orders pause() and resume() with a start()
  bool paused_ = false;
  int socket_ = -1;
  std::string pending_;  // bytes read past the last answer
};

}  // namespace ocltk::tuner

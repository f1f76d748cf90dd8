#include "build_workers.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <istream>
#include <ostream>
#include <random>
#include <sstream>

#include "ocltk/status.hpp"

extern char** environ;

namespace ocltk::tuner {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(text);
  while (std::getline(in, field, separator)) fields.push_back(field);
  if (!text.empty() && text.back() == separator) fields.emplace_back();
  return fields;
}

// "NAME=V NAME=V" (format_params) back into parameters.
Params parse_params(const std::string& text) {
  Params params;
  for (const std::string& item : split(text, ' ')) {
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "parameter '" + item + "' has no value");
    params[item.substr(0, eq)] = std::stoi(item.substr(eq + 1));
  }
  return params;
}

}  // namespace

const char* to_string(Builders b) {
  switch (b) {
    case Builders::kAuto:
      return "auto";
    case Builders::kShared:
      return "shared";
    case Builders::kContexts:
      return "contexts";
    case Builders::kProcesses:
      return "processes";
  }
  return "auto";
}

std::optional<Builders> parse_builders(const std::string& name) {
  for (Builders b : {Builders::kAuto, Builders::kShared, Builders::kContexts, Builders::kProcesses})
    if (name == to_string(b)) return b;
  return std::nullopt;
}

bool compiles_at_first_launch(const DeviceInfo& device) {
  return device.platform.find("Portable Computing Language") != std::string::npos;
}

Runtime open_runtime_like(const Runtime& rt, const std::string& cache_dir) {
  const boost::compute::device& device = rt.device().handle;
  boost::compute::context context(device);
  boost::compute::command_queue queue(context, device, boost::compute::command_queue::enable_profiling);
  RuntimeOptions options;
  options.use_profiles = false;
  options.cache_dir = cache_dir;
  Result<Runtime> own = Runtime::wrap(context.get(), device.id(), queue.get(), options);
  return std::move(own.value());
}

CandidateBuilder::CandidateBuilder(Runtime& rt) : rt_(rt), launch_(compiles_at_first_launch(rt.device())) {}

void CandidateBuilder::build(const FamilyTuning& tuning, const AlgorithmSpec& algorithm, const Params& params,
                             const std::string& variant, int input_bits) {
  if (!launch_ || !tuning.small_problem) {
    rt_.program_for(algorithm, params, variant);
    return;
  }
  std::unique_ptr<Workload>& small = small_[{tuning.family->name, input_bits}];
  if (!small) {
    std::mt19937_64 rng(1);
    small = tuning.make_for(rt_, tuning.small_problem(input_bits), rng);
    small->timeout_seconds = 30;  // a hang here is the measuring thread's to record
  }
  Choice choice;
  choice.kernel = tuning.family->name;
  choice.shape_class = "build";
  choice.algorithm = algorithm.name;
  choice.params = params;
  small->run(choice);
}

std::string build_request(const std::string& family, const std::string& algorithm, const Params& params,
                          const std::string& variant, int input_bits) {
  return family + "\t" + algorithm + "\t" + format_params(params) + "\t" + variant + "\t" + std::to_string(input_bits) +
         "\n";
}

void serve_build_requests(Runtime& rt, const std::vector<FamilyTuning>& families, std::istream& in, std::ostream& out) {
  CandidateBuilder builder(rt);
  for (std::string line; std::getline(in, line);) {
    std::string answer = "ok";
    try {
      const std::vector<std::string> f = split(line, '\t');
      if (f.size() != 5) throw Error(ErrorCode::kInvalidArgument, "a request has 5 tab-separated fields");
      const FamilyTuning* tuning = nullptr;
      for (const FamilyTuning& t : families)
        if (t.family->name == f[0]) tuning = &t;
      if (tuning == nullptr) throw Error(ErrorCode::kInvalidArgument, "no tunable kernel named '" + f[0] + "'");
      const AlgorithmSpec* algorithm = tuning->family->find_algorithm(f[1]);
      if (algorithm == nullptr) throw Error(ErrorCode::kInvalidArgument, f[0] + " has no algorithm '" + f[1] + "'");
      builder.build(*tuning, *algorithm, parse_params(f[2]), f[3], std::stoi(f[4]));
    } catch (const std::exception& e) {
      std::string why = e.what();
      for (char& c : why)
        if (c == '\n' || c == '\t') c = ' ';
      answer = "failed\t" + why;
    }
    out << answer << "\n" << std::flush;
  }
}

WorkerProcess::WorkerProcess(std::vector<std::string> command,
                             std::vector<std::pair<std::string, std::string>> environment)
    : command_(std::move(command)), environment_(std::move(environment)) {}

WorkerProcess::~WorkerProcess() { stop(); }

void WorkerProcess::start() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(ErrorCode::kIo, std::string("cannot create a socket for a build worker: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : environment_) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : environment_) env.push_back(name + "=" + value);
  std::vector<char*> argv, envp;
  for (std::string& a : command_) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // A process group of its own, so that pause() and kill() reach the processes it starts
  // (PoCL links each kernel with a linker it runs).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int status = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (status != 0) {
    ::close(fds[0]);
    throw Error(ErrorCode::kIo, "cannot start build worker " + command_[0] + ": " + std::strerror(status));
  }
  socket_ = fds[0];
  pending_.clear();
  std::lock_guard<std::mutex> lock(pause_mutex_);
  pid_ = pid;
  if (paused_) ::kill(-pid, SIGSTOP);
}

void WorkerProcess::stop() {
  if (socket_ >= 0) ::close(socket_);  // its input ends: the worker exits
  socket_ = -1;
  std::unique_lock<std::mutex> lock(pause_mutex_);
  const pid_t pid = pid_.exchange(-1);
  if (pid > 0 && paused_) ::kill(-pid, SIGCONT);  // a stopped process would never see its input end
  lock.unlock();
  if (pid > 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
}

void WorkerProcess::kill() {
  // Under the lock stop() reaps with, so the group killed is this worker's, not a reused id.
  std::lock_guard<std::mutex> lock(pause_mutex_);
  if (const pid_t pid = pid_.load(); pid > 0) {
    killed_ = true;
    ::kill(-pid, SIGKILL);
  }
}

void WorkerProcess::pause() {
  // Not waited for: a thread of the worker starting the linker (vfork) does not stop until
  // the linker, stopped too, goes on (waiting for the whole process to stop never ended
  // then); the worker's other threads stop at once.
  std::lock_guard<std::mutex> lock(pause_mutex_);
  paused_ = true;
  if (const pid_t pid = pid_.load(); pid > 0) ::kill(-pid, SIGSTOP);
}

void WorkerProcess::resume() {
  std::lock_guard<std::mutex> lock(pause_mutex_);
  paused_ = false;
  if (const pid_t pid = pid_.load(); pid > 0) ::kill(-pid, SIGCONT);
}

void WorkerProcess::build(const std::string& request) {
  // Killed between builds, or after its answer to the last one was sent: started again
  // rather than failing this request.
  if (killed_.exchange(false) && socket_ >= 0) stop();
  if (socket_ < 0) start();
  auto died = [&](const std::string& when) {
    stop();
    return Error(ErrorCode::kDevice, "the build worker ended " + when + " (started again for the next candidate)");
  };
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(socket_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw died("before it took the request");
    sent += std::size_t(n);
  }
  while (pending_.find('\n') == std::string::npos) {
    char buf[4096];
    const ssize_t n = ::recv(socket_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw died("while building");
    pending_.append(buf, std::size_t(n));
  }
  const std::size_t end = pending_.find('\n');
  const std::string answer = pending_.substr(0, end);
  pending_.erase(0, end + 1);
  if (answer.rfind("failed", 0) == 0)
    throw Error(ErrorCode::kDevice, "build worker: " + (answer.size() > 7 ? answer.substr(7) : "failed"));
}

}  // namespace ocltk::tuner

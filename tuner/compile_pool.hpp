// Compiles candidates on worker threads while the device measures others.
//
// Jobs are urgent (about to be measured) or speculative (may be measured: a strategy's
// likely next points, later classes' opening points). Urgent jobs go ahead of speculative
// ones, and at most `max_speculative` speculative builds run at once. The bound is for
// drivers that build one program at a time however many threads ask (NVIDIA's OpenCL
// seemed to on the H200; builds of separate processes do overlap there, those of one
// process's threads were not measured): a build that is needed now then queues inside
// the driver behind at most `max_speculative` speculative ones, not behind one per
// thread. With every thread on speculative builds, a class's next candidate once waited
// about 20 s and the class ran far past its budget, leaving the later classes almost none.
//
// Each job is queued for owners (the classes of a run that may measure it). When an owner's
// work is over (a class's budget ran out), done() takes its jobs that no other owner wants
// out of the queue: a finished class's next points, and the openings of classes long over,
// would otherwise be built ahead of the classes still to come (on the 2-core PoCL machine a
// first tune spent 48 s of its workers' 250 on such builds, while classes waited for their
// own). The jobs other owners want stay, urgent ones turned speculative, so they no longer
// take every thread ahead of the next class's own urgent builds. Such a job already running
// is abandoned where the pool was given a way (a worker process can be killed): there two
// builds for the class that had just ended, of 5 s and 14 s (wall time, paused while
// candidates were timed), held both workers while the next class built its first points on
// the measuring thread.
//
// Workers may build where the measuring thread cannot use the result directly (a context or a
// process of their own, which leaves the program in a cache on disk): before it needs a
// program, the measuring thread claim()s it, waiting while a worker builds it and taking it
// back when none has started it. hold() keeps every worker idle while the device times a
// candidate, where building and measuring share one CPU (or only keeps new builds from
// starting, where the running ones can be paused).
//
// The build function is called once per distinct `options` string (again only where an
// abandoned build is wanted again), with the index of the worker thread that runs it; its
// errors are left for the measuring thread to meet and record when it builds the same
// program.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace ocltk::tuner {

template <typename Item>
class CompilePool {
 public:
  using Build = std::function<void(const Item&, int worker)>;
  // Stops the build `worker` runs now, from another thread (its Build call then returns or
  // throws); called with the pool's lock held, possibly just after that build returned.
  using Abandon = std::function<void(int worker)>;

  // max_speculative 0: speculative jobs wait until they become urgent. Without `abandon`,
  // a running build nobody wants any more runs to its end.
  CompilePool(int threads, int max_speculative, Build build, Abandon abandon = nullptr)
      : max_speculative_(std::max(0, max_speculative)), build_(std::move(build)), abandon_(std::move(abandon)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run_builds(i); });
  }
  ~CompilePool() {
    stop();
    for (std::thread& t : threads_) t.join();
  }
  // No job starts from now on; the running ones end as they will (the destructor waits).
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
  }
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  bool enabled() const { return !threads_.empty(); }
  int threads() const { return int(threads_.size()); }

  // The measuring thread is about to need `options` built: waits while a worker builds it;
  // a job still queued leaves the queue (the caller builds it). The seconds a worker spent on
  // it, where one built it (or failed to: the caller meets the error again).
  std::optional<double> claim(const std::string& options) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.options == options; });
    if (queued != queue_.end()) {
      queue_.erase(queued);
      return std::nullopt;
    }
    wake_.wait(lock, [&] { return running_job(options) == nullptr; });
    const auto it = finished_.find(options);
    return it == finished_.end() ? std::nullopt : std::optional<double>(it->second);
  }

  // Whether a worker has finished building `options`.
  bool finished(const std::string& options) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_.count(options) != 0;
  }

  // No job starts until release(); returns once the running ones have ended, or at once with
  // `wait_for_running` false (where their owner stops them another way: Prefetcher pauses
  // the build processes).
  void hold(bool wait_for_running = true) {
    std::unique_lock<std::mutex> lock(mutex_);
    held_ = true;
    if (wait_for_running) wake_.wait(lock, [&] { return running_.empty(); });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    wake_.notify_all();
  }

  // `owner`'s work is over: its queued jobs leave the queue where no other owner (nor an
  // add() without one) wants them, and may be queued again; every job still queued becomes
  // speculative, in its place. Such a running job is abandoned (with `abandon`: it is not
  // counted as built, and may be queued again); the others go on.
  void done(int owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [worker, job] : running_) {
      job.owners.erase(owner);
      if (job.owners.empty() && !job.kept && abandon_ && abandoned_.insert(job.options).second) abandon_(worker);
    }
    for (auto it = queue_.begin(); it != queue_.end();) {
      it->owners.erase(owner);
      if (it->owners.empty() && !it->kept) {
        queued_.erase(it->options);
        it = queue_.erase(it);
      } else {
        it->urgent = false;
        ++it;
      }
    }
  }

  // Queues the build of `item` under `options` for `owner` (each options string once; a
  // negative owner: for none, kept until built or claimed). Urgent jobs go after the urgent
  // ones already queued and before every speculative one; a speculative job still queued
  // that becomes urgent moves up. A running job gains the owner; an abandoned one still
  // running is queued again when it ends.
  void add(const Item& item, const std::string& options, bool urgent, int owner = -1) {
    if (threads_.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queued_.insert(options).second) {
        Job job{item, options, false, {}};
        job.want(owner, urgent);
        enqueue(std::move(job));
      } else if (const auto it =
                     std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.options == options; });
                 it != queue_.end()) {
        if (urgent && !it->urgent) {  // still waiting, as a speculative build: moves up
          Job job = std::move(*it);
          queue_.erase(it);
          job.want(owner, urgent);
          enqueue(std::move(job));
        } else {
          it->want(owner, urgent);
        }
      } else if (Job* running = running_job(options)) {  // an abandoned one is wanted anew
        (abandoned_.count(options) ? requeue_.try_emplace(options, Job{item, options, false, {}}).first->second
                                   : *running)
            .want(owner, urgent);
      }  // else built or claimed
    }
    wake_.notify_all();
  }

 private:
  struct Job {
    Item item;
    std::string options;
    bool urgent = true;
    std::set<int> owners;  // the classes that may measure it
    bool kept = false;     // queued once for no owner: done() leaves it
    void want(int owner, bool now) {
      if (owner >= 0) owners.insert(owner);
      kept = kept || owner < 0;
      urgent = urgent || now;
    }
  };

  // Urgent jobs after the urgent ones already queued, before every speculative one; those last.
  void enqueue(Job job) {
    auto at = queue_.begin();
    if (job.urgent)
      while (at != queue_.end() && at->urgent) ++at;
    else
      at = queue_.end();
    queue_.insert(at, std::move(job));
  }
  Job* running_job(const std::string& options) {
    for (auto& [worker, job] : running_)
      if (job.options == options) return &job;
    return nullptr;
  }

  // The front job may start: nothing holds the workers, and it is urgent (urgent jobs are
  // always in front) or fewer than max_speculative_ speculative builds are running.
  bool can_start() const {
    return !held_ && !queue_.empty() && (queue_.front().urgent || speculative_running_ < max_speculative_);
  }

  void run_builds(int worker) {
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || can_start(); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        if (!job.urgent) ++speculative_running_;
        running_[worker] = job;
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        build_(job.item, worker);
      } catch (...) {
        // Met again, and recorded, when the candidate is measured.
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!job.urgent) --speculative_running_;
        running_.erase(worker);
        if (abandoned_.erase(job.options) != 0) {
          if (auto again = requeue_.extract(job.options)) {  // wanted again meanwhile
            enqueue(std::move(again.mapped()));
          } else {
            queued_.erase(job.options);
          }
        } else {
          finished_[job.options] = seconds;
        }
      }
      wake_.notify_all();
    }
  }

  const int max_speculative_;
  Build build_;
  Abandon abandon_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::set<std::string> queued_;
  std::map<int, Job> running_;              // by worker
  std::map<std::string, double> finished_;  // options -> seconds the build took
  std::set<std::string> abandoned_;         // running, stopped by done()
  std::map<std::string, Job> requeue_;      // of those, wanted again by an add()
  int speculative_running_ = 0;
  bool held_ = false;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace ocltk::tuner

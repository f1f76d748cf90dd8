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
// When the work that asked for urgent builds is over (a class's budget ran out), demote()
// turns the urgent jobs still queued into speculative ones: they stay useful (programs
// serve every class of their family) but no longer take every thread ahead of the next
// class's own urgent builds.
//
// Workers may build where the measuring thread cannot use the result directly (a context or a
// process of their own, which leaves the program in a cache on disk): before it needs a
// program, the measuring thread claim()s it, waiting while a worker builds it and taking it
// back when none has started it. hold() keeps every worker idle while the device times a
// candidate, where building and measuring share one CPU (or only keeps new builds from
// starting, where the running ones can be paused).
//
// The build function is called once per distinct `options` string, with the index of the
// worker thread that runs it; its errors are left for the measuring thread to meet and
// record when it builds the same program.
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

  // max_speculative 0: speculative jobs wait until they become urgent.
  CompilePool(int threads, int max_speculative, Build build)
      : max_speculative_(std::max(0, max_speculative)), build_(std::move(build)) {
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
    wake_.wait(lock, [&] { return running_.count(options) == 0; });
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

  // Every queued urgent job becomes speculative, in its place in the queue; running builds
  // go on.
  void demote() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Job& job : queue_) job.urgent = false;
  }

  // Queues the build of `item` under `options` (each options string once). Urgent jobs go
  // after the urgent ones already queued and before every speculative one; a speculative
  // job still queued that becomes urgent moves up.
  void add(const Item& item, const std::string& options, bool urgent) {
    if (threads_.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::size_t insert_at = 0;
      while (insert_at < queue_.size() && queue_[insert_at].urgent) ++insert_at;
      if (queued_.insert(options).second) {
        if (urgent)
          queue_.insert(queue_.begin() + long(insert_at), Job{item, options, true});
        else
          queue_.push_back(Job{item, options, false});
      } else if (urgent) {
        const auto it = std::find_if(queue_.begin() + long(insert_at), queue_.end(),
                                     [&](const Job& j) { return j.options == options; });
        if (it != queue_.end()) {  // still waiting, as a speculative build
          Job job = *it;
          job.urgent = true;
          queue_.erase(it);
          queue_.insert(queue_.begin() + long(insert_at), job);
        }
      }
    }
    wake_.notify_all();
  }

 private:
  struct Job {
    Item item;
    std::string options;
    bool urgent = true;
  };

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
        running_.insert(job.options);
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
        running_.erase(job.options);
        finished_[job.options] = seconds;
      }
      wake_.notify_all();
    }
  }

  const int max_speculative_;
  Build build_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  std::set<std::string> queued_;
  std::set<std::string> running_;
  std::map<std::string, double> finished_;  // options -> seconds the build took
  int speculative_running_ = 0;
  bool held_ = false;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace ocltk::tuner

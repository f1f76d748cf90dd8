#include "workload.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <optional>
#include <sstream>
#include <thread>

namespace ocltk::tuner {

void wait_for_event(cl_event event, double timeout_seconds, double start_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::optional<Clock::time_point> running;  // when it was first seen running
  auto pause = std::chrono::microseconds(20);
  // Polling does not submit work as clWaitForEvents does: flush the event's queue first.
  cl_command_queue queue = nullptr;
  if (clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, sizeof queue, &queue, nullptr) == CL_SUCCESS && queue != nullptr)
    clFlush(queue);
  while (true) {
    cl_int exec = CL_QUEUED;
    const cl_int status = clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof exec, &exec, nullptr);
    if (status != CL_SUCCESS) throw Error(ErrorCode::kDevice, "clGetEventInfo failed", status);
    if (exec < 0) throw Error(ErrorCode::kDevice, "launch failed with OpenCL status " + std::to_string(exec), exec);
    if (exec == CL_COMPLETE) return;
    const auto now = Clock::now();
    if (exec == CL_RUNNING && !running) running = now;
    const double waited = std::chrono::duration<double>(now - start).count();
    const double ran = running ? std::chrono::duration<double>(now - *running).count() : 0;
    if (timeout_seconds > 0 &&
        (ran > timeout_seconds || (!running && waited > timeout_seconds + std::max(0.0, start_seconds)))) {
      std::ostringstream msg;
      msg << "hang or far too slow: " << (running ? "still running after " : "not done after ") << std::setprecision(3)
          << (running ? timeout_seconds : waited) << " s";
      throw CandidateHang(msg.str());
    }
    // Short kernels are timed by events, not by this loop: polling only bounds the wait.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

}  // namespace ocltk::tuner

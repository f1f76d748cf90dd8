// Internal to the runtime: the enqueue mechanics every kernel family shares.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ocltk/runtime.hpp"

namespace ocltk::detail {

// Throws Error(kDevice) naming `what` and the OpenCL status when `status` is an error.
void check_cl(cl_int status, const std::string& what);

// Whether `queue` runs commands out of order (CL_QUEUE_PROPERTIES).
bool queue_out_of_order(cl_command_queue queue);

// Sets a kernel's arguments in order: (size, pointer) pairs.
using KernelArgs = std::vector<std::pair<std::size_t, const void*>>;
void set_kernel_args(cl_kernel kernel, const KernelArgs& args, const std::string& kernel_name);

// Enqueues dispatches in order on the launch's queue (or `default_queue`): the first waits
// for the caller's wait list, each later one for the one before it. finish() hands the
// last event to Launch::event, or releases it; a chain left unfinished (an exception)
// releases it too. Events are created only where they are used: for Launch::event and
// Launch::first_event, and between dispatches on an out-of-order queue (an in-order one
// orders them itself). A launch that asks for none, as an engine's hot path, creates none:
// on NVIDIA's OpenCL an event costs the host more than the enqueue itself.
class DispatchChain {
 public:
  // `default_out_of_order`: the default queue's mode (Runtime::queue_out_of_order); another
  // Launch::queue's is asked here.
  DispatchChain(cl_command_queue default_queue, bool default_out_of_order, const Launch& launch);
  ~DispatchChain();
  DispatchChain(const DispatchChain&) = delete;
  DispatchChain& operator=(const DispatchChain&) = delete;

  void enqueue(cl_kernel kernel, cl_uint dims, const std::size_t* global, const std::size_t* local,
               const std::string& kernel_name);
  void finish();

 private:
  const Launch& launch_;
  cl_command_queue queue_;
  int dispatches_ = 0;
  bool out_of_order_;  // the queue's mode
  cl_event last_ = nullptr;
  cl_event first_ = nullptr;  // retained for Launch::first_event
};

}  // namespace ocltk::detail

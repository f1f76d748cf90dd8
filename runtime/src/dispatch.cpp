#include "dispatch.hpp"

namespace ocltk::detail {

void check_cl(cl_int status, const std::string& what) {
  if (status != CL_SUCCESS)
    throw Error(ErrorCode::kDevice, what + " failed with OpenCL status " + std::to_string(status), status);
}

bool queue_out_of_order(cl_command_queue queue) {
  cl_command_queue_properties properties = 0;
  check_cl(clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof properties, &properties, nullptr),
           "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)");
  return (properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
}

void set_kernel_args(cl_kernel kernel, const KernelArgs& args, const std::string& kernel_name) {
  for (cl_uint i = 0; i < args.size(); ++i) {
    const cl_int status = clSetKernelArg(kernel, i, args[i].first, args[i].second);
    if (status != CL_SUCCESS) check_cl(status, "clSetKernelArg(" + kernel_name + ", " + std::to_string(i) + ")");
  }
}

DispatchChain::DispatchChain(cl_command_queue default_queue, bool default_out_of_order, const Launch& launch)
    : launch_(launch),
      queue_(launch.queue ? launch.queue : default_queue),
      out_of_order_(queue_ == default_queue ? default_out_of_order : queue_out_of_order(queue_)) {}

DispatchChain::~DispatchChain() {
  if (last_) clReleaseEvent(last_);
  if (first_) clReleaseEvent(first_);
}

void DispatchChain::enqueue(cl_kernel kernel, cl_uint dims, const std::size_t* global, const std::size_t* local,
                            const std::string& kernel_name) {
  const bool first = dispatches_ == 0;
  // On an in-order queue the earlier dispatches of the chain are waited for by the queue.
  const cl_uint waits = first ? cl_uint(launch_.wait_for.size()) : (out_of_order_ && last_ ? 1 : 0);
  const cl_event* list = first ? (launch_.wait_for.empty() ? nullptr : launch_.wait_for.data()) : &last_;
  const bool wanted = launch_.event != nullptr || out_of_order_ || (first && launch_.first_event != nullptr);
  cl_event event = nullptr;
  const cl_int status = clEnqueueNDRangeKernel(queue_, kernel, dims, nullptr, global, local, waits,
                                               waits ? list : nullptr, wanted ? &event : nullptr);
  if (status == CL_SUCCESS) {
    ++dispatches_;
    if (last_) clReleaseEvent(last_);
    last_ = event;
    if (first && launch_.first_event) {
      clRetainEvent(event);
      first_ = event;
    }
  }
  if (status != CL_SUCCESS) check_cl(status, "clEnqueueNDRangeKernel(" + kernel_name + ")");
}

void DispatchChain::finish() {
  if (launch_.first_event) {
    *launch_.first_event = first_;
    first_ = nullptr;
  }
  if (launch_.event) {
    *launch_.event = last_;
    last_ = nullptr;
  }
}

}  // namespace ocltk::detail

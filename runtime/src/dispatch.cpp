#include "dispatch.hpp"

namespace ocltk::detail {

void check_cl(cl_int status, const std::string& what) {
  if (status != CL_SUCCESS)
    throw Error(ErrorCode::kDevice, what + " failed with OpenCL status " + std::to_string(status), status);
}

void set_kernel_args(cl_kernel kernel, const KernelArgs& args, const std::string& kernel_name) {
  for (cl_uint i = 0; i < args.size(); ++i)
    check_cl(clSetKernelArg(kernel, i, args[i].first, args[i].second), "clSetKernelArg(" + kernel_name + ")");
}

DispatchChain::DispatchChain(cl_command_queue default_queue, const Launch& launch)
    : launch_(launch), queue_(launch.queue ? launch.queue : default_queue) {}

DispatchChain::~DispatchChain() {
  if (last_) clReleaseEvent(last_);
  if (first_) clReleaseEvent(first_);
}

void DispatchChain::enqueue(cl_kernel kernel, cl_uint dims, const std::size_t* global, const std::size_t* local,
                            const std::string& kernel_name) {
  const cl_uint waits = last_ ? 1 : cl_uint(launch_.wait_for.size());
  const cl_event* list = last_ ? &last_ : (launch_.wait_for.empty() ? nullptr : launch_.wait_for.data());
  cl_event event = nullptr;
  const cl_int status = clEnqueueNDRangeKernel(queue_, kernel, dims, nullptr, global, local, waits, list, &event);
  if (status == CL_SUCCESS) {
    if (last_) clReleaseEvent(last_);
    last_ = event;
    if (first_ == nullptr && launch_.first_event) {
      clRetainEvent(event);
      first_ = event;
    }
  }
  check_cl(status, "clEnqueueNDRangeKernel(" + kernel_name + ")");
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

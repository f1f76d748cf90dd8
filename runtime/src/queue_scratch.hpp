// Internal to the runtime: device scratch buffers of the launches on one command queue (the
// split sums of gemm_nt's tcs and of the NF4 backwards, the NF4 forward tc's split x).
#pragma once

#include <CL/cl.h>

#include <boost/compute/core.hpp>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "ocltk/runtime.hpp"

namespace ocltk::detail {

// A queue's scratch. Launches on an in-order queue run one after the other, so they share it
// safely. Grown, never shrunk, kept for the life of the process (the map is never destroyed,
// so no OpenCL object is released after the driver has unloaded). Counters are created
// zeroed and every launch leaves them at zero.
struct QueueScratch {
  boost::compute::buffer partials, counters, x_pairs, x_shifts;
};

// Held while reading or growing any queue's scratch.
std::mutex& queue_scratch_mutex();

// The queue's scratch; the caller holds queue_scratch_mutex().
QueueScratch& queue_scratch(cl_command_queue queue);

// Grows b to at least `bytes`, in 4 MiB steps.
void grow_scratch(Runtime& rt, boost::compute::buffer& b, std::size_t bytes);

struct SplitScratch {
  boost::compute::buffer partials, counters;
};

// Partial sums of at least `partial_bytes` and zeroed counters of at least `counter_bytes`
// (0: none, the counters buffer may then be empty).
SplitScratch split_scratch(Runtime& rt, cl_command_queue queue, std::size_t partial_bytes, std::size_t counter_bytes);

}  // namespace ocltk::detail

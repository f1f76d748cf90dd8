#include "queue_scratch.hpp"

#include <map>
#include <vector>

namespace ocltk::detail {

std::mutex& queue_scratch_mutex() {
  static std::mutex mutex;
  return mutex;
}

QueueScratch& queue_scratch(cl_command_queue queue) {
  static auto* by_queue = new std::map<cl_command_queue, QueueScratch>();
  return (*by_queue)[queue];
}

void grow_scratch(Runtime& rt, boost::compute::buffer& b, std::size_t bytes) {
  constexpr std::size_t kGrain = std::size_t(1) << 22;
  if (b.get() == nullptr || b.size() < bytes)
    b = boost::compute::buffer(rt.context(), (bytes + kGrain - 1) / kGrain * kGrain);
}

SplitScratch split_scratch(Runtime& rt, cl_command_queue queue, std::size_t partial_bytes, std::size_t counter_bytes) {
  std::lock_guard<std::mutex> lock(queue_scratch_mutex());
  QueueScratch& s = queue_scratch(queue);
  grow_scratch(rt, s.partials, partial_bytes);
  if (counter_bytes > 0 && (s.counters.get() == nullptr || s.counters.size() < counter_bytes)) {
    const std::size_t bytes = (counter_bytes + 4095) / 4096 * 4096;
    std::vector<std::uint32_t> zeros(bytes / 4, 0);
    s.counters = boost::compute::buffer(rt.context(), bytes, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.data());
  }
  return {s.partials, s.counters};
}

}  // namespace ocltk::detail

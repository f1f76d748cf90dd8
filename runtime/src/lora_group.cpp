// LoRA's segments from per-row adapter ids on the device, and the row moves between the
// caller's order and the grouped one (kernels/lora_group.cl). The kernels have no tunable
// parameters; they go through the same program cache and launch path as every family.
#include <climits>

#include "dispatch.hpp"
#include "ocltk/lora.hpp"
#include "ocltk/status.hpp"

namespace ocltk {
namespace {

const AlgorithmSpec& group_algorithm() {
  static const AlgorithmSpec spec = [] {
    AlgorithmSpec a;
    a.name = "group";
    a.source_name = "lora_group.cl";
    a.local_mem_bytes = [](const Params&, const DeviceLimits&) -> std::uint64_t { return 0; };
    a.local_size = [](const Params&) -> std::array<std::size_t, 2> { return {1, 1}; };
    return a;
  }();
  return spec;
}

Error invalid(const std::string& message) { return Error(ErrorCode::kInvalidArgument, message); }

void need(Runtime& rt, const std::string& who, const char* name, cl_mem buffer, double bytes) {
  if (bytes <= 0) return;
  if (buffer == nullptr) throw invalid(who + ": buffer " + name + " is null");
  cl_context ctx = nullptr;
  std::size_t size = 0;
  if (clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS ||
      clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size, nullptr) != CL_SUCCESS)
    throw invalid(who + ": buffer " + name + " is not a valid OpenCL buffer");
  if (ctx != rt.context().get()) throw invalid(who + ": buffer " + name + " belongs to another OpenCL context");
  if (bytes > double(size))
    throw invalid(who + ": buffer " + name + " holds " + std::to_string(size) + " bytes but needs " +
                  std::to_string(std::uint64_t(bytes)));
}

// Enqueues the group kernels in order on one queue; each waits for the previous one.
class Sequence {
 public:
  Sequence(Runtime& rt, const Launch& options) : rt_(rt), chain_(rt.queue().get(), rt.queue_out_of_order(), options) {}
  template <class... Args>
  void run(const std::string& name, std::size_t g0, std::size_t g1, const Args&... args) {
    Choice choice;
    choice.kernel = "lora_group";
    choice.algorithm = "group";
    rt_.launch(choice, group_algorithm(), name, [&](cl_kernel kernel) {
      detail::set_kernel_args(kernel, {{sizeof(Args), &args}...}, name);
      const std::size_t global[2] = {g0, g1};
      chain_.enqueue(kernel, g1 > 1 ? 2 : 1, global, nullptr, name);
    });
  }
  void finish() { chain_.finish(); }

 private:
  Runtime& rt_;
  detail::DispatchChain chain_;
};

Status permute(Runtime& rt, const LoraPermuteArgs& a, const Launch& launch, bool scatter) {
  return guard([&] {
    const std::string who = scatter ? "lora_scatter_rows" : "lora_gather_rows";
    if (a.rows < 0 || a.rows >= INT_MAX) throw invalid(who + ": rows = " + std::to_string(a.rows) + " is out of range");
    if (a.features < 1 || a.features >= INT_MAX)
      throw invalid(who + ": features = " + std::to_string(a.features) + " must be from 1 to 2^31 - 2");
    const double bytes = double(a.rows) * double(a.features) * double(element_size(a.type));
    need(rt, who, "row_index", a.row_index, 4.0 * double(a.rows));
    need(rt, who, "input", a.input, bytes);
    need(rt, who, "output", a.output, bytes);
    if (a.input != nullptr && a.input == a.output) throw invalid(who + ": input and output are the same buffer");
    Sequence seq(rt, launch);
    if (a.rows > 0) {
      const cl_int rows = cl_int(a.rows), features = cl_int(a.features), esize = cl_int(element_size(a.type)),
                   direction = scatter ? 1 : 0;
      seq.run("lora_permute_rows", std::size_t(a.features), std::size_t(a.rows), rows, features, esize, direction,
              a.row_index, a.input, a.output);
    }
    seq.finish();
  });
}

}  // namespace

Status lora_group_rows(Runtime& rt, const LoraGroupArgs& a, const Launch& launch) {
  return guard([&] {
    const std::string who = "lora_group_rows";
    if (a.rows < 0 || a.rows >= INT_MAX) throw invalid(who + ": rows = " + std::to_string(a.rows) + " is out of range");
    if (a.adapters < 1 || a.adapters >= INT_MAX - 2)
      throw invalid(who + ": adapters = " + std::to_string(a.adapters) + " must be at least 1");
    need(rt, who, "row_adapters", a.row_adapters, 4.0 * double(a.rows));
    need(rt, who, "offsets", a.offsets, 4.0 * double(a.adapters + 2));
    need(rt, who, "segment_adapters", a.segment_adapters, 4.0 * double(a.adapters + 1));
    need(rt, who, "row_index", a.row_index, 4.0 * double(a.rows));
    // Buffers the kernels take but never read where there are no rows.
    const cl_mem ids = a.row_adapters ? a.row_adapters : a.offsets, index = a.row_index ? a.row_index : a.offsets;
    const cl_int M = cl_int(a.rows), L = cl_int(a.adapters);
    Sequence seq(rt, launch);
    seq.run("lora_group_count", std::size_t(L + 1), 1, M, L, ids, a.offsets);
    seq.run("lora_group_scan", 1, 1, L, a.offsets, a.segment_adapters);
    if (M > 0) seq.run("lora_group_place", std::size_t(L + 1), 1, M, L, ids, a.offsets, index);
    seq.finish();
  });
}

Status lora_gather_rows(Runtime& rt, const LoraPermuteArgs& args, const Launch& launch) {
  return permute(rt, args, launch, false);
}

Status lora_scatter_rows(Runtime& rt, const LoraPermuteArgs& args, const Launch& launch) {
  return permute(rt, args, launch, true);
}

}  // namespace ocltk

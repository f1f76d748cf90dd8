// Device routing for the nf4 products: groups (token, slot) pairs by expert and scatters
// grouped results back (kernels/nf4_route.cl). The kernels have no tunable parameters;
// they go through the same program cache and launch path as every family.
#include <climits>

#include "dispatch.hpp"
#include "ocltk/nf4.hpp"
#include "ocltk/status.hpp"

namespace ocltk {
namespace {

const AlgorithmSpec& route_algorithm() {
  static const AlgorithmSpec spec = [] {
    AlgorithmSpec a;
    a.name = "route";
    a.source_name = "nf4_route.cl";
    a.local_mem_bytes = [](const Params&, const DeviceLimits&) -> std::uint64_t { return 0; };
    a.local_size = [](const Params&) -> std::array<std::size_t, 2> { return {1, 1}; };
    return a;
  }();
  return spec;
}

void need(Runtime& rt, const std::string& who, const char* name, cl_mem buffer, double bytes) {
  if (bytes <= 0) return;
  if (buffer == nullptr) throw Error(ErrorCode::kInvalidArgument, who + ": buffer " + name + " is null");
  cl_context ctx = nullptr;
  std::size_t size = 0;
  if (clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS ||
      clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof size, &size, nullptr) != CL_SUCCESS)
    throw Error(ErrorCode::kInvalidArgument, who + ": buffer " + name + " is not a valid OpenCL buffer");
  if (ctx != rt.context().get())
    throw Error(ErrorCode::kInvalidArgument, who + ": buffer " + name + " belongs to another OpenCL context");
  if (bytes > double(size))
    throw Error(ErrorCode::kInvalidArgument, who + ": buffer " + name + " holds " + std::to_string(size) +
                                                 " bytes, needs " + std::to_string(std::uint64_t(bytes)));
}

// Enqueues the routing kernels in order on one queue; each waits for the previous one.
class Sequence {
 public:
  Sequence(Runtime& rt, const Launch& options) : rt_(rt), chain_(rt.queue().get(), rt.queue_out_of_order(), options) {}
  template <class... Args>
  void run(const std::string& name, std::size_t g0, std::size_t g1, const Args&... args) {
    Choice choice;
    choice.kernel = "nf4_route";
    choice.algorithm = "route";
    rt_.launch(choice, route_algorithm(), name, [&](cl_kernel kernel) {
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

}  // namespace

Status route_tokens(Runtime& rt, const RouteArgs& a, const Launch& launch) {
  return guard([&] {
    const std::string who = "route_tokens";
    if (a.tokens < 0 || a.top_k < 1 || a.experts < 1 || a.features < 1)
      throw Error(ErrorCode::kInvalidArgument, who + ": need tokens >= 0, top_k >= 1, experts >= 1, features >= 1");
    const double pairs = double(a.tokens) * double(a.top_k);
    if (pairs >= double(INT_MAX) || a.experts >= INT_MAX || a.features >= kNf4MaxDim)
      throw Error(ErrorCode::kInvalidArgument, who + ": tokens · top_k, experts and features must stay below 2^31");
    const std::size_t es = element_size(a.type);
    need(rt, who, "expert_ids", a.expert_ids, 4 * pairs);
    need(rt, who, "input", a.input, double(a.tokens) * a.features * es);
    need(rt, who, "offsets", a.offsets, 4.0 * double(a.experts + 1));
    need(rt, who, "pair_row", a.pair_row, 4 * pairs);
    need(rt, who, "row_token", a.row_token, 4 * pairs);
    need(rt, who, "gathered", a.gathered, pairs * a.features * es);
    const cl_int E = cl_int(a.experts), P = cl_int(pairs), top_k = cl_int(a.top_k), K = cl_int(a.features),
                 esize = cl_int(es);
    Sequence seq(rt, launch);
    seq.run("nf4_route_count", std::size_t(E), 1, E, P, a.expert_ids, a.offsets);
    seq.run("nf4_route_scan", 1, 1, E, a.offsets);
    if (P > 0) {
      seq.run("nf4_route_place", std::size_t(E), 1, E, P, top_k, a.expert_ids, a.offsets, a.pair_row, a.row_token);
      seq.run("nf4_route_drop", std::size_t(P), 1, E, P, a.expert_ids, a.pair_row);
      seq.run("nf4_route_gather", std::size_t(K), std::size_t(P), K, P, E, esize, a.offsets, a.row_token, a.input,
              a.gathered);
    }
    seq.finish();
  });
}

Status scatter_rows(Runtime& rt, const ScatterArgs& a, const Launch& launch) {
  return guard([&] {
    const std::string who = "scatter_rows";
    if (a.tokens < 0 || a.top_k < 1 || a.features < 1 || a.y_rows < 0)
      throw Error(ErrorCode::kInvalidArgument, who + ": need tokens >= 0, top_k >= 1, features >= 1, y_rows >= 0");
    const double pairs = double(a.tokens) * double(a.top_k);
    if (pairs >= double(INT_MAX) || a.features >= kNf4MaxDim || a.y_rows >= INT_MAX)
      throw Error(ErrorCode::kInvalidArgument, who + ": sizes must stay below 2^31");
    const std::size_t es = element_size(a.type);
    need(rt, who, "y", a.y, double(a.y_rows) * a.features * es);
    need(rt, who, "pair_row", a.pair_row, 4 * pairs);
    need(rt, who, "weights", a.weights, 4 * pairs);
    need(rt, who, "output", a.output, double(a.tokens) * a.features * es);
    if (a.tokens == 0) return;
    const cl_int N = cl_int(a.features), T = cl_int(a.tokens), top_k = cl_int(a.top_k), y_rows = cl_int(a.y_rows),
                 type = cl_int(a.type);
    Sequence seq(rt, launch);
    seq.run("nf4_route_scatter", std::size_t(N), std::size_t(T), N, T, top_k, y_rows, type, a.y, a.pair_row, a.weights,
            a.output);
    seq.finish();
  });
}

}  // namespace ocltk

// LoRA as engines run it (docs/lora.md), Y += scale · (X · Aᵀ) · Bᵀ accumulated into an
// existing Y, on one queue and one set of buffers per case:
//
//   lora_apply/decode/MxNxK_rR/TYPE/IMPL          one adapter, M = 1, 4, 16, N = K = 4096, r = 16
//     ours_tuned         ocltk::lora_apply with the profile an engine would get (or --ocltk_profile)
//     ours_default       the same with the built-in choices
//     ocltk_two_calls    ocltk's own two calls: gemm_nt (X·Aᵀ into an f32 T), gemm_nt_accum (T·Bᵀ into Y)
//     clblast_two_calls  the same with two clblast::Gemm<float> calls (f32 only, as ocltk_two_calls)
//   lora_apply/multi_decode/16x4096x4096_L8_r8-64/TYPE/IMPL   16 rows over 8 adapters (2 rows each),
//                                                  ranks 64, 32, 16, 8, 64, 32, 16, 8
//     ours_tuned, ours_default   one launch over the 8 segments
//     ocltk_per_segment  one ocltk::lora_apply per segment (8 launches, each one adapter)
//
// TYPE is f32, f16 or bf16 for X, A, B and Y (the intermediate is always f32). Each row runs
// its implementation once and checks Y against the double reference (lora_reference within
// lora_error_bound) before timing; a wrong result skips the row with the element at fault.
// Counters: GFLOP/s, GB/s of the bytes the problem needs (X read, each used adapter's A and B
// rows up to its rank read once, Y read and written), floor_ms and floor_fraction (those bytes
// at the device's copy bandwidth), verified. bench/lora_ratios.py turns a JSON run into the
// ratios of docs/lora.md.
#include <benchmark/benchmark.h>
#include <clblast.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "common.hpp"
#include "ocltk/lora.hpp"

namespace {

using namespace ocltk;
using namespace ocltk::bench;

constexpr float kScale = 0.5f;  // not 1, so an implementation that drops the scale fails verification
constexpr std::int64_t kWidth = 4096;

enum class Impl { kOursTuned, kOursDefault, kOcltkTwoCalls, kClblastTwoCalls, kOcltkPerSegment };

const char* name_of(Impl impl) {
  switch (impl) {
    case Impl::kOursTuned:
      return "ours_tuned";
    case Impl::kOursDefault:
      return "ours_default";
    case Impl::kOcltkTwoCalls:
      return "ocltk_two_calls";
    case Impl::kClblastTwoCalls:
      return "clblast_two_calls";
    case Impl::kOcltkPerSegment:
      return "ocltk_per_segment";
  }
  return "?";
}

std::string cl_error(const std::string& what, cl_int status) {
  return what + " failed with OpenCL status " + std::to_string(status);
}

// ---- flags of this benchmark, beside common.hpp's ----

double& copy_gbps_flag() {
  static double gbps = 0;
  return gbps;
}

const char* kLoraFlagsHelp =
    "ocltk_bench_lora flags (besides the ocltk_bench flags above):\n"
    "  --ocltk_copy_gbps=X       device copy bandwidth in GB/s (bytes read + written) for floor_fraction;\n"
    "                            default: measured at start with clEnqueueCopyBuffer (1 GiB, 256 MiB on a CPU)\n"
    "Save results with --benchmark_out=OUT/bench-lora.json --benchmark_out_format=json and read the\n"
    "ratios with bench/lora_ratios.py.\n";

bool take_lora_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    const std::string prefix = "--ocltk_copy_gbps=";
    if (arg.compare(0, prefix.size(), prefix) == 0) {
      const std::string v = arg.substr(prefix.size());
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || !std::isfinite(x)) {
        std::fprintf(stderr, "ocltk_bench_lora: --ocltk_copy_gbps=%s: expected a positive number of GB/s\n", v.c_str());
        return false;
      }
      copy_gbps_flag() = x;
      continue;
    }
    if (arg == "--help" || arg == "-h") std::fputs(kLoraFlagsHelp, stdout);
    argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

// ---- device copy bandwidth ----

struct CopyBandwidth {
  double gbps = 0;
  std::string how;
};

// Best of 5 clEnqueueCopyBuffer calls of `bytes` after one warm-up, counting bytes read plus
// bytes written, as GB/s counts the bytes a launch needs.
CopyBandwidth measure_copy_bandwidth(std::size_t bytes) {
  Session& session = Session::get();
  CopyBandwidth result;
  cl_int status = CL_SUCCESS;
  cl_mem src = clCreateBuffer(session.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
  cl_mem dst =
      status == CL_SUCCESS ? clCreateBuffer(session.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status) : nullptr;
  const cl_uchar pattern = 0x5a;
  if (status == CL_SUCCESS)
    status = clEnqueueFillBuffer(session.queue(), src, &pattern, 1, 0, bytes, 0, nullptr, nullptr);
  if (status == CL_SUCCESS)
    status = clEnqueueFillBuffer(session.queue(), dst, &pattern, 1, 0, bytes, 0, nullptr, nullptr);
  double best = 0;
  for (int i = 0; i < 6 && status == CL_SUCCESS; ++i) {
    cl_event event = nullptr;
    status = clEnqueueCopyBuffer(session.queue(), src, dst, 0, 0, bytes, 0, nullptr, &event);
    if (status == CL_SUCCESS) status = clWaitForEvents(1, &event);
    cl_ulong start = 0, end = 0;
    if (status == CL_SUCCESS)
      status = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    if (status == CL_SUCCESS)
      status = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    if (event != nullptr) clReleaseEvent(event);
    if (status == CL_SUCCESS && i > 0 && end > start) best = std::max(best, 2.0 * double(bytes) / double(end - start));
  }
  if (src != nullptr) clReleaseMemObject(src);
  if (dst != nullptr) clReleaseMemObject(dst);
  if (status != CL_SUCCESS || best <= 0) {
    result.how = cl_error("measuring clEnqueueCopyBuffer", status) + "; floor_fraction is 0";
    return result;
  }
  result.gbps = best;  // bytes per ns = GB/s
  result.how = "measured in this run: clEnqueueCopyBuffer of " + std::to_string(bytes >> 20) +
               " MiB, best of 5 after a warm-up, bytes read + written over the event's START..END";
  return result;
}

CopyBandwidth& copy_bandwidth() {
  static CopyBandwidth b;
  return b;
}

// ---- cases and operands ----

struct Case {
  std::string shape_class;  // decode, multi_decode
  LoraProblem problem;
  std::int64_t segments = 0;  // 0: one adapter, no segment buffers
  ElementType type = ElementType::f32;

  std::string id() const {
    std::ostringstream out;
    out << problem.m << "x" << problem.n << "x" << problem.k;
    const std::vector<std::int32_t> r = ranks();
    if (problem.adapters > 1)
      out << "_L" << problem.adapters << "_r" << *std::min_element(r.begin(), r.end()) << "-" << problem.max_rank;
    else
      out << "_r" << problem.max_rank;
    return out.str();
  }
  std::vector<std::int32_t> ranks() const { return lora_problem_ranks(problem); }
  std::vector<std::uint32_t> offsets() const {
    return segments > 0 ? lora_even_offsets(problem.m, segments) : std::vector<std::uint32_t>();
  }
  std::vector<std::int32_t> adapters() const {
    std::vector<std::int32_t> a(static_cast<std::size_t>(segments));
    for (std::int64_t s = 0; s < segments; ++s) a[std::size_t(s)] = std::int32_t(s % problem.adapters);
    return a;
  }
};

// The bytes the problem needs at least once: X read, the A rows and B columns of each adapter
// that a segment uses (up to its rank), Y read and written.
double needed_bytes(const Case& c) {
  const LoraProblem& p = c.problem;
  const double es = double(element_size(c.type));
  const std::vector<std::int32_t> ranks = c.ranks();
  std::vector<bool> used(ranks.size(), c.segments == 0);
  for (std::int32_t a : c.adapters()) used[std::size_t(a)] = true;
  double adapter_elements = 0;
  for (std::size_t a = 0; a < ranks.size(); ++a)
    if (used[a]) adapter_elements += double(ranks[a]) * double(p.k + p.n);
  return es * (double(p.m) * double(p.k) + adapter_elements + 2.0 * double(p.m) * double(p.n));
}

double flops_of(const Case& c) {
  const std::vector<std::int32_t> ranks = c.ranks();
  const std::vector<std::uint32_t> offsets = c.offsets();
  double flops = 0;
  if (c.segments == 0) return 2.0 * double(c.problem.m) * double(ranks[0]) * double(c.problem.k + c.problem.n);
  const std::vector<std::int32_t> adapters = c.adapters();
  for (std::size_t s = 0; s < adapters.size(); ++s)
    flops += 2.0 * double(offsets[s + 1] - offsets[s]) * double(ranks[std::size_t(adapters[s])]) *
             double(c.problem.k + c.problem.n);
  return flops;
}

// One case's operands on the device in its type, with host copies (the values they hold) for
// the reference. Only one case is resident at a time: rows of a case are registered together.
struct Operands {
  Case c;
  std::vector<float> x, a, b, y0;  // packed: M×K, L×R×K, L×N×R, M×N
  cl_mem dx = nullptr, da = nullptr, db = nullptr, dy = nullptr, dt = nullptr;
  cl_mem d_offsets = nullptr, d_adapters = nullptr, d_ranks = nullptr, d_scales = nullptr;
  cl_mem clblast_temp = nullptr;
  std::vector<float> scales;

  Operands() = default;
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() {
    for (cl_mem m : {dx, da, db, dy, dt, d_offsets, d_adapters, d_ranks, d_scales, clblast_temp})
      if (m != nullptr) clReleaseMemObject(m);
  }

  // The launch of lora_apply over the whole case (validate: read the segments back).
  LoraArgs args(bool validate) const {
    LoraArgs g;
    g.problem = c.problem;
    g.x = {dx, 0, 0, c.type};
    g.a = {da, 0, 0, 0, c.type};
    g.b = {db, 0, 0, 0, c.type};
    g.y = {dy, 0, 0, c.type};
    g.scale = kScale;
    g.ranks = c.problem.adapters > 1 ? d_ranks : nullptr;
    g.scales = c.problem.adapters > 1 ? d_scales : nullptr;
    g.segments = c.segments;
    g.offsets = c.segments > 0 ? d_offsets : nullptr;
    g.segment_adapters = c.segments > 0 ? d_adapters : nullptr;
    g.accumulate = true;
    g.validate = validate;
    return g;
  }
};

std::uint32_t seed_of(const Case& c) {
  return std::uint32_t(c.problem.m * 73856093 ^ c.problem.n * 19349663 ^ c.problem.k * 83492791 ^
                       c.problem.adapters * 2654435761u ^ int(c.type));
}

// Uploads `values` in `type`, leaving in them the values the buffer holds.
cl_mem upload(ElementType type, std::vector<float>& values, cl_int* status) {
  const std::size_t es = element_size(type);
  std::vector<std::uint8_t> bytes(values.size() * es);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t bits = float_to_element(type, values[i]);
    std::memcpy(bytes.data() + i * es, &bits, es);
    values[i] = element_to_float(type, bits);
  }
  Session& session = Session::get();
  if (*status != CL_SUCCESS) return nullptr;
  cl_mem m =
      clCreateBuffer(session.context(), CL_MEM_READ_WRITE, std::max<std::size_t>(bytes.size(), 4), nullptr, status);
  if (*status == CL_SUCCESS)
    *status = clEnqueueWriteBuffer(session.queue(), m, CL_TRUE, 0, bytes.size(), bytes.data(), 0, nullptr, nullptr);
  return m;
}

template <class T>
cl_mem upload_raw(const std::vector<T>& values, cl_int* status) {
  if (*status != CL_SUCCESS) return nullptr;
  Session& session = Session::get();
  const std::size_t bytes = std::max<std::size_t>(values.size() * sizeof(T), 4);
  cl_mem m = clCreateBuffer(session.context(), CL_MEM_READ_WRITE, bytes, nullptr, status);
  if (*status == CL_SUCCESS && !values.empty())
    *status = clEnqueueWriteBuffer(session.queue(), m, CL_TRUE, 0, values.size() * sizeof(T), values.data(), 0, nullptr,
                                   nullptr);
  return m;
}

Operands* operands_for(const Case& c, std::string* error) {
  static std::unique_ptr<Operands> resident;
  if (resident && resident->c.id() == c.id() && resident->c.type == c.type && resident->c.segments == c.segments)
    return resident.get();
  resident.reset();
  auto ops = std::make_unique<Operands>();
  ops->c = c;
  const LoraProblem& p = c.problem;
  const std::uint32_t seed = seed_of(c);
  ops->x = random_matrix(std::size_t(p.m * p.k), seed);
  ops->a = random_matrix(std::size_t(p.adapters * p.max_rank * p.k), seed + 1);
  ops->b = random_matrix(std::size_t(p.adapters * p.n * p.max_rank), seed + 2);
  ops->y0 = random_matrix(std::size_t(p.m * p.n), seed + 3);
  ops->scales = random_matrix(std::size_t(p.adapters), seed + 4);
  cl_int status = CL_SUCCESS;
  ops->dx = upload(c.type, ops->x, &status);
  ops->da = upload(c.type, ops->a, &status);
  ops->db = upload(c.type, ops->b, &status);
  ops->dy = upload(c.type, ops->y0, &status);
  std::vector<float> t(std::size_t(p.m * p.max_rank));
  ops->dt = upload_raw(t, &status);
  ops->d_offsets = upload_raw(c.offsets(), &status);
  ops->d_adapters = upload_raw(c.adapters(), &status);
  ops->d_ranks = upload_raw(c.ranks(), &status);
  ops->d_scales = upload_raw(ops->scales, &status);
  if (status != CL_SUCCESS) {
    *error = cl_error("allocating and filling the " + c.id() + " operands", status);
    return nullptr;
  }
  resident = std::move(ops);
  return resident.get();
}

// CLBlast allocates scratch on every call unless given some: an engine would give it, so the
// benchmark does, sized for the larger of the two GEMMs.
std::string prepare_clblast(Operands& ops) {
  if (ops.clblast_temp != nullptr) return "";
  const LoraProblem& p = ops.c.problem;
  cl_command_queue queue = Session::get().queue();
  std::size_t shrink = 0, expand = 0;
  clblast::StatusCode code = clblast::GemmTempBufferSize<float>(
      clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, std::size_t(p.m),
      std::size_t(p.max_rank), std::size_t(p.k), 0, std::size_t(p.k), 0, std::size_t(p.k), 0, std::size_t(p.max_rank),
      &queue, shrink);
  if (code == clblast::StatusCode::kSuccess)
    code = clblast::GemmTempBufferSize<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                                              clblast::Transpose::kYes, std::size_t(p.m), std::size_t(p.n),
                                              std::size_t(p.max_rank), 0, std::size_t(p.max_rank), 0,
                                              std::size_t(p.max_rank), 0, std::size_t(p.n), &queue, expand);
  if (code != clblast::StatusCode::kSuccess)
    return "clblast::GemmTempBufferSize returned status " + std::to_string(int(code));
  cl_int status = CL_SUCCESS;
  ops.clblast_temp = clCreateBuffer(Session::get().context(), CL_MEM_READ_WRITE,
                                    std::max<std::size_t>({shrink, expand, 4}), nullptr, &status);
  return status == CL_SUCCESS ? "" : cl_error("allocating CLBlast's scratch buffer", status);
}

// Enqueues one call of `impl`; *event receives the event of its last command. `validate`:
// the checked call reads the segments back; timed calls do not, as an engine's hot path.
std::string enqueue_call(Impl impl, Operands& ops, bool validate, cl_event* event) {
  Session& session = Session::get();
  const Case& c = ops.c;
  const LoraProblem& p = c.problem;
  Launch launch;
  launch.event = event;
  if (impl == Impl::kOursTuned || impl == Impl::kOursDefault) {
    Runtime& rt = impl == Impl::kOursDefault ? session.defaults() : session.tuned();
    const Status s = lora_apply(rt, ops.args(validate), launch);
    return s.ok() ? "" : s.message();
  }
  if (impl == Impl::kOcltkPerSegment) {
    // One launch per segment: the rows of segment s, adapter s % L alone (its own rank as R,
    // its scale folded in), each a one-adapter lora_apply.
    const std::vector<std::uint32_t> offsets = c.offsets();
    const std::vector<std::int32_t> adapters = c.adapters(), ranks = c.ranks();
    for (std::size_t s = 0; s < adapters.size(); ++s) {
      const std::size_t a = std::size_t(adapters[s]), row0 = offsets[s];
      LoraArgs g;
      g.problem = {std::int64_t(offsets[s + 1] - offsets[s]), p.n, p.k, 1, ranks[a]};
      g.x = {ops.dx, row0 * std::size_t(p.k), 0, c.type};
      g.a = {ops.da, a * std::size_t(p.max_rank * p.k), std::size_t(p.k), 0, c.type};
      g.b = {ops.db, a * std::size_t(p.n * p.max_rank), std::size_t(p.max_rank), 0, c.type};
      g.y = {ops.dy, row0 * std::size_t(p.n), 0, c.type};
      g.scale = kScale * ops.scales[a];
      g.accumulate = true;
      g.validate = false;
      Launch each;
      each.event = s + 1 == adapters.size() ? event : nullptr;
      const Status st = lora_apply(session.tuned(), g, each);
      if (!st.ok()) return st.message();
    }
    return "";
  }
  // Two GEMM calls, f32 (as T): shrink X·Aᵀ into T, expand T·Bᵀ added to Y with the scale.
  if (impl == Impl::kClblastTwoCalls) {
    cl_command_queue queue = session.queue();
    clblast::StatusCode code = clblast::Gemm<float>(
        clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, std::size_t(p.m),
        std::size_t(p.max_rank), std::size_t(p.k), 1.0f, ops.dx, 0, std::size_t(p.k), ops.da, 0, std::size_t(p.k), 0.0f,
        ops.dt, 0, std::size_t(p.max_rank), &queue, nullptr, ops.clblast_temp);
    if (code == clblast::StatusCode::kSuccess)
      code = clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes,
                                  std::size_t(p.m), std::size_t(p.n), std::size_t(p.max_rank), kScale, ops.dt, 0,
                                  std::size_t(p.max_rank), ops.db, 0, std::size_t(p.max_rank), 1.0f, ops.dy, 0,
                                  std::size_t(p.n), &queue, event, ops.clblast_temp);
    return code == clblast::StatusCode::kSuccess ? "" : "clblast::Gemm returned status " + std::to_string(int(code));
  }
  Runtime& rt = session.tuned();
  GemmNtArgs shrink;
  shrink.problem = {p.m, p.max_rank, p.k};
  shrink.a = {ops.dx, 0, 0};
  shrink.b = {ops.da, 0, 0};
  shrink.c = {ops.dt, 0, 0};
  Status s = rt.gemm_nt(shrink);
  if (!s.ok()) return s.message();
  GemmNtArgs expand;
  expand.problem = {p.m, p.n, p.max_rank};
  expand.alpha = kScale;
  expand.a = {ops.dt, 0, 0};
  expand.b = {ops.db, 0, 0};
  expand.c = {ops.dy, 0, 0};
  s = rt.gemm_nt_accum(expand, launch);
  return s.ok() ? "" : s.message();
}

// Runs `impl` once on Y = its initial values and checks every element against lora_reference.
std::string verify(Impl impl, Operands& ops) {
  Session& session = Session::get();
  const Case& c = ops.c;
  const LoraProblem& p = c.problem;
  const std::size_t es = element_size(c.type), count = std::size_t(p.m * p.n);
  std::vector<std::uint8_t> y0(count * es);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = float_to_element(c.type, ops.y0[i]);
    std::memcpy(y0.data() + i * es, &bits, es);
  }
  cl_command_queue queue = session.queue();
  cl_int status = clEnqueueWriteBuffer(queue, ops.dy, CL_TRUE, 0, y0.size(), y0.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) return cl_error("writing Y before the check", status);
  cl_event event = nullptr;
  if (std::string error = enqueue_call(impl, ops, true, &event); !error.empty()) {
    clFinish(queue);
    return error;
  }
  status = clFinish(queue);
  if (event != nullptr) clReleaseEvent(event);
  if (status != CL_SUCCESS) return cl_error("clFinish after the checked call", status);
  std::vector<std::uint8_t> got(y0.size());
  status = clEnqueueReadBuffer(queue, ops.dy, CL_TRUE, 0, got.size(), got.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) return cl_error("reading Y back", status);

  LoraHostSegments host;
  host.offsets = c.offsets();
  host.adapters = c.adapters();
  if (p.adapters > 1) {
    host.ranks = c.ranks();
    host.scales = ops.scales;
  }
  std::vector<double> y_old(ops.y0.begin(), ops.y0.end()), t, t_abs, y, y_abs;
  lora_reference(p, host, kScale, ops.x.data(), ops.a.data(), ops.b.data(), y_old.data(), t, t_abs, y, y_abs);
  const std::vector<std::int32_t> row_adapter = host.row_adapters(p.m);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, got.data() + i * es, es);
    const double v = element_to_float(c.type, bits);
    const std::int32_t a = row_adapter[i / std::size_t(p.n)];
    const std::int64_t rank = a < 0 ? 0 : host.ranks.empty() ? p.max_rank : host.ranks[std::size_t(a)];
    const double bound = lora_error_bound(p.k, rank, y_abs[i], y_old[i], y[i], c.type);
    if (!(std::fabs(v - y[i]) <= bound)) {
      std::ostringstream out;
      out.precision(9);
      out << "wrong result: Y[" << i / std::size_t(p.n) << "][" << i % std::size_t(p.n) << "] = " << v << ", expected "
          << y[i] << " within " << bound;
      return out.str();
    }
  }
  return "";
}

void run_row(benchmark::State& state, Case c, Impl impl) {
  std::string error;
  Operands* ops = operands_for(c, &error);
  if (ops != nullptr && impl == Impl::kClblastTwoCalls) error = prepare_clblast(*ops);
  // The checked call is also the warm-up: it builds the programs and touches the pages.
  if (error.empty()) error = verify(impl, *ops);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  Session& session = Session::get();
  if (impl == Impl::kClblastTwoCalls) {
    state.SetLabel("CLBlast " + clblast_version());
  } else if (impl == Impl::kOcltkTwoCalls) {
    state.SetLabel("gemm_nt then gemm_nt_accum, as the profile chooses each");
  } else {
    state.SetLabel(choice_label((impl == Impl::kOursDefault ? session.defaults() : session.tuned()).last_choice()));
  }
  const IterationTime sums =
      time_iterations(state, session, [&](cl_event* event) { return enqueue_call(impl, *ops, false, event); });
  if (state.error_occurred()) return;
  const double timed = sums.seconds, wall = sums.wall_seconds;
  const double iterations = double(state.iterations()), bytes = needed_bytes(c);
  using benchmark::Counter;
  state.counters["GFLOP/s"] = Counter(flops_of(c) * iterations * 1e-9, Counter::kIsRate);
  state.counters["GB/s"] = Counter(bytes * iterations * 1e-9, Counter::kIsRate);
  const double copy_gbps = copy_bandwidth().gbps, seconds = timed / iterations;
  state.counters["floor_ms"] = copy_gbps > 0 ? bytes * 1e-9 / copy_gbps * 1e3 : 0;
  state.counters["floor_fraction"] = copy_gbps > 0 && seconds > 0 ? bytes * 1e-9 / copy_gbps / seconds : 0;
  state.counters["needed_MB"] = bytes * 1e-6;
  state.counters["verified"] = 1;
  state.counters["timer/wall"] = wall > 0 ? timed / wall : 0;
}

void add_context() {
  Session& session = Session::get();
  const DeviceInfo& d = session.device();
  benchmark::AddCustomContext("ocltk_version", version());
  benchmark::AddCustomContext("clblast_version", clblast_version());
  benchmark::AddCustomContext("device", d.name);
  benchmark::AddCustomContext("device_vendor", d.vendor);
  benchmark::AddCustomContext("device_driver", d.driver);
  benchmark::AddCustomContext("device_platform", d.platform + " (" + d.platform_version + ")");
  benchmark::AddCustomContext("device_type", d.type);
  benchmark::AddCustomContext("device_compute_units", std::to_string(d.compute_units));
  const ProfileSelection& profiles = session.tuned().profiles();
  std::string used;
  for (const ProfileCandidate& c : profiles.candidates)
    used += (used.empty() ? "" : ", ") + c.profile.path + " (" + c.tier + ", match: " + to_string(c.level) + ")";
  benchmark::AddCustomContext("ocltk_profile", used.empty() ? "none: ours_tuned runs the built-in defaults" : used);
  add_timing_context();
  std::ostringstream gbps;
  gbps.precision(4);
  gbps << copy_bandwidth().gbps;
  benchmark::AddCustomContext("copy_gbps", gbps.str());
  benchmark::AddCustomContext("copy_gbps_source", copy_bandwidth().how);
  benchmark::AddCustomContext("floor",
                              "needed bytes = X read + each used adapter's A and B up to its rank read once + Y read "
                              "and written, in the row's type; floor_fraction = needed bytes / copy_gbps / time");
  benchmark::AddCustomContext("scale", std::to_string(kScale) + " (times a random per-adapter scale with L > 1)");
  benchmark::AddCustomContext("ours_timed_calls", "validate = false (the checked call: true), accumulating into Y");
}

}  // namespace

int main(int argc, char** argv) {
  if (!take_lora_flags(&argc, argv)) return 2;
  if (!take_flags(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Session& session = Session::get();
  const bool cpu = session.device().type == "cpu";
  copy_bandwidth() = copy_gbps_flag() > 0
                         ? CopyBandwidth{copy_gbps_flag(), "--ocltk_copy_gbps (given on the command line)"}
                         : measure_copy_bandwidth(cpu ? (std::size_t(256) << 20) : (std::size_t(1) << 30));
  const ElementType types[] = {ElementType::f32, ElementType::f16, ElementType::bf16};
  auto add = [](const Case& c, Impl impl) {
    const std::string name =
        "lora_apply/" + c.shape_class + "/" + c.id() + "/" + to_string(c.type) + "/" + name_of(impl);
    per_call_min_time(
        benchmark::RegisterBenchmark(name.c_str(), run_row, c, impl)->UseManualTime()->Unit(benchmark::kMillisecond));
  };
  for (const std::int64_t m : {1, 4, 16}) {
    for (const ElementType type : types) {
      const Case c{"decode", {m, kWidth, kWidth, 1, 16}, 0, type};
      add(c, Impl::kOursTuned);
      add(c, Impl::kOursDefault);
      if (type == ElementType::f32) {
        add(c, Impl::kOcltkTwoCalls);
        add(c, Impl::kClblastTwoCalls);
      }
    }
  }
  for (const ElementType type : types) {
    const Case c{"multi_decode", {16, kWidth, kWidth, 8, 64}, 8, type};
    add(c, Impl::kOursTuned);
    add(c, Impl::kOursDefault);
    add(c, Impl::kOcltkPerSegment);
  }
  add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// gemm_nt (C = alpha A B^T) and gemm_nt_accum (C += alpha A B^T), row-major f32, at every
// shape class, three ways on one queue and one set of buffers per shape:
//   ours_default  ocltk with its built-in parameters (RuntimeOptions::use_profiles = false)
//   ours_tuned    ocltk with the profile an engine would get (or --ocltk_profile=FILE)
//   clblast       clblast::Gemm<float>, row-major, B transposed, beta 0 or 1
// Rows are named OP/CLASS/MxNxK/IMPLEMENTATION, e.g. gemm_nt/large/1024x1024x1024/clblast.
// Then the large square in the tensor cores' storage and precision modes, OP gemm_nt_bf16,
// gemm_nt_f16 (A, B and C in the type) and gemm_nt_tf32x3 (f32 under GemmPrecision::tf32x3),
// against cuBLAS in the same type (bench/cublas_ref.py; SGEMM for tf32x3): ours_default,
// ours_tuned, and ours_tc, the tc algorithm at the point measured fastest on the H200
// (kernels/gemm_nt_tc.cl), skipped where the device has no mma.sync.
// On GPU sizes also the LoRA shapes in bf16 (A, B and C in bf16), gemm_nt_bf16 for the
// shrink and gemm_nt_accum_bf16 for the expand, ours_default and ours_tuned against cuBLAS
// bf16 (LoRA's adapters are stored in 16 bits in the engines this serves), and in f32 under
// 3×TF32 (gemm_nt_tf32x3, gemm_nt_accum_tf32x3; classes lora_shrink_tf32x3,
// lora_expand_tf32x3) against cuBLAS SGEMM, TF32 off: f32 accuracy either way.
// Each row runs its implementation once and checks it against a double-precision CPU
// reference before timing (within the bound of its type and precision); a wrong result
// skips the row with the element at fault.
#include <benchmark/benchmark.h>
#include <clblast.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include "common.hpp"

namespace {

using namespace ocltk;
using namespace ocltk::bench;

constexpr float kAlpha = 0.5f;  // not 1, so an implementation that drops alpha fails verification
// What C holds before a non-accumulating call, so an unwritten element fails. Finite:
// a BLAS that computes beta * C with beta = 0 must still produce the right answer.
constexpr float kPoison = 1e30f;
constexpr int kRandomSamples = 64;  // checked elements besides the first and last rows

enum class Impl { kOursDefault, kOursTuned, kClblast, kOursTc };
constexpr Impl kImpls[] = {Impl::kOursDefault, Impl::kOursTuned, Impl::kClblast};
// CLBlast's half GEMM needs cl_khr_fp16 (NVIDIA's OpenCL has none) and its SGEMM is the f32
// large row's already: the typed rows compare with cuBLAS.
constexpr Impl kTypedImpls[] = {Impl::kOursDefault, Impl::kOursTuned, Impl::kOursTc};

const char* name_of(Impl impl) {
  switch (impl) {
    case Impl::kOursDefault:
      return "ours_default";
    case Impl::kOursTuned:
      return "ours_tuned";
    case Impl::kClblast:
      return "clblast";
    case Impl::kOursTc:
      return "ours_tc";
  }
  return "?";
}

// What A, B and C hold and what the launch allows: f32 exact (the class rows), or one of
// the tensor cores' modes.
struct Storage {
  const char* op_suffix;  // "" or "_bf16", "_f16", "_tf32x3"
  ElementType type;
  GemmPrecision precision;
};
constexpr Storage kF32{"", ElementType::f32, GemmPrecision::exact};
constexpr Storage kTypedStorages[] = {{"_bf16", ElementType::bf16, GemmPrecision::exact},
                                      {"_f16", ElementType::f16, GemmPrecision::exact},
                                      {"_tf32x3", ElementType::f32, GemmPrecision::tf32x3}};

// The problem of a typed row: the figures (16-bit at 8192³, 3×TF32 at 4096³) on
// GPUs, the large f32 row's 1024³ on CPUs.
GemmProblem typed_problem(const Storage& s, bool gpu_sizes) {
  if (!gpu_sizes) return {1024, 1024, 1024};
  return s.type == ElementType::f32 ? GemmProblem{4096, 4096, 4096} : GemmProblem{8192, 8192, 8192};
}

// ours_tc's point: the defaults (fastest for bf16 and f16 at 8192³ on the H200), and for
// 3×TF32 the fastest there at 4096³ (KCH 2, four stages, XOR swizzle, cp.async past L1:
// 71 TFLOP/s).
Choice tc_choice(const Storage& s) {
  Choice c;
  c.kernel = "gemm_nt";
  c.shape_class = "bench";
  c.algorithm = "tc";
  const AlgorithmSpec& tc = *gemm_nt_family().find_algorithm("tc");
  c.params =
      s.type == ElementType::f32 ? tc.complete({{"KCH", 2}, {"STAGES", 4}, {"SWZ", 1}, {"CPASYNC", 1}}) : tc.defaults();
  return c;
}

std::string shape_name(const GemmProblem& p) {
  return std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k);
}

// The problems benchmarked per size set; the class of each comes from the library's own
// rule (gemm_nt_shape_class), so a row's class is the one its profile entry is keyed on.
std::vector<GemmProblem> problems(bool gpu_sizes) {
  std::vector<GemmProblem> list = {
      {1, 4096, 4096},   // gemv
      {16, 4096, 4096},  // small_batch
      {4096, 16, 4096},  // lora_shrink, rank 16
      {4096, 64, 4096},  // lora_shrink, rank 64
      {4096, 4096, 16},  // lora_expand, rank 16
      {4096, 4096, 64},  // lora_expand, rank 64
  };
  if (gpu_sizes) {
    list.push_back({4096, 4096, 4096});
    list.push_back({2048, 2048, 2048});
  } else {
    list.push_back({1024, 1024, 1024});
  }
  return list;
}

// The LoRA problems of problems() measured again in bf16 and in f32 under 3×TF32 (GPU sizes
// only: the figures are the H200's, where 16-bit adapters are the engines' case and tensor
// cores serve the f32 ones; a CPU device runs them as the f32 rows).
std::vector<GemmProblem> lora_problems(bool gpu_sizes) {
  if (!gpu_sizes) return {};
  return {{4096, 16, 4096}, {4096, 64, 4096}, {4096, 4096, 16}, {4096, 4096, 64}};
}

// Accumulation is how LoRA's expand step and residual GEMMs are used in an engine.
bool benchmark_accumulate(const std::string& shape_class) {
  return shape_class == "lora_expand" || shape_class == "large";
}

std::string cl_error(const char* what, cl_int status) {
  return std::string(what) + " failed with OpenCL status " + std::to_string(status);
}

// A, B and C of one shape and type on the device, with host copies of A and B (the values
// the type holds) for the reference. Only one shape is resident at a time: rows of a shape
// are registered together.
struct Operands {
  GemmProblem problem;
  ElementType type = ElementType::f32;
  std::vector<float> a, b;
  cl_mem da = nullptr, db = nullptr, dc = nullptr;
  cl_mem clblast_temp = nullptr;  // CLBlast's scratch for padded/transposed copies
  bool clblast_temp_ready = false;

  Operands() = default;
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() {
    for (cl_mem m : {da, db, dc, clblast_temp})
      if (m != nullptr) clReleaseMemObject(m);
  }
};

std::uint32_t seed_of(const GemmProblem& p) { return std::uint32_t(p.m * 73856093 ^ p.n * 19349663 ^ p.k * 83492791); }

// `values` stored as `type`, left holding the values the type holds.
std::vector<std::uint8_t> to_bytes(ElementType type, std::vector<float>& values) {
  const std::size_t size = element_size(type);
  std::vector<std::uint8_t> bytes(values.size() * size);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint32_t bits = float_to_element(type, values[i]);
    std::memcpy(bytes.data() + i * size, &bits, size);
    values[i] = element_to_float(type, bits);
  }
  return bytes;
}

// Returns the operands of `p` in `type`, creating (and filling) them when another shape or
// type is resident.
Operands* operands_for(const GemmProblem& p, ElementType type, std::string* error) {
  static std::unique_ptr<Operands> resident;
  if (resident && resident->problem.m == p.m && resident->problem.n == p.n && resident->problem.k == p.k &&
      resident->type == type)
    return resident.get();
  resident.reset();  // free the previous shape before allocating the next
  Session& session = Session::get();
  auto ops = std::make_unique<Operands>();
  ops->problem = p;
  ops->type = type;
  ops->a = random_matrix(std::size_t(p.m * p.k), seed_of(p));
  ops->b = random_matrix(std::size_t(p.n * p.k), seed_of(p) + 1);
  cl_int status = CL_SUCCESS;
  auto create = [&](std::size_t bytes, const void* init, cl_mem* out) {
    if (status != CL_SUCCESS) return;
    *out = clCreateBuffer(session.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
    if (status == CL_SUCCESS && init != nullptr)
      status = clEnqueueWriteBuffer(session.queue(), *out, CL_TRUE, 0, bytes, init, 0, nullptr, nullptr);
  };
  const std::vector<std::uint8_t> a_bytes = to_bytes(type, ops->a), b_bytes = to_bytes(type, ops->b);
  create(a_bytes.size(), a_bytes.data(), &ops->da);
  create(b_bytes.size(), b_bytes.data(), &ops->db);
  create(std::size_t(p.m * p.n) * element_size(type), nullptr, &ops->dc);
  if (status != CL_SUCCESS) {
    *error = cl_error(("allocating and filling the " + shape_name(p) + " operands").c_str(), status);
    return nullptr;
  }
  resident = std::move(ops);
  return resident.get();
}

// CLBlast allocates its scratch buffer on every call unless given one; an engine would
// give one, so the benchmark does too and the allocation stays out of the timing.
std::string prepare_clblast(Operands& ops) {
  if (ops.clblast_temp_ready) return "";
  const GemmProblem& p = ops.problem;
  cl_command_queue queue = Session::get().queue();
  std::size_t bytes = 0;
  const clblast::StatusCode code = clblast::GemmTempBufferSize<float>(
      clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, std::size_t(p.m), std::size_t(p.n),
      std::size_t(p.k), 0, std::size_t(p.k), 0, std::size_t(p.k), 0, std::size_t(p.n), &queue, bytes);
  if (code != clblast::StatusCode::kSuccess)
    return "clblast::GemmTempBufferSize returned status " + std::to_string(int(code));
  if (bytes > 0) {
    cl_int status = CL_SUCCESS;
    ops.clblast_temp = clCreateBuffer(Session::get().context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
    if (status != CL_SUCCESS) return cl_error("allocating CLBlast's scratch buffer", status);
  }
  ops.clblast_temp_ready = true;
  return "";
}

// Enqueues one call of `impl`; *event receives the event of its last command.
std::string enqueue_call(Impl impl, bool accumulate, const Storage& storage, Operands& ops, cl_event* event) {
  Session& session = Session::get();
  const GemmProblem& p = ops.problem;
  if (impl == Impl::kClblast) {
    cl_command_queue queue = session.queue();
    const clblast::StatusCode code = clblast::Gemm<float>(
        clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, std::size_t(p.m),
        std::size_t(p.n), std::size_t(p.k), kAlpha, ops.da, 0, std::size_t(p.k), ops.db, 0, std::size_t(p.k),
        accumulate ? 1.0f : 0.0f, ops.dc, 0, std::size_t(p.n), &queue, event, ops.clblast_temp);
    return code == clblast::StatusCode::kSuccess ? "" : "clblast::Gemm returned status " + std::to_string(int(code));
  }
  Runtime& rt = impl == Impl::kOursDefault ? session.defaults() : session.tuned();
  GemmNtArgs args;
  args.problem = p;
  args.alpha = kAlpha;
  args.a = {ops.da, 0, 0, storage.type};
  args.b = {ops.db, 0, 0, storage.type};
  args.c = {ops.dc, 0, 0, storage.type};
  args.precision = storage.precision;
  Launch launch;
  launch.event = event;
  const Status status = impl == Impl::kOursTc ? rt.gemm_nt_with(tc_choice(storage), accumulate, args, launch)
                        : accumulate          ? rt.gemm_nt_accum(args, launch)
                                              : rt.gemm_nt(args, launch);
  return status.ok() ? "" : status.message();
}

// Runs `impl` once on fresh C (poison, or random C_old when accumulating) and checks
// the first and last rows of C and kRandomSamples random elements against
// gemm_nt_reference within gemm_nt_error_bound. Returns "" or what is wrong.
std::string verify(Impl impl, bool accumulate, const Storage& storage, Operands& ops) {
  Session& session = Session::get();
  const GemmProblem& p = ops.problem;
  const std::size_t mn = std::size_t(p.m * p.n), k = std::size_t(p.k), n = std::size_t(p.n);
  const std::size_t c_size = element_size(storage.type);
  // The poison is finite in f32 (see kPoison); the 16-bit types take NaN (1e30 overflows f16).
  std::vector<float> c_old = accumulate ? random_matrix(mn, seed_of(p) + 2)
                             : storage.type == ElementType::f32
                                 ? std::vector<float>(mn, kPoison)
                                 : std::vector<float>(mn, std::numeric_limits<float>::quiet_NaN());
  const std::vector<std::uint8_t> c_old_bytes = to_bytes(storage.type, c_old);
  cl_command_queue queue = session.queue();
  cl_int status =
      clEnqueueWriteBuffer(queue, ops.dc, CL_TRUE, 0, c_old_bytes.size(), c_old_bytes.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) return cl_error("writing C before the check", status);

  cl_event event = nullptr;
  if (std::string error = enqueue_call(impl, accumulate, storage, ops, &event); !error.empty()) {
    clFinish(queue);
    return error;
  }
  status = clFinish(queue);
  cl_int execution = CL_COMPLETE;
  if (event != nullptr) {
    clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof execution, &execution, nullptr);
    clReleaseEvent(event);
  }
  if (status != CL_SUCCESS) return cl_error("clFinish after the checked call", status);
  if (execution < 0) return "the checked call ended with OpenCL status " + std::to_string(execution);
  std::vector<std::uint8_t> c_bytes(mn * c_size);
  status = clEnqueueReadBuffer(queue, ops.dc, CL_TRUE, 0, c_bytes.size(), c_bytes.data(), 0, nullptr, nullptr);
  if (status != CL_SUCCESS) return cl_error("reading C back", status);
  std::vector<float> c(mn);
  for (std::size_t i = 0; i < mn; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, c_bytes.data() + i * c_size, c_size);
    c[i] = element_to_float(storage.type, bits);
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> positions;
  for (std::int64_t row : {std::int64_t(0), p.m - 1})
    for (std::int64_t j = 0; j < p.n; ++j) positions.emplace_back(row, j);
  std::mt19937 gen(seed_of(p) + 3);
  std::uniform_int_distribution<std::int64_t> pick_row(0, p.m - 1), pick_col(0, p.n - 1);
  for (int s = 0; s < kRandomSamples; ++s) positions.emplace_back(pick_row(gen), pick_col(gen));

  const GemmProblem one{1, 1, p.k};
  for (const auto& [i, j] : positions) {
    const float* ai = ops.a.data() + i * k;
    const float* bj = ops.b.data() + j * k;
    const double old = accumulate ? double(c_old[i * n + j]) : 0.0;
    double expected = 0;
    gemm_nt_reference(one, kAlpha, accumulate, ai, k, bj, k, &old, 1, &expected, 1);
    double abs_dot = 0;
    for (std::size_t q = 0; q < k; ++q) abs_dot += std::fabs(double(ai[q]) * double(bj[q]));
    const double bound = gemm_nt_error_bound(p.k, abs_dot, kAlpha, old, expected, storage.type, storage.precision);
    const double got = c[i * n + j];
    if (!(std::fabs(got - expected) <= bound)) {
      std::ostringstream out;
      out.precision(9);
      out << "wrong result: C[" << i << "][" << j << "] = " << got << ", expected " << expected << " within " << bound;
      return out.str();
    }
  }
  return "";
}

void run_row(benchmark::State& state, GemmProblem p, bool accumulate, Impl impl, Storage storage) {
  Session& session = Session::get();
  if (impl == Impl::kOursTc && !DeviceLimits::of(session.device()).tensor_mma) {
    state.SkipWithError("no mma.sync on this device (tc needs NVIDIA's OpenCL at sm_80 or newer)");
    return;
  }
  std::string error;
  Operands* ops = operands_for(p, storage.type, &error);
  if (ops != nullptr && impl == Impl::kClblast) error = prepare_clblast(*ops);
  // The checked call is also the warm-up: it builds the programs and touches the pages.
  if (error.empty()) error = verify(impl, accumulate, storage, *ops);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  if (impl == Impl::kClblast) {
    state.SetLabel("CLBlast " + clblast_version());
  } else {
    Runtime& rt = impl == Impl::kOursDefault ? session.defaults() : session.tuned();
    state.SetLabel(choice_label(rt.last_choice()));
  }

  const IterationTime sums = time_iterations(
      state, session, [&](cl_event* event) { return enqueue_call(impl, accumulate, storage, *ops, event); });
  if (state.error_occurred()) return;
  const double timed = sums.seconds, wall = sums.wall_seconds, last = sums.last_seconds;
  const double iterations = double(state.iterations());
  using benchmark::Counter;
  state.counters["GFLOP/s"] = Counter(p.flops() * iterations * 1e-9, Counter::kIsRate);
  const std::size_t size = element_size(storage.type);
  state.counters["GB/s"] = Counter(p.min_bytes(accumulate, size, size) * iterations * 1e-9, Counter::kIsRate);
  state.counters["verified"] = 1;
  // Timed over wall-clock time for the same iterations: near 1 when the timer covers
  // the call, well below 1 where host work or launch gaps fall outside it, above 1
  // only if timestamps are wrong.
  state.counters["timer/wall"] = wall > 0 ? timed / wall : 0;
  // The share of the timed interval that the last command's own event covers: what a
  // benchmark timing only the returned event would have seen (below 1 for CLBlast where
  // it pads or transposes first). Meaningful with --ocltk_calls=1.
  if (flags().timer != Timer::kWall) state.counters["last_event/timer"] = timed > 0 ? last / timed : 0;
}

// The launch floor: a kernel that does nothing, one work-item, timed as every row is (calls
// back to back, the same timer): what any call of one launch costs at least on this device
// and driver, beside which the rows of a few microseconds (gemv, LoRA decode) are read.
void run_launch_floor(benchmark::State& state) {
  Session& session = Session::get();
  cl_kernel kernel = session.empty_kernel();
  const std::size_t one = 1;
  const EnqueueCall launch = [&](cl_event* event) -> std::string {
    const cl_int status = clEnqueueNDRangeKernel(session.queue(), kernel, 1, nullptr, &one, &one, 0, nullptr, event);
    return status == CL_SUCCESS ? ""
                                : "enqueueing the empty kernel failed with OpenCL status " + std::to_string(status);
  };
  // A first launch, untimed, as every row's checked call: the driver's first-use work.
  std::string error = launch(nullptr);
  if (error.empty() && clFinish(session.queue()) != CL_SUCCESS) error = "clFinish after the empty kernel failed";
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  state.SetLabel("one work-item, no work");
  const IterationTime sums = time_iterations(state, session, launch);
  if (!state.error_occurred())
    state.counters["timer/wall"] = sums.wall_seconds > 0 ? sums.seconds / sums.wall_seconds : 0;
}

void add_context(bool gpu_sizes, const std::vector<std::string>& classes) {
  Session& session = Session::get();
  const DeviceInfo& d = session.device();
  benchmark::AddCustomContext("ocltk_version", version());
  benchmark::AddCustomContext("clblast_version", clblast_version());
  benchmark::AddCustomContext("device", d.name);
  benchmark::AddCustomContext("device_vendor", d.vendor);
  benchmark::AddCustomContext("device_driver", d.driver);
  benchmark::AddCustomContext("device_version", d.version);
  benchmark::AddCustomContext("device_platform", d.platform + " (" + d.platform_version + ")");
  benchmark::AddCustomContext("device_type", d.type);
  benchmark::AddCustomContext("device_compute_units", std::to_string(d.compute_units));

  const ProfileSelection& profiles = session.tuned().profiles();
  std::string used;
  for (const ProfileCandidate& c : profiles.candidates)
    used += (used.empty() ? "" : ", ") + c.profile.path + " (" + c.tier + ", match: " + to_string(c.level) + ")";
  benchmark::AddCustomContext("ocltk_profile", used.empty() ? "none: ours_tuned runs the built-in defaults" : used);
  std::string warnings;
  for (const std::string& w : profiles.warnings) warnings += (warnings.empty() ? "" : "; ") + w;
  if (!warnings.empty()) benchmark::AddCustomContext("ocltk_profile_warnings", warnings);
  for (const std::string& shape_class : classes)
    benchmark::AddCustomContext("ocltk_tuned_choice/" + shape_class,
                                session.tuned().choose("gemm_nt", shape_class).describe());
  // The typed rows' choices as a launch gets them (tc only where the probe passed).
  for (const Storage& s : kTypedStorages) {
    const GemmProblem p = typed_problem(s, gpu_sizes);
    benchmark::AddCustomContext(std::string("ocltk_tuned_choice/gemm_nt") + s.op_suffix,
                                session.tuned().choose_gemm_nt(p, s.type, s.precision).describe());
  }
  for (const Storage& s : {kTypedStorages[0], kTypedStorages[2]})
    for (const GemmProblem& p : lora_problems(gpu_sizes))
      benchmark::AddCustomContext(std::string("ocltk_tuned_choice/gemm_nt") + s.op_suffix + "/" +
                                      gemm_nt_shape_class(p, s.type, s.precision) + "/" + shape_name(p),
                                  session.tuned().choose_gemm_nt(p, s.type, s.precision).describe());

  benchmark::AddCustomContext("ocltk_sizes", gpu_sizes ? "gpu" : "cpu");
  add_timing_context();
  benchmark::AddCustomContext("alpha", std::to_string(kAlpha));
}

}  // namespace

int main(int argc, char** argv) {
  if (!take_flags(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  Session& session = Session::get();
  const bool gpu_sizes = flags().sizes.empty() ? session.device().type != "cpu" : flags().sizes == "gpu";
  std::vector<std::string> classes;
  for (const GemmProblem& p : problems(gpu_sizes)) {
    const std::string shape_class = gemm_nt_shape_class(p);
    if (std::find(classes.begin(), classes.end(), shape_class) == classes.end()) classes.push_back(shape_class);
    for (bool accumulate : {false, true}) {
      if (accumulate && !benchmark_accumulate(shape_class)) continue;
      for (Impl impl : kImpls) {
        const std::string name = std::string(accumulate ? "gemm_nt_accum" : "gemm_nt") + "/" + shape_class + "/" +
                                 shape_name(p) + "/" + name_of(impl);
        per_call_min_time(benchmark::RegisterBenchmark(name.c_str(), run_row, p, accumulate, impl, kF32)
                              ->UseManualTime()
                              ->Unit(benchmark::kMillisecond));
      }
    }
  }
  for (const Storage& storage : kTypedStorages) {
    const GemmProblem p = typed_problem(storage, gpu_sizes);
    const std::string shape_class = gemm_nt_shape_class(p, storage.type, storage.precision);
    for (Impl impl : kTypedImpls) {
      const std::string name =
          std::string("gemm_nt") + storage.op_suffix + "/" + shape_class + "/" + shape_name(p) + "/" + name_of(impl);
      per_call_min_time(benchmark::RegisterBenchmark(name.c_str(), run_row, p, false, impl, storage)
                            ->UseManualTime()
                            ->Unit(benchmark::kMillisecond));
    }
  }
  for (const Storage& storage : {kTypedStorages[0], kTypedStorages[2]})  // bf16, f32 under 3×TF32
    for (const GemmProblem& p : lora_problems(gpu_sizes)) {
      const std::string shape_class = gemm_nt_shape_class(p, storage.type, storage.precision);
      const bool accumulate = benchmark_accumulate(gemm_nt_shape_class(p));  // as the f32 row of the shape
      for (Impl impl : {Impl::kOursDefault, Impl::kOursTuned}) {
        const std::string name = std::string(accumulate ? "gemm_nt_accum" : "gemm_nt") + storage.op_suffix + "/" +
                                 shape_class + "/" + shape_name(p) + "/" + name_of(impl);
        per_call_min_time(benchmark::RegisterBenchmark(name.c_str(), run_row, p, accumulate, impl, storage)
                              ->UseManualTime()
                              ->Unit(benchmark::kMillisecond));
      }
    }
  per_call_min_time(benchmark::RegisterBenchmark("launch/empty_kernel/1x1x1/floor", run_launch_floor)
                        ->UseManualTime()
                        ->Unit(benchmark::kMillisecond));
  add_context(gpu_sizes, classes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

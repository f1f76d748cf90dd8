// The LoRA family slices (docs/lora.md): parameter tables of lora_shrink, lora_expand and
// lora_apply (fused and split), their shape classes, launch geometry, argument checks,
// launches and the CPU reference. Sources: kernels/lora_{shrink,expand,split,fused}.cl with
// kernels/lora_common.clh, lora_shrink.clh, lora_expand.clh, element_types.clh and
// vector_types.clh.
#include "ocltk/lora.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <mutex>

#include "dispatch.hpp"
#include "ocltk/status.hpp"

namespace ocltk {
namespace {

Error invalid(const std::string& message) { return Error(ErrorCode::kInvalidArgument, message); }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// ---- parameter tables ----

ParamSpec wgs_param() {
  return {"WGS",
          128,
          {1, 4, 16, 32, 64, 128, 256},
          "work-items per workgroup (side by side along K for the shrink, on consecutive columns for the expand)"};
}
ParamSpec tr_param() { return {"TR", 4, {1, 2, 4, 8, 16}, "tile rows: segment rows per workgroup"}; }
ParamSpec rc_param() { return {"RC", 8, {4, 8, 16, 32}, "rank columns: rows of A the shrink sums at once"}; }
ParamSpec vw_param() { return {"VW", 4, {1, 2, 4, 8, 16}, "vector width of the loads of X and A along K"}; }
ParamSpec va_param() {
  return {"VA",
          0,
          {0, 1},
          "1: vector accumulators (the shrink's VW wide, the expand's 4 wide) summed across once at the end (SIMD "
          "CPUs); 0: a dot product per step (GPUs: fewer registers)"};
}
ParamSpec cn_param() {
  return {"CN", 1, {1, 2, 4, 8}, "columns of Y each work-item sums at once (WGS apart), sharing their loads of T"};
}
ParamSpec cw_param() {
  return {"CW",
          1,
          {1, 4},
          "4: a work-item's columns in runs of 4 consecutive ones, summed by one transposing add and Y read and "
          "written 4 wide (SIMD CPUs); 1: columns WGS apart (coalesced on GPUs)"};
}
ParamSpec cb_param() {
  return {"CB", 256, {32, 64, 128, 256, 512, 1024, 2048, 4096}, "columns of Y per workgroup (expand)"};
}

Constraint partial_sums() {
  return constraint("TR * RC <= 64 (partial sums in registers)",
                    [](const Params& p) { return param(p, "TR") * param(p, "RC") <= 64; });
}
Constraint load_registers() {
  return constraint("TR * VW <= 64 (the rows' loads in registers)",
                    [](const Params& p) { return param(p, "TR") * param(p, "VW") <= 64; });
}
Constraint vector_accumulators() {
  return constraint("VA == 1 implies TR * RC * VW <= 256 (accumulator registers)", [](const Params& p) {
    return param(p, "VA") == 0 || param(p, "TR") * param(p, "RC") * param(p, "VW") <= 256;
  });
}
// A GPU's scalar lanes gain nothing from vector accumulators but their registers.
Constraint scalar_accumulators() {
  return constraint("VA == 0 (scalar accumulators)", [](const Params& p) { return param(p, "VA") == 0; });
}
// A CPU's SIMD lanes want them: every LoRA class of the long tunes on both CPUs measured
// (EPYC and Xeon through PoCL, results/first-tune/pocl-*/best.yaml: 30 of 30) and every CPU
// entry shipped chose VA 1. Leaving VA 0 out there cuts the CPU spaces by 39-53 %, which a
// first tune's handful of evaluations per class feels.
Constraint vector_accumulators_kept() {
  return constraint("VA == 1 (vector accumulators)", [](const Params& p) { return param(p, "VA") == 1; });
}
Constraint whole_column_steps() {
  return constraint("CB % (WGS * CN * CW) == 0 (every work-item takes as many columns)", [](const Params& p) {
    return param(p, "CB") % (param(p, "WGS") * param(p, "CN") * param(p, "CW")) == 0;
  });
}
Constraint column_accumulators() {
  return constraint("TR * CN * CW <= 64 (accumulators)",
                    [](const Params& p) { return param(p, "TR") * param(p, "CN") * param(p, "CW") <= 64; });
}
// CW 4 always sums in 4-wide vectors: with VA 0 it would repeat the VA 1 point.
Constraint column_runs_vector_sums() {
  return constraint("CW == 4 implies VA == 1 (its sums are 4-wide vectors)",
                    [](const Params& p) { return param(p, "CW") == 1 || param(p, "VA") == 1; });
}
// Runs of 4 columns split a warp's loads and stores of Y into 16-byte pieces.
Constraint strided_columns() {
  return constraint("CW == 1 (columns WGS apart)", [](const Params& p) { return param(p, "CW") == 1; });
}
// Below a warp or wavefront a GPU idles lanes, and the shrink's shuffles need whole warps.
Constraint whole_warps() {
  return constraint("WGS >= 32 (a warp or wavefront)", [](const Params& p) { return param(p, "WGS") >= 32; });
}

// Local memory of the shrink's lora_reduce (TR·RC sums per warp on NVIDIA, whose shuffles
// sum each warp first; per work-item elsewhere) and its sums.
std::uint64_t reduce_bytes(const Params& p, const DeviceLimits& limits) {
  const int wgs = param(p, "WGS");
  const std::uint64_t per_output = limits.ptx_binaries && wgs % 32 == 0 ? wgs / 32 : wgs;
  return 4ull * param(p, "TR") * param(p, "RC") * (per_output + 1);
}

std::array<std::size_t, 2> wgs_local_size(const Params& p) { return {std::size_t(param(p, "WGS")), 1}; }

AlgorithmSpec shrink_algorithm() {
  AlgorithmSpec a;
  a.name = "tiled";
  a.source_name = "lora_shrink.cl";
  a.params = {wgs_param(), tr_param(), rc_param(), vw_param(), va_param()};
  a.constraints = {partial_sums(), load_registers(), vector_accumulators()};
  a.gpu_search_pruning = {whole_warps(), scalar_accumulators()};
  a.cpu_search_pruning = {vector_accumulators_kept()};
  a.local_mem_bytes = reduce_bytes;
  a.local_size = wgs_local_size;
  return a;
}

// The expand's T rows sit in local memory sized at launch (TR × R floats, checked there).
AlgorithmSpec expand_algorithm() {
  AlgorithmSpec a;
  a.name = "tiled";
  a.source_name = "lora_expand.cl";
  a.params = {wgs_param(), tr_param(), va_param(), cb_param(), cn_param(), cw_param()};
  a.constraints = {whole_column_steps(), column_accumulators(), column_runs_vector_sums()};
  a.gpu_search_pruning = {whole_warps(), scalar_accumulators(), strided_columns()};
  a.cpu_search_pruning = {vector_accumulators_kept()};
  a.local_mem_bytes = [](const Params&, const DeviceLimits&) -> std::uint64_t { return 0; };
  a.local_size = wgs_local_size;
  return a;
}

// fused and split share one table: split's two kernels take the same parameters.
AlgorithmSpec apply_algorithm(const char* name, const char* source) {
  AlgorithmSpec a;
  a.name = name;
  a.source_name = source;
  a.params = {wgs_param(), tr_param(), rc_param(), vw_param(), va_param(), cb_param(), cn_param(), cw_param()};
  a.constraints = {partial_sums(),       load_registers(),      vector_accumulators(),
                   whole_column_steps(), column_accumulators(), column_runs_vector_sums()};
  a.gpu_search_pruning = {whole_warps(), scalar_accumulators(), strided_columns()};
  a.cpu_search_pruning = {vector_accumulators_kept()};
  a.local_mem_bytes = reduce_bytes;
  a.local_size = wgs_local_size;
  a.tiles_like = {"lora_shrink/tiled", "lora_expand/tiled"};  // lora_shrink.clh, then lora_expand.clh
  return a;
}

const std::vector<ShapeClassSpec>& lora_classes() {
  static const std::vector<ShapeClassSpec> classes = {
      {"decode", "one segment, M <= 16"},
      {"small_batch", "one segment, 16 < M <= 256"},
      {"prefill", "one segment, M > 256"},
      {"multi_decode", "several segments, M / S <= 16 rows per segment"},
      {"multi_batch", "several segments, M / S > 16"},
  };
  return classes;
}

KernelFamily lora_family(const char* name, std::vector<AlgorithmSpec> algorithms, std::vector<BuiltinChoice> builtin) {
  KernelFamily f;
  f.name = name;
  f.algorithms = std::move(algorithms);
  f.classes = lora_classes();
  f.builtin = std::move(builtin);
  return f;
}

}  // namespace

const KernelFamily& lora_shrink_family() {
  static const KernelFamily family = lora_family("lora_shrink", {shrink_algorithm()},
                                                 {{"tiled", {{"TR", 4}}},
                                                  {"tiled", {{"TR", 8}}},
                                                  {"tiled", {{"TR", 8}}},
                                                  {"tiled", {{"TR", 2}}},
                                                  {"tiled", {{"TR", 8}}}});
  return family;
}

const KernelFamily& lora_expand_family() {
  static const KernelFamily family = lora_family("lora_expand", {expand_algorithm()},
                                                 {{"tiled", {{"TR", 4}}},
                                                  {"tiled", {{"TR", 8}}},
                                                  {"tiled", {{"TR", 8}}},
                                                  {"tiled", {{"TR", 2}}},
                                                  {"tiled", {{"TR", 8}}}});
  return family;
}

const KernelFamily& lora_apply_family() {
  static const KernelFamily family =
      lora_family("lora_apply", {apply_algorithm("fused", "lora_fused.cl"), apply_algorithm("split", "lora_split.cl")},
                  {{"fused", {{"TR", 4}}},
                   {"split", {{"TR", 8}}},
                   {"split", {{"TR", 8}}},
                   {"fused", {{"TR", 2}}},
                   {"split", {{"TR", 8}}}});
  return family;
}

std::string lora_shape_class(std::int64_t m, std::int64_t segments) {
  const std::int64_t s = std::max<std::int64_t>(segments, 1);
  const double per_segment = double(m) / double(s);
  if (s == 1) return m <= 16 ? "decode" : m <= 256 ? "small_batch" : "prefill";
  return per_segment <= 16 ? "multi_decode" : "multi_batch";
}

std::map<std::string, std::int64_t> lora_problem_of(const std::string& kernel, const LoraProblem& p,
                                                    std::int64_t segments, ElementType type) {
  std::map<std::string, std::int64_t> out{
      {"m", p.m}, {"rank", p.max_rank}, {"adapters", p.adapters}, {"segments", std::max<std::int64_t>(segments, 1)}};
  if (kernel != "lora_shrink") out["n"] = p.n;
  if (kernel != "lora_expand") out["k"] = p.k;
  if (type != ElementType::f32) out["input_bits"] = 16;
  return out;
}

LoraTuneProblem lora_class_problem(const std::string& shape_class, bool cpu_device) {
  LoraTuneProblem t;
  t.problem = {4, 4096, 4096, 1, 16};
  if (shape_class == "decode") return t;
  if (shape_class == "small_batch") {
    t.problem.m = 64;
    return t;
  }
  if (shape_class == "prefill") {
    t.problem.m = cpu_device ? 512 : 4096;
    return t;
  }
  // Several adapters of mixed ranks up to 64 (lora_problem_ranks: 64, 32, 16, 8), a segment
  // each: the serving batch of the multi-adapter target.
  t.problem.adapters = 8;
  t.problem.max_rank = 64;
  t.segments = 8;
  if (shape_class == "multi_decode") {
    t.problem.m = 16;
    return t;
  }
  if (shape_class == "multi_batch") {
    t.problem.m = cpu_device ? 256 : 1024;
    return t;
  }
  throw Error(ErrorCode::kNotFound, "lora has no shape class '" + shape_class + "'");
}

std::vector<std::int32_t> lora_problem_ranks(const LoraProblem& p) {
  std::vector<std::int32_t> ranks(std::size_t(std::max<std::int64_t>(p.adapters, 0)));
  for (std::size_t a = 0; a < ranks.size(); ++a)
    ranks[a] =
        p.adapters == 1 ? std::int32_t(p.max_rank) : std::max<std::int32_t>(1, std::int32_t(p.max_rank >> (a % 4)));
  return ranks;
}

std::vector<std::uint32_t> lora_even_offsets(std::int64_t m, std::int64_t segments) {
  std::vector<std::uint32_t> offsets(std::size_t(segments + 1));
  for (std::int64_t s = 0; s <= segments; ++s) offsets[std::size_t(s)] = std::uint32_t(m * s / segments);
  return offsets;
}

std::string lora_launch_variant(ElementType type) {
  return type == ElementType::f32 ? std::string() : " -DIN_TYPE=" + std::to_string(int(type));
}

LoraGeometry lora_geometry(const std::string& kernel, const Params& params, const LoraProblem& p,
                           std::int64_t segments) {
  LoraGeometry g;
  const std::int64_t tr = param(params, "TR");
  g.local = std::size_t(param(params, "WGS"));
  g.groups1 = ceil_div(p.m, tr) + (segments > 0 ? segments : 0);
  if (kernel == "lora_shrink")
    g.groups0 = ceil_div(p.max_rank, param(params, "RC"));
  else if (kernel == "lora_expand" || kernel == "lora_fused")
    g.groups0 = ceil_div(p.n, param(params, "CB"));
  else
    throw Error(ErrorCode::kNotFound, "no LoRA kernel named '" + kernel + "'");
  return g;
}

// ---- host-side segments and the reference ----

std::vector<std::int32_t> LoraHostSegments::row_adapters(std::int64_t m) const {
  std::vector<std::int32_t> out(std::size_t(m), offsets.empty() ? 0 : -1);
  for (std::size_t s = 0; s + 1 < offsets.size() && s < adapters.size(); ++s)
    for (std::uint32_t r = offsets[s]; r < offsets[s + 1] && std::int64_t(r) < m; ++r) out[r] = adapters[s];
  return out;
}

void validate_lora_segments(const LoraHostSegments& s, const LoraProblem& p, const std::string& who) {
  if (!s.offsets.empty() || !s.adapters.empty()) {
    const std::size_t n = s.adapters.size();
    if (s.offsets.size() != n + 1)
      throw invalid(who + ": offsets hold " + std::to_string(s.offsets.size()) + " entries but " + std::to_string(n) +
                    " segment adapters need one more (" + std::to_string(n + 1) + ")");
    if (s.offsets.front() != 0)
      throw invalid(who + ": offsets[0] = " + std::to_string(s.offsets.front()) + " but must be 0");
    for (std::size_t i = 1; i < s.offsets.size(); ++i)
      if (s.offsets[i] < s.offsets[i - 1])
        throw invalid(who + ": offsets decrease at entry " + std::to_string(i) + " (" +
                      std::to_string(s.offsets[i - 1]) + " then " + std::to_string(s.offsets[i]) + ")");
    if (std::int64_t(s.offsets.back()) != p.m)
      throw invalid(who + ": offsets[" + std::to_string(n) + "] = " + std::to_string(s.offsets.back()) +
                    " but must be M = " + std::to_string(p.m) + " (the rows)");
    for (std::size_t i = 0; i < n; ++i)
      if (s.adapters[i] < -1 || s.adapters[i] >= p.adapters)
        throw invalid(who + ": segment_adapters[" + std::to_string(i) + "] = " + std::to_string(s.adapters[i]) +
                      " is not an adapter index (-1 for none, or 0 to " + std::to_string(p.adapters - 1) +
                      " for L = " + std::to_string(p.adapters) + " adapters)");
  }
  if (!s.ranks.empty()) {
    if (std::int64_t(s.ranks.size()) != p.adapters)
      throw invalid(who + ": ranks hold " + std::to_string(s.ranks.size()) +
                    " entries but there are L = " + std::to_string(p.adapters) + " adapters");
    for (std::size_t a = 0; a < s.ranks.size(); ++a)
      if (s.ranks[a] < 1 || s.ranks[a] > p.max_rank)
        throw invalid(who + ": ranks[" + std::to_string(a) + "] = " + std::to_string(s.ranks[a]) +
                      " is outside 1 .. R = " + std::to_string(p.max_rank));
  }
  if (!s.scales.empty() && std::int64_t(s.scales.size()) != p.adapters)
    throw invalid(who + ": scales hold " + std::to_string(s.scales.size()) +
                  " entries but there are L = " + std::to_string(p.adapters) + " adapters");
}

void lora_shrink_reference(const LoraProblem& p, const LoraHostSegments& s, const float* x, const float* a,
                           std::vector<double>& t, std::vector<double>& t_abs) {
  const std::int64_t R = p.max_rank, K = p.k;
  t.assign(std::size_t(p.m * R), 0.0);
  t_abs.assign(t.size(), 0.0);
  const std::vector<std::int32_t> row_adapter = s.row_adapters(p.m);
  for (std::int64_t m = 0; m < p.m; ++m) {
    const std::int32_t ad = row_adapter[std::size_t(m)];
    if (ad < 0) continue;
    const std::int64_t rank = s.ranks.empty() ? R : s.ranks[std::size_t(ad)];
    const float* xr = x + m * K;
    for (std::int64_t j = 0; j < rank; ++j) {
      const float* ar = a + (std::int64_t(ad) * R + j) * K;
      double sum = 0, abs = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double v = double(xr[k]) * double(ar[k]);
        sum += v;
        abs += std::fabs(v);
      }
      t[std::size_t(m * R + j)] = sum;
      t_abs[std::size_t(m * R + j)] = abs;
    }
  }
}

void lora_expand_reference(const LoraProblem& p, const LoraHostSegments& s, float scale, const double* t,
                           const double* t_abs, const float* b, const double* y_old, std::vector<double>& y,
                           std::vector<double>& y_abs) {
  const std::int64_t R = p.max_rank, N = p.n;
  y.assign(std::size_t(p.m * N), 0.0);
  y_abs.assign(y.size(), 0.0);
  const std::vector<std::int32_t> row_adapter = s.row_adapters(p.m);
  for (std::int64_t m = 0; m < p.m; ++m) {
    const std::int32_t ad = row_adapter[std::size_t(m)];
    const std::int64_t rank = ad < 0 ? 0 : s.ranks.empty() ? R : s.ranks[std::size_t(ad)];
    const double sc = ad < 0 ? 0.0 : double(scale) * (s.scales.empty() ? 1.0 : double(s.scales[std::size_t(ad)]));
    for (std::int64_t n = 0; n < N; ++n) {
      double sum = 0, abs = 0;
      const float* br = ad < 0 ? nullptr : b + (std::int64_t(ad) * N + n) * R;
      for (std::int64_t j = 0; j < rank; ++j) {
        sum += t[m * R + j] * double(br[j]);
        abs += t_abs[m * R + j] * std::fabs(double(br[j]));
      }
      const std::size_t at = std::size_t(m * N + n);
      y[at] = sc * sum + (y_old ? y_old[at] : 0.0);
      y_abs[at] = std::fabs(sc) * abs;
    }
  }
}

void lora_reference(const LoraProblem& p, const LoraHostSegments& s, float scale, const float* x, const float* a,
                    const float* b, const double* y_old, std::vector<double>& t, std::vector<double>& t_abs,
                    std::vector<double>& y, std::vector<double>& y_abs) {
  lora_shrink_reference(p, s, x, a, t, t_abs);
  lora_expand_reference(p, s, scale, t.data(), t_abs.data(), b, y_old, y, y_abs);
}

double lora_error_bound(std::int64_t k, std::int64_t rank, double y_abs, double y_old, double y_ref,
                        ElementType output) {
  constexpr double u = 1.0 / (1 << 24);
  const auto gamma = [](std::int64_t n) {
    const double nu = double(n) * u;
    return nu / (1.0 - nu);
  };
  // T's error (the shrink's dot of length K) carried through |B|, then the expand's dot of
  // length rank, the scale's product and the accumulate add on T's computed magnitude.
  const double f32 = (gamma(k) + gamma(rank + 2) * (1 + gamma(k))) * y_abs + 2 * u * std::fabs(y_old) + 1e-30;
  if (output == ElementType::f32) return f32;
  const double subnormal = output == ElementType::f16 ? std::ldexp(1.0, -25) : 0.0;
  return f32 + unit_roundoff(output) * (std::fabs(y_ref) + f32) + subnormal;
}

namespace {

// ---- argument checks ----

enum class Op { kShrink, kExpand, kApply };

const char* name_of(Op op) {
  return op == Op::kShrink ? "lora_shrink" : op == Op::kExpand ? "lora_expand" : "lora_apply";
}

// Throws unless `buffer` is a buffer of this runtime's context holding `needed` bytes.
void check_buffer(Runtime& rt, const std::string& who, const std::string& name, cl_mem buffer, double needed) {
  if (buffer == nullptr) throw invalid(who + ": buffer " + name + " is null");
  cl_context ctx = nullptr;
  std::size_t bytes = 0;
  if (clGetMemObjectInfo(buffer, CL_MEM_CONTEXT, sizeof ctx, &ctx, nullptr) != CL_SUCCESS ||
      clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof bytes, &bytes, nullptr) != CL_SUCCESS)
    throw invalid(who + ": buffer " + name + " is not a valid OpenCL buffer");
  if (ctx != rt.context().get()) throw invalid(who + ": buffer " + name + " belongs to another OpenCL context");
  if (needed > double(bytes))
    throw invalid(who + ": buffer " + name + " holds " + std::to_string(bytes) + " bytes but needs " +
                  std::to_string(std::uint64_t(needed)));
}

std::int64_t ld_of(std::size_t ld, std::int64_t cols) { return ld == 0 ? cols : std::int64_t(ld); }

// A matrix of rows × cols: its leading dimension and its buffer's size.
void check_matrix(Runtime& rt, const std::string& who, const char* name, const Matrix& m, std::int64_t rows,
                  std::int64_t cols) {
  const std::int64_t ld = ld_of(m.ld, cols);
  if (ld < cols)
    throw invalid(who + ": the leading dimension of " + name + " (" + std::to_string(ld) +
                  ") is smaller than its row length " + std::to_string(cols));
  if (ld > INT_MAX) throw invalid(who + ": the leading dimension of " + std::string(name) + " exceeds 2^31 - 1");
  const double elements = double(m.offset) + double(rows - 1) * double(ld) + double(cols);
  check_buffer(rt, who, name, m.buffer, elements * double(element_size(m.type)));
}

// L stacked matrices of rows × cols each.
void check_stack(Runtime& rt, const std::string& who, const char* name, const MatrixStack& m, std::int64_t count,
                 std::int64_t rows, std::int64_t cols) {
  const std::int64_t ld = ld_of(m.ld, cols);
  if (ld < cols)
    throw invalid(who + ": the leading dimension of " + name + " (" + std::to_string(ld) +
                  ") is smaller than its row length " + std::to_string(cols));
  if (ld > INT_MAX) throw invalid(who + ": the leading dimension of " + std::string(name) + " exceeds 2^31 - 1");
  const std::int64_t stride = m.stride == 0 ? rows * ld : std::int64_t(m.stride);
  if (stride < rows * ld)
    throw invalid(who + ": the stride of " + name + " between adapters (" + std::to_string(stride) +
                  ") is smaller than one adapter's " + std::to_string(rows) + " rows of " + std::to_string(ld));
  const double elements =
      double(m.offset) + double(count - 1) * double(stride) + double(rows - 1) * double(ld) + double(cols);
  check_buffer(rt, who, name, m.buffer, elements * double(element_size(m.type)));
}

void check_dim(const std::string& who, const char* name, std::int64_t value) {
  if (value < 1) throw invalid(who + ": " + name + " = " + std::to_string(value) + " must be at least 1");
  if (value >= INT_MAX) throw invalid(who + ": " + name + " = " + std::to_string(value) + " exceeds 2^31 - 2");
}

template <class T>
std::vector<T> read_back(Runtime& rt, cl_mem buffer, std::size_t count, const std::string& what) {
  std::vector<T> host(count);
  if (count > 0)
    detail::check_cl(
        clEnqueueReadBuffer(rt.queue().get(), buffer, CL_TRUE, 0, count * sizeof(T), host.data(), 0, nullptr, nullptr),
        what);
  return host;
}

void check(Runtime& rt, Op op, const LoraArgs& a) {
  const std::string who = name_of(op);
  const LoraProblem& p = a.problem;
  const bool reads_x = op != Op::kExpand, writes_y = op != Op::kShrink;
  check_dim(who, "M", p.m);
  if (writes_y) check_dim(who, "N", p.n);
  if (reads_x) check_dim(who, "K", p.k);
  check_dim(who, "L (adapters)", p.adapters);
  check_dim(who, "R (max_rank)", p.max_rank);
  if (a.segments < 0 || a.segments >= INT_MAX)
    throw invalid(who + ": segments = " + std::to_string(a.segments) + " must be from 0 to 2^31 - 2");
  // One element type for X, A, B and Y: the first one the operation reads names it.
  const ElementType type = reads_x ? a.x.type : a.b.type;
  const char* type_of = reads_x ? "X" : "B";
  auto same_type = [&](const char* name, ElementType t) {
    if (t != type)
      throw invalid(who + ": " + name + " is " + to_string(t) + " but " + type_of + " is " + to_string(type) +
                    " (X, A, B and Y share one element type)");
  };
  if (reads_x) same_type("A", a.a.type);
  if (writes_y) {
    if (op == Op::kApply) same_type("B", a.b.type);
    same_type("Y", a.y.type);
  }
  const bool needs_t = op != Op::kApply;
  if ((needs_t || a.intermediate.buffer != nullptr) && a.intermediate.type != ElementType::f32)
    throw invalid(who + ": the intermediate T is " + std::string(to_string(a.intermediate.type)) + " but must be f32");
  if (reads_x) {
    check_matrix(rt, who, "X", a.x, p.m, p.k);
    check_stack(rt, who, "A", a.a, p.adapters, p.max_rank, p.k);
  }
  if (writes_y) {
    check_stack(rt, who, "B", a.b, p.adapters, p.n, p.max_rank);
    check_matrix(rt, who, "Y", a.y, p.m, p.n);
  }
  if (needs_t || a.intermediate.buffer != nullptr)
    check_matrix(rt, who, "T (intermediate)", a.intermediate, p.m, p.max_rank);
  if (a.ranks != nullptr) check_buffer(rt, who, "ranks", a.ranks, 4.0 * double(p.adapters));
  if (writes_y && a.scales != nullptr) check_buffer(rt, who, "scales", a.scales, 4.0 * double(p.adapters));
  if (a.segments == 0) {
    if (a.offsets != nullptr || a.segment_adapters != nullptr)
      throw invalid(who + ": offsets or segment_adapters given with segments = 0 (one segment of all rows, adapter 0)");
  } else {
    check_buffer(rt, who, "offsets", a.offsets, 4.0 * double(a.segments + 1));
    check_buffer(rt, who, "segment_adapters", a.segment_adapters, 4.0 * double(a.segments));
  }
  if (!a.validate) return;
  LoraHostSegments host;
  if (a.segments > 0) {
    host.offsets = read_back<std::uint32_t>(rt, a.offsets, std::size_t(a.segments + 1), who + ": reading offsets back");
    host.adapters = read_back<std::int32_t>(rt, a.segment_adapters, std::size_t(a.segments),
                                            who + ": reading segment_adapters back");
  }
  if (a.ranks != nullptr)
    host.ranks = read_back<std::int32_t>(rt, a.ranks, std::size_t(p.adapters), who + ": reading ranks back");
  validate_lora_segments(host, p, who);
}

// ---- launches ----

// A checked launch's kernel arguments: leading dimensions and strides resolved, absent
// buffers replaced by one that is never read (the flags say so).
struct KernelArgs {
  cl_int M, N, K, R, L, S, have_ranks, have_scales, accumulate;
  cl_mem offsets, seg_adapters, ranks, scales;
  cl_mem x, a, b, y, t;
  cl_long x_off, a_off, a_stride, b_off, b_stride, y_off, t_off;
  cl_int ldx, lda, ldb, ldy, ldt;
  cl_float scale;
  // The expand's rows of T in local memory: TR rows of ldtl floats (the fused kernel's rank
  // rounded up to RC, as its shrink writes whole chunks).
  cl_int ldtl;
  std::size_t tl_bytes;
};

KernelArgs kernel_args(const LoraArgs& a, cl_mem any) {
  const LoraProblem& p = a.problem;
  KernelArgs k{};
  k.M = cl_int(p.m);
  k.N = cl_int(p.n);
  k.K = cl_int(p.k);
  k.R = cl_int(p.max_rank);
  k.L = cl_int(p.adapters);
  k.S = cl_int(a.segments);
  k.have_ranks = a.ranks != nullptr;
  k.have_scales = a.scales != nullptr;
  k.accumulate = a.accumulate;
  k.offsets = a.offsets ? a.offsets : any;
  k.seg_adapters = a.segment_adapters ? a.segment_adapters : any;
  k.ranks = a.ranks ? a.ranks : any;
  k.scales = a.scales ? a.scales : any;
  k.x = a.x.buffer ? a.x.buffer : any;
  k.a = a.a.buffer ? a.a.buffer : any;
  k.b = a.b.buffer ? a.b.buffer : any;
  k.y = a.y.buffer ? a.y.buffer : any;
  k.t = a.intermediate.buffer ? a.intermediate.buffer : any;
  k.ldx = cl_int(ld_of(a.x.ld, p.k));
  k.lda = cl_int(ld_of(a.a.ld, p.k));
  k.ldb = cl_int(ld_of(a.b.ld, p.max_rank));
  k.ldy = cl_int(ld_of(a.y.ld, p.n));
  k.ldt = cl_int(ld_of(a.intermediate.ld, p.max_rank));
  k.x_off = cl_long(a.x.offset);
  k.a_off = cl_long(a.a.offset);
  k.a_stride = a.a.stride ? cl_long(a.a.stride) : cl_long(p.max_rank) * k.lda;
  k.b_off = cl_long(a.b.offset);
  k.b_stride = a.b.stride ? cl_long(a.b.stride) : cl_long(p.n) * k.ldb;
  k.y_off = cl_long(a.y.offset);
  k.t_off = cl_long(a.intermediate.offset);
  k.scale = a.scale;
  return k;
}

// The f32 intermediate of lora_apply's split launches on one command queue, where the caller
// gives none: launches on an in-order queue run one after the other, so they share it.
// Grown, never shrunk, kept for the life of the process (the map is never destroyed, so no
// OpenCL object is released after the driver has unloaded).
boost::compute::buffer queue_scratch(Runtime& rt, cl_command_queue queue, std::size_t bytes) {
  static std::mutex mutex;
  static auto* by_queue = new std::map<std::pair<cl_context, cl_command_queue>, boost::compute::buffer>();
  std::lock_guard<std::mutex> lock(mutex);
  boost::compute::buffer& b = (*by_queue)[{rt.context().get(), queue}];
  constexpr std::size_t kGrain = std::size_t(1) << 20;
  if (b.get() == nullptr || b.size() < bytes)
    b = boost::compute::buffer(rt.context(), (bytes + kGrain - 1) / kGrain * kGrain);
  return b;
}

// Enqueues `kernel` over its grid, split into dispatches of at most `cap` workgroups per
// dimension; `args` are its arguments with the two dispatch bases at `base_at`.
void enqueue_grid(detail::DispatchChain& chain, cl_kernel kernel, const std::string& name, const LoraGeometry& g,
                  std::int64_t cap, detail::KernelArgs args, std::size_t base_at) {
  for (std::int64_t b1 = 0; b1 < g.groups1; b1 += cap) {
    for (std::int64_t b0 = 0; b0 < g.groups0; b0 += cap) {
      const cl_int base0 = cl_int(b0), base1 = cl_int(b1);
      args[base_at] = {sizeof base0, &base0};
      args[base_at + 1] = {sizeof base1, &base1};
      detail::set_kernel_args(kernel, args, name);
      const std::size_t global[2] = {std::size_t(std::min(cap, g.groups0 - b0)) * g.local,
                                     std::size_t(std::min(cap, g.groups1 - b1))};
      const std::size_t local[2] = {g.local, 1};
      chain.enqueue(kernel, 2, global, local, name);
    }
  }
}

// The arguments every LoRA kernel opens with, up to the dispatch bases (left empty).
detail::KernelArgs head_args(const KernelArgs& k, bool with_n, bool with_k) {
  detail::KernelArgs args;
  args.reserve(32);  // the most a LoRA kernel takes (lora_fused): one allocation a launch
  args.push_back({sizeof k.M, &k.M});
  if (with_n) args.push_back({sizeof k.N, &k.N});
  if (with_k) args.push_back({sizeof k.K, &k.K});
  args.insert(args.end(), {{sizeof k.R, &k.R},
                           {sizeof k.L, &k.L},
                           {sizeof k.S, &k.S},
                           {sizeof k.offsets, &k.offsets},
                           {sizeof k.seg_adapters, &k.seg_adapters},
                           {sizeof k.have_ranks, &k.have_ranks},
                           {sizeof k.ranks, &k.ranks},
                           {0, nullptr},
                           {0, nullptr}});
  return args;
}

detail::KernelArgs shrink_args(const KernelArgs& k) {
  detail::KernelArgs args = head_args(k, false, true);
  args.insert(args.end(), {{sizeof k.x, &k.x},
                           {sizeof k.x_off, &k.x_off},
                           {sizeof k.ldx, &k.ldx},
                           {sizeof k.a, &k.a},
                           {sizeof k.a_off, &k.a_off},
                           {sizeof k.lda, &k.lda},
                           {sizeof k.a_stride, &k.a_stride},
                           {sizeof k.t, &k.t},
                           {sizeof k.t_off, &k.t_off},
                           {sizeof k.ldt, &k.ldt}});
  return args;
}

void push_output_args(detail::KernelArgs& args, const KernelArgs& k) {
  args.insert(args.end(), {{sizeof k.b, &k.b},
                           {sizeof k.b_off, &k.b_off},
                           {sizeof k.ldb, &k.ldb},
                           {sizeof k.b_stride, &k.b_stride},
                           {sizeof k.y, &k.y},
                           {sizeof k.y_off, &k.y_off},
                           {sizeof k.ldy, &k.ldy},
                           {sizeof k.scale, &k.scale},
                           {sizeof k.have_scales, &k.have_scales},
                           {sizeof k.scales, &k.scales},
                           {sizeof k.accumulate, &k.accumulate}});
}

detail::KernelArgs expand_args(const KernelArgs& k) {
  detail::KernelArgs args = head_args(k, true, false);
  args.insert(args.end(), {{sizeof k.t, &k.t}, {sizeof k.t_off, &k.t_off}, {sizeof k.ldt, &k.ldt}});
  push_output_args(args, k);
  args.insert(args.end(), {{k.tl_bytes, nullptr}, {sizeof k.ldtl, &k.ldtl}});
  return args;
}

detail::KernelArgs fused_args(const KernelArgs& k) {
  detail::KernelArgs args = head_args(k, true, true);
  args.insert(args.end(), {{sizeof k.x, &k.x},
                           {sizeof k.x_off, &k.x_off},
                           {sizeof k.ldx, &k.ldx},
                           {sizeof k.a, &k.a},
                           {sizeof k.a_off, &k.a_off},
                           {sizeof k.lda, &k.lda},
                           {sizeof k.a_stride, &k.a_stride}});
  push_output_args(args, k);
  args.insert(args.end(), {{k.tl_bytes, nullptr}, {sizeof k.ldtl, &k.ldtl}});
  return args;
}

// Where the two dispatch bases sit in head_args.
std::size_t base_index(bool with_n, bool with_k) { return 1 + (with_n ? 1 : 0) + (with_k ? 1 : 0) + 7; }

const KernelFamily& family_of(Op op) {
  return op == Op::kShrink ? lora_shrink_family() : op == Op::kExpand ? lora_expand_family() : lora_apply_family();
}

// The kernels an operation's algorithm launches, in order: apply's split runs the shrink then
// the expand.
const std::vector<std::string>& kernel_names_of(Op op, bool split) {
  static const std::vector<std::string> shrink = {"lora_shrink"}, expand = {"lora_expand"}, fused = {"lora_fused"},
                                        both = {"lora_shrink", "lora_expand"};
  if (op == Op::kShrink) return shrink;
  if (op == Op::kExpand) return expand;
  return split ? both : fused;
}

// The element type that names an operation's variant and choice: the expand's B, else X.
ElementType type_of(Op op, const LoraArgs& a) { return op == Op::kExpand ? a.b.type : a.x.type; }

bool is_split(Op op, const AlgorithmSpec& algorithm) { return op == Op::kApply && algorithm.name == "split"; }

// The fused kernel's rows of T in local memory: TR rows of the max rank rounded up to RC (its
// shrink writes whole chunks); the expand's TR rows of the rank.
std::int64_t local_t_ld(Op op, bool split, const Params& params, std::int64_t max_rank) {
  return op == Op::kApply && !split ? ceil_div(max_rank, param(params, "RC")) * param(params, "RC") : max_rank;
}

// What a launch of `choice` resolves before its arguments (Runtime::make_plan), and the check
// that its rows of T fit the device's local memory beside the kernel's own.
Runtime::LaunchPlan make_lora_plan(Runtime& rt, Op op, const Choice& choice, const LoraArgs& a) {
  const KernelFamily& family = family_of(op);
  const AlgorithmSpec* algorithm = family.find_algorithm(choice.algorithm);
  if (algorithm == nullptr) throw invalid(family.name + " has no algorithm '" + choice.algorithm + "'");
  Choice used = choice;
  used.kernel = family.name;
  try {
    used.params = algorithm->complete(choice.params);
  } catch (const Error& e) {
    throw invalid(e.what());
  }
  const Params& params = used.params;
  const ElementType type = type_of(op, a);
  const bool split = is_split(op, *algorithm);
  if (op != Op::kShrink) {
    const std::uint64_t tl_bytes =
        std::uint64_t(param(params, "TR")) * std::uint64_t(local_t_ld(op, split, params, a.problem.max_rank)) * 4;
    const DeviceLimits limits = DeviceLimits::of(rt.device());
    const std::uint64_t own = algorithm->local_mem_bytes(params, limits);
    if (own + tl_bytes > limits.local_mem_bytes)
      throw invalid(family.name + "/" + algorithm->name + " {" + format_params(params) + "}: TR = " +
                    std::to_string(param(params, "TR")) + " rows of rank R = " + std::to_string(a.problem.max_rank) +
                    " need " + std::to_string(own + tl_bytes) + " bytes of local memory, more than " +
                    rt.device().name + "'s " + std::to_string(limits.local_mem_bytes) + " (a smaller TR needs less)");
  }
  return rt.make_plan(used, *algorithm, kernel_names_of(op, split), lora_launch_variant(type));
}

// The launch of a plan: its arguments and dispatches under the runtime's launch lock.
void enqueue(Runtime& rt, Op op, const Runtime::LaunchPlan& plan, const LoraArgs& a, const Launch& launch_options) {
  const Params& params = plan.choice->params;
  const bool split = is_split(op, *plan.algorithm);
  const std::vector<std::string>& kernel_names = kernel_names_of(op, split);
  const std::int64_t cap =
      rt.options().max_groups_per_dispatch > 0 ? rt.options().max_groups_per_dispatch : std::int64_t(65535);
  const cl_command_queue queue = launch_options.queue ? launch_options.queue : rt.queue().get();
  LoraArgs resolved = a;
  if (split && resolved.intermediate.buffer == nullptr) {
    const boost::compute::buffer scratch =
        queue_scratch(rt, queue, std::size_t(a.problem.m * a.problem.max_rank) * sizeof(float));
    resolved.intermediate = {scratch.get(), 0, 0, ElementType::f32};
  }
  const std::int64_t ldtl = local_t_ld(op, split, params, a.problem.max_rank);
  rt.launch(plan, [&](const std::vector<cl_kernel>& kernels) {
    KernelArgs k = kernel_args(resolved, a.y.buffer ? a.y.buffer : a.intermediate.buffer);
    k.ldtl = cl_int(ldtl);
    k.tl_bytes = std::size_t(param(params, "TR")) * std::size_t(ldtl) * 4;
    detail::DispatchChain chain(rt.queue().get(), rt.queue_out_of_order(), launch_options);
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const std::string& name = kernel_names[i];
      const LoraGeometry g = lora_geometry(name, params, a.problem, a.segments);
      if (name == "lora_shrink")
        enqueue_grid(chain, kernels[i], name, g, cap, shrink_args(k), base_index(false, true));
      else if (name == "lora_expand")
        enqueue_grid(chain, kernels[i], name, g, cap, expand_args(k), base_index(true, false));
      else
        enqueue_grid(chain, kernels[i], name, g, cap, fused_args(k), base_index(true, true));
    }
    chain.finish();
  });
}

// A launch with the profile's choice: its plan found by the problem (made once, by choose_lora
// and make_lora_plan), then enqueued.
void enqueue_chosen(Runtime& rt, Op op, const char* kernel, const LoraArgs& a, const Launch& launch_options) {
  const ElementType type = type_of(op, a);
  // The shrink reads no N, the expand no K (lora_problem_of leaves them out too).
  const Runtime::PlanFamily family = op == Op::kShrink   ? Runtime::PlanFamily::kLoraShrink
                                     : op == Op::kExpand ? Runtime::PlanFamily::kLoraExpand
                                                         : Runtime::PlanFamily::kLoraApply;
  Runtime::PlanKey key;
  key.values = {std::int64_t(family),
                a.problem.m,
                op == Op::kShrink ? 0 : a.problem.n,
                op == Op::kExpand ? 0 : a.problem.k,
                a.problem.adapters,
                a.problem.max_rank,
                a.segments,
                std::int64_t(type)};
  std::shared_ptr<const Runtime::LaunchPlan> plan = rt.find_plan(key);
  if (!plan) plan = rt.keep_plan(key, make_lora_plan(rt, op, choose_lora(rt, kernel, a), a));
  enqueue(rt, op, *plan, a, launch_options);
}

}  // namespace

Choice choose_lora(Runtime& rt, const std::string& kernel, const LoraArgs& args) {
  const ElementType type = kernel == "lora_expand" ? args.b.type : args.x.type;
  return rt.choose(kernel, lora_shape_class(args.problem.m, args.segments),
                   lora_problem_of(kernel, args.problem, args.segments, type));
}

Status check_lora_shrink(Runtime& rt, const LoraArgs& args) {
  return guard([&] { check(rt, Op::kShrink, args); });
}
Status check_lora_expand(Runtime& rt, const LoraArgs& args) {
  return guard([&] { check(rt, Op::kExpand, args); });
}
Status check_lora_apply(Runtime& rt, const LoraArgs& args) {
  return guard([&] { check(rt, Op::kApply, args); });
}

Status lora_shrink_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kShrink, args);
    enqueue(rt, Op::kShrink, make_lora_plan(rt, Op::kShrink, choice, args), args, launch);
  });
}
Status lora_expand_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kExpand, args);
    enqueue(rt, Op::kExpand, make_lora_plan(rt, Op::kExpand, choice, args), args, launch);
  });
}
Status lora_apply_with(Runtime& rt, const Choice& choice, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kApply, args);
    enqueue(rt, Op::kApply, make_lora_plan(rt, Op::kApply, choice, args), args, launch);
  });
}

Status lora_shrink(Runtime& rt, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kShrink, args);
    enqueue_chosen(rt, Op::kShrink, "lora_shrink", args, launch);
  });
}
Status lora_expand(Runtime& rt, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kExpand, args);
    enqueue_chosen(rt, Op::kExpand, "lora_expand", args, launch);
  });
}
Status lora_apply(Runtime& rt, const LoraArgs& args, const Launch& launch) {
  return guard([&] {
    check(rt, Op::kApply, args);
    enqueue_chosen(rt, Op::kApply, "lora_apply", args, launch);
  });
}

}  // namespace ocltk

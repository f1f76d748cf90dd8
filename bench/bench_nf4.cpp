// NF4 segmented expert GEMMs (docs/nf4.md) against what OpenCL users run today, on one
// queue and one set of buffers per shape:
//   ours                      nf4_forward_segmented / nf4_input_backward_segmented with the
//                             runtime's choice (--ocltk_profile=FILE, else the normal search)
//   ours_bf16                 the same with bf16 input (forward: bf16 output too, as
//                             inference engines call it; backward: bf16 grad, f32 dx, as
//                             QLoRA's backward has it); the runtime's choice for 16-bit
//                             input (profile entries with input_bits: 16 come first)
//   baseline_dequant_clblast  per expert with at least one row: an OpenCL dequantize of
//                             that expert to f32, then clblast::Gemm<float>; timed from the
//                             marker before the first dequantize to the end of the last GEMM
//   baseline_clblast_only     the same GEMMs on f32 weights dequantized beforehand (not
//                             timed): the dense product alone, for context
// Forward: Y_e = X_e · W_eᵀ (row-major, B transposed). Backward (input gradient):
// DX_e = G_e · W_e (no transpose). Rows are spread evenly over the experts as the tuner
// spreads them (offsets[e] = rows·e / E), so 1 row lands on the last expert alone; or, with
// --ocltk_routing=topK, as top-K routing groups them: rows / K tokens, each sending a row to K
// distinct experts drawn at random (seeded: nf4_topk_offsets), so some experts get several rows
// and some none.
// Rows are named DIRECTION/SHAPE/rowsR/CLASS/IMPLEMENTATION, e.g.
// nf4_forward/mixtral_8x14336x4096/rows1/decode/ours (SHAPE ends in _topK with top-K
// routing); CLASS is nf4_shape_class of rows/E.
//
// The floor. A launch needs, at least once: the 4-bit payload and the scales of every
// expert that has a row (experts without rows need not be read), the input activations
// and the output. `GB/s` is those bytes over the measured time, for every implementation
// alike (so ratios of GB/s are ratios of speed); `floor_fraction` is the time those bytes
// take at the device's copy bandwidth over the measured time, i.e. GB/s / copy GB/s,
// where the copy bandwidth counts bytes read plus written by clEnqueueCopyBuffer (measured
// at start in the same run, or --ocltk_copy_gbps).
//
// Activations (x and g) are random values representable in bf16 (stored as f32 for ours and
// the baselines, as bf16 for ours_bf16), so every implementation multiplies the same numbers.
// Weights are random bytes and random positive scales, not quantized from real weights:
// the kernels never look at how codes were chosen, and quantizing 470M coefficients on
// the host would take longer than the suite. Each row is run once and checked against
// nf4_forward_reference / nf4_backward_reference (double) on weights dequantized by
// dequantize_nf4, on a sample of rows × every column, before timing.
#include <benchmark/benchmark.h>
#include <clblast.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "common.hpp"
#include "ocltk/nf4.hpp"

namespace {

using namespace ocltk;
using namespace ocltk::bench;

// What an output holds before the checked call, so an unwritten element fails. Finite:
// a BLAS that computes beta · C with beta = 0 must still produce the right answer.
constexpr float kPoison = 1e30f;
constexpr int kSampleRows = 8;  // checked rows per (shape, rows, direction): first, last, random

struct Nf4Shape {
  const char* name;
  std::int64_t experts, n, k, block_size;
  std::int64_t cpu_max_rows;  // larger row counts are skipped with --ocltk_sizes=cpu
  std::int64_t max_rows;      // and larger ones always
  std::string id() const {
    return std::string(name) + "_" + std::to_string(experts) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
  std::int64_t coefficients_per_expert() const { return n * k; }
};

// From the issue: a Mixtral-like layer and a fine-grained one. On a CPU the prefill rows
// of the big shape are minutes of arithmetic per iteration, so the cpu set stops earlier.
// The fine-grained shape also runs 32768 rows (512 per expert: the prefill class, on the
// problem `ocltk tune` measures it on).
const Nf4Shape kShapes[] = {
    {"mixtral", 8, 14336, 4096, 64, 64, 4096},
    {"fine_grained", 64, 1408, 2048, 64, 512, 32768},
};
const std::int64_t kRows[] = {1, 8, 64, 512, 4096, 32768};

enum class Impl { kOurs, kOursBf16, kDequantClblast, kClblastOnly };
constexpr Impl kImpls[] = {Impl::kOurs, Impl::kOursBf16, Impl::kDequantClblast, Impl::kClblastOnly};

const char* name_of(Impl impl) {
  switch (impl) {
    case Impl::kOurs:
      return "ours";
    case Impl::kOursBf16:
      return "ours_bf16";
    case Impl::kDequantClblast:
      return "baseline_dequant_clblast";
    case Impl::kClblastOnly:
      return "baseline_clblast_only";
  }
  return "?";
}

// ---- flags of this benchmark, beside common.hpp's ----

struct Nf4Flags {
  double copy_gbps = 0;            // --ocltk_copy_gbps=X; 0: measure
  std::vector<std::int64_t> rows;  // --ocltk_rows=A,B,...; empty: kRows
  std::int64_t top_k = 0;          // --ocltk_routing=topK; 0 (even): offsets[e] = rows·e / E
};

Nf4Flags& nf4_flags() {
  static Nf4Flags f;
  return f;
}

const char* kNf4FlagsHelp =
    "ocltk_bench_nf4 flags (besides the ocltk_bench flags above):\n"
    "  --ocltk_copy_gbps=X       device copy bandwidth in GB/s (bytes read + written) for floor_fraction;\n"
    "                            default: measured at start with clEnqueueCopyBuffer (1 GiB, 256 MiB on a CPU)\n"
    "  --ocltk_sizes=cpu         skips rows above 64 for the Mixtral-like shape and above 512 for the\n"
    "                            fine-grained one (the gpu set: 1 to 4096 rows, and 32768 fine-grained)\n"
    "  --ocltk_rows=A,B,...      these row counts (1 to 32768) instead of 1, 8, 64, 512, 4096, 32768 (each\n"
    "                            shape's and the size set's limits still apply: 4096 Mixtral-like), e.g.\n"
    "                            16,32 for 2 and 4 rows per Mixtral-like expert\n"
    "  --ocltk_routing=R         even (default): offsets[e] = rows * e / experts; topK (K = 1 to 8): rows / K\n"
    "                            tokens, each routed to K distinct experts drawn at random (seeded), rows grouped\n"
    "                            by expert; row counts that are not multiples of K are skipped\n"
    "Save results with --benchmark_out=results/DEVICE-nf4.json --benchmark_out_format=json.\n";

// Removes this benchmark's own --ocltk_* flags before common.hpp's take_flags sees them.
bool take_nf4_flags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    const std::string prefix = "--ocltk_copy_gbps=";
    if (arg.compare(0, prefix.size(), prefix) == 0) {
      const std::string v = arg.substr(prefix.size());
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || !std::isfinite(x)) {
        std::fprintf(stderr, "ocltk_bench_nf4: --ocltk_copy_gbps=%s: expected a positive number of GB/s\n", v.c_str());
        return false;
      }
      nf4_flags().copy_gbps = x;
      continue;
    }
    const std::string rows_prefix = "--ocltk_rows=";
    if (arg.compare(0, rows_prefix.size(), rows_prefix) == 0) {
      // Comma-separated counts from 1 to 32768 (the most any shape runs); repeats once.
      const std::string list = arg.substr(rows_prefix.size());
      std::vector<std::int64_t>& rows = nf4_flags().rows;
      rows.clear();
      std::size_t at = 0;
      while (true) {
        const std::size_t comma = list.find(',', at);
        const std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        char* end = nullptr;
        const long long r = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || r < 1 || r > 32768) {
          std::fprintf(stderr, "ocltk_bench_nf4: %s: expected row counts from 1 to 32768, separated by commas\n",
                       arg.c_str());
          return false;
        }
        if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      continue;
    }
    const std::string routing_prefix = "--ocltk_routing=";
    if (arg.compare(0, routing_prefix.size(), routing_prefix) == 0) {
      const std::string v = arg.substr(routing_prefix.size());
      if (v == "even") {
        nf4_flags().top_k = 0;
        continue;
      }
      if (v.size() == 4 && v.compare(0, 3, "top") == 0 && v[3] >= '1' && v[3] <= '8') {
        nf4_flags().top_k = v[3] - '0';
        continue;
      }
      std::fprintf(stderr, "ocltk_bench_nf4: %s: expected even or top1 to top8\n", arg.c_str());
      return false;
    }
    if (arg == "--help" || arg == "-h") std::fputs(kNf4FlagsHelp, stdout);
    argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

std::string cl_error(const std::string& what, cl_int status) {
  return what + " failed with OpenCL status " + std::to_string(status);
}

// ---- the baseline's dequantize kernel ----

// What a user without ocltk writes: one work-item expands one u32 of the payload (8
// codes, high nibble first within a byte) to 8 floats. `first` is the stream position
// of the window (a multiple of the block size, so 8 codes never straddle a scale).
const char* kDequantizeSource = R"CL(
__kernel void dequantize_nf4_f32(__global const uchar* packed, __global const float* scales,
                                 __constant float* codebook, const ulong first, const uint log2_block,
                                 const ulong groups, __global float* out) {
  const ulong i = get_global_id(0);
  if (i >= groups) return;
  const ulong c = first + i * 8;
  const uchar4 b = vload4(0, packed + c / 2);
  const float s = scales[c >> log2_block];
  const float8 v = (float8)(codebook[b.s0 >> 4], codebook[b.s0 & 15], codebook[b.s1 >> 4], codebook[b.s1 & 15],
                            codebook[b.s2 >> 4], codebook[b.s2 & 15], codebook[b.s3 >> 4], codebook[b.s3 & 15]);
  vstore8(v * s, i, out);
}
)CL";

class DequantizeKernel {
 public:
  ~DequantizeKernel() {
    if (kernel_ != nullptr) clReleaseKernel(kernel_);
    if (program_ != nullptr) clReleaseProgram(program_);
  }
  // Builds on first use; returns an error sentence or "".
  std::string ready() {
    if (kernel_ != nullptr) return "";
    Session& session = Session::get();
    cl_int status = CL_SUCCESS;
    cl_device_id id = session.device().handle.id();
    cl_context ctx = session.context();
    program_ = clCreateProgramWithSource(ctx, 1, &kDequantizeSource, nullptr, &status);
    if (status == CL_SUCCESS) status = clBuildProgram(program_, 1, &id, "", nullptr, nullptr);
    if (status == CL_SUCCESS) kernel_ = clCreateKernel(program_, "dequantize_nf4_f32", &status);
    return status == CL_SUCCESS ? "" : cl_error("building the baseline's dequantize kernel", status);
  }
  // Expands expert e of `shape` into `out` (N·K floats). *event may be null.
  std::string enqueue(const Nf4Shape& shape, cl_mem packed, cl_mem scales, cl_mem codebook, std::int64_t e, cl_mem out,
                      cl_event* event) {
    const cl_ulong first = cl_ulong(e * shape.coefficients_per_expert());
    cl_uint log2_block = 0;
    while ((std::int64_t(1) << log2_block) < shape.block_size) ++log2_block;
    const cl_ulong groups = cl_ulong(shape.coefficients_per_expert() / 8);
    cl_int status = clSetKernelArg(kernel_, 0, sizeof packed, &packed);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 1, sizeof scales, &scales);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 2, sizeof codebook, &codebook);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 3, sizeof first, &first);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 4, sizeof log2_block, &log2_block);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 5, sizeof groups, &groups);
    if (status == CL_SUCCESS) status = clSetKernelArg(kernel_, 6, sizeof out, &out);
    if (status != CL_SUCCESS) return cl_error("clSetKernelArg(dequantize_nf4_f32)", status);
    const std::size_t local = 256;
    const std::size_t global = (std::size_t(groups) + local - 1) / local * local;
    status = clEnqueueNDRangeKernel(Session::get().queue(), kernel_, 1, nullptr, &global, &local, 0, nullptr, event);
    return status == CL_SUCCESS ? "" : cl_error("clEnqueueNDRangeKernel(dequantize_nf4_f32)", status);
  }

 private:
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
};

DequantizeKernel& dequantize_kernel() {
  static DequantizeKernel k;
  return k;
}

// ---- device copy bandwidth ----

struct CopyBandwidth {
  double gbps = 0;
  std::string how;
};

// Best of 5 clEnqueueCopyBuffer calls of `bytes` after one warm-up, counting bytes read
// plus bytes written (2 × bytes), as GB/s counts the bytes a launch needs.
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

// ---- operands ----

// One shape's weights on the device (random payload and scales, host copies kept for the
// reference) and, when a baseline needs them, each expert's f32 weights.
struct Weights {
  Nf4Shape shape{};
  std::vector<std::uint8_t> packed;
  std::vector<float> scales;
  cl_mem d_packed = nullptr, d_scales = nullptr, d_codebook = nullptr;
  std::vector<cl_mem> f32;        // per expert, N·K floats; allocated on first use
  std::vector<bool> f32_current;  // expert e's f32 weights hold dequantize(e)
  cl_mem clblast_temp = nullptr;  // CLBlast's scratch for padded/transposed copies
  std::size_t clblast_temp_bytes = 0;

  Weights() = default;
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;
  ~Weights() {
    for (cl_mem m : {d_packed, d_scales, d_codebook, clblast_temp})
      if (m != nullptr) clReleaseMemObject(m);
    for (cl_mem m : f32)
      if (m != nullptr) clReleaseMemObject(m);
  }
  Nf4Geometry geometry() const { return {shape.experts, shape.n, shape.k, shape.block_size, 0}; }
  Nf4Weights device() const { return {geometry(), d_packed, 0, d_scales, 0, d_codebook}; }
};

std::uint32_t seed_of(const Nf4Shape& s) {
  return std::uint32_t(s.experts * 73856093 ^ s.n * 19349663 ^ s.k * 83492791);
}

std::string upload(const void* data, std::size_t bytes, cl_mem* out) {
  Session& session = Session::get();
  cl_int status = CL_SUCCESS;
  *out = clCreateBuffer(session.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
  if (status == CL_SUCCESS && data != nullptr)
    status = clEnqueueWriteBuffer(session.queue(), *out, CL_TRUE, 0, bytes, data, 0, nullptr, nullptr);
  return status == CL_SUCCESS ? "" : cl_error("allocating " + std::to_string(bytes) + " bytes", status);
}

// One (shape, rows) case: offsets, activations of both directions, host copies and the
// reference of the sampled rows, computed once and shared by the three implementations.
struct Activations {
  std::int64_t rows = 0;
  std::vector<std::uint32_t> offsets;
  std::vector<float> x, g;  // rows × K (forward input), rows × N (backward input)
  cl_mem d_offsets = nullptr, d_x = nullptr, d_y = nullptr, d_g = nullptr, d_dx = nullptr;
  cl_mem d_x16 = nullptr, d_y16 = nullptr, d_g16 = nullptr;  // ours_bf16's x, y and g as bf16
  std::vector<std::int64_t> sample;                          // checked rows
  // Per direction (0 forward, 1 backward): expected values, f32 bounds and Σ|in·w| of the
  // sampled rows, sample.size() × output width; empty until first needed.
  std::vector<double> expected[2], bound[2], magnitude[2];

  Activations() = default;
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;
  ~Activations() {
    for (cl_mem m : {d_offsets, d_x, d_y, d_g, d_dx, d_x16, d_y16, d_g16})
      if (m != nullptr) clReleaseMemObject(m);
  }
  std::int64_t expert_of(std::int64_t row) const {
    std::int64_t e = 0;
    while (std::int64_t(offsets[std::size_t(e + 1)]) <= row) ++e;
    return e;
  }
  std::int64_t rows_of(std::int64_t e) const { return offsets[std::size_t(e + 1)] - offsets[std::size_t(e)]; }
};

// The offsets of `rows` rows over the shape's experts, as --ocltk_routing asks: spread evenly
// as the tuner spreads them (nf4_problem_offsets), or routed with a seed of the shape's own.
std::vector<std::uint32_t> offsets_for(const Nf4Shape& s, std::int64_t rows) {
  const std::int64_t k = nf4_flags().top_k;
  if (k > 0) return nf4_topk_offsets(rows / k, s.experts, k, seed_of(s) + std::uint32_t(rows) + 3);
  Nf4Problem even;
  even.experts = s.experts;
  even.rows = rows;
  return nf4_problem_offsets(even);
}

std::int64_t active_experts(const std::vector<std::uint32_t>& offsets) {
  return nf4_active_experts(offsets.data(), offsets.size());
}

// The bytes a launch needs at least once (see the top of the file).
// in_bytes / out_bytes: bytes per input / output element (f32 4, bf16 2).
double needed_bytes(const Nf4Shape& s, std::int64_t rows, std::int64_t active, bool forward, int in_bytes,
                    int out_bytes) {
  const double per_expert = double(s.n * s.k) / 2 + 4.0 * double(s.n * s.k / s.block_size);
  const double in_width = double(forward ? s.k : s.n), out_width = double(forward ? s.n : s.k);
  return double(active) * per_expert + double(rows) * (in_bytes * in_width + out_bytes * out_width);
}

// Only one shape's weights and one row count's activations are resident at a time:
// rows of a case are registered together.
struct Resident {
  std::unique_ptr<Weights> weights;
  std::unique_ptr<Activations> activations;
};

Resident& resident() {
  static Resident r;
  return r;
}

Weights* weights_for(const Nf4Shape& s, std::string* error) {
  Resident& r = resident();
  if (r.weights && r.weights->shape.name == s.name) return r.weights.get();
  r.activations.reset();
  r.weights.reset();  // free the previous shape before allocating the next
  auto w = std::make_unique<Weights>();
  w->shape = s;
  const Nf4Geometry geo = w->geometry();
  w->packed.resize(std::size_t(geo.packed_bytes()));
  w->scales.resize(std::size_t(geo.scale_count()));
  std::mt19937_64 gen(seed_of(s));
  for (std::size_t i = 0; i < w->packed.size(); i += 8) {
    const std::uint64_t bits = gen();
    std::memcpy(w->packed.data() + i, &bits, std::min<std::size_t>(8, w->packed.size() - i));
  }
  // Absmax-like magnitudes of trained weights (~0.01 .. 0.1); any positive value works.
  std::uniform_real_distribution<float> scale(0.01f, 0.1f);
  for (float& v : w->scales) v = scale(gen);
  *error = upload(w->packed.data(), w->packed.size(), &w->d_packed);
  if (error->empty()) *error = upload(w->scales.data(), w->scales.size() * 4, &w->d_scales);
  if (error->empty()) *error = upload(kNf4Codebook.data(), 64, &w->d_codebook);
  if (!error->empty()) {
    *error = "weights of " + s.id() + ": " + *error;
    return nullptr;
  }
  w->f32.assign(std::size_t(s.experts), nullptr);
  w->f32_current.assign(std::size_t(s.experts), false);
  r.weights = std::move(w);
  return r.weights.get();
}

Activations* activations_for(const Weights& w, std::int64_t rows, std::string* error) {
  Resident& r = resident();
  if (r.activations && r.activations->rows == rows) return r.activations.get();
  r.activations.reset();
  const Nf4Shape& s = w.shape;
  auto a = std::make_unique<Activations>();
  a->rows = rows;
  a->offsets = offsets_for(s, rows);
  a->x = random_matrix(std::size_t(rows * s.k), seed_of(s) + std::uint32_t(rows));
  std::vector<std::uint16_t> x16(a->x.size());
  for (std::size_t i = 0; i < x16.size(); ++i) {
    x16[i] = float_to_bf16(a->x[i]);
    a->x[i] = bf16_to_float(x16[i]);
  }
  a->g = random_matrix(std::size_t(rows * s.n), seed_of(s) + std::uint32_t(rows) + 1);
  std::vector<std::uint16_t> g16(a->g.size());
  for (std::size_t i = 0; i < g16.size(); ++i) {
    g16[i] = float_to_bf16(a->g[i]);
    a->g[i] = bf16_to_float(g16[i]);
  }
  *error = upload(a->offsets.data(), a->offsets.size() * 4, &a->d_offsets);
  if (error->empty()) *error = upload(a->x.data(), a->x.size() * 4, &a->d_x);
  if (error->empty()) *error = upload(a->g.data(), a->g.size() * 4, &a->d_g);
  if (error->empty()) *error = upload(nullptr, std::size_t(rows * s.n) * 4, &a->d_y);
  if (error->empty()) *error = upload(nullptr, std::size_t(rows * s.k) * 4, &a->d_dx);
  if (error->empty()) *error = upload(x16.data(), x16.size() * 2, &a->d_x16);
  if (error->empty()) *error = upload(nullptr, std::size_t(rows * s.n) * 2, &a->d_y16);
  if (error->empty()) *error = upload(g16.data(), g16.size() * 2, &a->d_g16);
  if (!error->empty()) {
    *error = "activations of " + std::to_string(rows) + " rows: " + *error;
    return nullptr;
  }
  std::set<std::int64_t> sample{0, rows - 1};
  std::mt19937 gen(seed_of(s) + std::uint32_t(rows) + 2);
  std::uniform_int_distribution<std::int64_t> pick(0, rows - 1);
  while (sample.size() < std::size_t(std::min<std::int64_t>(rows, kSampleRows))) sample.insert(pick(gen));
  a->sample.assign(sample.begin(), sample.end());
  r.activations = std::move(a);
  return r.activations.get();
}

// Expected values and error bounds of the sampled rows in one direction, from the
// library's double reference on each needed expert dequantized by dequantize_nf4 (one
// expert at a time: a Mixtral-like expert is 235 MB of f32).
void compute_reference(const Weights& w, Activations& a, bool forward) {
  std::vector<double>& expected = a.expected[forward ? 0 : 1];
  std::vector<double>& bound = a.bound[forward ? 0 : 1];
  std::vector<double>& magnitude = a.magnitude[forward ? 0 : 1];
  if (!expected.empty()) return;
  const Nf4Shape& s = w.shape;
  const std::int64_t in_width = forward ? s.k : s.n, out_width = forward ? s.n : s.k;
  expected.assign(a.sample.size() * std::size_t(out_width), 0);
  bound.assign(expected.size(), 0);
  magnitude.assign(expected.size(), 0);
  std::map<std::int64_t, std::vector<std::size_t>> by_expert;  // expert → positions in a.sample
  for (std::size_t i = 0; i < a.sample.size(); ++i) by_expert[a.expert_of(a.sample[i])].push_back(i);
  const Nf4Geometry one{1, s.n, s.k, s.block_size, 0};
  const std::uint32_t one_row[2] = {0, 1};
  std::vector<float> we(std::size_t(s.coefficients_per_expert()));
  for (const auto& [e, positions] : by_expert) {
    const std::int64_t first = e * s.coefficients_per_expert();  // a multiple of the block size
    dequantize_nf4(w.packed.data() + first / 2, w.scales.data() + first / s.block_size, kNf4Codebook, 0, s.block_size,
                   we.size(), we.data());
    for (std::size_t i : positions) {
      const std::int64_t r = a.sample[i];
      const float* in = (forward ? a.x.data() : a.g.data()) + r * in_width;
      double* want = expected.data() + i * std::size_t(out_width);
      if (forward) {
        nf4_forward_reference(one, we.data(), in, one_row, 1, want);
      } else {
        nf4_backward_reference(one, we.data(), in, one_row, 1, want);
      }
      // Σ|in·w| per output, for the f32 accumulation bound of a sum of in_width terms.
      double* mag = bound.data() + i * std::size_t(out_width);
      for (std::int64_t n = 0; n < s.n; ++n) {
        const float* wn = we.data() + n * s.k;
        if (forward) {
          double sum = 0;
          for (std::int64_t k = 0; k < s.k; ++k) sum += std::fabs(double(in[k]) * double(wn[k]));
          mag[n] = sum;
        } else {
          const double gn = std::fabs(double(in[n]));
          for (std::int64_t k = 0; k < s.k; ++k) mag[k] += gn * std::fabs(double(wn[k]));
        }
      }
      std::copy(mag, mag + out_width, magnitude.begin() + std::ptrdiff_t(i) * out_width);
      for (std::int64_t j = 0; j < out_width; ++j) mag[j] = gemm_nt_error_bound(in_width, mag[j], 1.0, 0);
    }
  }
}

// ---- implementations ----

struct Case {
  Nf4Shape shape;
  std::int64_t rows;
  bool forward;
};

// Without the read-back (the timed calls) the runtime is told the experts with rows and the
// most rows on one of them, as an engine that keeps its routing counts on the host would, so
// it chooses as the checked call.
std::int64_t active_unless_read(const Activations& a, bool validate_offsets) {
  return validate_offsets ? -1 : active_experts(a.offsets);
}

std::int64_t longest_unless_read(const Activations& a, bool validate_offsets) {
  return validate_offsets ? -1 : nf4_max_expert_rows(a.offsets.data(), a.offsets.size());
}

// The args of one call: `in`/`out` the activations of the call's direction and type.
template <typename Args>
Args segmented_args(const Weights& w, const Activations& a, cl_mem in, ElementType type, cl_mem out,
                    bool validate_offsets) {
  return {w.device(),
          in,
          type,
          a.rows,
          a.d_offsets,
          out,
          validate_offsets,
          active_unless_read(a, validate_offsets),
          longest_unless_read(a, validate_offsets)};
}

Nf4ForwardArgs forward_args(const Weights& w, const Activations& a, bool validate_offsets) {
  return segmented_args<Nf4ForwardArgs>(w, a, a.d_x, ElementType::f32, a.d_y, validate_offsets);
}

Nf4ForwardArgs forward_args_bf16(const Weights& w, const Activations& a, bool validate_offsets) {
  return segmented_args<Nf4ForwardArgs>(w, a, a.d_x16, ElementType::bf16, a.d_y16, validate_offsets);
}

Nf4BackwardArgs backward_args(const Weights& w, const Activations& a, bool validate_offsets) {
  return segmented_args<Nf4BackwardArgs>(w, a, a.d_g, ElementType::f32, a.d_dx, validate_offsets);
}

Nf4BackwardArgs backward_args_bf16(const Weights& w, const Activations& a, bool validate_offsets) {
  return segmented_args<Nf4BackwardArgs>(w, a, a.d_g16, ElementType::bf16, a.d_dx, validate_offsets);
}

// One expert's GEMM through CLBlast on its f32 weights; *event may be null.
std::string enqueue_gemm(Weights& w, Activations& a, bool forward, std::int64_t e, cl_event* event) {
  const Nf4Shape& s = w.shape;
  cl_command_queue queue = Session::get().queue();
  const std::size_t m = std::size_t(a.rows_of(e)), row0 = a.offsets[std::size_t(e)];
  const std::size_t N = std::size_t(s.n), K = std::size_t(s.k);
  clblast::StatusCode code;
  if (forward) {  // Y_e (m × N) = X_e (m × K) · W_eᵀ, W_e N × K
    code = clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, m, N, K,
                                1.0f, a.d_x, row0 * K, K, w.f32[std::size_t(e)], 0, K, 0.0f, a.d_y, row0 * N, N, &queue,
                                event, w.clblast_temp);
  } else {  // DX_e (m × K) = G_e (m × N) · W_e
    code = clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kNo, m, K, N,
                                1.0f, a.d_g, row0 * N, N, w.f32[std::size_t(e)], 0, K, 0.0f, a.d_dx, row0 * K, K,
                                &queue, event, w.clblast_temp);
  }
  return code == clblast::StatusCode::kSuccess ? "" : "clblast::Gemm returned status " + std::to_string(int(code));
}

// Allocates the f32 weights of the experts that have rows, and CLBlast's scratch for the
// largest of this case's calls: an engine would hold both, so neither is timed.
std::string prepare_baseline(Weights& w, Activations& a, bool forward) {
  Session& session = Session::get();
  if (std::string error = dequantize_kernel().ready(); !error.empty()) return error;
  const Nf4Shape& s = w.shape;
  const DeviceInfo& d = session.device();
  const double f32_bytes = 4.0 * double(s.experts) * double(s.coefficients_per_expert());
  if (d.global_mem_bytes > 0 && f32_bytes > 0.8 * double(d.global_mem_bytes))
    return "the f32 weights (" + std::to_string(std::int64_t(f32_bytes / 1e6)) +
           " MB) do not fit comfortably in the device's " + std::to_string(d.global_mem_bytes >> 20) + " MiB";
  std::size_t temp = 0;
  cl_command_queue queue = session.queue();
  for (std::int64_t e = 0; e < s.experts; ++e) {
    if (a.rows_of(e) == 0) continue;
    if (w.f32[std::size_t(e)] == nullptr)
      if (std::string error = upload(nullptr, std::size_t(s.coefficients_per_expert()) * 4, &w.f32[std::size_t(e)]);
          !error.empty())
        return "f32 weights of expert " + std::to_string(e) + ": " + error;
    const std::size_t m = std::size_t(a.rows_of(e)), N = std::size_t(s.n), K = std::size_t(s.k);
    std::size_t bytes = 0;
    const clblast::StatusCode code =
        forward ? clblast::GemmTempBufferSize<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                                                     clblast::Transpose::kYes, m, N, K, 0, K, 0, K, 0, N, &queue, bytes)
                : clblast::GemmTempBufferSize<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                                                     clblast::Transpose::kNo, m, K, N, 0, N, 0, K, 0, K, &queue, bytes);
    if (code != clblast::StatusCode::kSuccess)
      return "clblast::GemmTempBufferSize returned status " + std::to_string(int(code));
    temp = std::max(temp, bytes);
  }
  if (temp > w.clblast_temp_bytes) {
    if (w.clblast_temp != nullptr) clReleaseMemObject(w.clblast_temp);
    w.clblast_temp = nullptr;
    w.clblast_temp_bytes = 0;
    if (std::string error = upload(nullptr, temp, &w.clblast_temp); !error.empty())
      return "CLBlast's scratch buffer: " + error;
    w.clblast_temp_bytes = temp;
  }
  return "";
}

// Dequantizes (untimed) every expert with rows whose f32 weights are not current.
std::string make_f32_current(Weights& w, Activations& a) {
  for (std::int64_t e = 0; e < w.shape.experts; ++e) {
    if (a.rows_of(e) == 0 || w.f32_current[std::size_t(e)]) continue;
    if (std::string error = dequantize_kernel().enqueue(w.shape, w.d_packed, w.d_scales, w.d_codebook, e,
                                                        w.f32[std::size_t(e)], nullptr);
        !error.empty())
      return error;
    w.f32_current[std::size_t(e)] = true;
  }
  const cl_int status = clFinish(Session::get().queue());
  return status == CL_SUCCESS ? "" : cl_error("clFinish after dequantizing the f32 weights", status);
}

// Enqueues one call of `impl`; where `event` is not null, *event receives the event of its
// last command.
std::string enqueue_call(Impl impl, const Case& c, Weights& w, Activations& a, bool validate_offsets, cl_event* event) {
  if (impl == Impl::kOurs || impl == Impl::kOursBf16) {
    Runtime& rt = Session::get().tuned();
    Launch launch;
    launch.event = event;
    const bool bf16 = impl == Impl::kOursBf16;
    const Status status =
        c.forward
            ? nf4_forward_segmented(
                  rt, bf16 ? forward_args_bf16(w, a, validate_offsets) : forward_args(w, a, validate_offsets), launch)
            : nf4_input_backward_segmented(
                  rt, bf16 ? backward_args_bf16(w, a, validate_offsets) : backward_args(w, a, validate_offsets),
                  launch);
    return status.ok() ? "" : status.message();
  }
  std::int64_t last = -1;
  for (std::int64_t e = 0; e < w.shape.experts; ++e)
    if (a.rows_of(e) > 0) last = e;
  for (std::int64_t e = 0; e <= last; ++e) {
    if (a.rows_of(e) == 0) continue;
    if (impl == Impl::kDequantClblast)
      if (std::string error = dequantize_kernel().enqueue(w.shape, w.d_packed, w.d_scales, w.d_codebook, e,
                                                          w.f32[std::size_t(e)], nullptr);
          !error.empty())
        return error;
    if (std::string error = enqueue_gemm(w, a, c.forward, e, e == last ? event : nullptr); !error.empty()) return error;
  }
  return "";
}

// Runs `impl` once on a poisoned output (and, for the dequantizing baseline, poisoned f32
// weights, so a dequantize that writes nothing fails) and checks the sampled rows.
std::string verify(Impl impl, const Case& c, Weights& w, Activations& a) {
  Session& session = Session::get();
  cl_command_queue queue = session.queue();
  const Nf4Shape& s = w.shape;
  const std::int64_t out_width = c.forward ? s.n : s.k;
  const bool bf16 = impl == Impl::kOursBf16 && c.forward;  // a bf16 output (the backward's dx is f32)
  const bool half_in = impl == Impl::kOursBf16;
  cl_mem out = bf16 ? a.d_y16 : c.forward ? a.d_y : a.d_dx;
  const std::size_t out_count = std::size_t(a.rows * out_width);
  const std::uint16_t poison16 = float_to_bf16(kPoison);
  cl_int status =
      bf16 ? clEnqueueFillBuffer(queue, out, &poison16, 2, 0, out_count * 2, 0, nullptr, nullptr)
           : clEnqueueFillBuffer(queue, out, &kPoison, sizeof kPoison, 0, out_count * 4, 0, nullptr, nullptr);
  if (impl == Impl::kDequantClblast) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t e = 0; e < s.experts && status == CL_SUCCESS; ++e) {
      if (a.rows_of(e) == 0) continue;
      status = clEnqueueFillBuffer(queue, w.f32[std::size_t(e)], &nan, sizeof nan, 0,
                                   std::size_t(s.coefficients_per_expert()) * 4, 0, nullptr, nullptr);
      w.f32_current[std::size_t(e)] = false;
    }
  }
  if (status == CL_SUCCESS) status = clFinish(queue);
  if (status != CL_SUCCESS) return cl_error("poisoning before the check", status);

  cl_event event = nullptr;
  if (std::string error = enqueue_call(impl, c, w, a, true, &event); !error.empty()) {
    clFinish(queue);
    if (event != nullptr) clReleaseEvent(event);
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
  if (impl == Impl::kDequantClblast)
    for (std::int64_t e = 0; e < s.experts; ++e)
      w.f32_current[std::size_t(e)] = w.f32_current[std::size_t(e)] || a.rows_of(e) > 0;

  compute_reference(w, a, c.forward);
  const std::vector<double>& expected = a.expected[c.forward ? 0 : 1];
  const std::vector<double>& bound = a.bound[c.forward ? 0 : 1];
  const std::vector<double>& magnitude = a.magnitude[c.forward ? 0 : 1];
  std::vector<float> got(static_cast<std::size_t>(out_width));
  std::vector<std::uint16_t> got16(bf16 ? got.size() : 0);
  for (std::size_t i = 0; i < a.sample.size(); ++i) {
    const std::int64_t r = a.sample[i];
    status = bf16 ? clEnqueueReadBuffer(queue, out, CL_TRUE, std::size_t(r * out_width) * 2, got16.size() * 2,
                                        got16.data(), 0, nullptr, nullptr)
                  : clEnqueueReadBuffer(queue, out, CL_TRUE, std::size_t(r * out_width) * 4, got.size() * 4, got.data(),
                                        0, nullptr, nullptr);
    if (status != CL_SUCCESS) return cl_error("reading the output back", status);
    for (std::size_t j = 0; j < got16.size(); ++j) got[j] = bf16_to_float(got16[j]);
    for (std::int64_t j = 0; j < out_width; ++j) {
      const double want = expected[i * std::size_t(out_width) + std::size_t(j)];
      // bf16 output: rounding of the result (2^-8 relative: bf16 keeps 8 significant bits).
      // bf16 input: 16-bit products (tc), the codebook values rounded to bf16 (forward: 2^-8
      // of Σ|in·w|) and g times the scale too (backward: two roundings, 2^-7; docs/nf4.md).
      const double margin =
          bound[i * std::size_t(out_width) + std::size_t(j)] + (bf16 ? std::fabs(want) / 256 : 0) +
          (half_in ? magnitude[i * std::size_t(out_width) + std::size_t(j)] / (c.forward ? 256 : 128) : 0);
      if (!(std::fabs(double(got[std::size_t(j)]) - want) <= margin)) {
        std::ostringstream text;
        text.precision(9);
        text << "wrong result: " << (c.forward ? "y[" : "dx[") << r << "][" << j << "] (expert " << a.expert_of(r)
             << ") = " << got[std::size_t(j)] << ", expected " << want << " within " << margin;
        return text.str();
      }
    }
  }
  return "";
}

std::string shape_class_of(const Case& c) { return nf4_shape_class(double(c.rows) / double(c.shape.experts)); }

void run_row(benchmark::State& state, Case c, Impl impl) {
  std::string error;
  Weights* w = weights_for(c.shape, &error);
  Activations* a = w != nullptr ? activations_for(*w, c.rows, &error) : nullptr;
  if (a != nullptr && impl != Impl::kOurs) error = prepare_baseline(*w, *a, c.forward);
  if (error.empty() && impl == Impl::kClblastOnly) error = make_f32_current(*w, *a);
  // The checked call is also the warm-up: it builds the programs and touches the pages.
  if (error.empty()) error = verify(impl, c, *w, *a);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  Session& session = Session::get();
  const std::int64_t active = active_experts(a->offsets);
  if (impl == Impl::kOurs || impl == Impl::kOursBf16) {
    state.SetLabel(choice_label(session.tuned().last_choice()));
  } else {
    state.SetLabel("CLBlast " + clblast_version() + ", " + std::to_string(active) + " GEMM(s)" +
                   (impl == Impl::kDequantClblast ? " after as many dequantize kernels" : " on f32 weights"));
  }

  // The timed calls skip the offsets read-back (validate_offsets = false), as an engine's
  // hot path does, and give the experts with rows instead; the checked call above validated
  // them.
  const IterationTime sums =
      time_iterations(state, session, [&](cl_event* event) { return enqueue_call(impl, c, *w, *a, false, event); });
  if (state.error_occurred()) return;
  const double timed = sums.seconds, wall = sums.wall_seconds, last = sums.last_seconds;
  const double iterations = double(state.iterations());
  const bool bf16_in = impl == Impl::kOursBf16;
  const double bytes = needed_bytes(c.shape, c.rows, active, c.forward, bf16_in ? 2 : 4, bf16_in && c.forward ? 2 : 4);
  const double flops = 2.0 * double(c.rows) * double(c.shape.n) * double(c.shape.k);
  using benchmark::Counter;
  state.counters["GFLOP/s"] = Counter(flops * iterations * 1e-9, Counter::kIsRate);
  state.counters["GB/s"] = Counter(bytes * iterations * 1e-9, Counter::kIsRate);
  const double copy_gbps = copy_bandwidth().gbps;
  const double seconds = timed / iterations;
  state.counters["floor_fraction"] = copy_gbps > 0 && seconds > 0 ? bytes * 1e-9 / copy_gbps / seconds : 0;
  state.counters["floor_ms"] = copy_gbps > 0 ? bytes * 1e-9 / copy_gbps * 1e3 : 0;
  state.counters["needed_MB"] = bytes * 1e-6;
  state.counters["active_experts"] = double(active);
  state.counters["verified"] = 1;
  // Near 1 when the timer covers the call; well below 1 where host work (CLBlast's
  // per-call setup, one call per expert) falls outside it; above 1 only with bad timestamps.
  state.counters["timer/wall"] = wall > 0 ? timed / wall : 0;
  // START to END of the last command of an iteration's last call (ours: its kernel; CLBlast:
  // its last GEMM), so the device's time alone. A per-call time well above it at few rows
  // means the device waited for the host's enqueues (0 with --ocltk_timer=wall).
  state.counters["last_command_ms"] = last / iterations * 1e3;
}

// On a CPU device a row that decodes more than 1e8 coefficients per call (two
// Mixtral-like experts, or 35 fine-grained ones) takes seconds per iteration: it gets a
// fixed 3 iterations instead of Google Benchmark's adaptive count.
int iterations_for(const Case& c, bool cpu) {
  if (!cpu) return 0;
  const double decoded =
      double(active_experts(offsets_for(c.shape, c.rows))) * double(c.shape.coefficients_per_expert());
  return decoded > 1e8 ? 3 : 0;
}

void add_context(bool gpu_sizes) {
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
  benchmark::AddCustomContext("device_global_mem_MiB", std::to_string(d.global_mem_bytes >> 20));

  const ProfileSelection& profiles = session.tuned().profiles();
  std::string used;
  for (const ProfileCandidate& c : profiles.candidates)
    used += (used.empty() ? "" : ", ") + c.profile.path + " (" + c.tier + ", match: " + to_string(c.level) + ")";
  benchmark::AddCustomContext("ocltk_profile", used.empty() ? "none: ours runs the built-in defaults" : used);
  std::string warnings;
  for (const std::string& w : profiles.warnings) warnings += (warnings.empty() ? "" : "; ") + w;
  if (!warnings.empty()) benchmark::AddCustomContext("ocltk_profile_warnings", warnings);
  for (const char* family : {"nf4_forward", "nf4_backward"})
    for (const char* shape_class : {"decode", "small_batch", "prefill"})
      benchmark::AddCustomContext(std::string("ocltk_choice/") + family + "/" + shape_class,
                                  session.tuned().choose(family, shape_class).describe());

  benchmark::AddCustomContext("ocltk_sizes", gpu_sizes ? "gpu" : "cpu");
  add_timing_context();
  const CopyBandwidth& copy = copy_bandwidth();
  std::ostringstream gbps;
  gbps.precision(4);
  gbps << copy.gbps;
  benchmark::AddCustomContext("copy_gbps", gbps.str());
  benchmark::AddCustomContext("copy_gbps_source", copy.how);
  benchmark::AddCustomContext(
      "floor",
      "needed bytes = payload + scales of the experts with >= 1 row + activations in and out (4 bytes each; "
      "ours_bf16 2, but 4 for the backward's dx); "
      "floor_fraction = needed bytes / copy_gbps / measured time");
  benchmark::AddCustomContext("weights",
                              "random payload bytes and random scales in [0.01, 0.1), block 64, "
                              "codebook NF4; not quantized from real weights");
  benchmark::AddCustomContext("rows_spread",
                              nf4_flags().top_k > 0
                                  ? "top-" + std::to_string(nf4_flags().top_k) +
                                        " routing: rows / k tokens, each to k distinct experts drawn at random (seeded)"
                                  : std::string("offsets[e] = rows * e / experts (1 row: the last expert alone)"));
  benchmark::AddCustomContext("activations",
                              "values representable in bf16; f32 in and out (ours_bf16: bf16 in, bf16 out forward, "
                              "f32 dx backward)");
  benchmark::AddCustomContext("ours_timed_calls", "validate_offsets = false (checked call: true)");
}

}  // namespace

int main(int argc, char** argv) {
  if (!take_nf4_flags(&argc, argv)) return 2;
  if (!take_flags(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  Session& session = Session::get();
  const bool cpu = session.device().type == "cpu";
  const bool gpu_sizes = flags().sizes.empty() ? !cpu : flags().sizes == "gpu";
  if (nf4_flags().copy_gbps > 0) {
    copy_bandwidth() = {nf4_flags().copy_gbps, "--ocltk_copy_gbps (given on the command line)"};
  } else {
    copy_bandwidth() = measure_copy_bandwidth(cpu ? (std::size_t(256) << 20) : (std::size_t(1) << 30));
  }
  const std::vector<std::int64_t> row_counts =
      nf4_flags().rows.empty() ? std::vector<std::int64_t>(std::begin(kRows), std::end(kRows)) : nf4_flags().rows;
  for (const Nf4Shape& shape : kShapes) {
    for (std::int64_t rows : row_counts) {
      if (rows > shape.max_rows || (!gpu_sizes && rows > shape.cpu_max_rows)) continue;
      const std::int64_t k = nf4_flags().top_k;
      if (k > 0 && (rows % k != 0 || k > shape.experts)) {
        std::fprintf(stderr, "ocltk_bench_nf4: %s: %lld rows skipped (top-%lld routing needs a multiple of %lld)\n",
                     shape.id().c_str(), static_cast<long long>(rows), static_cast<long long>(k),
                     static_cast<long long>(k));
        continue;
      }
      const std::string shape_id = shape.id() + (k > 0 ? "_top" + std::to_string(k) : "");
      for (bool forward : {true, false}) {
        const Case c{shape, rows, forward};
        for (Impl impl : kImpls) {
          const std::string name = std::string(forward ? "nf4_forward" : "nf4_backward") + "/" + shape_id + "/rows" +
                                   std::to_string(rows) + "/" + shape_class_of(c) + "/" + name_of(impl);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), run_row, c, impl)
                        ->UseManualTime()
                        ->Unit(benchmark::kMillisecond);
          per_call_min_time(b);
          if (const int n = iterations_for(c, cpu); n > 0) b->Iterations(n);
        }
      }
    }
  }
  add_context(gpu_sizes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#include "gemm_nt_probe.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace ocltk::detail {
namespace fs = std::filesystem;
namespace {

// Two 32 × 32 tiles each way with partial edges; K spans several steps of the probe point's
// stage (16 columns for f16 and bf16, 8 for f32) and ends inside one; K >= kTf32x3MinK.
constexpr GemmProblem kProbeProblem{40, 36, 56};
constexpr float kProbeAlpha = -0.75f;
constexpr char kAnswerMagic[] = "ocltk-tc-probe 1";

// Small tiles build fastest and leave most of a workgroup's warps busy on the probe's
// problem; the rest are the defaults, so ldmatrix, cp.async and the padded rows are all used.
Params probe_params(const AlgorithmSpec& tc) {
  return tc.complete({{"MWG", 32}, {"NWG", 32}, {"KCH", 2}, {"MWARPS", 1}, {"NWARPS", 2}});
}

std::string kind_of(ElementType input, GemmPrecision precision) {
  return input == ElementType::f32 ? to_string(precision) : to_string(input);
}

// A file holds the magic line, "usable" or "unusable", then the reason.
std::optional<TensorCoreProbe> read_answer(const std::string& path, const std::string& kind) {
  std::ifstream in(path);
  std::string magic, verdict, reason;
  if (!in || !std::getline(in, magic) || magic != kAnswerMagic || !std::getline(in, verdict) ||
      (verdict != "usable" && verdict != "unusable") || !std::getline(in, reason))
    return std::nullopt;
  TensorCoreProbe answer;
  answer.kind = kind;
  answer.usable = verdict == "usable";
  answer.reason = reason + " (the probe's answer in " + path + ")";
  return answer;
}

// Temporary file and rename: a reader never sees half an answer; a read-only cache folder
// only costs probing again.
void write_answer(const std::string& path, const TensorCoreProbe& answer) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    std::string reason = answer.reason;
    for (char& c : reason)
      if (c == '\n') c = ' ';
    out << kAnswerMagic << "\n" << (answer.usable ? "usable" : "unusable") << "\n" << reason << "\n";
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

// Fresh operands of `type`: the bytes for the device and, in `values`, what they hold.
std::vector<std::uint8_t> draw(std::mt19937& rng, ElementType type, std::size_t count, std::vector<float>& values) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t size = element_size(type);
  std::vector<std::uint8_t> bytes(count * size);
  values.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = float_to_element(type, dist(rng));
    std::memcpy(bytes.data() + i * size, &bits, size);
    values[i] = element_to_float(type, bits);
  }
  return bytes;
}

// Runs the probe's product; "" when every element is within its bound, else the first
// that is not, or what failed.
std::string run_probe(Runtime& rt, const AlgorithmSpec& tc, ElementType input, GemmPrecision precision,
                      bool force_failure) {
  const GemmProblem& p = kProbeProblem;
  std::mt19937 rng(0x7C0DE);
  std::vector<float> a, b, unused;
  const std::vector<std::uint8_t> a_bytes = draw(rng, input, std::size_t(p.m * p.k), a);
  const std::vector<std::uint8_t> b_bytes = draw(rng, input, std::size_t(p.n * p.k), b);
  const std::size_t c_size = element_size(input), c_count = std::size_t(p.m * p.n);
  std::vector<std::uint8_t> c_bytes(c_count * c_size, 0xFF);  // NaN in every type: an unwritten element fails
  auto upload = [&](const std::vector<std::uint8_t>& bytes) {
    boost::compute::buffer buffer = rt.allocate(bytes.size()).value();
    rt.queue().enqueue_write_buffer(buffer, 0, bytes.size(), bytes.data());
    return buffer;
  };
  boost::compute::buffer da = upload(a_bytes), db = upload(b_bytes), dc = upload(c_bytes);
  GemmNtArgs args;
  args.problem = p;
  args.alpha = kProbeAlpha;
  args.a = {da.get(), 0, 0, input};
  args.b = {db.get(), 0, 0, input};
  args.c = {dc.get(), 0, 0, input};
  args.precision = precision;
  Choice choice;
  choice.kernel = "gemm_nt";
  choice.shape_class = "tensor-core probe";
  choice.algorithm = tc.name;
  choice.params = probe_params(tc);
  if (const Status s = rt.gemm_nt_with(choice, false, args); !s.ok()) return "its launch failed: " + s.message();
  rt.queue().enqueue_read_buffer(dc, 0, c_bytes.size(), c_bytes.data());

  const double alpha = force_failure ? -double(kProbeAlpha) : double(kProbeAlpha);
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      double sum = 0, abs_dot = 0;
      for (std::int64_t q = 0; q < p.k; ++q) {
        const double v = double(a[std::size_t(i * p.k + q)]) * double(b[std::size_t(j * p.k + q)]);
        sum += v;
        abs_dot += std::fabs(v);
      }
      const double want = alpha * sum;
      std::uint32_t bits = 0;
      std::memcpy(&bits, c_bytes.data() + std::size_t(i * p.n + j) * c_size, c_size);
      const double got = element_to_float(input, bits);
      const double bound = gemm_nt_error_bound(p.k, abs_dot, kProbeAlpha, 0.0, want, input, precision);
      if (!(std::fabs(got - want) <= bound)) {
        std::ostringstream out;
        out << "C(" << i << ", " << j << ") = " << got << ", want " << want << " (bound " << bound << ")";
        if (force_failure) out << " [OCLTK_TC_PROBE=fail: the reference's sign is flipped on purpose]";
        return out.str();
      }
    }
  }
  return "";
}

}  // namespace

TensorCoreProbe probe_gemm_nt_tc(Runtime& rt, ElementType input, GemmPrecision precision, bool force_failure) {
  TensorCoreProbe answer;
  answer.kind = kind_of(input, precision);
  const AlgorithmSpec& tc = *gemm_nt_family().find_algorithm("tc");
  const Params params = probe_params(tc);
  const std::string variant = gemm_nt_launch_variant(input, input, tc.name, precision);
  std::string file;
  if (!force_failure) {
    const std::string entry = rt.program_cache().entry_path(rt.device().handle, kernel_source(tc.source_name),
                                                            rt.program_options(tc, params, variant));
    if (!entry.empty()) file = fs::path(entry).replace_extension(".tc-probe").string();
  }
  if (!file.empty())
    if (std::optional<TensorCoreProbe> known = read_answer(file, answer.kind)) return *known;
  std::string wrong;
  try {
    wrong = run_probe(rt, tc, input, precision, force_failure);
  } catch (const std::exception& e) {
    wrong = std::string("it could not run: ") + e.what();
  }
  const GemmProblem& p = kProbeProblem;
  const std::string product = "a " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) + " " +
                              answer.kind + " tc product {" + format_params(params) + "}";
  answer.usable = wrong.empty();
  answer.reason = answer.usable ? product + " matched the CPU reference" : product + " failed: " + wrong;
  if (!file.empty()) write_answer(file, answer);
  return answer;
}

}  // namespace ocltk::detail

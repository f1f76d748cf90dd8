// The tuner's view of the nf4 family: a class's representative problem (rows spread
// evenly over the experts; a --shapes problem's rows may be top-k routed) run with any choice, checked against the
// double reference on dequantized weights for a sample of rows. One factory per direction. Input is f32, or bf16 where
// a --shapes problem asks for input_bits 16 (checked against the bf16 bounds).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

#include "ocltk/nf4.hpp"
#include "workload.hpp"

namespace ocltk::tuner {
namespace {

// Random weights of one geometry: random payload bytes and random positive scales (every
// code equally likely; the kernels' speed does not depend on the values), dequantized on
// the host for the reference, and on the device. Even so, dequantizing takes about a second
// at GPU class sizes (184 M coefficients), so the classes and both directions of a run
// share one set per geometry: a new workload reuses the set of one still alive (tune()
// keeps the previous class's workload until the next one is built).
struct Nf4WeightSet {
  std::vector<float> w;  // dequantized, for the reference
  boost::compute::buffer packed, scales, codebook;
};

std::shared_ptr<const Nf4WeightSet> weights_for(Runtime& rt, const Nf4Geometry& geo, std::mt19937_64& rng) {
  static std::mutex mutex;
  static std::weak_ptr<const Nf4WeightSet> last;
  static std::tuple<cl_context, std::int64_t, std::int64_t, std::int64_t, std::int64_t> last_key;
  const auto key = std::make_tuple(rt.context().get(), geo.experts, geo.out_features, geo.in_features, geo.block_size);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto set = last.lock(); set && key == last_key) return set;
  auto set = std::make_shared<Nf4WeightSet>();
  Nf4Packed q;
  q.packed.resize(std::size_t(geo.packed_bytes()));
  for (std::size_t i = 0; i < q.packed.size(); i += 8) {  // 8 random bytes per draw
    const std::uint64_t bits = rng();
    std::memcpy(q.packed.data() + i, &bits, std::min<std::size_t>(8, q.packed.size() - i));
  }
  std::uniform_real_distribution<float> scale(0.25f, 1.0f);
  q.scales.resize(std::size_t(geo.scale_count()));
  for (float& v : q.scales) v = scale(rng);
  set->w.resize(std::size_t(geo.coefficients()));
  dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, 0, geo.block_size, set->w.size(), set->w.data());
  const auto upload = [&](const void* data, std::size_t bytes) {
    boost::compute::buffer b = rt.allocate(bytes).value();
    rt.queue().enqueue_write_buffer(b, 0, bytes, data);
    return b;
  };
  set->packed = upload(q.packed.data(), q.packed.size());
  set->scales = upload(q.scales.data(), q.scales.size() * 4);
  set->codebook = upload(kNf4Codebook.data(), 64);
  last = set;
  last_key = key;
  return set;
}

class Nf4Workload : public Workload {
 public:
  Nf4Workload(Runtime& rt, bool forward, const Nf4Problem& p, std::mt19937_64& rng)
      : rt_(rt),
        forward_(forward),
        p_(p),
        geo_{p.experts, p.n, p.k, p.block_size, 0},
        type_(p.input_bits == 16 ? ElementType::bf16 : ElementType::f32) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    weights_ = weights_for(rt, geo_, rng);
    offsets_ = nf4_problem_offsets(p);  // even, or top-k routed (uneven, some experts empty)
    in_width_ = forward ? p.k : p.n;
    out_width_ = forward ? p.n : p.k;
    in_.resize(std::size_t(p.rows * in_width_));
    for (float& v : in_) v = dist(rng);
    offsets_buf_ = upload(offsets_.data(), offsets_.size() * 4);
    if (type_ == ElementType::bf16) {  // bf16 input: the reference takes the values it holds
      std::vector<std::uint16_t> bits(in_.size());
      for (std::size_t i = 0; i < in_.size(); ++i) {
        bits[i] = float_to_bf16(in_[i]);
        in_[i] = bf16_to_float(bits[i]);
      }
      in_buf_ = upload(bits.data(), bits.size() * 2);
    } else {
      in_buf_ = upload(in_.data(), in_.size() * 4);
    }
    out_buf_ = rt.allocate(std::size_t(p.rows * out_width_) * out_size()).value();
    std::set<std::int64_t> rows{0, p.rows - 1};
    std::uniform_int_distribution<std::int64_t> row(0, p.rows - 1);
    while (rows.size() < std::size_t(std::min<std::int64_t>(p.rows, 12))) rows.insert(row(rng));
    sample_.assign(rows.begin(), rows.end());
  }

  // bf16 input writes input_bits 16 into its entries (the runtime prefers them for half-type
  // launches); f32 writes none, as it always has.
  std::map<std::string, std::int64_t> problem() const override {
    std::map<std::string, std::int64_t> p = {
        {"experts", p_.experts}, {"n", p_.n}, {"k", p_.k}, {"rows", p_.rows}, {"block_size", p_.block_size}};
    if (type_ != ElementType::f32) p["input_bits"] = 16;
    // Routed rows: the experts with rows and the most rows on one of them, which the runtime
    // compares with a launch's own (problem_distance); top_k itself is how they were drawn,
    // not a dimension of a launch.
    if (p_.top_k > 0) {
      p["active"] = nf4_active_experts(offsets_.data(), offsets_.size());
      p["max_rows"] = nf4_max_expert_rows(offsets_.data(), offsets_.size());
    }
    return p;
  }
  double flops() const override { return 2.0 * double(p_.rows) * double(p_.n) * double(p_.k); }
  double min_bytes() const override {
    return double(geo_.packed_bytes()) + 4.0 * double(geo_.scale_count()) +
           double(p_.rows) * double(in_width_ * element_size(type_) + out_width_ * out_size());
  }
  std::string variant(const AlgorithmSpec& algorithm) const override { return nf4_launch_variant(algorithm, type_); }
  void poison() override {
    // A NaN of the output's type (all ones), one element wide: a bf16 output of odd size
    // would not take a 4-byte pattern.
    const std::uint32_t nan = 0xFFFFFFFFu;
    const cl_int status = clEnqueueFillBuffer(rt_.queue().get(), out_buf_.get(), &nan, out_size(), 0, out_buf_.size(),
                                              0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw Error(ErrorCode::kDevice, "clEnqueueFillBuffer failed", status);
  }
  double run(const Choice& choice) override {
    cl_event event = nullptr, first = nullptr;
    Launch launch;
    launch.event = &event;
    launch.first_event = &first;  // tc's f32 split runs before the product: time both
    const Nf4Weights w = weights();
    Status s =
        forward_
            ? nf4_forward_with(rt_, choice,
                               {w, in_buf_.get(), type_, p_.rows, offsets_buf_.get(), out_buf_.get(), false}, launch)
            : nf4_backward_with(rt_, choice,
                                {w, in_buf_.get(), type_, p_.rows, offsets_buf_.get(), out_buf_.get(), false}, launch);
    s.throw_if_error();
    try {
      wait_for_event(event, timeout_seconds, start_seconds);
    } catch (...) {
      clReleaseEvent(event);
      clReleaseEvent(first);
      throw;
    }
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    clReleaseEvent(event);
    clReleaseEvent(first);
    return double(end - start) * 1e-6;  // from the first command's start: a pre-pass counts
  }
  bool refines(const AlgorithmSpec& algorithm, const Params& best, const std::string& param) override {
    if (forward_ || param != "SPLIT_SUM") return true;
    Choice choice;
    choice.kernel = "nf4_backward";
    choice.algorithm = algorithm.name;
    choice.params = best;
    const Result<std::int64_t> splits = nf4_backward_splits(
        rt_, choice, {weights(), in_buf_.get(), type_, p_.rows, offsets_buf_.get(), out_buf_.get(), false});
    return !splits.ok() || splits.value() > 1;
  }
  CheckedRows checked_rows() const override { return {std::int64_t(sample_.size()), p_.rows}; }
  std::string verify() override {
    // Only the sampled rows come back (a prefill output is hundreds of MB).
    std::vector<float> got(sample_.size() * std::size_t(out_width_));
    const std::size_t os = out_size();
    std::vector<std::uint16_t> half(os == 2 ? got.size() : 0);
    for (std::size_t s = 0; s < sample_.size(); ++s)
      rt_.queue().enqueue_read_buffer(out_buf_, std::size_t(sample_[s] * out_width_) * os, std::size_t(out_width_) * os,
                                      os == 2 ? static_cast<void*>(half.data() + s * std::size_t(out_width_))
                                              : static_cast<void*>(got.data() + s * std::size_t(out_width_)));
    for (std::size_t i = 0; i < half.size(); ++i) got[i] = bf16_to_float(half[i]);
    if (want_.empty()) reference();
    // bf16 input: the documented 16-bit bounds (docs/verification.md): products in bf16
    // (tc) within 2^-8 of Σ|in·w| forward (the codebook value rounded) and 2^-7 backward (g
    // times the scale rounded too), and a bf16 output (the forward's) rounded, 2^-8 of |y|.
    const double half_products = type_ == ElementType::bf16 ? (forward_ ? 1.0 / 256 : 1.0 / 128) : 0.0;
    const double half_output = os == 2 ? 1.0 / 256 : 0.0;
    for (std::size_t s = 0; s < sample_.size(); ++s) {
      for (std::int64_t j = 0; j < out_width_; ++j) {
        const std::size_t at = s * std::size_t(out_width_) + std::size_t(j);
        const double v = got[at];
        const double bound = gemm_nt_error_bound(in_width_, mag_[at], 1.0, 0) + half_products * mag_[at] +
                             half_output * std::fabs(want_[at]);
        if (!(std::fabs(v - want_[at]) <= bound)) {
          std::ostringstream out;
          out << (forward_ ? "y(" : "dx(") << sample_[s] << ", " << j << ") = " << v << ", want " << want_[at];
          return out.str();
        }
      }
    }
    return "";
  }

 private:
  Nf4Weights weights() const {
    return {geo_, weights_->packed.get(), 0, weights_->scales.get(), 0, weights_->codebook.get()};
  }
  // The sampled rows' outputs in double (want_) and their sums of |terms| (mag_, for the
  // error bound), computed once per workload: every candidate is checked against the same
  // inputs, and at GPU class sizes (a Mixtral-like backward: 12 rows × 4096 × 14336 terms)
  // recomputing them per candidate took seconds, most of a tuning budget. Each output sums
  // its terms in order of the reduction index, as a direct loop would.
  void reference() {
    want_.assign(sample_.size() * std::size_t(out_width_), 0.0);
    mag_.assign(want_.size(), 0.0);
    for (std::size_t s = 0; s < sample_.size(); ++s) {
      const std::int64_t r = sample_[s];
      std::int64_t e = 0;
      while (std::int64_t(offsets_[e + 1]) <= r) ++e;
      double* want = want_.data() + s * std::size_t(out_width_);
      double* mag = mag_.data() + s * std::size_t(out_width_);
      const float* x = in_.data() + r * in_width_;
      const float* w = weights_->w.data() + e * p_.n * p_.k;
      if (forward_) {  // y[r, n] = Σ_k x[r, k] · W[n, k]: W's rows are contiguous along k
        for (std::int64_t n = 0; n < out_width_; ++n)
          for (std::int64_t k = 0; k < in_width_; ++k) {
            const double t = double(x[k]) * w[n * p_.k + k];
            want[n] += t;
            mag[n] += std::fabs(t);
          }
      } else {  // dx[r, k] = Σ_n g[r, n] · W[n, k]: sweep W row by row, every k at once
        for (std::int64_t n = 0; n < in_width_; ++n)
          for (std::int64_t k = 0; k < out_width_; ++k) {
            const double t = double(x[n]) * w[n * p_.k + k];
            want[k] += t;
            mag[k] += std::fabs(t);
          }
      }
    }
  }

  // Bytes per output element: the forward writes the input's type, the backward f32.
  std::size_t out_size() const { return forward_ ? element_size(type_) : 4; }

  boost::compute::buffer upload(const void* data, std::size_t bytes) {
    boost::compute::buffer b = rt_.allocate(bytes).value();
    rt_.queue().enqueue_write_buffer(b, 0, bytes, data);
    return b;
  }

  Runtime& rt_;
  bool forward_;
  Nf4Problem p_;
  Nf4Geometry geo_;
  ElementType type_;  // of the input (bf16 where the problem asks for input_bits 16)
  std::shared_ptr<const Nf4WeightSet> weights_;
  std::vector<float> in_;
  std::vector<std::uint32_t> offsets_;
  std::int64_t in_width_ = 0, out_width_ = 0;
  std::vector<std::int64_t> sample_;
  std::vector<double> want_, mag_;  // reference(): the sampled rows' outputs and |term| sums
  boost::compute::buffer offsets_buf_, in_buf_, out_buf_;
};

bool is_cpu(const Runtime& rt) {
  cl_device_type type = 0;
  clGetDeviceInfo(rt.device().handle.id(), CL_DEVICE_TYPE, sizeof type, &type, nullptr);
  return (type & CL_DEVICE_TYPE_CPU) != 0;
}

}  // namespace

std::unique_ptr<Workload> make_nf4_workload_for(Runtime& rt, bool forward, const Nf4Problem& p, std::mt19937_64& rng) {
  return std::make_unique<Nf4Workload>(rt, forward, p, rng);
}

std::unique_ptr<Workload> make_nf4_forward_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng) {
  return std::make_unique<Nf4Workload>(rt, true, nf4_class_problem(shape_class, is_cpu(rt)), rng);
}

std::unique_ptr<Workload> make_nf4_backward_workload(Runtime& rt, const std::string& shape_class,
                                                     std::mt19937_64& rng) {
  return std::make_unique<Nf4Workload>(rt, false, nf4_class_problem(shape_class, is_cpu(rt)), rng);
}

}  // namespace ocltk::tuner

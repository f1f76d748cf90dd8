// The tuner's view of the LoRA families: a class's representative problem (or a --shapes
// one) on the device, run with any choice, checked against the double reference on a sample
// of rows. X, A, B and Y are bf16 for problems with input_bits 16 (the classes' own: engines
// run LoRA in 16-bit types), else f32; segments spread evenly, segment s on adapter s % L,
// mixed ranks for several adapters (lora_problem_ranks), random per-adapter scales.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "ocltk/lora.hpp"
#include "workload.hpp"

namespace ocltk::tuner {
namespace {

enum class Op { kShrink, kExpand, kApply };

class LoraWorkload : public Workload {
 public:
  LoraWorkload(Runtime& rt, Op op, const LoraTuneProblem& t, std::mt19937_64& rng)
      : rt_(rt), op_(op), p_(t.problem), segments_(t.segments), type_(t.type) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto draw = [&](std::size_t count) {
      std::vector<float> v(count);
      for (float& x : v) x = dist(rng);
      return v;
    };
    x_ = draw(std::size_t(p_.m * p_.k));
    a_ = draw(std::size_t(p_.adapters * p_.max_rank * p_.k));
    b_ = draw(std::size_t(p_.adapters * p_.n * p_.max_rank));
    t_in_ = draw(std::size_t(p_.m * p_.max_rank));
    host_.scales = draw(std::size_t(p_.adapters));
    host_.ranks = lora_problem_ranks(p_);
    if (segments_ > 0) {
      host_.offsets = lora_even_offsets(p_.m, segments_);
      for (std::int64_t s = 0; s < segments_; ++s) host_.adapters.push_back(std::int32_t(s % p_.adapters));
    }
    dx_ = upload_typed(x_);  // leaves in x_, a_, b_ the values the buffers hold
    da_ = upload_typed(a_);
    db_ = upload_typed(b_);
    dt_ = upload(t_in_.data(), t_in_.size() * 4);
    dy_ = rt.allocate(std::size_t(p_.m * p_.n) * element_size(type_)).value();
    dranks_ = upload(host_.ranks.data(), host_.ranks.size() * 4);
    dscales_ = upload(host_.scales.data(), host_.scales.size() * 4);
    if (segments_ > 0) {
      doffsets_ = upload(host_.offsets.data(), host_.offsets.size() * 4);
      dadapters_ = upload(host_.adapters.data(), host_.adapters.size() * 4);
    }
    std::set<std::int64_t> rows{0, p_.m - 1};
    std::uniform_int_distribution<std::int64_t> row(0, p_.m - 1);
    while (rows.size() < std::size_t(std::min<std::int64_t>(p_.m, 12))) rows.insert(row(rng));
    sample_.assign(rows.begin(), rows.end());
  }

  std::map<std::string, std::int64_t> problem() const override {
    return lora_problem_of(kernel(), p_, segments_, type_);
  }
  double flops() const override {
    const std::vector<std::int32_t> adapter = host_.row_adapters(p_.m);
    double rank_rows = 0;
    for (std::int32_t a : adapter) rank_rows += double(host_.ranks[std::size_t(a)]);
    const double widths = op_ == Op::kShrink ? double(p_.k) : op_ == Op::kExpand ? double(p_.n) : double(p_.k + p_.n);
    return 2.0 * rank_rows * widths;
  }
  double min_bytes() const override {
    const double es = double(element_size(type_));
    std::vector<bool> used(host_.ranks.size(), segments_ == 0);
    for (std::int32_t a : host_.adapters) used[std::size_t(a)] = true;
    double a_elements = 0, b_elements = 0;
    for (std::size_t a = 0; a < used.size(); ++a)
      if (used[a]) {
        a_elements += double(host_.ranks[a]) * double(p_.k);
        b_elements += double(host_.ranks[a]) * double(p_.n);
      }
    const double x = double(p_.m) * double(p_.k) * es, y = double(p_.m) * double(p_.n) * es;
    const double t = double(p_.m) * double(p_.max_rank) * 4;
    if (op_ == Op::kShrink) return x + a_elements * es + t;
    if (op_ == Op::kExpand) return t + b_elements * es + y;
    return x + (a_elements + b_elements) * es + y;
  }
  std::string variant(const AlgorithmSpec&) const override { return lora_launch_variant(type_); }

  void poison() override {
    // A NaN of the output's type (all ones), one element wide.
    const std::uint32_t nan = 0xFFFFFFFFu;
    const bool t_out = op_ == Op::kShrink;
    const boost::compute::buffer& out = t_out ? dt_ : dy_;
    const std::size_t width = t_out ? 4 : element_size(type_);
    const cl_int status =
        clEnqueueFillBuffer(rt_.queue().get(), out.get(), &nan, width, 0, out.size(), 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw Error(ErrorCode::kDevice, "clEnqueueFillBuffer failed", status);
  }

  double run(const Choice& choice) override {
    if (op_ == Op::kExpand) rt_.queue().enqueue_write_buffer(dt_, 0, t_in_.size() * 4, t_in_.data());
    cl_event event = nullptr, first = nullptr;
    Launch launch;
    launch.event = &event;
    launch.first_event = &first;  // split's shrink runs before its expand: time both
    LoraArgs args;
    args.problem = p_;
    args.x = {dx_.get(), 0, 0, type_};
    args.a = {da_.get(), 0, 0, 0, type_};
    args.b = {db_.get(), 0, 0, 0, type_};
    args.y = {dy_.get(), 0, 0, type_};
    if (op_ != Op::kApply) args.intermediate = {dt_.get(), 0, 0, ElementType::f32};
    args.ranks = dranks_.get();
    args.scales = dscales_.get();
    args.segments = segments_;
    args.offsets = segments_ > 0 ? doffsets_.get() : nullptr;
    args.segment_adapters = segments_ > 0 ? dadapters_.get() : nullptr;
    args.validate = false;
    const Status s = op_ == Op::kShrink   ? lora_shrink_with(rt_, choice, args, launch)
                     : op_ == Op::kExpand ? lora_expand_with(rt_, choice, args, launch)
                                          : lora_apply_with(rt_, choice, args, launch);
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
    return double(end - start) * 1e-6;
  }

  CheckedRows checked_rows() const override { return {std::int64_t(sample_.size()), p_.m}; }
  std::string verify() override {
    if (want_.empty()) reference();
    const bool t_out = op_ == Op::kShrink;
    const std::int64_t width = t_out ? p_.max_rank : p_.n;
    const std::size_t es = t_out ? 4 : element_size(type_);
    const ElementType out_type = t_out ? ElementType::f32 : type_;
    const std::vector<std::int32_t> row_adapter = host_.row_adapters(p_.m);
    std::vector<std::uint8_t> row(std::size_t(width) * es);
    for (std::size_t s = 0; s < sample_.size(); ++s) {
      const std::int64_t m = sample_[s];
      rt_.queue().enqueue_read_buffer(t_out ? dt_ : dy_, std::size_t(m * width) * es, row.size(), row.data());
      const std::int32_t a = row_adapter[std::size_t(m)];
      const std::int64_t rank = a < 0 ? 0 : host_.ranks[std::size_t(a)];
      for (std::int64_t j = 0; j < (t_out ? rank : width); ++j) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, row.data() + std::size_t(j) * es, es);
        const double got = element_to_float(out_type, bits);
        const std::size_t at = s * std::size_t(width) + std::size_t(j);
        const double bound =
            t_out ? gemm_nt_error_bound(p_.k, mag_[at], 1.0, 0.0)
                  : lora_error_bound(op_ == Op::kApply ? p_.k : 0, rank, mag_[at], 0.0, want_[at], type_);
        if (!(std::fabs(got - want_[at]) <= bound)) {
          std::ostringstream out;
          out << (t_out ? "T(" : "Y(") << m << ", " << j << ") = " << got << ", want " << want_[at];
          return out.str();
        }
      }
    }
    return "";
  }

 private:
  const char* kernel() const {
    return op_ == Op::kShrink ? "lora_shrink" : op_ == Op::kExpand ? "lora_expand" : "lora_apply";
  }

  // The sampled rows' outputs and magnitudes, once per workload (every candidate is checked
  // against the same inputs).
  void reference() {
    LoraProblem rows = p_;
    rows.m = std::int64_t(sample_.size());
    LoraHostSegments host = host_;
    host.offsets.clear();
    host.adapters.clear();
    const std::vector<std::int32_t> row_adapter = host_.row_adapters(p_.m);
    std::vector<float> x, t_in;
    for (std::size_t s = 0; s < sample_.size(); ++s) {
      const std::size_t m = std::size_t(sample_[s]);
      host.offsets.push_back(std::uint32_t(s));
      host.adapters.push_back(row_adapter[m]);
      x.insert(x.end(), x_.begin() + std::ptrdiff_t(m * std::size_t(p_.k)),
               x_.begin() + std::ptrdiff_t((m + 1) * std::size_t(p_.k)));
      t_in.insert(t_in.end(), t_in_.begin() + std::ptrdiff_t(m * std::size_t(p_.max_rank)),
                  t_in_.begin() + std::ptrdiff_t((m + 1) * std::size_t(p_.max_rank)));
    }
    host.offsets.push_back(std::uint32_t(sample_.size()));
    std::vector<double> t, t_abs, y, y_abs;
    if (op_ == Op::kShrink) {
      lora_shrink_reference(rows, host, x.data(), a_.data(), want_, mag_);
      return;
    }
    if (op_ == Op::kExpand) {
      t.assign(t_in.begin(), t_in.end());
      for (float v : t_in) t_abs.push_back(std::fabs(double(v)));
      lora_expand_reference(rows, host, 1.0f, t.data(), t_abs.data(), b_.data(), nullptr, want_, mag_);
      return;
    }
    lora_reference(rows, host, 1.0f, x.data(), a_.data(), b_.data(), nullptr, t, t_abs, want_, mag_);
  }

  boost::compute::buffer upload(const void* data, std::size_t bytes) {
    boost::compute::buffer b = rt_.allocate(std::max<std::size_t>(bytes, 4)).value();
    if (bytes) rt_.queue().enqueue_write_buffer(b, 0, bytes, data);
    return b;
  }
  boost::compute::buffer upload_typed(std::vector<float>& values) {
    const std::size_t es = element_size(type_);
    std::vector<std::uint8_t> bytes(values.size() * es);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = float_to_element(type_, values[i]);
      std::memcpy(bytes.data() + i * es, &bits, es);
      values[i] = element_to_float(type_, bits);
    }
    return upload(bytes.data(), bytes.size());
  }

  Runtime& rt_;
  Op op_;
  LoraProblem p_;
  std::int64_t segments_;
  ElementType type_;
  LoraHostSegments host_;
  std::vector<float> x_, a_, b_, t_in_;
  std::vector<std::int64_t> sample_;
  std::vector<double> want_, mag_;
  boost::compute::buffer dx_, da_, db_, dt_, dy_, dranks_, dscales_, doffsets_, dadapters_;
};

Op op_of(const std::string& kernel) {
  if (kernel == "lora_shrink") return Op::kShrink;
  if (kernel == "lora_expand") return Op::kExpand;
  return Op::kApply;
}

}  // namespace

std::unique_ptr<Workload> make_lora_workload(Runtime& rt, const std::string& kernel, const std::string& shape_class,
                                             std::mt19937_64& rng) {
  return std::make_unique<LoraWorkload>(rt, op_of(kernel), lora_class_problem(shape_class, rt.device().type == "cpu"),
                                        rng);
}

std::unique_ptr<Workload> make_lora_workload_for(Runtime& rt, const std::string& kernel, const LoraTuneProblem& p,
                                                 std::mt19937_64& rng) {
  return std::make_unique<LoraWorkload>(rt, op_of(kernel), p, rng);
}

}  // namespace ocltk::tuner

// The tuner's view of the nf4 family: a class's representative problem (rows spread
// evenly over the experts) run with any choice, checked against the double reference
// on dequantized weights for a sample of rows. One factory per direction.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "ocltk/nf4.hpp"
#include "workload.hpp"

namespace ocltk::tuner {
namespace {

class Nf4Workload : public Workload {
 public:
  Nf4Workload(Runtime& rt, bool forward, const Nf4Problem& p, std::mt19937_64& rng)
      : rt_(rt), forward_(forward), p_(p), geo_{p.experts, p.n, p.k, p.block_size, 0} {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> stream(std::size_t(geo_.coefficients()));
    for (float& v : stream) v = dist(rng);
    const Nf4Packed q = quantize_nf4(stream.data(), stream.size(), p.block_size);
    w_.resize(stream.size());
    dequantize_nf4(q.packed.data(), q.scales.data(), kNf4Codebook, 0, p.block_size, w_.size(), w_.data());
    offsets_.push_back(0);
    for (std::int64_t e = 0; e < p.experts; ++e) offsets_.push_back(std::uint32_t(p.rows * (e + 1) / p.experts));
    in_width_ = forward ? p.k : p.n;
    out_width_ = forward ? p.n : p.k;
    in_.resize(std::size_t(p.rows * in_width_));
    for (float& v : in_) v = dist(rng);
    packed_ = upload(q.packed.data(), q.packed.size());
    scales_ = upload(q.scales.data(), q.scales.size() * 4);
    codebook_ = upload(kNf4Codebook.data(), 64);
    offsets_buf_ = upload(offsets_.data(), offsets_.size() * 4);
    in_buf_ = upload(in_.data(), in_.size() * 4);
    out_buf_ = rt.allocate(std::size_t(p.rows * out_width_) * 4).value();
    std::set<std::int64_t> rows{0, p.rows - 1};
    std::uniform_int_distribution<std::int64_t> row(0, p.rows - 1);
    while (rows.size() < std::size_t(std::min<std::int64_t>(p.rows, 12))) rows.insert(row(rng));
    sample_.assign(rows.begin(), rows.end());
  }

  std::map<std::string, std::int64_t> problem() const override {
    return {{"experts", p_.experts}, {"n", p_.n}, {"k", p_.k}, {"rows", p_.rows}, {"block_size", p_.block_size}};
  }
  double flops() const override { return 2.0 * double(p_.rows) * double(p_.n) * double(p_.k); }
  double min_bytes() const override {
    return double(geo_.packed_bytes()) + 4.0 * double(geo_.scale_count()) +
           4.0 * double(p_.rows) * double(in_width_ + out_width_);
  }
  void poison() override {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> fill(std::size_t(p_.rows * out_width_), nan);
    rt_.queue().enqueue_write_buffer(out_buf_, 0, fill.size() * 4, fill.data());
  }
  double run(const Choice& choice) override {
    cl_event event = nullptr;
    Launch launch;
    launch.event = &event;
    const Nf4Weights w{geo_, packed_.get(), 0, scales_.get(), 0, codebook_.get()};
    Status s =
        forward_
            ? nf4_forward_with(rt_, choice,
                               {w, in_buf_.get(), ElementType::f32, p_.rows, offsets_buf_.get(), out_buf_.get(), false},
                               launch)
            : nf4_backward_with(
                  rt_, choice, {w, in_buf_.get(), ElementType::f32, p_.rows, offsets_buf_.get(), out_buf_.get(), false},
                  launch);
    s.throw_if_error();
    try {
      wait_for_event(event, timeout_seconds);
    } catch (...) {
      clReleaseEvent(event);
      throw;
    }
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
    clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    clReleaseEvent(event);
    return double(end - start) * 1e-6;  // the class problems fit one dispatch
  }
  std::string verify() override {
    std::vector<float> got(std::size_t(p_.rows * out_width_));
    rt_.queue().enqueue_read_buffer(out_buf_, 0, got.size() * 4, got.data());
    for (std::int64_t r : sample_) {
      std::int64_t e = 0;
      while (std::int64_t(offsets_[e + 1]) <= r) ++e;
      for (std::int64_t j = 0; j < out_width_; ++j) {
        double want = 0, mag = 0;
        for (std::int64_t i = 0; i < in_width_; ++i) {
          const std::int64_t n = forward_ ? j : i, k = forward_ ? i : j;
          const double t = double(in_[r * in_width_ + i]) * w_[(e * p_.n + n) * p_.k + k];
          want += t;
          mag += std::fabs(t);
        }
        const double v = got[r * out_width_ + j];
        if (!(std::fabs(v - want) <= gemm_nt_error_bound(in_width_, mag, 1.0, 0))) {
          std::ostringstream out;
          out << (forward_ ? "y(" : "dx(") << r << ", " << j << ") = " << v << ", want " << want;
          return out.str();
        }
      }
    }
    return "";
  }

 private:
  boost::compute::buffer upload(const void* data, std::size_t bytes) {
    boost::compute::buffer b = rt_.allocate(bytes).value();
    rt_.queue().enqueue_write_buffer(b, 0, bytes, data);
    return b;
  }

  Runtime& rt_;
  bool forward_;
  Nf4Problem p_;
  Nf4Geometry geo_;
  std::vector<float> w_, in_;
  std::vector<std::uint32_t> offsets_;
  std::int64_t in_width_ = 0, out_width_ = 0;
  std::vector<std::int64_t> sample_;
  boost::compute::buffer packed_, scales_, codebook_, offsets_buf_, in_buf_, out_buf_;
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

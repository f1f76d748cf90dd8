// The tuner's view of gemm_nt: a class's representative problem on the device, run with
// any choice, checked against the double-precision reference on a sample of rows. A, B and
// C are f32, or bf16 for the *_half classes and problems with input_bits 16; the TF32 classes
// (large_tf32 … lora_expand_tf32x3) launch with their precision and are held to its bound.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "ocltk/gemm_nt.hpp"
#include "workload.hpp"

namespace ocltk::tuner {
namespace {

double event_ms(cl_event first, cl_event last) {
  cl_ulong start = 0, end = 0;
  clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
  clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
  return double(end - start) * 1e-6;
}

class GemmNtWorkload : public Workload {
 public:
  GemmNtWorkload(Runtime& rt, const GemmProblem& p, ElementType type, GemmPrecision precision, std::mt19937_64& rng)
      : rt_(rt), p_(p), type_(type), precision_(precision) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a(std::size_t(p.m * p.k)), b(std::size_t(p.n * p.k));
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    a_ = upload(a);  // rounds a and b to the type: the reference takes the values they hold
    b_ = upload(b);
    c_ = rt.allocate(std::size_t(p.m * p.n) * element_size(type)).value();
    // Every row when the reference is cheap, else a random sample plus both edges.
    if (double(p.m) * double(p.n) * double(p.k) <= 3e8) {
      for (std::int64_t i = 0; i < p.m; ++i) rows_.push_back(i);
    } else {
      std::set<std::int64_t> rows{0, p.m - 1};
      std::uniform_int_distribution<std::int64_t> row(0, p.m - 1);
      while (rows.size() < std::size_t(std::min<std::int64_t>(p.m, 18))) rows.insert(row(rng));
      rows_.assign(rows.begin(), rows.end());
    }
    want_.resize(rows_.size() * std::size_t(p.n));
    bound_.resize(want_.size());
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      const float* ai = a.data() + rows_[r] * p.k;
      for (std::int64_t j = 0; j < p.n; ++j) {
        const float* bj = b.data() + j * p.k;
        double sum = 0, abs_sum = 0;
        for (std::int64_t k = 0; k < p.k; ++k) {
          const double prod = double(ai[k]) * double(bj[k]);
          sum += prod;
          abs_sum += std::fabs(prod);
        }
        want_[r * p.n + j] = sum;
        bound_[r * p.n + j] = gemm_nt_error_bound(p.k, abs_sum, 1.0, 0.0, sum, type, precision);
      }
    }
  }

  std::map<std::string, std::int64_t> problem() const override { return gemm_nt_problem_of(p_, type_); }
  double flops() const override { return p_.flops(); }
  double min_bytes() const override { return p_.min_bytes(false, element_size(type_), element_size(type_)); }
  std::string variant(const AlgorithmSpec& algorithm) const override {
    return gemm_nt_launch_variant(type_, type_, algorithm.name, precision_);
  }

  void poison() override {
    // A NaN of C's type (all ones), one element wide.
    const std::uint32_t nan = 0xFFFFFFFFu;
    const cl_int status =
        clEnqueueFillBuffer(rt_.queue().get(), c_.get(), &nan, element_size(type_), 0, c_.size(), 0, nullptr, nullptr);
    if (status != CL_SUCCESS) throw Error(ErrorCode::kDevice, "clEnqueueFillBuffer failed", status);
  }

  double run(const Choice& choice) override {
    GemmNtArgs args;
    args.problem = p_;
    args.a = {a_.get(), 0, 0, type_};
    args.b = {b_.get(), 0, 0, type_};
    args.c = {c_.get(), 0, 0, type_};
    args.precision = precision_;
    cl_event event = nullptr;
    Launch launch;
    launch.event = &event;
    rt_.gemm_nt_with(choice, false, args, launch).throw_if_error();
    try {
      wait_for_event(event, timeout_seconds, start_seconds);
    } catch (...) {
      clReleaseEvent(event);
      throw;
    }
    const double ms = event_ms(event, event);  // the class problems fit one dispatch
    clReleaseEvent(event);
    return ms;
  }

  CheckedRows checked_rows() const override { return {std::int64_t(rows_.size()), p_.m}; }
  std::string verify() override {
    const std::size_t es = element_size(type_);
    std::vector<std::uint8_t> bytes(std::size_t(p_.m * p_.n) * es);
    rt_.queue().enqueue_read_buffer(c_, 0, bytes.size(), bytes.data());
    std::vector<float> c(std::size_t(p_.m * p_.n));
    for (std::size_t i = 0; i < c.size(); ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, bytes.data() + i * es, es);
      c[i] = element_to_float(type_, bits);
    }
    for (std::size_t i = 0; i < c.size(); ++i)
      if (!std::isfinite(c[i]))
        return "wrong result: C[" + std::to_string(i / p_.n) + "," + std::to_string(i % p_.n) + "] was not written";
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      for (std::int64_t j = 0; j < p_.n; ++j) {
        const double got = c[std::size_t(rows_[r] * p_.n + j)];
        const double want = want_[r * p_.n + j];
        if (std::fabs(got - want) > bound_[r * p_.n + j]) {
          std::ostringstream msg;
          msg << "wrong result: C[" << rows_[r] << "," << j << "] = " << got << ", want " << want << " (bound "
              << bound_[r * p_.n + j] << ")";
          return msg.str();
        }
      }
    }
    return "";
  }

 private:
  // Uploads `values` in the workload's type and leaves in them the values the buffer holds.
  boost::compute::buffer upload(std::vector<float>& values) {
    const std::size_t es = element_size(type_);
    std::vector<std::uint8_t> bytes(values.size() * es);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = float_to_element(type_, values[i]);
      std::memcpy(bytes.data() + i * es, &bits, es);
      values[i] = element_to_float(type_, bits);
    }
    boost::compute::buffer b = rt_.allocate(bytes.size()).value();
    rt_.queue().enqueue_write_buffer(b, 0, bytes.size(), bytes.data());
    return b;
  }

  Runtime& rt_;
  GemmProblem p_;
  ElementType type_;
  GemmPrecision precision_;
  boost::compute::buffer a_, b_, c_;
  std::vector<std::int64_t> rows_;
  std::vector<double> want_, bound_;
};

}  // namespace

std::unique_ptr<Workload> make_gemm_nt_workload_for(Runtime& rt, const GemmProblem& p, ElementType type,
                                                    GemmPrecision precision, std::mt19937_64& rng) {
  return std::make_unique<GemmNtWorkload>(rt, p, type, precision, rng);
}

std::unique_ptr<Workload> make_gemm_nt_workload(Runtime& rt, const std::string& shape_class, std::mt19937_64& rng) {
  return std::make_unique<GemmNtWorkload>(rt, gemm_nt_class_problem(shape_class, rt.device().type == "cpu"),
                                          gemm_nt_class_input(shape_class), gemm_nt_class_precision(shape_class), rng);
}

}  // namespace ocltk::tuner

// Applies a LoRA adapter the way an inference engine does, with ocltk:
//   T = X · Aᵀ                  (shrink: tokens × rank; gemm_nt)
//   Y += (alpha / rank) · T · Bᵀ (expand into the base layer's output; gemm_nt_accum)
// Both launches are enqueued back to back on one queue; the host reads Y once at the end.
//
//   lora_apply [--profile FILE] [--device SEL] [--tokens N] [--hidden H] [--rank R]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ocltk/ocltk.hpp>
#include <random>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  ocltk::RuntimeOptions options;
  long tokens = 37, hidden = 512, rank = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--profile")
      options.profile_path = argv[i + 1];
    else if (flag == "--device")
      options.device = argv[i + 1];
    else if (flag == "--tokens")
      tokens = std::atol(argv[i + 1]);
    else if (flag == "--hidden")
      hidden = std::atol(argv[i + 1]);
    else if (flag == "--rank")
      rank = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "lora_apply: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  auto opened = ocltk::Runtime::open(options);
  if (!opened) {
    std::fprintf(stderr, "lora_apply: %s\n", opened.status().message().c_str());
    return 1;
  }
  ocltk::Runtime& rt = opened.value();
  std::printf("device: %s\n", rt.device().name.c_str());

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  const std::vector<float> x = random(tokens * hidden), a = random(rank * hidden), b = random(hidden * rank),
                           y0 = random(tokens * hidden);
  auto upload = [&](const std::vector<float>& host) {
    boost::compute::buffer buf = rt.allocate(host.size() * sizeof(float)).value();
    rt.queue().enqueue_write_buffer(buf, 0, host.size() * sizeof(float), host.data());
    return buf;
  };
  boost::compute::buffer dx = upload(x), da = upload(a), db = upload(b), dy = upload(y0);
  boost::compute::buffer dt = rt.allocate(tokens * rank * sizeof(float)).value();

  const float scale = 2.0f / float(rank);  // alpha / rank with alpha = 2
  ocltk::GemmNtArgs shrink;
  shrink.problem = {tokens, rank, hidden};
  shrink.a = {dx.get()};
  shrink.b = {da.get()};
  shrink.c = {dt.get()};
  ocltk::GemmNtArgs expand;
  expand.problem = {tokens, hidden, rank};
  expand.alpha = scale;
  expand.a = {dt.get()};
  expand.b = {db.get()};
  expand.c = {dy.get()};
  for (const ocltk::Status& s : {rt.gemm_nt(shrink), rt.gemm_nt_accum(expand)}) {
    if (!s) {
      std::fprintf(stderr, "lora_apply: %s\n", s.message().c_str());
      return 1;
    }
  }
  std::printf("shrink: %s\nexpand: %s\n", rt.choose_gemm_nt(shrink.problem).describe().c_str(),
              rt.choose_gemm_nt(expand.problem).describe().c_str());
  std::vector<float> y(y0.size());
  rt.queue().enqueue_read_buffer(dy, 0, y.size() * sizeof(float), y.data());

  // Check every output against a double-precision reference.
  double worst = 0;
  for (long i = 0; i < tokens; ++i) {
    std::vector<double> t(rank);
    for (long r = 0; r < rank; ++r)
      for (long h = 0; h < hidden; ++h) t[r] += double(x[i * hidden + h]) * a[r * hidden + h];
    for (long j = 0; j < hidden; ++j) {
      double want = y0[i * hidden + j];
      for (long r = 0; r < rank; ++r) want += scale * t[r] * b[j * rank + r];
      worst = std::max(worst, std::fabs(want - y[i * hidden + j]) / (1.0 + std::fabs(want)));
    }
  }
  std::printf("max relative error %.3g over %ld outputs\n", worst, tokens * hidden);
  return worst < 1e-4 ? 0 : 1;
}

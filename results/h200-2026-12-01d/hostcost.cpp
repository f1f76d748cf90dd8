// Host cost per nf4 launch: time inside nf4_forward_segmented (check + choice + enqueue).
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
#include "ocltk/ocltk.hpp"
using namespace ocltk;
int main(int argc, char** argv) {
  const char* profile = argc > 1 ? argv[1] : "";
  RuntimeOptions o;
  if (*profile) o.profile_path = profile;
  auto r = Runtime::open(o);
  if (!r.ok()) { std::fprintf(stderr, "%s\n", r.status().message().c_str()); return 1; }
  Runtime& rt = r.value();
  const bool small = argc > 2; const std::int64_t E = 64, N = small ? 16 : 1408, K = small ? 64 : 2048;
  Nf4Geometry g{E, N, K, 64, 0};
  auto packed = rt.allocate(g.packed_bytes()).value();
  auto scales = rt.allocate(g.scale_count() * 4).value();
  std::vector<float> cb(kNf4Codebook.begin(), kNf4Codebook.end());
  auto codebook = rt.allocate(64).value();
  rt.queue().enqueue_write_buffer(codebook, 0, 64, cb.data());
  std::vector<std::uint32_t> off(E + 1, 1); off[0] = 0;
  auto offs = rt.allocate(off.size() * 4).value();
  rt.queue().enqueue_write_buffer(offs, 0, off.size() * 4, off.data());
  auto x = rt.allocate(K * 4).value(); auto y = rt.allocate(N * 4).value();
  Nf4Weights w{g, packed.get(), 0, scales.get(), 0, codebook.get()};
  Nf4ForwardArgs a{w, x.get(), ElementType::f32, 1, offs.get(), y.get(), false, 1};
  using C = std::chrono::steady_clock;
  // A trivial kernel with the nf4 forward's 18 arguments: the driver's floor per launch.
  const char* src = "__kernel void k(int a, int b, int c, int d, int e, long f, int g, __global uchar* h, long i, "
                    "__global float* j, long k2, __global float* l, __global uchar* m, int n, __global uint* o, "
                    "__global uchar* p) { if (a < 0) p[0] = 1; }";
  cl_int st = 0;
  cl_device_id dev = rt.device().handle.id();
  cl_program prog = clCreateProgramWithSource(rt.context().get(), 1, &src, nullptr, &st);
  st = clBuildProgram(prog, 1, &dev, "", nullptr, nullptr);
  cl_kernel kk = clCreateKernel(prog, "k", &st);
  if (st) { std::fprintf(stderr, "build %d\n", st); return 1; }
  Choice fixed = rt.choose("nf4_forward", "decode");
  for (int phase = 0; phase < 6; ++phase) {
    std::vector<double> t;
    for (int i = 0; i < (phase == 3 ? 1000 : 300); ++i) {
      auto t0 = C::now();
      Status s = phase == 0 ? nf4_forward_segmented(rt, a) : phase == 1 ? check_nf4_forward(rt, a) : Status();
      if (phase == 2) { Choice c = rt.choose("nf4_forward", "decode"); (void)c; }
      if (phase == 3) s = nf4_forward_with(rt, fixed, a);
      if (phase == 4 || phase == 5) {
        cl_int iv = 1; cl_long lv = 0; cl_mem m = x.get();
        if (phase == 5 || i == 0) {
          for (int q : {0, 1, 2, 3, 4, 6, 13}) clSetKernelArg(kk, q, sizeof iv, &iv);
          for (int q : {5, 8, 10}) clSetKernelArg(kk, q, sizeof lv, &lv);
          for (int q : {7, 9, 11, 12, 14, 15}) clSetKernelArg(kk, q, sizeof m, &m);
        }
        const size_t gs[2] = {128 * 22, 1}, ls[2] = {128, 1};
        clEnqueueNDRangeKernel(rt.queue().get(), kk, 2, nullptr, gs, ls, 0, nullptr, nullptr);
      }
      auto t1 = C::now();
      if (!s.ok()) { std::fprintf(stderr, "%s\n", s.message().c_str()); return 1; }
      t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      if (i % 50 == 49) rt.queue().finish();
    }
    std::sort(t.begin(), t.end());
    std::printf("%s: median %.1f us, p10 %.1f, p90 %.1f\n", phase == 0 ? "nf4_forward_segmented" : phase == 1 ? "check_nf4_forward" : phase == 2 ? "choose(decode)" : phase == 3 ? "nf4_forward_with(choice)" : phase == 4 ? "raw enqueue, args set once" : "raw enqueue, 16 args set each", t[t.size()/2], t[t.size()/10], t[t.size()*9/10]);
  }
  rt.queue().finish();
}

// Lab harness (not shipped): times variants of an nf4_forward kernel file on a decode shape
// (default Mixtral-like). Usage: lab KERNEL.cl INCLUDE_DIR ROWS_PER_EXPERT VARIANTS.txt [N [E [K]]]
// VARIANTS.txt lines: label|WGS|RB|NB|extra -D options. LAB_TYPE=0/1/2: x in f32, f16 or
// bf16 (the reference then uses the rounded x); output in the same type. A kernel file whose
// name has "warps" or "_tc" gets the warps grid, RB being its W rows per batch. A file whose
// name has "lut" gets the lut grid: RB is its RPL, NB its KSPLIT (pass -DRPL and -DKSPLIT
// too), with partial sums and zeroed counters (2026-11-30h copy of h200-2026-11-30e/lab).
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                               \
  do {                                                                      \
    cl_int e_ = (x);                                                        \
    if (e_ != CL_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, e_); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

static const float kCb[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  std::ifstream kf(argv[1]);
  std::stringstream ss;
  ss << kf.rdbuf();
  const std::string src = ss.str();
  const std::string inc = argv[2];
  const int rpe = std::atoi(argv[3]);
  const int N = argc > 5 ? std::atoi(argv[5]) : 14336, E = argc > 6 ? std::atoi(argv[6]) : 8,
            K = argc > 7 ? std::atoi(argv[7]) : 4096, LB = 6;
  const int rows = E * rpe;

  cl_uint np = 0;
  CK(clGetPlatformIDs(0, nullptr, &np));
  std::vector<cl_platform_id> plats(np);
  CK(clGetPlatformIDs(np, plats.data(), nullptr));
  cl_device_id dev = nullptr;
  for (auto p : plats) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &dev, &nd) == CL_SUCCESS && nd) break;
  }
  char name[256];
  CK(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, nullptr));
  std::printf("device %s, rows/expert %d\n", name, rpe);
  cl_int st;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &st);
  CK(st);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &st);
  CK(st);

  const size_t nbytes = size_t(E) * N * K / 2, nscales = size_t(E) * N * K / 64;
  std::vector<unsigned char> packed(nbytes);
  std::vector<float> scales(nscales), x(size_t(rows) * K);
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < nbytes; i += 8) {
    const unsigned long long v = rng();
    std::memcpy(&packed[i], &v, 8);
  }
  std::uniform_real_distribution<float> u(0.5f, 1.0f), s(-1.0f, 1.0f);
  for (auto& v : scales) v = u(rng);
  for (auto& v : x) v = s(rng);
  const int type = std::getenv("LAB_TYPE") ? std::atoi(std::getenv("LAB_TYPE")) : 0;
  const size_t esize = type == 0 ? 4 : 2;
  std::vector<unsigned short> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    unsigned u;
    std::memcpy(&u, &x[i], 4);
    if (type == 2) {
      xh[i] = (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
      const unsigned b = unsigned(xh[i]) << 16;
      std::memcpy(&x[i], &b, 4);
    } else if (type == 1) {
      // |x| < 1, normal or subnormal f16: round to 2^-24 units below 2^-14, else 11 bits.
      const float a = std::fabs(x[i]);
      unsigned short h;
      if (a < 6.103515625e-05f) {
        h = (unsigned short)std::nearbyint(a * 16777216.0f);
      } else {
        unsigned au;
        std::memcpy(&au, &a, 4);
        h = (unsigned short)((au + 0xFFFu + ((au >> 13) & 1u) - 0x38000000u) >> 13);
      }
      const float back = a < 6.103515625e-05f ? h * 5.9604645e-8f : [&] {
        unsigned bu = (unsigned(h) << 13) + 0x38000000u;
        float f;
        std::memcpy(&f, &bu, 4);
        return f;
      }();
      xh[i] = (unsigned short)(h | (x[i] < 0 ? 0x8000 : 0));
      x[i] = x[i] < 0 ? -back : back;
    }
  }
  std::vector<unsigned> offs(E + 1);
  for (int e = 0; e <= E; ++e) offs[e] = e * rpe;

  auto mk = [&](size_t bytes, const void* host) {
    cl_mem m =
        clCreateBuffer(ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), bytes, const_cast<void*>(host), &st);
    CK(st);
    return m;
  };
  cl_mem dp = mk(nbytes, packed.data()), ds = mk(nscales * 4, scales.data()), dc = mk(64, kCb),
         dx = mk(x.size() * esize, type == 0 ? (const void*)x.data() : (const void*)xh.data()),
         doff = mk(offs.size() * 4, offs.data()), dy = mk(size_t(rows) * N * esize, nullptr);

  // Reference on sampled outputs.
  std::vector<std::pair<int, int>> samples;
  for (int i = 0; i < 48; ++i) samples.push_back({int(rng() % rows), int(rng() % N)});
  samples.push_back({0, 0});
  samples.push_back({rows - 1, N - 1});
  std::vector<double> ref, absdot;
  for (auto [r, n] : samples) {
    const int e = r / rpe;
    double acc = 0, mag = 0;
    for (int k = 0; k < K; ++k) {
      const size_t c = (size_t(e) * N + n) * K + k;
      const unsigned byte = packed[c >> 1];
      const unsigned code = (c & 1) ? (byte & 15) : (byte >> 4);
      acc += double(x[size_t(r) * K + k]) * kCb[code] * scales[c >> LB];
      mag += std::fabs(double(x[size_t(r) * K + k]) * kCb[code] * scales[c >> LB]);
    }
    ref.push_back(acc);
    absdot.push_back(mag);
  }

  std::ifstream vf(argv[4]);
  std::string line;
  while (std::getline(vf, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string part;
    while (std::getline(ls, part, '|')) f.push_back(part);
    if (f.size() < 5) continue;
    const int wgs = std::stoi(f[1]), rb = std::stoi(f[2]), nb = std::stoi(f[3]);
    const std::string opts =
        "-cl-std=CL1.2 -cl-mad-enable -I " + inc + " -DWGS=" + f[1] + " -DRB=" + f[2] + " -DNB=" + f[3] + " " + f[4];
    const char* s = src.c_str();
    auto t0 = std::chrono::steady_clock::now();
    cl_program prog = clCreateProgramWithSource(ctx, 1, &s, nullptr, &st);
    st = clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr);
    const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st != CL_SUCCESS) {
      size_t len = 0;
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
      std::string log(len, '\0');
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, log.data(), nullptr);
      std::printf("%-28s BUILD FAILED %d\n%.2000s\n", f[0].c_str(), st, log.c_str());
      continue;
    }
    std::string regs;
    if (opts.find("-cl-nv-verbose") != std::string::npos) {
      size_t len = 0;
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &len);
      std::string log(len, '\0');
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, log.data(), nullptr);
      std::stringstream ls2(log);
      std::string l2;
      while (std::getline(ls2, l2)) {
        const size_t at = l2.find("Used ");
        if (at != std::string::npos) regs += " [" + l2.substr(at) + "]";
        const size_t sp = l2.find("spill");
        if (sp != std::string::npos && l2.find(" 0 bytes spill stores") == std::string::npos) regs += " [" + l2 + "]";
      }
    }
    if (const char* dir = std::getenv("LAB_PTX_DIR")) {
      size_t sz = 0;
      CK(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, nullptr));
      std::vector<unsigned char> bin(sz);
      unsigned char* bp = bin.data();
      CK(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bp, &bp, nullptr));
      std::ofstream(std::string(dir) + "/" + f[0] + ".ptx", std::ios::binary)
          .write(reinterpret_cast<const char*>(bin.data()), std::streamsize(sz));
    }
    cl_kernel kern = clCreateKernel(prog, "nf4_forward", &st);
    CK(st);
    cl_int a_n = N, a_k = K, a_rows = rows, a_eb = 0, a_lb = LB, a_type = type;
    cl_long a_eoff = 0, a_poff = 0, a_soff = 0;
    int i = 0;
    CK(clSetKernelArg(kern, i++, 4, &a_n));
    CK(clSetKernelArg(kern, i++, 4, &a_k));
    CK(clSetKernelArg(kern, i++, 4, &a_rows));
    CK(clSetKernelArg(kern, i++, 4, &a_eb));
    CK(clSetKernelArg(kern, i++, 8, &a_eoff));
    CK(clSetKernelArg(kern, i++, 4, &a_lb));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dp));
    CK(clSetKernelArg(kern, i++, 8, &a_poff));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &ds));
    CK(clSetKernelArg(kern, i++, 8, &a_soff));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dc));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dx));
    CK(clSetKernelArg(kern, i++, 4, &a_type));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &doff));
    CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dy));
    const bool lut_grid = std::string(argv[1]).find("lut") != std::string::npos;
    const int lut_rows = 8 * (wgs / 32) * rb, lut_tiles = (N + lut_rows - 1) / lut_rows;
    cl_int a_splits = std::min(nb, K / 64);
    cl_mem dpart = nullptr, dcnt = nullptr;
    if (lut_grid) {
      std::vector<unsigned> zeros(size_t(E) * lut_tiles, 0u);
      dpart = mk(size_t(a_splits) * rows * N * 4, nullptr);
      dcnt = mk(zeros.size() * 4, zeros.data());
      CK(clSetKernelArg(kern, i++, 4, &a_splits));
      CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dpart));
      CK(clSetKernelArg(kern, i++, sizeof(cl_mem), &dcnt));
    }
    // The lanes grid: ceil(ceil(N / RB) / NB) workgroups per expert; a warps kernel (file name
    // with "warps") has WGS / 32 warps per workgroup, so ceil(ceil(N / RB) / (WGS / 32 · NB)).
    // (Device call 6 ran the warps variants on the lanes grid: see README.md.)
    const bool warps_grid = std::string(argv[1]).find("warps") != std::string::npos ||
                            std::string(argv[1]).find("_tc") != std::string::npos;
    // tc: -DKS=n makes teams of n warps, WGS / 32 / n per workgroup.
    const size_t ks_at = opts.find("-DKS="), ks = ks_at == std::string::npos ? 1 : std::stoul(opts.substr(ks_at + 5));
    const size_t per_group = warps_grid ? size_t(wgs) / 32 / ks : 1;
    const size_t groups0 = lut_grid ? size_t(lut_tiles) * size_t(a_splits)
                                    : size_t(((N + rb - 1) / rb + nb * per_group - 1) / (nb * per_group));
    const size_t global[2] = {groups0 * wgs, size_t(E)}, local[2] = {size_t(wgs), 1};
    std::vector<double> times;
    for (int it = 0; it < 23; ++it) {
      cl_event ev;
      CK(clEnqueueNDRangeKernel(q, kern, 2, nullptr, global, local, 0, nullptr, &ev));
      CK(clWaitForEvents(1, &ev));
      cl_ulong a = 0, b = 0;
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, 8, &a, nullptr);
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, 8, &b, nullptr);
      if (it >= 3) times.push_back((b - a) * 1e-6);
      clReleaseEvent(ev);
    }
    std::sort(times.begin(), times.end());
    std::vector<float> y(size_t(rows) * N);
    if (type == 0) {
      CK(clEnqueueReadBuffer(q, dy, CL_TRUE, 0, y.size() * 4, y.data(), 0, nullptr, nullptr));
    } else {
      std::vector<unsigned short> yh(y.size());
      CK(clEnqueueReadBuffer(q, dy, CL_TRUE, 0, yh.size() * 2, yh.data(), 0, nullptr, nullptr));
      for (size_t i = 0; i < y.size(); ++i) {
        unsigned bits;
        if (type == 2) {
          bits = unsigned(yh[i]) << 16;
        } else {
          const unsigned em = yh[i] & 0x7FFFu;
          float mag;
          if (em >= 0x400u) {
            bits = (em << 13) + 0x38000000u;
            std::memcpy(&mag, &bits, 4);
          } else {
            mag = em * 5.9604645e-8f;
          }
          if (yh[i] & 0x8000u) mag = -mag;
          std::memcpy(&bits, &mag, 4);
        }
        std::memcpy(&y[i], &bits, 4);
      }
    }
    double worst = 0, worst_abs = 0;
    for (size_t j = 0; j < samples.size(); ++j) {
      const double got = y[size_t(samples[j].first) * N + samples[j].second];
      worst = std::max(worst, std::fabs(got - ref[j]) / (1e-3 + std::fabs(ref[j])));
      worst_abs = std::max(worst_abs, std::fabs(got - ref[j]) / absdot[j]);
    }
    const double floor_ms = (nbytes + nscales * 4.0) / 3.92e12 * 1e3;
    std::printf("%-28s build %5.2f s  median %.4f ms  min %.4f  floor%% %5.1f  relerr %.2e  err/absdot %.2e%s%s\n",
                f[0].c_str(), build_s, times[times.size() / 2], times[0], 100 * floor_ms / times[times.size() / 2],
                worst, worst_abs, worst > (type == 0 ? 1e-3 : 2e-2) ? "  WRONG" : "", regs.c_str());
    std::fflush(stdout);
    clReleaseKernel(kern);
    clReleaseProgram(prog);
    if (dpart) clReleaseMemObject(dpart);
    if (dcnt) clReleaseMemObject(dcnt);
  }
  return 0;
}

// tclab: times gemm_nt_tc.cl variants (bf16, no verification beyond a few samples).
// usage: tclab KERNEL.cl M N K REPS "name|-D... options|REGS|MWG|NWG|WGS" ...
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#define CK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { std::fprintf(stderr, "%s: %d\n", #x, e_); std::exit(1); } } while (0)
static std::string maxnreg(const std::string& ptx, int regs) {
  std::string out; std::istringstream in(ptx); std::string line; bool hdr = false;
  while (std::getline(in, line)) {
    if (line.rfind(".entry ", 0) == 0 || line.rfind(".visible .entry ", 0) == 0) hdr = true;
    if (hdr && line.rfind("{", 0) == 0) { out += ".maxnreg " + std::to_string(regs) + "\n"; hdr = false; }
    out += line + "\n";
  }
  return out;
}
static float bf(uint16_t h) { uint32_t u = uint32_t(h) << 16; float f; std::memcpy(&f, &u, 4); return f; }
int main(int argc, char** argv) {
  if (argc < 7) { std::fprintf(stderr, "usage\n"); return 2; }
  std::ifstream f(argv[1]); std::stringstream ss; ss << f.rdbuf(); const std::string src = ss.str();
  const int M = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]), reps = std::atoi(argv[5]);
  cl_platform_id plat; CK(clGetPlatformIDs(1, &plat, nullptr));
  cl_device_id dev; CK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr));
  cl_int err; cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err); CK(err);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err); CK(err);
  std::mt19937 rng(1); std::uniform_real_distribution<float> U(-1, 1);
  auto mk = [&](size_t n) { std::vector<uint16_t> v(n); for (auto& x : v) { float y = U(rng); uint32_t u; std::memcpy(&u, &y, 4); x = uint16_t(u >> 16); } return v; };
  std::vector<uint16_t> a = mk(size_t(M) * K), b = mk(size_t(N) * K);
  cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, a.size() * 2, a.data(), &err); CK(err);
  cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, b.size() * 2, b.data(), &err); CK(err);
  cl_mem dc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size_t(M) * N * 2, nullptr, &err); CK(err);
  for (int v = 6; v < argc; ++v) {
    std::string spec = argv[v]; std::vector<std::string> p; size_t s = 0, e;
    while ((e = spec.find('|', s)) != std::string::npos) { p.push_back(spec.substr(s, e - s)); s = e + 1; } p.push_back(spec.substr(s));
    const std::string name = p[0], opts = (std::getenv("LAB_NOPTX") ? std::string("-cl-std=CL1.2 -DIN_TYPE=2 -DOUT_TYPE=2 ") : std::string("-cl-std=CL1.2 -cl-mad-enable -DOCLTK_PTX=1 -DIN_TYPE=2 -DOUT_TYPE=2 ")) + p[1];
    const int regs = std::atoi(p[2].c_str()), mwg = std::atoi(p[3].c_str()), nwg = std::atoi(p[4].c_str()), wgs = std::atoi(p[5].c_str());
    const char* sp = src.c_str(); cl_program prog = clCreateProgramWithSource(ctx, 1, &sp, nullptr, &err); CK(err);
    if (clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) {
      size_t n; clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n); std::string log(n, 0);
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr); std::printf("%s BUILD FAILED %s\n", name.c_str(), log.substr(0, 800).c_str()); continue; }
    size_t bs; CK(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bs, &bs, nullptr)); std::string bin(bs, 0);
    unsigned char* bp = (unsigned char*)bin.data(); CK(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bp, &bp, nullptr));
    while (!bin.empty() && bin.back() == 0) bin.pop_back();
    if (regs > 0) {
      clReleaseProgram(prog); std::string ptx = maxnreg(bin, regs); bin = ptx;
      const unsigned char* pp = (const unsigned char*)ptx.c_str(); size_t pl = ptx.size() + 1; cl_int bst;
      prog = clCreateProgramWithBinary(ctx, 1, &dev, &pl, &pp, &bst, &err); CK(err); CK(clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr));
    }
    if (const char* dir = std::getenv("PTX_DIR")) { std::ofstream(std::string(dir) + "/" + name + ".ptx") << bin; }
    cl_kernel k = clCreateKernel(prog, "gemm_nt", &err); CK(err);
    float alpha = 1.0f; cl_long zero = 0; int ia = K;
    CK(clSetKernelArg(k, 0, 4, &M)); CK(clSetKernelArg(k, 1, 4, &N)); CK(clSetKernelArg(k, 2, 4, &K)); CK(clSetKernelArg(k, 3, 4, &alpha));
    CK(clSetKernelArg(k, 4, sizeof(cl_mem), &da)); CK(clSetKernelArg(k, 5, 8, &zero)); CK(clSetKernelArg(k, 6, 4, &ia));
    CK(clSetKernelArg(k, 7, sizeof(cl_mem), &db)); CK(clSetKernelArg(k, 8, 8, &zero)); CK(clSetKernelArg(k, 9, 4, &ia));
    CK(clSetKernelArg(k, 10, sizeof(cl_mem), &dc)); CK(clSetKernelArg(k, 11, 8, &zero)); CK(clSetKernelArg(k, 12, 4, &N));
    const size_t local = wgs, global = size_t((M + mwg - 1) / mwg) * ((N + nwg - 1) / nwg) * wgs;
    std::vector<double> ms;
    for (int r = 0; r < reps + 3; ++r) {
      cl_event ev; CK(clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, &ev)); CK(clWaitForEvents(1, &ev));
      cl_ulong t0, t1; clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, 8, &t0, nullptr); clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, 8, &t1, nullptr);
      if (r >= 3) ms.push_back((t1 - t0) * 1e-6); clReleaseEvent(ev);
    }
    std::sort(ms.begin(), ms.end()); const double med = ms[ms.size() / 2];
    std::vector<uint16_t> c(size_t(M) * N); CK(clEnqueueReadBuffer(q, dc, CL_TRUE, 0, c.size() * 2, c.data(), 0, nullptr, nullptr));
    double worst = 0;
    for (int t = 0; t < 16; ++t) {
      const int m = (t * 7919) % M, n = (t * 104729 + 13) % N; double ref = 0, mag = 0;
      for (int kk = 0; kk < K; ++kk) { double x = double(bf(a[size_t(m) * K + kk])) * bf(b[size_t(n) * K + kk]); ref += x; mag += std::fabs(x); }
      worst = std::max(worst, std::fabs(bf(c[size_t(m) * N + n]) - ref) / (mag * 0.0078125 + 1e-30));
    }
    std::printf("%-28s %8.4f ms %7.1f TFLOP/s  err/bound %.3f  min %.4f\n", name.c_str(), med, 2.0 * M * N * K / med * 1e-9, worst, ms.front());
    std::fflush(stdout);
    clReleaseKernel(k); clReleaseProgram(prog);
  }
  return 0;
}

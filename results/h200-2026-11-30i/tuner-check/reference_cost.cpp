#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>
int main() {
  const long N = 14336, K = 4096, rows = 12;
  std::vector<float> w(N * K, 0.5f), g(rows * N, 0.25f);
  auto t0 = std::chrono::steady_clock::now();
  double acc = 0;
  for (long r = 0; r < rows; ++r)  // old: per output k, sum over n (stride K)
    for (long k = 0; k < K; ++k) {
      double want = 0, mag = 0;
      for (long n = 0; n < N; ++n) { const double t = double(g[r * N + n]) * w[n * K + k]; want += t; mag += std::fabs(t); }
      acc += want + mag;
    }
  auto t1 = std::chrono::steady_clock::now();
  std::vector<double> want(rows * K, 0), mag(rows * K, 0);
  for (long r = 0; r < rows; ++r)
    for (long n = 0; n < N; ++n)
      for (long k = 0; k < K; ++k) { const double t = double(g[r * N + n]) * w[n * K + k]; want[r * K + k] += t; mag[r * K + k] += std::fabs(t); }
  auto t2 = std::chrono::steady_clock::now();
  std::printf("old per verify %.2f s, new once %.2f s (%g %g)\n", std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count(), acc, want[5]);
}

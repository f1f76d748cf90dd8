// Lab (2026-11-30f call 7): results/h200-2026-11-30e/lab/read_tc_lab.cl with PAD words of
// local memory per workgroup, to hold the warps per SM down (PAD 12288: 48 KiB, 4
// workgroups an SM; 25600: 100 KiB, 2).
// Lab (not shipped): the W read pattern of nf4_forward_tc alone, to separate the access
// pattern from the decode. Same grid and signature as nf4_forward_tc.cl (one team per warp,
// NB = 1): warp u reads W rows 16·RT·u .. + 16·RT - 1 of its expert over all of K, in
// groups of 4 steps (256 codes, 128 bytes per row), D groups in flight, and folds the bits
// into one output per lane so no load is dead.
//   PAT 0: the kernel's pattern, lane (g, t) reads 8 bytes of rows g and g + 8 per step
//          (an instruction: 8 rows × 32 bytes)
//   PAT 1: coalesced, lane l reads 16 bytes of row l / 8 at byte 16·(l % 8) of the group
//          (an instruction: 4 rows × 128 bytes)
#ifndef WGS
#define WGS 256
#endif
#ifndef RT
#define RT 1
#endif
#ifndef D
#define D 2
#endif
#ifndef PAT
#define PAT 0
#endif
#define NV (RT * 4)  // uint4 per lane per group: 16·RT rows × 128 bytes / 32 lanes / 16 bytes

inline void load_group(uint4* v, const __global uchar* w, const int K, const int n0, const int N, const int k0,
                       const int lane) {
#if PAT == 0
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int q = 0; q < 2 * RT; ++q) {
    const int n = min(n0 + 16 * (q >> 1) + g + 8 * (q & 1), N - 1);
    const __global uchar* p = w + (long)n * (K / 2) + k0 / 2 + 8 * t;
    const uint2 a = *(const __global uint2*)p, b = *(const __global uint2*)(p + 32);
    const uint2 c = *(const __global uint2*)(p + 64), d = *(const __global uint2*)(p + 96);
    v[2 * q] = (uint4)(a.s0, a.s1, b.s0, b.s1);
    v[2 * q + 1] = (uint4)(c.s0, c.s1, d.s0, d.s1);
  }
#else
#pragma unroll
  for (int q = 0; q < NV; ++q) {
    const int n = min(n0 + 4 * q + lane / 8, N - 1);
    v[q] = *(const __global uint4*)(w + (long)n * (K / 2) + k0 / 2 + 16 * (lane % 8));
  }
#endif
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y) {
  const int lid = get_local_id(0), lane = lid % 32;
  const int e = expert_base + get_group_id(1);
  const int n0 = (get_group_id(0) * (WGS / 32) + lid / 32) * 16 * RT;
  if (n0 >= N) return;
  const __global uchar* w = packed + (long)e * N * (K / 2);
#ifdef PAD
  __local uint pad[PAD];
  pad[lid] = lid;
#endif
  uint4 v[D + 1][NV];
  uint acc = 0;
#pragma unroll
  for (int u = 0; u < D; ++u) load_group(v[u], w, K, n0, N, u * 256, lane);
  for (int k0 = 0; k0 < K; k0 += (D + 1) * 256) {
#pragma unroll
    for (int u = 0; u < D + 1; ++u) {
      const int k = k0 + u * 256;
      if (k >= K) break;
      if (k + D * 256 < K) load_group(v[(u + D) % (D + 1)], w, K, n0, N, k + D * 256, lane);
#pragma unroll
      for (int q = 0; q < NV; ++q) acc ^= v[u][q].s0 ^ v[u][q].s1 ^ v[u][q].s2 ^ v[u][q].s3;
    }
  }
#ifdef PAD
  acc ^= pad[(lid + 1) % WGS];
#endif
  if (acc == 0x12345678u) ((__global float*)y)[lid] = 1.0f;  // never, in practice
}

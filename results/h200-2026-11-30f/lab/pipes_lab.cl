// Lab (2026-11-30f call 12): throughput of single instruction kinds on the H200 through
// NVIDIA's OpenCL, in the lab harness's nf4_forward signature (its inputs are ignored but
// for the codes, which seed the chains; results are WRONG by design). Every work-item runs
// ITER rounds of 8 independent chains of one operation (OP):
//   1 prmt, 2 lop3 (and-xor), 3 shift, 4 integer multiply-add, 5 f32 fma,
//   6 lds.32 from a 32 KiB table at conflict-free offsets, 7 mma.sync m16n8k16 (4 chains),
//   8 prmt + lds (one each per chain and round); mixes, chains 0-3 of one kind and 4-7 of
//   the other: 9 imad + lop3, 10 prmt + imad, 11 lop3 + ffma, 12 prmt + ffma.
// Time per operation = event time / (work-items · ITER · 8).
#ifndef WGS
#define WGS 128
#endif
#ifndef ITER
#define ITER 256
#endif
#ifndef OP
#define OP 1
#endif

inline uint prmt(const uint a, const uint b, const uint c) {
  uint d;
  asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
inline uint lop3(const uint a, const uint b, const uint c) {
  uint d;
  asm volatile("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
inline uint shr(const uint a, const uint b) {
  uint d;
  asm volatile("shr.b32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
inline uint imad(const uint a, const uint b, const uint c) {
  uint d;
  asm volatile("mad.lo.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
inline float ffma(const float a, const float b, const float c) {
  float d;
  asm volatile("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y) {
  __local uint table[256 * 32];
  const int lid = get_local_id(0), lane = lid % 32;
  for (int i = lid; i < 256 * 32; i += WGS) table[i] = (uint)i * 2654435761u;
  barrier(CLK_LOCAL_MEM_FENCE);
  const size_t gid = get_global_id(0) + get_global_id(1) * get_global_size(0);
  const uint seed = ((const __global uint*)packed)[gid % 1024];
  uint v[8];
  float f[8];
  for (int c = 0; c < 8; ++c) {
    v[c] = seed * (uint)(c + 1) + (uint)c;
    f[c] = as_float(0x3F800000u | (v[c] & 0x7FFFu));
  }
  const uint lane_off = (uint)lane * 4u;
  float d[4][4] = {{0.0f}};
#pragma unroll 1
  for (int it = 0; it < ITER; ++it) {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
#if OP == 1
      v[c] = prmt(v[c], seed, 0x5140u + (uint)c);
#elif OP == 2
      v[c] = lop3(v[c], seed, 0x9E3779B9u);
#elif OP == 3
      v[c] = shr(v[c], 1u) ^ seed;  // two instructions: the xor keeps the chain alive
#elif OP == 4
      v[c] = imad(v[c], 0x9E3779B1u, seed);
#elif OP == 5
      f[c] = ffma(f[c], 0.999f, 0.001f);
#elif OP == 6
      v[c] = *(__local const uint*)((__local const uchar*)table + ((v[c] & 0x7F80u) | lane_off));
#elif OP == 7
      if (c < 4) {
        float e0, e1, e2, e3;
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};"
            : "=f"(e0), "=f"(e1), "=f"(e2), "=f"(e3)
            : "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "f"(d[c][0]), "f"(d[c][1]),
              "f"(d[c][2]), "f"(d[c][3]));
        d[c][0] = e0;
        d[c][1] = e1;
        d[c][2] = e2;
        d[c][3] = e3;
      }
#elif OP == 8
      v[c] = *(__local const uint*)((__local const uchar*)table + ((prmt(v[c], seed, 0x4140u) & 0x7F80u) | lane_off));
#elif OP == 9
      v[c] = c < 4 ? imad(v[c], 0x9E3779B1u, seed) : lop3(v[c], seed, 0x9E3779B9u);
#elif OP == 10
      v[c] = c < 4 ? prmt(v[c], seed, 0x5140u + (uint)c) : imad(v[c], 0x9E3779B1u, seed);
#elif OP == 11
      if (c < 4)
        v[c] = lop3(v[c], seed, 0x9E3779B9u);
      else
        f[c] = ffma(f[c], 0.999f, 0.001f);
#elif OP == 12
      if (c < 4)
        v[c] = prmt(v[c], seed, 0x5140u + (uint)c);
      else
        f[c] = ffma(f[c], 0.999f, 0.001f);
#endif
    }
  }
  uint acc = 0;
  for (int c = 0; c < 8; ++c) acc ^= v[c] ^ as_uint(f[c]);
  for (int c = 0; c < 4; ++c) acc ^= as_uint(d[c][0] + d[c][1] + d[c][2] + d[c][3]);
  if (acc == 0x12345678u) ((__global uint*)y)[gid % 16] = acc;  // never, in practice
}

// Lab: the memory floor of the lanes grid. Same arguments and grid as nf4_forward_lanes
// (ceil(ceil(N / RB) / NB) workgroups of WGS along dimension 0, experts along 1); each
// workgroup streams its share of its expert's payload (uint4, UNROLL loads in flight per
// lane) and scales, and writes one word so that nothing is optimised away.
#ifndef UNROLL
#define UNROLL 4
#endif
__kernel __attribute__((reqd_work_group_size(WGS, 1, 1))) void nf4_forward(
    const int N, const int K, const int rows, const int expert_base, const long element_offset, const int log2_block,
    const __global uchar* packed, const long packed_offset, const __global float* scales, const long scales_offset,
    const __global float* codebook, const __global uchar* x, const int type, const __global uint* offsets,
    __global uchar* y) {
  const int e = get_group_id(1);
  const long per_expert16 = (long)N * K / 32;  // uint4 of one expert's payload
  const __global uint4* p = (const __global uint4*)packed + e * per_expert16;
  const __global uint4* s = (const __global uint4*)scales + e * ((long)N * K / 256);
  const long stride = (long)get_num_groups(0) * WGS;
  uint acc = 0;
  long i = (long)get_group_id(0) * WGS + get_local_id(0);
  for (; i + (UNROLL - 1) * stride < per_expert16; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = p[i + u * stride];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].s0 ^ v[u].s1 ^ v[u].s2 ^ v[u].s3;
  }
  for (; i < per_expert16; i += stride) acc ^= p[i].s0 ^ p[i].s1 ^ p[i].s2 ^ p[i].s3;
  for (long j = (long)get_group_id(0) * WGS + get_local_id(0); j < (long)N * K / 256; j += stride)
    acc ^= s[j].s0 ^ s[j].s1 ^ s[j].s2 ^ s[j].s3;
  if (acc == 0x12345678u) ((__global uint*)y)[0] = acc;
}

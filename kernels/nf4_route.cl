// nf4_route: groups token rows by expert for the segmented NF4 products, and scatters
// the grouped results back. No tunable parameters; the runtime launches these in order:
//
//   nf4_route_count   (global: experts)          offsets[e+1] = pairs routed to e
//   nf4_route_scan    (global: 1)                offsets = exclusive prefix, offsets[0] = 0
//   nf4_route_place   (global: experts)          pair_row[p] / row_token[q], token order kept
//   nf4_route_drop    (global: pairs)            pair_row[p] = ~0 for expert ids >= experts
//   nf4_route_gather  (global: K × pairs)        gathered[q, :] = input[row_token[q], :]
//   nf4_route_scatter (global: N × tokens)       out[t, :] = Σ_s w[t, s] · y[pair_row[t, s], :]
//
// A pair p = t·top_k + s is slot s of token t; ids are u32, tokens × top_k, row-major.
// Count and place walk all pairs once per expert (deterministic and simple; the pair
// count is tokens × top_k, small next to the products they feed).

#include "nf4_common.clh"

__kernel void nf4_route_count(const int experts, const int pairs, const __global uint* ids,
                              __global uint* offsets) {
  const int e = get_global_id(0);
  if (e >= experts) return;
  uint count = 0;
  for (int p = 0; p < pairs; ++p) count += ids[p] == (uint)e;
  offsets[e + 1] = count;
}

__kernel void nf4_route_scan(const int experts, __global uint* offsets) {
  uint sum = 0;
  offsets[0] = 0;
  for (int e = 0; e < experts; ++e) {
    sum += offsets[e + 1];
    offsets[e + 1] = sum;
  }
}

__kernel void nf4_route_place(const int experts, const int pairs, const int top_k, const __global uint* ids,
                              const __global uint* offsets, __global uint* pair_row, __global uint* row_token) {
  const int e = get_global_id(0);
  if (e >= experts) return;
  uint q = offsets[e];
  for (int p = 0; p < pairs; ++p) {
    if (ids[p] == (uint)e) {
      pair_row[p] = q;
      row_token[q] = (uint)(p / top_k);
      ++q;
    }
  }
}

__kernel void nf4_route_drop(const int experts, const int pairs, const __global uint* ids, __global uint* pair_row) {
  const int p = get_global_id(0);
  if (p < pairs && ids[p] >= (uint)experts) pair_row[p] = 0xFFFFFFFFu;
}

// esize: bytes per element (4 or 2); rows are copied bit for bit.
__kernel void nf4_route_gather(const int K, const int pairs, const int experts, const int esize,
                               const __global uint* offsets, const __global uint* row_token,
                               const __global uchar* input, __global uchar* gathered) {
  const int k = get_global_id(0);
  const int q = get_global_id(1);
  if (k >= K || q >= pairs || (uint)q >= offsets[experts]) return;
  const long src = (long)row_token[q] * K + k, dst = (long)q * K + k;
  if (esize == 4)
    ((__global uint*)gathered)[dst] = ((const __global uint*)input)[src];
  else
    ((__global ushort*)gathered)[dst] = ((const __global ushort*)input)[src];
}

__kernel void nf4_route_scatter(const int N, const int tokens, const int top_k, const int y_rows, const int type,
                                const __global uchar* y, const __global uint* pair_row,
                                const __global float* weights, __global uchar* out) {
  const int n = get_global_id(0);
  const int t = get_global_id(1);
  if (n >= N || t >= tokens) return;
  float sum = 0.0f;
  for (int s = 0; s < top_k; ++s) {
    const uint q = pair_row[t * top_k + s];
    if (q < (uint)y_rows) sum = mad(weights[t * top_k + s], nf4_load(y, (long)q * N + n, type), sum);
  }
  nf4_store(out, (long)t * N + n, type, sum);
}

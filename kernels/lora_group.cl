// lora_group: builds LoRA's segments from per-row adapter ids on the device, and moves rows
// between the caller's order and the grouped one. No tunable parameters; the runtime
// launches them in order:
//
//   lora_group_count (global: L + 1)          offsets[a + 1] = rows of adapter a (a = L: of none)
//   lora_group_scan  (global: 1)              offsets = exclusive prefix; seg_adapters = 0 .. L-1, -1
//   lora_group_place (global: L + 1)          row_index[q] = the caller's row at grouped row q
//   lora_permute_rows (global: features × rows)  a gather or a scatter of whole rows
//
// An id outside [0, L) (-1 by convention) is "no adapter": such rows form segment L. Count and
// place walk all rows once per segment and keep the rows' order within one (deterministic;
// the row count is a batch's, small next to the products it feeds).

inline int lora_group_of(const int id, const int L) { return (id >= 0 && id < L) ? id : L; }

__kernel void lora_group_count(const int M, const int L, const __global int* ids, __global uint* offsets) {
  const int a = get_global_id(0);
  if (a > L) return;
  uint count = 0;
  for (int r = 0; r < M; ++r) count += lora_group_of(ids[r], L) == a;
  offsets[a + 1] = count;
}

__kernel void lora_group_scan(const int L, __global uint* offsets, __global int* seg_adapters) {
  uint sum = 0;
  offsets[0] = 0;
  for (int s = 0; s <= L; ++s) {
    sum += offsets[s + 1];
    offsets[s + 1] = sum;
    seg_adapters[s] = s < L ? s : -1;
  }
}

__kernel void lora_group_place(const int M, const int L, const __global int* ids, const __global uint* offsets,
                               __global uint* row_index) {
  const int a = get_global_id(0);
  if (a > L) return;
  uint q = offsets[a];
  for (int r = 0; r < M; ++r)
    if (lora_group_of(ids[r], L) == a) row_index[q++] = (uint)r;
}

// esize: bytes per element (4 or 2); scatter 0: out[q] = in[row_index[q]], 1: out[row_index[q]]
// = in[q]. Rows are copied bit for bit; an index at or past `rows` moves nothing.
__kernel void lora_permute_rows(const int rows, const int features, const int esize, const int scatter,
                                const __global uint* row_index, const __global uchar* in, __global uchar* out) {
  const int k = get_global_id(0);
  const int q = get_global_id(1);
  if (k >= features || q >= rows) return;
  const uint r = row_index[q];
  if (r >= (uint)rows) return;
  const long src = (long)(scatter ? q : (int)r) * features + k, dst = (long)(scatter ? (int)r : q) * features + k;
  if (esize == 4)
    ((__global uint*)out)[dst] = ((const __global uint*)in)[src];
  else
    ((__global ushort*)out)[dst] = ((const __global ushort*)in)[src];
}

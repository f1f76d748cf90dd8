#!/usr/bin/env python3
# Run on an NVIDIA GPU with cupy: python3 measure_fast_rcp.py OUT.npz
# Result of the H200 run: results/h200-fast-rcp.npz at commit 936f2b6 (idx: mantissas of x in [1,2)
# whose fast reciprocal differs from IEEE 1/x; delta: the difference in ulps, +1 or -1).
# Which reciprocals does nvcc's --use_fast_math `1.0f / x` (bitsandbytes' normalisation)
# round differently from IEEE 1/x?  Sweeps every mantissa of [1, 2) and a few exponents.
import sys, numpy as np, cupy as cp
src = r'''
extern "C" __global__ void fast(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 1.0f / x[i]; }
'''
fast = cp.RawKernel(src, 'fast', options=('--use_fast_math',))
exact = cp.RawKernel(src, 'fast', options=())
out = {}
for e in [0, -3, 5, -20, 20]:
    m = cp.arange(1 << 23, dtype=cp.uint32)
    x = ((m | cp.uint32((127 + e) << 23))).view(cp.float32)
    yf = cp.empty_like(x); ye = cp.empty_like(x); n = x.size
    fast(((n + 255) // 256,), (256,), (x, yf, cp.int32(n)))
    exact(((n + 255) // 256,), (256,), (x, ye, cp.int32(n)))
    d = (yf.view(cp.int32) - ye.view(cp.int32)).get()
    out[e] = d
    print('exp', e, 'differ', int((d != 0).sum()), 'values', np.unique(d, return_counts=True))
same = all(np.array_equal(out[0], out[e]) for e in out)
print('pattern independent of exponent:', same)
d = out[0]; idx = np.nonzero(d)[0].astype(np.uint32)
np.savez_compressed(sys.argv[1], idx=idx, delta=d[idx].astype(np.int8))

# The table the library embeds (runtime/data/nvidia-fast-rcp.bin.z): 2 bits per mantissa
# (0 same as IEEE, 1 one ulp up, 2 one ulp down), four mantissas per byte, zlib level 9.
import zlib
codes = np.zeros(1 << 23, dtype=np.uint8)
codes[idx] = np.where(d[idx] > 0, 1, 2)
c = codes.reshape(-1, 4)
table = (c[:, 0] | (c[:, 1] << 2) | (c[:, 2] << 4) | (c[:, 3] << 6)).astype(np.uint8)
open(sys.argv[1].replace('.npz', '') + '.bin.z', 'wb').write(zlib.compress(table.tobytes(), 9))

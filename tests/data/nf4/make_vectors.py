#!/usr/bin/env python3
"""Writes the bitsandbytes NF4 test vectors that tests/test_nf4.cpp compares against.

Needs a CUDA machine with torch and bitsandbytes. Run from anywhere:
    python3 tests/data/nf4/make_vectors.py
For each case NAME it writes, next to this script:
    NAME_w.npy          float32 weights (flat, deterministic from a fixed seed)
    NAME_packed.npy     uint8, bitsandbytes quantize_4bit(quant_type="nf4") payload
    NAME_absmax.npy     float32 absmax per block
    NAME_blocksize.npy  int64 scalar block size
"""
import os

import numpy as np
import torch
import bitsandbytes.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]
# bitsandbytes' decision thresholds (its dQuantizeNF4 constants), as f32.
THRESHOLDS = np.array([-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
                       -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
                       0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
                       0.5016634166240692, 0.6427869200706482, 0.8614784181118011], dtype=np.float32)


def midpoint_weights(rng, blocks, block):
    """Blocks whose absmax is a random scale and whose other values sit at, one ulp
    below and one ulp above each threshold times that scale (the tie cases)."""
    out = []
    for _ in range(blocks):
        scale = np.float32(rng.uniform(0.5, 4.0))
        vals = [scale]
        while len(vals) < block:
            t = THRESHOLDS[len(vals) % 15] * scale
            vals += [t, np.nextafter(t, np.float32(10)), np.nextafter(t, np.float32(-10))]
        out.append(np.array(vals[:block], dtype=np.float32))
    return np.concatenate(out)


def write_case(name, w, block):
    t = torch.from_numpy(w).cuda()
    packed, state = F.quantize_4bit(t, blocksize=block, quant_type="nf4")
    np.save(os.path.join(HERE, name + "_w.npy"), w)
    np.save(os.path.join(HERE, name + "_packed.npy"), packed.cpu().numpy().reshape(-1).astype(np.uint8))
    np.save(os.path.join(HERE, name + "_absmax.npy"), state.absmax.cpu().numpy().reshape(-1).astype(np.float32))
    np.save(os.path.join(HERE, name + "_blocksize.npy"), np.array(block, dtype=np.int64))
    print(name, w.shape, "->", packed.numel(), "bytes,", state.absmax.numel(), "scales")


def main():
    rng = np.random.default_rng(20240601)
    # 3 experts × 40 × 96 coefficients flattened; normal weights like a real layer.
    write_case("bs64", rng.standard_normal(3 * 40 * 96).astype(np.float32), 64)
    write_case("bs128", rng.standard_normal(3 * 40 * 96).astype(np.float32), 128)
    # K % block != 0 and an odd total count (2 experts × 7 × 101): blocks straddle rows.
    write_case("bs64_oddk", rng.standard_normal(2 * 7 * 101).astype(np.float32), 64)
    write_case("bs64_midpoints", midpoint_weights(rng, 16, 64), 64)
    write_case("bs32", rng.standard_normal(4096).astype(np.float32), 32)
    write_case("bs4096", rng.standard_normal(3 * 4096 + 17).astype(np.float32), 4096)


if __name__ == "__main__":
    main()

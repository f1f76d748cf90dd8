"""Writes the bitsandbytes NF4 files the Python tests load (tests/data/bnb/README.md).

Run with bitsandbytes, torch, safetensors and numpy installed (CPU is enough):
    python tests/data/bnb/make_files.py tests/data/bnb
"""
import sys
from pathlib import Path

import bitsandbytes as bnb
import bitsandbytes.functional as F
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
import numpy as np
import safetensors.torch
import torch


def linear4bit(w, blocksize, double_quant):
    """A Linear4bit holding w (out_features x in_features), quantized as .to(device) does."""
    n, k = w.shape
    layer = bnb.nn.Linear4bit(k, n, bias=False, compress_statistics=double_quant, quant_type="nf4")
    layer.weight = bnb.nn.Params4bit(w, requires_grad=False, compress_statistics=double_quant, quant_type="nf4",
                                     blocksize=blocksize)
    return layer.to("cpu")


def reference(path, packed, state, w):
    """bitsandbytes' own dequantization, the tests' expected weights (f32, compressed).

    Through its generic backend, which follows its CUDA kernel: flat blocks that may straddle
    rows. bitsandbytes 0.50.2's AVX-512 CPU kernel (what dequantize_4bit runs on such a CPU)
    scales a block that straddles two rows by the wrong absmax, so it is not the reference.
    """
    absmax = state.absmax
    if state.nested:  # as dequantize_4bit does
        absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
    out = _dequantize_4bit_compute(packed.reshape(-1), absmax, state.code, state.blocksize, state.shape, torch.float32)
    # Flat blocks, checked: each value within half the widest NF4 gap (-1 to -0.696) of its block's
    # true absmax, plus what double quantization moved that absmax by (|levels| <= 1).
    flat = torch.nn.functional.pad(w.reshape(-1), (0, (-w.numel()) % state.blocksize))
    true = flat.abs().reshape(-1, state.blocksize).amax(dim=1)
    per_value = lambda v: torch.repeat_interleave(v, state.blocksize)[: w.numel()].reshape(w.shape)  # noqa: E731
    assert torch.all((out - w).abs() <= 0.153 * per_value(true) + per_value((true - absmax).abs()) + 1e-6), path
    np.savez_compressed(path, w=out.numpy())


def main(out):
    out = Path(out)
    torch.manual_seed(28)
    prefix = "model.layers.0.mlp."
    # 2-D, double quantization: 24 x 768 in blocks of 64 gives 288 absmax values, two nested blocks of 256.
    # 2-D, plain absmax: 24 x 96 in blocks of 128 (blocks straddle rows).
    for name, shape, blocksize, double_quant in [("down_proj_dq", (24, 768), 64, True),
                                                 ("up_proj", (24, 96), 128, False)]:
        dense = torch.randn(*shape)
        layer = linear4bit(dense, blocksize, double_quant)
        tensors = {prefix + name + "." + k: v.contiguous() for k, v in layer.state_dict().items()}
        safetensors.torch.save_file(tensors, out / f"{name}.safetensors", metadata={"format": "pt"})
        reference(out / f"{name}_dequantized.npz", layer.weight.data, layer.weight.quant_state, dense)
    # 3-D experts (E x N x K), double quantization (288 blocks of 32), saved with Linear4bit's keys
    # (quant_state.as_dict, as Linear4bit._save_to_state_dict writes them).
    w = torch.randn(4, 32, 72)
    packed, state = F.quantize_4bit(w, blocksize=32, compress_statistics=True, quant_type="nf4")
    name = "experts_dq"
    tensors = {prefix + name + ".weight": packed}
    tensors.update({prefix + name + ".weight." + k: v.contiguous() for k, v in state.as_dict(packed=True).items()})
    safetensors.torch.save_file(tensors, out / f"{name}.safetensors", metadata={"format": "pt"})
    reference(out / f"{name}_dequantized.npz", packed, state, w)
    for path in out.glob("*.safetensors"):
        path.chmod(0o644)  # safetensors writes 0600
    print("bitsandbytes", bnb.__version__, "torch", torch.__version__)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)

"""ocltk.nf4: the quantizer against bitsandbytes' vectors, files saved by bitsandbytes, and the
forward and backward products from numpy and pyopencl arrays, with their refusals."""
import ml_dtypes
import numpy as np
import pytest

import ocltk
from conftest import DATA

TYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
HALF_ULP = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, np.dtype(ml_dtypes.bfloat16): 2.0 ** -8}


@pytest.mark.parametrize("case", ["bs32", "bs64", "bs64_oddk", "bs64_midpoints", "bs128", "bs4096"])
def test_quantize_matches_bitsandbytes(case):
    w = np.load(DATA / "nf4" / f"{case}_w.npy")
    block = int(np.load(DATA / "nf4" / f"{case}_blocksize.npy"))
    packed, scales = ocltk.nf4.quantize(w, block)
    assert np.array_equal(packed, np.load(DATA / "nf4" / f"{case}_packed.npy"))
    assert np.array_equal(scales, np.load(DATA / "nf4" / f"{case}_absmax.npy"))
    back = ocltk.nf4.dequantize(packed, scales, w.shape, block)
    codes = np.stack([packed >> 4, packed & 15], axis=1).reshape(-1)[: w.size]
    assert np.array_equal(back, ocltk.nf4.CODEBOOK[codes] * np.repeat(scales, block)[: w.size])


def test_quantize_half_inputs(rng):
    w = rng.standard_normal((3, 5, 40)).astype(ml_dtypes.bfloat16)
    assert all(np.array_equal(x, y) for x, y in zip(ocltk.nf4.quantize(w, 32),
                                                    ocltk.nf4.quantize(w.astype(np.float32), 32)))
    with pytest.raises(ocltk.Error, match="block_size 48 is not a power of two from 32 to 4096"):
        ocltk.nf4.quantize(w, 48)
    with pytest.raises(ocltk.Error, match="w must be float32, float16 or ml_dtypes.bfloat16, got int32"):
        ocltk.nf4.quantize(np.ones(8, np.int32))


@pytest.mark.parametrize("name,shape,block", [("down_proj_dq", (1, 24, 768), 64), ("up_proj", (1, 24, 96), 128),
                                              ("experts_dq", (4, 32, 72), 32)])
def test_load_bitsandbytes(rt, rng, name, shape, block):
    path = DATA / "bnb" / f"{name}.safetensors"
    w = ocltk.nf4.load_bitsandbytes(path, f"model.layers.0.mlp.{name}")
    assert w.shape == shape and w.block_size == block and w.element_offset == 0
    reference = np.load(DATA / "bnb" / f"{name}_dequantized.npz")["w"].reshape(shape)
    assert np.array_equal(w.dequantize(), reference)  # bit-exact with bitsandbytes' own dequantize_4bit
    assert np.array_equal(ocltk.nf4.load_bitsandbytes(str(path), f"model.layers.0.mlp.{name}.").packed, w.packed)
    # The loaded weights on the device, rows spread over the experts.
    e, n, k = shape
    rows = 2 * e + 1
    offsets = np.linspace(0, rows, e + 1).astype(np.uint32)
    x = rng.uniform(-1, 1, (rows, k)).astype(np.float32)
    check_forward(rt.nf4_forward(x, w, offsets), x, reference, offsets)


def test_load_bitsandbytes_refusals(tmp_path):
    path = DATA / "bnb" / "up_proj.safetensors"
    with pytest.raises(ocltk.Error, match=r"no tensor model.layers.0.mlp.gate.weight; NF4 modules in the file: "
                                          r"model.layers.0.mlp.up_proj"):
        ocltk.nf4.load_bitsandbytes(path, "model.layers.0.mlp.gate")
    with pytest.raises(ocltk.Error, match="missing.safetensors: cannot read"):
        ocltk.nf4.load_bitsandbytes(tmp_path / "missing.safetensors", "x")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    with pytest.raises(ocltk.Error, match="bad.safetensors: not a safetensors file"):
        ocltk.nf4.load_bitsandbytes(tmp_path / "bad.safetensors", "x")


def reference_product(x, w, offsets, backward):
    x64, out = x.astype(np.float64), []
    for e in range(len(offsets) - 1):
        rows = x64[offsets[e]:offsets[e + 1]]
        out.append(rows @ w[e].astype(np.float64) if backward else rows @ w[e].astype(np.float64).T)
    abs_out = []
    for e in range(len(offsets) - 1):
        rows = np.abs(x64[offsets[e]:offsets[e + 1]])
        abs_out.append(rows @ np.abs(w[e]) if backward else rows @ np.abs(w[e]).T)
    return np.concatenate(out), np.concatenate(abs_out)


def check_forward(y, x, w, offsets, backward=False):
    want, abs_dot = reference_product(x.astype(np.float32), w, offsets, backward)
    k = w.shape[1] if backward else w.shape[2]
    u = 2.0 ** -24
    half = 0.0 if backward else HALF_ULP[np.dtype(y.dtype)]
    bound = (k * u / (1 - k * u)) * abs_dot * (1 + half) + half * np.abs(want) + 1e-30
    err = np.abs(y.astype(np.float64) - want)
    assert np.all(err <= bound * 1.0000001), f"max error {err.max()}"


def make_weights(rng, e, n, k, block, element_offset=0):
    stream = rng.standard_normal(e * n * k + element_offset).astype(np.float32)
    packed, scales = ocltk.nf4.quantize(stream, block)
    w = ocltk.nf4.Weights(packed, scales, experts=e, out_features=n, in_features=k, block_size=block,
                          element_offset=element_offset)
    return w, w.dequantize()


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("backward", [False, True])
def test_numpy_products(rt, rng, dtype, backward):
    w, dense = make_weights(rng, 3, 24, 40, 32, element_offset=5)
    offsets = np.array([0, 4, 4, 9], np.uint32)  # an expert without rows
    width = 24 if backward else 40
    x = (rng.integers(-128, 128, (9, width)) / 64).astype(dtype)  # exact in every type
    y = (rt.nf4_backward if backward else rt.nf4_forward)(x, w, offsets)
    assert isinstance(y, np.ndarray) and y.dtype == (np.float32 if backward else np.dtype(dtype))
    check_forward(y, x, dense, offsets, backward)
    assert rt.last_choice().kernel == ("nf4_backward" if backward else "nf4_forward")
    out = np.full_like(y, 7)
    assert (rt.nf4_backward if backward else rt.nf4_forward)(x, w, offsets, out=out) is out
    check_forward(out, x, dense, offsets, backward)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_pyopencl_products(queue, rng, dtype):
    import pyopencl.array as cla

    rt = ocltk.Runtime.from_queue(queue)
    w, dense = make_weights(rng, 4, 16, 64, 64)
    device_w = ocltk.nf4.Weights(cla.to_device(queue, w.packed), cla.to_device(queue, w.scales), experts=4,
                                 out_features=16, in_features=64, block_size=64)
    offsets = np.array([0, 3, 3, 5, 6], np.uint32)
    x = (rng.integers(-128, 128, (6, 64)) / 64).astype(dtype)
    dx, doff = cla.to_device(queue, x), cla.to_device(queue, offsets)
    for weights in (w, device_w):
        y = rt.nf4_forward(dx, weights, doff, validate_offsets=False, active_experts=3, max_expert_rows=3)
        assert isinstance(y, cla.Array) and y.dtype == np.dtype(dtype) and y.events
        check_forward(y.get(), x, dense, offsets)
        g = cla.to_device(queue, (rng.integers(-128, 128, (6, 16)) / 64).astype(dtype))
        check_forward(rt.nf4_backward(g, weights, doff).get(), g.get(), dense, offsets, backward=True)
    # numpy offsets with device activations: uploaded and checked.
    check_forward(rt.nf4_forward(dx, device_w, offsets).get(), x, dense, offsets)
    choice = rt.choose_nf4(w, 6, dtype=dtype, active_experts=3)
    assert (choice.kernel, choice.shape_class) == ("nf4_forward", "decode") and choice.algorithm


def test_nf4_refusals_leave_out_untouched(rt, rng):
    w, _ = make_weights(rng, 3, 8, 32, 32)
    x = rng.uniform(-1, 1, (9, 32)).astype(np.float32)
    out = rng.uniform(-1, 1, (9, 8)).astype(np.float32)
    before = out.copy()
    good = np.array([0, 4, 4, 9], np.uint32)
    cases = [
        (lambda: rt.nf4_forward(x, w, np.array([0, 6, 4, 9], np.uint32), out=out),
         r"nf4_forward: offsets decrease at entry 2 \(6 then 4\)"),
        (lambda: rt.nf4_forward(x, w, np.array([0, 4, 4, 8], np.uint32), out=out),
         "nf4_forward: offsets must end at rows = 9, got 8"),
        (lambda: rt.nf4_forward(x, w, good[:3], out=out), "offsets must hold experts \\+ 1 = 4 entries, got 3"),
        (lambda: rt.nf4_forward(x, w, good.astype(np.int64), out=out), "offsets must be a 1-D uint32 array"),
        (lambda: rt.nf4_forward(x[:, :31], w, good, out=out), r"x must be rows x K = \(rows, 32\), got \(9, 31\)"),
        (lambda: rt.nf4_forward(x, w, good, out=out, active_experts=3), "active_experts = 3 but the offsets give "
                                                                        "rows to 2 experts"),
        (lambda: rt.nf4_forward(x, w, good, out=out.astype(np.float16)), "out must be float32"),
        (lambda: rt.nf4_forward(x, None, good, out=out), "weights must be ocltk.nf4.Weights"),
        (lambda: rt.nf4_backward(out, w, good, out=x[:, :8].copy()), r"out must be float32 \(9, 32\)"),
    ]
    for call, message in cases:
        with pytest.raises(ocltk.Error, match=message):
            call()
        assert np.array_equal(out, before)
    packed, scales = w.packed, w.scales
    weight_cases = [
        (lambda: ocltk.nf4.Weights(packed[:-1], scales, experts=3, out_features=8, in_features=32, block_size=32),
         "packed holds 383 bytes, but 3 experts x 8 x 32 from element offset 0 need 384"),
        (lambda: ocltk.nf4.Weights(packed, scales[:-1], experts=3, out_features=8, in_features=32, block_size=32),
         "scales holds 23 values, but the window needs 24 blocks of 32"),
        (lambda: ocltk.nf4.Weights(packed, scales, experts=3, out_features=8, in_features=32, block_size=48),
         "block size 48 is not a power of two"),
        (lambda: ocltk.nf4.Weights(packed, scales, experts=3, out_features=8, in_features=32, block_size=32,
                                   element_offset=32), r"element_offset 32 is not inside the first block \[0, 32\)"),
        (lambda: ocltk.nf4.Weights(packed, scales, experts=3, out_features=0, in_features=32, block_size=32),
         "out_features expects an integer >= 1, got 0"),
        (lambda: ocltk.nf4.Weights(packed.astype(np.int8), scales, experts=3, out_features=8, in_features=32,
                                   block_size=32), "packed must be uint8"),
        (lambda: ocltk.nf4.Weights(packed, scales, experts=3, out_features=8, in_features=32, block_size=32,
                                   codebook=np.zeros(15, np.float32)), "codebook must hold 16 float32 values"),
    ]
    for call, message in weight_cases:
        with pytest.raises(ocltk.Error, match=message):
            call()

"""Runtime.lora_apply from numpy and from pyopencl arrays against a double reference (many adapters
with mixed ranks and scales, empty and -1 segments, one adapter without segments, 16-bit types,
slices of wider matrices, wait lists), its choices, and every refusal with out left as it was.

The problems sit in the shape classes test_capi uses (multi_decode, decode, small_batch), so the
programs come from the same kernel cache."""
import ml_dtypes
import numpy as np
import pytest

import ocltk

TYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
U = 2.0 ** -24
ROUNDING = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, np.dtype(ml_dtypes.bfloat16): 2.0 ** -8}

# 13 rows in 6 segments: an empty one, a -1 one, adapter 1 on two; ranks below R, scales.
OFFSETS = np.array([0, 3, 3, 6, 8, 11, 13], np.uint32)
SEGMENTS = np.array([1, 0, -1, 2, 1, 0], np.int32)
RANKS = np.array([7, 3, 1], np.int32)
SCALES = np.array([0.5, -1.5, 0.25], np.float32)


def exact(rng, shape, dtype):
    """Multiples of 1/64 in [-2, 2): exact in every type, so the reference reads what the device does."""
    return (rng.integers(-128, 128, shape) / 64).astype(dtype)


def row_adapters(m, offsets, segments):
    ids = np.zeros(m, np.int64) if offsets is None else np.full(m, -1, np.int64)
    if offsets is not None:
        for s, adapter in enumerate(segments):
            ids[offsets[s]:offsets[s + 1]] = adapter
    return ids


def lora_reference(x, a, b, scale=1.0, scales=None, ranks=None, offsets=None, segments=None, y_old=None):
    """Y, the magnitude its bound scales with (|s| Σ_j Σ_k |x a| |b|) and each row's rank, in double."""
    a3 = a.reshape((1,) + a.shape) if a.ndim == 2 else a
    b3 = b.reshape((1,) + b.shape) if b.ndim == 2 else b
    x64 = x.astype(np.float64)
    m, n = x.shape[0], b3.shape[1]
    y = np.zeros((m, n)) if y_old is None else y_old.astype(np.float64).copy()
    y_abs, row_rank = np.zeros((m, n)), np.zeros(m, np.int64)
    for r, adapter in enumerate(row_adapters(m, offsets, segments)):
        if adapter < 0:
            continue
        rank = a3.shape[1] if ranks is None else int(ranks[adapter])
        s = scale * (1.0 if scales is None else float(scales[adapter]))
        av, bv = a3[adapter, :rank].astype(np.float64), b3[adapter, :, :rank].astype(np.float64)
        y[r] += s * ((x64[r] @ av.T) @ bv.T)
        y_abs[r] = abs(s) * ((np.abs(x64[r]) @ np.abs(av).T) @ np.abs(bv).T)
        row_rank[r] = rank
    return y, y_abs, row_rank


def assert_lora_close(got, x, a, b, **kwargs):
    """Within lora_error_bound (docs/lora.md) of the reference, one rounding for 16-bit Y."""
    y_old = kwargs.get("y_old")
    want, y_abs, rank = lora_reference(x, a, b, **kwargs)
    k = x.shape[1]

    def gamma(j):
        return j * U / (1 - j * U)

    old = np.zeros_like(want) if y_old is None else np.abs(y_old.astype(np.float64))
    f32 = (gamma(k) + gamma(rank + 2)[:, None] * (1 + gamma(k))) * y_abs + 2 * U * old + 1e-30
    rho = ROUNDING[np.dtype(got.dtype)]
    bound = f32 + rho * (np.abs(want) + f32) + (2.0 ** -25 if got.dtype == np.float16 else 0.0)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound * 1.0000001), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"


def multi_case(rng, dtype):
    x = exact(rng, (13, 33), dtype)
    a = exact(rng, (3, 7, 33), dtype)
    b = exact(rng, (3, 37, 7), dtype)
    return x, a, b


@pytest.mark.parametrize("dtype", TYPES)
def test_numpy_many_adapters(rt, rng, dtype):
    x, a, b = multi_case(rng, dtype)
    segs = dict(offsets=OFFSETS, segment_adapters=SEGMENTS)
    y = rt.lora_apply(x, a, b, scale=-0.75, scales=SCALES, ranks=RANKS, **segs)
    assert isinstance(y, np.ndarray) and y.dtype == np.dtype(dtype) and y.shape == (13, 37)
    assert_lora_close(y, x, a, b, scale=-0.75, scales=SCALES, ranks=RANKS, offsets=OFFSETS, segments=SEGMENTS)
    assert not np.any(y[3:6].astype(np.float32))  # the -1 segment, overwritten: zeros
    old = exact(rng, (13, 37), dtype)
    out = old.copy()
    assert rt.lora_apply(x, a, b, scale=0.5, ranks=RANKS.astype(np.uint32), out=out, accumulate=True, **segs) is out
    assert_lora_close(out, x, a, b, scale=0.5, ranks=RANKS, offsets=OFFSETS, segments=SEGMENTS, y_old=old)
    assert np.array_equal(out[3:6], old[3:6])  # the -1 segment, accumulated: as it was
    assert rt.last_choice().kernel == "lora_apply"


def test_numpy_one_adapter(rt, rng):
    # A (R x K) and B (N x R) of one adapter, no segments: every row (the decode class).
    x = exact(rng, (3, 65), np.float32)
    a, b = exact(rng, (9, 65), np.float32), exact(rng, (40, 9), np.float32)
    assert_lora_close(rt.lora_apply(x, a, b, scale=1.25), x, a, b, scale=1.25)
    # Not contiguous: copied to rows first.
    at = np.asfortranarray(a)
    assert_lora_close(rt.lora_apply(x, at, b), x, a, b)
    # A batch (small_batch), accumulated.
    x = exact(rng, (37, 20), np.float32)
    a, b = exact(rng, (16, 20), np.float32), exact(rng, (24, 16), np.float32)
    old = exact(rng, (37, 24), np.float32)
    out = old.copy()
    rt.lora_apply(x, a, b, scale=0.5, out=out, accumulate=True)
    assert_lora_close(out, x, a, b, scale=0.5, y_old=old)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_pyopencl_shared_queue(queue, rng, dtype):
    import pyopencl as cl
    import pyopencl.array as cla

    rt = ocltk.Runtime.from_queue(queue)
    x, a, b = multi_case(rng, dtype)
    # x inside a wider matrix, B's rows padded (ld > R), Y accumulated inside a padded buffer.
    wide_x = exact(rng, (15, 40), dtype)
    wide_x[2:, 3:36] = x
    wide_b = exact(rng, (3, 37, 10), dtype)
    wide_b[:, :, :7] = b
    wide_y = exact(rng, (14, 41), dtype)
    old = wide_y[1:, 2:39].copy()
    dx = cla.to_device(queue, wide_x)[2:, 3:36]
    da, db = cla.to_device(queue, a), cla.to_device(queue, wide_b)[:, :, :7]
    dy_wide = cla.to_device(queue, wide_y)
    dy = dy_wide[1:, 2:39]
    ranks, scales = cla.to_device(queue, RANKS), cla.to_device(queue, SCALES)
    offsets, segments = cla.to_device(queue, OFFSETS), cla.to_device(queue, SEGMENTS)
    got = rt.lora_apply(dx, da, db, scale=0.75, scales=scales, ranks=ranks, offsets=offsets,
                        segment_adapters=segments, out=dy, accumulate=True)
    assert got is dy and dy.events
    after = dy_wide.get()
    assert_lora_close(after[1:, 2:39], x, a, b, scale=0.75, scales=SCALES, ranks=RANKS, offsets=OFFSETS,
                      segments=SEGMENTS, y_old=old)
    untouched = np.ones(wide_y.shape, bool)
    untouched[1:, 2:39] = False
    assert np.array_equal(after[untouched], wide_y[untouched])
    # A new result on x's queue; numpy segments with device activations (uploaded, checked).
    y = rt.lora_apply(cla.to_device(queue, x), da, cla.to_device(queue, b), ranks=RANKS, offsets=OFFSETS,
                      segment_adapters=SEGMENTS)
    assert isinstance(y, cla.Array) and y.queue is queue and y.dtype == np.dtype(dtype)
    assert_lora_close(y.get(), x, a, b, ranks=RANKS, offsets=OFFSETS, segments=SEGMENTS)
    # The launch waits for the arrays' pending events: x filled behind a user event, segments
    # on the device unread (validate=False). (Nothing blocking may enter the in-order queue
    # while the gate is closed.)
    packed_b = cla.to_device(queue, b)
    gate = cl.UserEvent(queue.context)
    fresh = cla.empty(queue, x.shape, x.dtype)
    fresh.add_event(cl.enqueue_copy(queue, fresh.data, np.ascontiguousarray(x).view(np.uint8), wait_for=[gate],
                                    is_blocking=False))
    y = rt.lora_apply(fresh, da, packed_b, offsets=offsets, segment_adapters=segments, validate=False)
    assert y.events[-1].command_execution_status != cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    assert_lora_close(y.get(), x, a, b, offsets=OFFSETS, segments=SEGMENTS)


def test_choices(rt):
    choice = rt.choose_lora("lora_apply", 4, 4096, 4096, 16, dtype=ml_dtypes.bfloat16)
    assert (choice.kernel, choice.shape_class) == ("lora_apply", "decode") and choice.algorithm and choice.params
    assert rt.choose_lora("lora_apply", 16, 4096, 4096, 64, adapters=8, segments=8).shape_class == "multi_decode"
    assert rt.choose_lora("lora_shrink", 64, 1, 4096, 16).shape_class == "small_batch"
    assert rt.choose_lora("lora_expand", 1024, 4096, 1, 16, adapters=4, segments=4).shape_class == "multi_batch"
    with pytest.raises(ocltk.Error, match="operation must be lora_apply, lora_shrink or lora_expand, got 'apply'"):
        rt.choose_lora("apply", 4, 8, 8, 4)
    with pytest.raises(ocltk.Error, match=r"ocltk_choose_lora: R \(max_rank\) = 0 must be at least 1"):
        rt.choose_lora("lora_apply", 4, 8, 8, 0)


def refusal_cases(x, a, b, out):
    """(call kwargs changes, message) for every bad input the LoRA issue names and the binding's own."""
    f16 = np.float16
    return [
        (dict(segment_adapters=np.array([1, 0, -2, 2, 1, 0], np.int32)),
         r"lora_apply: segment_adapters\[2\] = -2 is not an adapter index \(-1 for none, or 0 to 2 for L = 3"),
        (dict(segment_adapters=np.array([1, 0, 3, 2, 1, 0], np.int32)), r"segment_adapters\[2\] = 3 is not an adapter"),
        (dict(ranks=np.array([7, 0, 1], np.int32)), r"lora_apply: ranks\[1\] = 0 is outside 1 .. R = 7"),
        (dict(ranks=np.array([7, 8, 1], np.int32)), r"lora_apply: ranks\[1\] = 8 is outside 1 .. R = 7"),
        (dict(ranks=np.array([7, 2 ** 31, 1], np.uint32)), r"lora_apply: ranks\[1\] = 2147483648 is out of range"),
        (dict(offsets=np.array([1, 3, 3, 6, 8, 11, 13], np.uint32)), r"lora_apply: offsets\[0\] = 1 but must be 0"),
        (dict(offsets=np.array([0, 3, 3, 6, 8, 11, 12], np.uint32)),
         r"lora_apply: offsets\[6\] = 12 but must be M = 13 \(the rows\)"),
        (dict(offsets=np.array([0, 3, 2, 6, 8, 11, 13], np.uint32)),
         r"lora_apply: offsets decrease at entry 2 \(3 then 2\)"),
        (dict(offsets=OFFSETS[:-1]), r"lora_apply: offsets must hold one entry more than segment_adapters \(7\), "
                                     r"got 6"),
        (dict(offsets=OFFSETS.astype(np.int64)), "lora_apply: offsets must be uint32, got int64"),
        (dict(segment_adapters=SEGMENTS.astype(np.uint32)), "lora_apply: segment_adapters must be int32, got uint32"),
        (dict(offsets=np.zeros(1, np.uint32), segment_adapters=np.zeros(0, np.int32)),
         r"lora_apply: segment_adapters holds no segment \(shape \(0\)\)"),
        (dict(offsets=None), r"lora_apply: offsets and segment_adapters come together"),
        (dict(lora_a=a[:, :, :32]), r"lora_apply: lora_a's K is 32 but x's is 33 \(lora_a is \(3, 7, 32\), x is "
                                    r"\(13, 33\)\)"),
        (dict(lora_b=b[:, :, :6]), r"lora_apply: lora_b's rank is 6 but lora_a's is 7"),
        (dict(lora_b=b[:2]), r"lora_apply: lora_b holds 2 adapters but lora_a holds 3"),
        (dict(lora_a=a.astype(f16)), "lora_apply: lora_a holds float16 but x is float32 "
                                     r"\(x, lora_a, lora_b and out share one type\)"),
        (dict(lora_b=b.astype(f16)), "lora_apply: lora_b holds float16 but x is float32"),
        (dict(lora_a=a[0, 0]), r"lora_apply: lora_a must be L x R x K or R x K, got shape \(33\)"),
        (dict(scales=SCALES[:2]), r"lora_apply: scales must hold L = 3 entries \(one per adapter\), got 2"),
        (dict(scales=SCALES.astype(np.float64)), "lora_apply: scales must be float32, got float64"),
        (dict(ranks=RANKS[:2]), r"lora_apply: ranks must hold L = 3 entries \(one per adapter\), got 2"),
        (dict(ranks=RANKS.astype(np.int64)), "lora_apply: ranks must be int32 or uint32, got int64"),
        (dict(out=out[:, :36]), r"lora_apply: out must be M x N = \(13, 37\), got \(13, 36\)"),
        (dict(out=out.astype(f16)), "lora_apply: out holds float16 but x is float32"),
        (dict(out=None), "lora_apply: accumulate=True needs out, the Y to add to"),
        (dict(x=x[0]), r"lora_apply: x must be 2-D, M x K, got shape \(33\)"),
        (dict(x=x[:0]), r"empty operand: x is \(0, 33\), lora_a \(3, 7, 33\), lora_b \(3, 37, 7\); M, N, K, R and L"),
        (dict(x=x.astype(np.float64)), "lora_apply: x must be float32, float16 or ml_dtypes.bfloat16, got float64"),
        (dict(x=x.tolist()), "lora_apply: x must be a numpy array or a pyopencl.array.Array, got list"),
    ]


def test_refusals_leave_out_untouched(rt, rng):
    x, a, b = multi_case(rng, np.float32)
    out = exact(rng, (13, 37), np.float32)
    before = out.copy()
    good = dict(x=x, lora_a=a, lora_b=b, ranks=RANKS, scales=SCALES, offsets=OFFSETS, segment_adapters=SEGMENTS,
                out=out, accumulate=True)
    for change, message in refusal_cases(x, a, b, out):
        kwargs = dict(good, **change)
        args = [kwargs.pop(name) for name in ("x", "lora_a", "lora_b")]
        with pytest.raises(ocltk.Error, match=message):
            rt.lora_apply(*args, **kwargs)
        assert np.array_equal(out, before)


def test_refusals_on_the_device(rt, queue, rng):
    import pyopencl.array as cla

    shared = ocltk.Runtime.from_queue(queue)
    x, a, b = multi_case(rng, np.float32)
    host_out = exact(rng, (13, 37), np.float32)
    dx, da, db, out = (cla.to_device(queue, v) for v in (x, a, b, host_out))
    good = dict(ranks=cla.to_device(queue, RANKS), offsets=cla.to_device(queue, OFFSETS),
                segment_adapters=cla.to_device(queue, SEGMENTS), out=out, accumulate=True)
    cases = [
        (dict(offsets=cla.to_device(queue, np.array([0, 3, 2, 6, 8, 11, 13], np.uint32))),
         r"lora_apply: offsets decrease at entry 2 \(3 then 2\)"),
        (dict(segment_adapters=cla.to_device(queue, np.array([1, 0, -2, 2, 1, 0], np.int32))),
         r"lora_apply: segment_adapters\[2\] = -2 is not an adapter index"),
        (dict(ranks=cla.to_device(queue, np.array([7, 9, 1], np.int32))), r"lora_apply: ranks\[1\] = 9 is outside"),
        (dict(ranks=np.array([0, 3, 1], np.int32)), r"lora_apply: ranks\[0\] = 0 is outside 1 .. R = 7"),
        (dict(offsets=cla.to_device(queue, np.array([9, 0, 3, 3, 6, 8, 11, 13], np.uint32))[1:]),
         "lora_apply: offsets must start at the start of its buffer"),
        (dict(out=cla.to_device(queue, host_out.astype(np.float16))), "lora_apply: out holds float16 but x is float32"),
        (dict(out=host_out), "x, lora_a, lora_b and out must all be numpy arrays or all pyopencl arrays"),
    ]
    for change, message in cases:
        with pytest.raises(ocltk.Error, match=message):
            shared.lora_apply(dx, da, db, **dict(good, **change))
        assert np.array_equal(out.get(), host_out)
    # Arrays of another context than the runtime's.
    with pytest.raises(ocltk.Error, match="queue belongs to another OpenCL context than the runtime's"):
        rt.lora_apply(dx, da, db, **good)
    with pytest.raises(ocltk.Error, match="lora_apply: scales must be a numpy array like x"):
        rt.lora_apply(x, a, b, scales=cla.to_device(queue, SCALES))
    assert np.array_equal(out.get(), host_out)

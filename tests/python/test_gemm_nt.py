"""Runtime.gemm_nt from numpy and from pyopencl arrays in every element type, the runtime's
choices, and every refusal."""
import ml_dtypes
import numpy as np
import pytest

import ocltk
from conftest import assert_gemm_close

SHAPES = [(1, 37, 96), (7, 65, 33), (33, 24, 17), (5, 16, 64)]  # gemv, odd, lora_expand, lora_shrink


def test_package_basics():
    assert ocltk.__version__ == ocltk.version() and ocltk.version().count(".") == 2
    assert issubclass(ocltk.Error, ValueError) and issubclass(ocltk.DeviceError, RuntimeError)
    assert "bfloat16" in ocltk.Runtime.gemm_nt.__doc__ and "bitsandbytes" in ocltk.nf4.load_bitsandbytes.__doc__
    assert "segment_adapters" in ocltk.Runtime.lora_apply.__doc__ and "top-k" in ocltk.Runtime.nf4_route.__doc__
    assert ocltk.__doc__ and "Runtime" in ocltk.__all__


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_numpy(rt, rng, m, n, k):
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    c = rt.gemm_nt(a, b, alpha=-0.75)
    assert isinstance(c, np.ndarray) and c.dtype == np.float32 and c.shape == (m, n)
    assert_gemm_close(c, a, b, -0.75)
    old = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    out = old.copy()
    assert rt.gemm_nt(a, b, alpha=0.5, out=out, accumulate=True) is out
    assert_gemm_close(out, a, b, 0.5, old)
    # A transposed view of b: copied to rows before the launch.
    bt = np.asfortranarray(b)
    assert_gemm_close(rt.gemm_nt(a, bt), a, b)


@pytest.mark.parametrize("m,n,k", SHAPES[:3])
def test_pyopencl_shared_queue(queue, rng, m, n, k):
    import pyopencl as cl
    import pyopencl.array as cla

    rt = ocltk.Runtime.from_queue(queue)
    assert rt.queue is queue and rt.context.int_ptr == queue.context.int_ptr
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    dc = rt.gemm_nt(da, db, alpha=2.0)
    assert isinstance(dc, cla.Array) and dc.queue is queue and dc.events
    assert_gemm_close(dc.get(), a, b, 2.0)
    # Operands inside wider matrices (leading dimensions from the strides, offsets from the
    # slices), C accumulated inside a padded buffer whose padding must survive.
    host_a = rng.uniform(-1, 1, (m + 2, k + 5)).astype(np.float32)
    host_b = rng.uniform(-1, 1, (n + 1, k + 3)).astype(np.float32)
    sub_a, sub_b = cla.to_device(queue, host_a)[2:, 1:k + 1], cla.to_device(queue, host_b)[1:, :k]
    host_c = rng.uniform(-1, 1, (m + 1, n + 4)).astype(np.float32)
    wide_c = cla.to_device(queue, host_c)
    sub_c = wide_c[1:, 2:n + 2]
    got = rt.gemm_nt(sub_a, sub_b, alpha=0.25, out=sub_c, accumulate=True)
    assert got is sub_c
    after = wide_c.get()
    assert_gemm_close(after[1:, 2:n + 2], host_a[2:, 1:k + 1], host_b[1:, :k], 0.25, host_c[1:, 2:n + 2])
    untouched = np.ones(host_c.shape, bool)
    untouched[1:, 2:n + 2] = False
    assert np.array_equal(after[untouched], host_c[untouched])
    # A launch waits for the arrays' pending events: b filled behind a user event.
    gate = cl.UserEvent(queue.context)
    fresh = cla.empty(queue, (n, k), np.float32)
    fresh.add_event(cl.enqueue_copy(queue, fresh.data, b, wait_for=[gate], is_blocking=False))
    out = rt.gemm_nt(da, fresh)
    assert out.events[-1].command_execution_status != cl.command_execution_status.COMPLETE
    gate.set_status(cl.command_execution_status.COMPLETE)
    assert_gemm_close(out.get(), a, b)


# Each pair of element types the library adds, in the classes test_capi builds (gemv, LoRA
# expand shapes): the same programs from the kernel cache.
HALF_CASES = [(np.float16, np.float16, (1, 37, 40)), (ml_dtypes.bfloat16, ml_dtypes.bfloat16, (5, 65, 16)),
              (ml_dtypes.bfloat16, np.float32, (1, 16, 33))]


def assert_half_close(got, a, b, alpha=1.0, c_old=None):
    """Within the f32 bound plus one rounding to got's type (docs/verification.md)."""
    rounding = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, np.dtype(ml_dtypes.bfloat16): 2.0 ** -8}
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    old = np.zeros((a.shape[0], b.shape[0])) if c_old is None else c_old.astype(np.float64)
    want = alpha * (a64 @ b64.T) + old
    k = a.shape[1]
    f32 = (k * 2.0 ** -24 / (1 - k * 2.0 ** -24)) * abs(alpha) * (np.abs(a64) @ np.abs(b64).T) \
        + 2.0 ** -24 * np.abs(old) + 1e-30
    rho = rounding[np.dtype(got.dtype)]
    bound = f32 + rho * (np.abs(want) + f32) + (2.0 ** -25 if got.dtype == np.float16 else 0.0)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound * 1.0000001), f"max error {err.max()}"


def exact(rng, shape, dtype):
    return (rng.integers(-128, 128, shape) / 64).astype(dtype)  # exact in every type


@pytest.mark.parametrize("in_type,out_type,shape", HALF_CASES)
def test_half_numpy(rt, rng, in_type, out_type, shape):
    m, n, k = shape
    a, b = exact(rng, (m, k), in_type), exact(rng, (n, k), in_type)
    if out_type == in_type:
        c = rt.gemm_nt(a, b, alpha=-0.5)
        assert c.dtype == np.dtype(in_type) and c.shape == (m, n)
        assert_half_close(c, a, b, -0.5)
    old = exact(rng, (m, n), out_type)
    out = old.copy()
    assert rt.gemm_nt(a, b, alpha=0.75, out=out, accumulate=True) is out
    assert_half_close(out, a, b, 0.75, old)
    assert rt.last_choice().shape_class.endswith("_half")


def test_half_pyopencl(queue, rng):
    import pyopencl.array as cla

    rt = ocltk.Runtime.from_queue(queue)
    for in_type, out_type, (m, n, k) in HALF_CASES[1:]:
        a, b = exact(rng, (m, k), in_type), exact(rng, (n, k), in_type)
        host = exact(rng, (m + 1, n + 3), out_type)
        wide = cla.to_device(queue, host)
        got = rt.gemm_nt(cla.to_device(queue, a), cla.to_device(queue, b), out=wide[1:, 2:n + 2], accumulate=True)
        after = wide.get()
        assert_half_close(after[1:, 2:n + 2], a, b, 1.0, host[1:, 2:n + 2])
        assert got.events and after[0].tobytes() == host[0].tobytes()
    a, b = exact(rng, (1, 40), np.float16), exact(rng, (37, 40), np.float16)
    c = rt.gemm_nt(cla.to_device(queue, a), cla.to_device(queue, b))
    assert c.dtype == np.float16
    assert_half_close(c.get(), a, b)


def test_runtime_on_its_own_queue(rt, rng):
    import pyopencl.array as cla

    a = rng.uniform(-1, 1, (3, 40)).astype(np.float32)
    b = rng.uniform(-1, 1, (9, 40)).astype(np.float32)
    out = rt.gemm_nt(cla.to_device(rt.queue, a), cla.to_device(rt.queue, b))
    assert_gemm_close(out.get(), a, b)
    assert rt.last_choice().kernel == "gemm_nt"


def test_choices(rt):
    choice = rt.choose_gemm_nt(1, 4096, 4096)
    assert (choice.kernel, choice.shape_class) == ("gemm_nt", "gemv")
    assert choice.algorithm and choice.source and choice.match
    assert all(f"{name}={value}" in choice.description for name, value in choice.params.items())
    assert rt.choose_gemm_nt(16, 16, 4096).shape_class == "lora_shrink"
    assert rt.choose_gemm_nt(1, 4096, 4096, dtype=ml_dtypes.bfloat16).shape_class == "gemv_half"
    assert rt.choose_gemm_nt(64, 4096, 16, dtype=np.float16).shape_class == "lora_expand_half"
    with pytest.raises(ocltk.Error, match="M, N and K must be at least 1"):
        rt.choose_gemm_nt(0, 4, 4)
    with pytest.raises(ocltk.Error, match="dtype must be float32, float16 or ml_dtypes.bfloat16, got int8"):
        rt.choose_gemm_nt(1, 4, 4, dtype=np.int8)


def test_refusals_leave_out_untouched(rt, queue, rng):
    import pyopencl.array as cla

    a = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    b = rng.uniform(-1, 1, (6, 8)).astype(np.float32)
    out = rng.uniform(-1, 1, (4, 6)).astype(np.float32)
    before = out.copy()
    cases = [
        (lambda: rt.gemm_nt(a, b[:, :7]), r"gemm_nt: b must be N x K with K = 8 \(the columns of a\), got \(6, 7\)"),
        (lambda: rt.gemm_nt(a[:, :0], b[:, :0]), r"empty operand: a is \(4, 0\), b is \(6, 0\); M, N and K"),
        (lambda: rt.gemm_nt(a, b, out=out.astype(np.float16)),
         r"gemm_nt: out is float16 but a and b are float32 \(out takes their type or float32\)"),
        (lambda: rt.gemm_nt(a.astype(np.float16), b.astype(np.float16), out=out.astype(ml_dtypes.bfloat16)),
         "gemm_nt: out is bfloat16 but a and b are float16"),
        (lambda: rt.gemm_nt(a.astype(np.float16), b.astype(ml_dtypes.bfloat16)), "a is float16 but b is bfloat16"),
        (lambda: rt.gemm_nt(a, b.astype(np.float64), out=out), "b must be float32, float16 or ml_dtypes.bfloat16"),
        (lambda: rt.gemm_nt(a, b.astype(np.float16), out=out), "a is float32 but b is float16"),
        (lambda: rt.gemm_nt(a, b, accumulate=True), "accumulate=True needs out"),
        (lambda: rt.gemm_nt(a, b, out=out[:, :5], accumulate=True), r"out must be M x N = \(4, 6\), got \(4, 5\)"),
        (lambda: rt.gemm_nt(a[0], b, out=out), "a and b must be 2-D"),
        (lambda: rt.gemm_nt(a.tolist(), b), "a must be a numpy array or a pyopencl.array.Array, got list"),
        (lambda: rt.gemm_nt(a, cla.to_device(queue, b), out=out), "must all be numpy arrays or all pyopencl arrays"),
    ]
    for call, message in cases:
        with pytest.raises(ocltk.Error, match=message):
            call()
        assert np.array_equal(out, before)
    # On the device: another context than the runtime's, and strided columns.
    dout = cla.to_device(queue, before)
    with pytest.raises(ocltk.Error, match="queue belongs to another OpenCL context than the runtime's"):
        rt.gemm_nt(cla.to_device(queue, a), cla.to_device(queue, b), out=dout, accumulate=True)
    other = ocltk.Runtime.from_queue(queue)
    with pytest.raises(ocltk.Error, match="must have contiguous rows"):
        other.gemm_nt(cla.to_device(queue, a)[:, ::2], cla.to_device(queue, b)[:, ::2], out=dout)
    assert np.array_equal(dout.get(), before)


def test_runtime_errors(rt):
    with pytest.raises(ocltk.Error, match="no-such-device-here") as e:
        ocltk.Runtime(device="no-such-device-here")
    assert e.value.status == 2
    with pytest.raises(ocltk.Error, match="/nonexistent/p.yaml: cannot open profile"):
        ocltk.Runtime(profile="/nonexistent/p.yaml")
    with pytest.raises(ocltk.Error, match="queue must be a pyopencl.CommandQueue"):
        ocltk.Runtime.from_queue(rt)
    closed = ocltk.Runtime()
    closed.close()
    with pytest.raises(ocltk.Error, match="the runtime is closed"):
        closed.gemm_nt(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32))


@pytest.mark.parametrize("status,cls", [(1, ocltk.Error), (2, ocltk.Error), (3, ocltk.Error), (6, ocltk.Error),
                                        (7, ocltk.Error), (4, ocltk.DeviceError), (5, ocltk.DeviceError),
                                        (8, ocltk.DeviceError)])
def test_status_classes(status, cls):
    from ocltk._errors import raise_for

    with pytest.raises(cls) as e:
        raise_for(status)
    assert e.value.status == status and str(e.value)

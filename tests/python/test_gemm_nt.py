"""Runtime.gemm_nt from numpy and from pyopencl arrays, the runtime's choices, and every refusal."""
import numpy as np
import pytest

import ocltk
from conftest import assert_gemm_close

SHAPES = [(1, 37, 96), (7, 65, 33), (33, 24, 17), (5, 16, 64)]  # gemv, odd, lora_expand, lora_shrink


def test_package_basics():
    assert ocltk.__version__ == ocltk.version() and ocltk.version().count(".") == 2
    assert issubclass(ocltk.Error, ValueError) and issubclass(ocltk.DeviceError, RuntimeError)
    assert "gemm_nt" in ocltk.Runtime.gemm_nt.__doc__ and "bitsandbytes" in ocltk.nf4.load_bitsandbytes.__doc__
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
    with pytest.raises(ocltk.Error, match="M, N and K must be at least 1"):
        rt.choose_gemm_nt(0, 4, 4)


def test_refusals_leave_out_untouched(rt, queue, rng):
    import pyopencl.array as cla

    a = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    b = rng.uniform(-1, 1, (6, 8)).astype(np.float32)
    out = rng.uniform(-1, 1, (4, 6)).astype(np.float32)
    before = out.copy()
    cases = [
        (lambda: rt.gemm_nt(a, b[:, :7]), r"gemm_nt: b must be N x K with K = 8 \(the columns of a\), got \(6, 7\)"),
        (lambda: rt.gemm_nt(a[:, :0], b[:, :0]), r"empty operand: a is \(4, 0\), b is \(6, 0\); M, N and K"),
        (lambda: rt.gemm_nt(a.astype(np.float16), b.astype(np.float16), out=out),
         "A and B of type f16 with C of type f32 is not implemented"),
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

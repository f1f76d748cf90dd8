"""ocltk.Runtime: a device with its profiles, and the operations launched on it."""
from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_void_p
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

import numpy as np

from . import _arrays, _capi
from ._errors import Error, raise_for

if TYPE_CHECKING:  # pragma: no cover
    import pyopencl

    from .nf4 import Weights

ArrayLike = Any  # numpy.ndarray or pyopencl.array.Array


@dataclass(frozen=True)
class Choice:
    """Which algorithm and parameters serve a launch, and where they come from."""

    kernel: str
    shape_class: str
    algorithm: str
    params: Dict[str, int] = field(default_factory=dict)
    source: str = "built-in"  # the profile file, or "built-in"
    match: str = "none"  # "device+driver", "device", "architecture", "vendor" or "none"
    description: str = ""  # one line, as OCLTK_VERBOSE=1 logs it

    def __str__(self) -> str:
        return self.description


def _take_choice(handle: c_void_p) -> Choice:
    lib = _capi.lib
    try:
        count = lib.ocltk_choice_param_count(handle)
        params = {lib.ocltk_choice_param_name(handle, i).decode(): lib.ocltk_choice_param_value(handle, i)
                  for i in range(count)}
        return Choice(lib.ocltk_choice_kernel(handle).decode(), lib.ocltk_choice_shape_class(handle).decode(),
                      lib.ocltk_choice_algorithm(handle).decode(), params, lib.ocltk_choice_source(handle).decode(),
                      lib.ocltk_choice_match(handle).decode(), lib.ocltk_choice_describe(handle).decode())
    finally:
        lib.ocltk_choice_release(handle)


def _encode(text: Optional[Union[str, int, "os.PathLike[str]"]]) -> Optional[bytes]:
    return None if text is None else os.fsencode(str(text) if isinstance(text, int) else text)


class Runtime:
    """An OpenCL device, its context and queue, the profiles that fit it and its compiled kernels.

    ``Runtime(device=None, profile=None)`` opens a device: ``device`` is an index or a
    case-insensitive substring of "platform / device / vendor" (default: ``OCLTK_DEVICE``, else
    the first GPU, else the first device); ``profile`` a profile file used before any other.
    ``Runtime.from_queue(queue)`` shares a ``pyopencl.CommandQueue``'s context, device and queue.

    Operations take numpy arrays (float32, float16 or ``ml_dtypes.bfloat16``; copied to the
    device and back, numpy out) or ``pyopencl.array.Array`` (enqueued on the array's queue after
    its pending events, no host copy, a pyopencl array out carrying the launch's event). Bad input
    raises :class:`ocltk.Error` and writes nothing; device failures :class:`ocltk.DeviceError`.
    """

    def __init__(self, device: Optional[Union[str, int]] = None,
                 profile: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_runtime_open(_encode(device), _encode(profile), byref(handle)))
        self._handle = handle
        self._wrapped: Any = None
        self._cl_queue: Any = None

    @classmethod
    def from_queue(cls, queue: "pyopencl.CommandQueue",
                   profile: Optional[Union[str, "os.PathLike[str]"]] = None) -> "Runtime":
        """A runtime on a pyopencl queue: its context, device and queue are shared, not copied;
        operations without a pyopencl array of their own run on this queue."""
        cl = _arrays.cl()
        if not isinstance(queue, cl.CommandQueue):
            raise Error(f"Runtime.from_queue: queue must be a pyopencl.CommandQueue, got {type(queue).__name__}")
        self = cls.__new__(cls)
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_runtime_wrap(c_void_p(queue.context.int_ptr), c_void_p(queue.device.int_ptr),
                                               c_void_p(queue.int_ptr), _encode(profile), byref(handle)))
        self._handle = handle
        self._wrapped = queue
        self._cl_queue = queue
        return self

    def close(self) -> None:
        """Releases the runtime (commands already enqueued still run). Also done when collected."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _capi.lib.ocltk_runtime_release(handle)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _live(self) -> c_void_p:
        if not self._handle:
            raise Error("ocltk.Runtime: the runtime is closed")
        return self._handle

    @property
    def device_name(self) -> str:
        """The device's name, as OpenCL reports it."""
        return _capi.lib.ocltk_runtime_device_name(self._live()).decode()

    @property
    def queue(self) -> "pyopencl.CommandQueue":
        """The runtime's queue as a pyopencl.CommandQueue (the one given to from_queue)."""
        if self._cl_queue is None:
            cl = _arrays.cl()
            self._cl_queue = cl.CommandQueue.from_int_ptr(_capi.lib.ocltk_runtime_queue(self._live()), retain=True)
        return self._cl_queue

    @property
    def context(self) -> "pyopencl.Context":
        """The runtime's context as a pyopencl.Context."""
        return self.queue.context

    def __repr__(self) -> str:
        return f"ocltk.Runtime({self.device_name!r})" if self._handle else "ocltk.Runtime(closed)"

    # ---- gemm_nt --------------------------------------------------------------------------

    def gemm_nt(self, a: ArrayLike, b: ArrayLike, *, alpha: float = 1.0, out: Optional[ArrayLike] = None,
                accumulate: bool = False) -> ArrayLike:
        """``alpha * a @ b.T`` (``out += alpha * a @ b.T`` with ``accumulate=True``).

        ``a`` is M x K, ``b`` N x K, the result M x N, all float32 (the C API's gemm_nt carries
        the element types; this version implements f32). Rows of pyopencl arrays may be apart
        (a slice of a wider matrix: the leading dimension is taken from the strides).
        ``out`` receives the result (required with ``accumulate``); it is left as it was when
        the call raises.
        """
        who = "gemm_nt"
        device = _arrays.kind(who, "a", a)
        if _arrays.kind(who, "b", b) != device or (out is not None and _arrays.kind(who, "out", out) != device):
            raise Error(f"{who}: a, b and out must all be numpy arrays or all pyopencl arrays")
        if a.ndim != 2 or b.ndim != 2:
            raise Error(f"{who}: a and b must be 2-D, got {_arrays.shape_str(a.shape)} and {_arrays.shape_str(b.shape)}")
        m, k = a.shape
        n = b.shape[0]
        if b.shape[1] != k:
            raise Error(f"{who}: b must be N x K with K = {k} (the columns of a), got {_arrays.shape_str(b.shape)}")
        if m == 0 or n == 0 or k == 0:
            raise Error(f"empty operand: a is {_arrays.shape_str(a.shape)}, b is {_arrays.shape_str(b.shape)}; "
                        "M, N and K must be at least 1")
        dtype = _arrays.dtype_code(who, "a", a.dtype)
        if _arrays.dtype_code(who, "b", b.dtype) != dtype:
            raise Error(f"{who}: a is {a.dtype} but b is {b.dtype}")
        if out is None:
            if accumulate:
                raise Error(f"{who}: accumulate=True needs out, the C to add to")
            c_dtype = _capi.F32
        else:
            if out.shape != (m, n):
                raise Error(f"{who}: out must be M x N = ({m}, {n}), got {_arrays.shape_str(out.shape)}")
            c_dtype = _arrays.dtype_code(who, "out", out.dtype)
        function = _capi.lib.ocltk_gemm_nt_accum if accumulate else _capi.lib.ocltk_gemm_nt
        if device:
            return self._gemm_nt_device(function, dtype, c_dtype, m, n, k, alpha, a, b, out)
        return self._gemm_nt_host(function, dtype, c_dtype, m, n, k, alpha, a, b, out, accumulate)

    def _gemm_nt_device(self, function, dtype, c_dtype, m, n, k, alpha, a, b, out):
        who = "gemm_nt"
        queue = a.queue
        if queue is None:
            raise Error(f"{who}: the pyopencl array a has no queue to enqueue on")
        if out is None:
            out = _arrays.cl().array.empty(queue, (m, n), np.float32)
        pa, oa, lda = _arrays.device_matrix(who, "a", a)
        pb, ob, ldb = _arrays.device_matrix(who, "b", b)
        pc, oc, ldc = _arrays.device_matrix(who, "out", out)
        count, events = _arrays.wait_list(a, b, out)
        event = c_void_p()
        raise_for(function(self._live(), dtype, c_dtype, m, n, k, alpha, pa, oa, lda, pb, ob, ldb, pc, oc, ldc,
                           queue.int_ptr, count, events, byref(event)))
        _arrays.hand_event(out, event)
        return out

    def _gemm_nt_host(self, function, dtype, c_dtype, m, n, k, alpha, a, b, out, accumulate):
        cl = _arrays.cl()
        queue = self.queue
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        da = cl.Buffer(queue.context, flags, hostbuf=np.ascontiguousarray(a))
        db = cl.Buffer(queue.context, flags, hostbuf=np.ascontiguousarray(b))
        result = np.ascontiguousarray(out) if accumulate else np.empty((m, n), np.float32)
        dc = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | (cl.mem_flags.COPY_HOST_PTR if accumulate else 0),
                       size=result.nbytes, hostbuf=result if accumulate else None)
        raise_for(function(self._live(), dtype, c_dtype, m, n, k, alpha, da.int_ptr, 0, 0, db.int_ptr, 0, 0,
                           dc.int_ptr, 0, 0, None, 0, None, None))
        cl.enqueue_copy(queue, result, dc)
        if out is None:
            return result
        out[...] = result
        return out

    def choose_gemm_nt(self, m: int, n: int, k: int) -> Choice:
        """The profile entry (or built-in default) that would serve gemm_nt of M x N x K."""
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_choose_gemm_nt(self._live(), _capi.F32, _capi.F32, m, n, k, byref(handle)))
        return _take_choice(handle)

    def last_choice(self) -> Choice:
        """The choice behind this runtime's most recent launch (kernel "" before any)."""
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_last_choice(self._live(), byref(handle)))
        return _take_choice(handle)

    # ---- NF4 --------------------------------------------------------------------------------

    def nf4_forward(self, x: ArrayLike, weights: "Weights", offsets: ArrayLike, *, out: Optional[ArrayLike] = None,
                    validate_offsets: bool = True, active_experts: int = -1,
                    max_expert_rows: int = -1) -> ArrayLike:
        """``y[r] = x[r] @ W[e].T`` for the rows ``offsets[e] <= r < offsets[e+1]`` of expert e.

        ``x`` is rows x K (float32, float16 or bfloat16), ``offsets`` uint32 with experts + 1
        entries from 0 to rows, never decreasing; the result is rows x N in x's type.
        ``validate_offsets`` reads device offsets back and refuses bad ones (numpy offsets are
        always checked); without it, ``active_experts`` and ``max_expert_rows`` (-1: unknown)
        steer the profile's choice (docs/nf4.md).
        """
        return self._nf4(False, x, weights, offsets, out, validate_offsets, active_experts, max_expert_rows)

    def nf4_backward(self, grad: ArrayLike, weights: "Weights", offsets: ArrayLike, *,
                     out: Optional[ArrayLike] = None, validate_offsets: bool = True, active_experts: int = -1,
                     max_expert_rows: int = -1) -> ArrayLike:
        """The input gradient of :meth:`nf4_forward`: ``dx[r] = grad[r] @ W[e]``.

        ``grad`` is rows x N (float32, float16 or bfloat16); the result rows x K float32.
        """
        return self._nf4(True, grad, weights, offsets, out, validate_offsets, active_experts, max_expert_rows)

    def _nf4(self, backward, x, weights, offsets, out, validate, active, longest):
        from .nf4 import Weights

        who = "nf4_backward" if backward else "nf4_forward"
        what = "grad" if backward else "x"
        if not isinstance(weights, Weights):
            raise Error(f"{who}: weights must be ocltk.nf4.Weights, got {type(weights).__name__}")
        device = _arrays.kind(who, what, x)
        dtype = _arrays.dtype_code(who, what, x.dtype)
        e, n, k = weights.shape
        width, out_width = (n, k) if backward else (k, n)
        if x.ndim != 2 or x.shape[1] != width:
            raise Error(f"{who}: {what} must be rows x {'N' if backward else 'K'} = (rows, {width}), "
                        f"got {_arrays.shape_str(x.shape)}")
        rows = x.shape[0]
        offsets_device = _arrays.kind(who, "offsets", offsets)
        if offsets.dtype != np.uint32 or offsets.ndim != 1:
            raise Error(f"{who}: offsets must be a 1-D uint32 array, got {offsets.dtype} "
                        f"{_arrays.shape_str(offsets.shape)}")
        if offsets.shape[0] != e + 1:
            raise Error(f"{who}: offsets must hold experts + 1 = {e + 1} entries, got {offsets.shape[0]}")
        out_dtype = np.dtype(np.float32) if backward else x.dtype
        if out is not None:
            if _arrays.kind(who, "out", out) != device:
                raise Error(f"{who}: out must be a {'pyopencl' if device else 'numpy'} array like {what}")
            if out.shape != (rows, out_width) or out.dtype != out_dtype:
                raise Error(f"{who}: out must be {out_dtype} ({rows}, {out_width}), got {out.dtype} "
                            f"{_arrays.shape_str(out.shape)}")
        cl = _arrays.cl()
        if device:
            queue = x.queue
            if queue is None:
                raise Error(f"{who}: the pyopencl array {what} has no queue to enqueue on")
        else:
            queue = self.queue
        struct, keep = weights._struct(self, queue)
        function = _capi.lib.ocltk_nf4_backward if backward else _capi.lib.ocltk_nf4_forward
        if offsets_device:
            po, oo = _arrays.device_vector(who, "offsets", offsets)
            if oo:
                raise Error(f"{who}: offsets must start at the start of their buffer")
        else:
            offsets_buffer = cl.Buffer(queue.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                       hostbuf=np.ascontiguousarray(offsets))
            po, validate = offsets_buffer.int_ptr, True
        if device:
            px, ox = _arrays.device_vector(who, what, x)
            if ox:
                raise Error(f"{who}: {what} must start at the start of its buffer")
            result = out if out is not None else cl.array.empty(queue, (rows, out_width), out_dtype)
            py, oy = _arrays.device_vector(who, "out", result)
            if oy:
                raise Error(f"{who}: out must start at the start of its buffer")
            count, events = _arrays.wait_list(x, result, offsets if offsets_device else None)
            event = c_void_p()
            raise_for(function(self._live(), ctypes.byref(struct), dtype, rows, px, po, py, int(bool(validate)),
                               active, longest, queue.int_ptr, count, events, byref(event)))
            _arrays.hand_event(result, event)
            del keep
            return result
        host = np.ascontiguousarray(x)
        dx = cl.Buffer(queue.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host) \
            if host.nbytes else cl.Buffer(queue.context, cl.mem_flags.READ_ONLY, size=4)
        result = np.empty((rows, out_width), out_dtype)
        dy = cl.Buffer(queue.context, cl.mem_flags.WRITE_ONLY, size=max(result.nbytes, 4))
        raise_for(function(self._live(), ctypes.byref(struct), dtype, rows, dx.int_ptr, po, dy.int_ptr,
                           int(bool(validate)), active, longest, None, 0, None, None))
        if result.nbytes:
            cl.enqueue_copy(queue, result, dy)
        del keep
        if out is None:
            return result
        out[...] = result
        return out

    def choose_nf4(self, weights: "Weights", rows: int, *, backward: bool = False, dtype: Any = np.float32,
                   active_experts: int = -1, max_expert_rows: int = -1) -> Choice:
        """The profile entry (or built-in default) that would serve nf4_forward (or backward) of
        ``rows`` rows over these weights with input ``dtype``."""
        who = "choose_nf4"
        code = _arrays.dtype_code(who, "dtype", np.dtype(dtype))
        struct = weights._geometry_struct()
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_choose_nf4(self._live(), int(backward), ctypes.byref(struct), code, rows,
                                             active_experts, max_expert_rows, byref(handle)))
        return _take_choice(handle)

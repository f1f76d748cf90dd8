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

        ``a`` is M x K and ``b`` N x K, both float32, both float16 or both ``ml_dtypes.bfloat16``;
        the result is M x N in their type, or in ``out``'s, which may also be float32 for 16-bit
        ``a`` and ``b``. Sums are float32, rounded once at the store (the accumulate form reads
        ``out``, adds in float32 and rounds once). Rows of pyopencl arrays may be apart (a slice of
        a wider matrix: the leading dimension is taken from the strides). ``out`` receives the
        result (required with ``accumulate``); it is left as it was when the call raises.
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
            c_dtype = dtype
        else:
            if out.shape != (m, n):
                raise Error(f"{who}: out must be M x N = ({m}, {n}), got {_arrays.shape_str(out.shape)}")
            c_dtype = _arrays.dtype_code(who, "out", out.dtype)
            if c_dtype not in (dtype, _capi.F32):
                raise Error(f"{who}: out is {out.dtype} but a and b are {a.dtype} (out takes their type or float32)")
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
            out = _arrays.cl().array.empty(queue, (m, n), _arrays.dtype_of(c_dtype))
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
        da = _arrays.upload(queue.context, a)
        db = _arrays.upload(queue.context, b)
        result = np.ascontiguousarray(out) if accumulate else np.empty((m, n), _arrays.dtype_of(c_dtype))
        dc = _arrays.upload(queue.context, result) if accumulate else \
            cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size=result.nbytes)
        raise_for(function(self._live(), dtype, c_dtype, m, n, k, alpha, da.int_ptr, 0, 0, db.int_ptr, 0, 0,
                           dc.int_ptr, 0, 0, None, 0, None, None))
        _arrays.download(queue, result, dc)
        if out is None:
            return result
        out[...] = result
        return out

    def choose_gemm_nt(self, m: int, n: int, k: int, *, dtype: Any = np.float32) -> Choice:
        """The profile entry (or built-in default) that would serve gemm_nt of M x N x K with ``a``
        and ``b`` of ``dtype`` (16-bit types have classes of their own: ``gemv_half``, ...)."""
        code = _arrays.dtype_code("choose_gemm_nt", "dtype", np.dtype(dtype))
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_choose_gemm_nt(self._live(), code, code, m, n, k, byref(handle)))
        return _take_choice(handle)

    # ---- LoRA ---------------------------------------------------------------------------------

    def lora_apply(self, x: ArrayLike, lora_a: ArrayLike, lora_b: ArrayLike, *, scale: float = 1.0,
                   scales: Optional[ArrayLike] = None, ranks: Optional[ArrayLike] = None,
                   offsets: Optional[ArrayLike] = None, segment_adapters: Optional[ArrayLike] = None,
                   out: Optional[ArrayLike] = None, accumulate: bool = False, validate: bool = True) -> ArrayLike:
        """LoRA in one call: ``Y = scale * (x @ A.T) @ B.T`` (``out += ...`` with ``accumulate``), rows
        grouped in segments that each use their own adapter (docs/lora.md).

        ``x`` is M x K, float32, float16 or ``ml_dtypes.bfloat16``. ``lora_a`` is L x R x K (or
        R x K for one adapter) and ``lora_b`` L x N x R (or N x R), in x's type. The result is
        M x N in x's type; the rank-R intermediate stays on the device in float32, every sum is
        float32 and Y is rounded once at its store.

        - ``scale`` applies to every adapter; ``scales`` (float32, L entries) gives adapter l the
          factor ``scale * scales[l]``.
        - ``ranks`` (int32 or uint32, L entries from 1 to R): adapter l uses the first
          ``ranks[l]`` rows of its A and columns of its B (default: R each).
        - ``offsets`` (uint32, S + 1 entries from 0 to M, never decreasing) and
          ``segment_adapters`` (int32, S entries from -1 to L - 1) come together: segment s is
          rows ``offsets[s] .. offsets[s+1]-1`` on adapter ``segment_adapters[s]``; -1 is none
          (its rows of Y are left as they are when accumulating, zero otherwise). Without them
          all rows use adapter 0.
        - ``out`` receives the result (required with ``accumulate``, read first and added to);
          it is left as it was when the call raises.

        With pyopencl arrays the launch is enqueued on x's queue after the arrays' pending
        events, with no host copy, and returns ``out`` (or a new array) carrying its event;
        ``scales``, ``ranks``, ``offsets`` and ``segment_adapters`` may be numpy (uploaded) or
        pyopencl arrays. Their values are checked before anything is enqueued (offsets from 0 to
        M and never decreasing, adapters from -1 to L - 1, ranks from 1 to R): pyopencl ones by
        a blocking read after their pending events, unless ``validate=False`` (an engine's hot
        path: bad values then give wrong rows, never an access outside the arrays).
        """
        who = "lora_apply"
        device = _arrays.kind(who, "x", x)
        for what, array in (("lora_a", lora_a), ("lora_b", lora_b), ("out", out)):
            if array is not None and _arrays.kind(who, what, array) != device:
                raise Error(f"{who}: x, lora_a, lora_b and out must all be numpy arrays or all pyopencl arrays")
        dtype = _arrays.dtype_code(who, "x", x.dtype)
        shape = _arrays.shape_str

        def same_type(what: str, array: Any) -> None:
            if array.dtype != x.dtype:
                raise Error(f"{who}: {what} holds {array.dtype} but x is {x.dtype} "
                            "(x, lora_a, lora_b and out share one type)")

        if x.ndim != 2:
            raise Error(f"{who}: x must be 2-D, M x K, got shape {shape(x.shape)}")
        m, k = x.shape
        same_type("lora_a", lora_a)
        if lora_a.ndim not in (2, 3):
            raise Error(f"{who}: lora_a must be L x R x K or R x K, got shape {shape(lora_a.shape)}")
        adapters = lora_a.shape[0] if lora_a.ndim == 3 else 1
        rank = lora_a.shape[-2]
        if lora_a.shape[-1] != k:
            raise Error(f"{who}: lora_a's K is {lora_a.shape[-1]} but x's is {k} "
                        f"(lora_a is {shape(lora_a.shape)}, x is {shape(x.shape)})")
        same_type("lora_b", lora_b)
        if lora_b.ndim not in (2, 3):
            raise Error(f"{who}: lora_b must be L x N x R or N x R, got shape {shape(lora_b.shape)}")
        b_adapters = lora_b.shape[0] if lora_b.ndim == 3 else 1
        n = lora_b.shape[-2]
        if lora_b.shape[-1] != rank:
            raise Error(f"{who}: lora_b's rank is {lora_b.shape[-1]} but lora_a's is {rank} "
                        f"(lora_b is {shape(lora_b.shape)}, lora_a is {shape(lora_a.shape)})")
        if b_adapters != adapters:
            raise Error(f"{who}: lora_b holds {b_adapters} adapters but lora_a holds {adapters} "
                        f"(lora_b is {shape(lora_b.shape)}, lora_a is {shape(lora_a.shape)})")
        if 0 in (m, k, n, rank, adapters):
            raise Error(f"empty operand: x is {shape(x.shape)}, lora_a {shape(lora_a.shape)}, lora_b "
                        f"{shape(lora_b.shape)}; M, N, K, R and L must be at least 1")
        vectors = {}  # name: (array, its device flag)
        if scales is not None:
            self._lora_vector(who, "scales", scales, device, (np.float32,), "float32")
            if scales.size != adapters:
                raise Error(f"{who}: scales must hold L = {adapters} entries (one per adapter), got {scales.size} "
                            f"(shape {shape(scales.shape)})")
            vectors["scales"] = scales
        if ranks is not None:
            self._lora_vector(who, "ranks", ranks, device, (np.int32, np.uint32), "int32 or uint32")
            if ranks.size != adapters:
                raise Error(f"{who}: ranks must hold L = {adapters} entries (one per adapter), got {ranks.size} "
                            f"(shape {shape(ranks.shape)})")
            if isinstance(ranks, np.ndarray):
                flat = ranks.reshape(-1)
                if ranks.dtype == np.uint32 and np.any(flat > 0x7FFFFFFF):
                    i = int(np.argmax(flat > 0x7FFFFFFF))
                    raise Error(f"{who}: ranks[{i}] = {flat[i]} is out of range")
                ranks = flat.view(np.int32)
            vectors["ranks"] = ranks
        if (offsets is None) != (segment_adapters is None):
            raise Error(f"{who}: offsets and segment_adapters come together (without them all rows use adapter 0)")
        if offsets is not None:
            self._lora_vector(who, "offsets", offsets, device, (np.uint32,), "uint32")
            self._lora_vector(who, "segment_adapters", segment_adapters, device, (np.int32,), "int32")
            if segment_adapters.size == 0:
                raise Error(f"{who}: segment_adapters holds no segment (shape {shape(segment_adapters.shape)})")
            if offsets.size != segment_adapters.size + 1:
                raise Error(f"{who}: offsets must hold one entry more than segment_adapters "
                            f"({segment_adapters.size + 1}), got {offsets.size}")
            vectors["offsets"] = offsets
            vectors["segment_adapters"] = segment_adapters
        if out is None:
            if accumulate:
                raise Error(f"{who}: accumulate=True needs out, the Y to add to")
        else:
            same_type("out", out)
            if out.shape != (m, n):
                raise Error(f"{who}: out must be M x N = ({m}, {n}), got {shape(out.shape)}")
        segments = int(segment_adapters.size) if offsets is not None else 0
        if device:
            return self._lora_apply_device(x, lora_a, lora_b, out, vectors, dtype, (m, n, k, adapters, rank, segments),
                                           scale, accumulate, validate)
        return self._lora_apply_host(x, lora_a, lora_b, out, vectors, dtype, (m, n, k, adapters, rank, segments),
                                     scale, accumulate)

    @staticmethod
    def _lora_vector(who: str, what: str, array: Any, device: bool, dtypes, names: str) -> None:
        is_device = _arrays.kind(who, what, array)
        if is_device and not device:
            raise Error(f"{who}: {what} must be a numpy array like x")
        if array.dtype not in dtypes:
            raise Error(f"{who}: {what} must be {names}, got {array.dtype}")

    def _lora_launch(self, dtype, sizes, x, a, b, y, handles, scale, accumulate, validate, queue, events):
        """Calls ocltk_lora_apply: x and y as (handle, offset, ld), a and b as (handle, offset, ld,
        stride), the vectors as handles by name; returns the event (queue given) or None."""
        m, n, k, adapters, rank, segments = sizes
        stack = _capi.LoraAdapters(adapters, rank, *a, *b, handles.get("ranks"), handles.get("scales"))
        groups = _capi.LoraSegments(segments, handles["offsets"], handles["segment_adapters"]) if segments else None
        count, wait = events if events else (0, None)
        event = c_void_p()
        raise_for(_capi.lib.ocltk_lora_apply(self._live(), dtype, m, n, k, *x, ctypes.byref(stack),
                                             ctypes.byref(groups) if groups is not None else None, scale,
                                             int(bool(accumulate)), *y, None, 0, 0, int(bool(validate)),
                                             queue, count, wait, byref(event) if queue is not None else None))
        return event

    def _lora_apply_host(self, x, a, b, out, vectors, dtype, sizes, scale, accumulate):
        cl = _arrays.cl()
        queue = self.queue
        context = queue.context
        m, n = sizes[0], sizes[1]
        keep = {"x": _arrays.upload(context, x), "a": _arrays.upload(context, a), "b": _arrays.upload(context, b)}
        keep.update({name: _arrays.upload(context, v) for name, v in vectors.items()})
        result = np.ascontiguousarray(out) if accumulate else np.empty((m, n), x.dtype)
        keep["y"] = _arrays.upload(context, result) if accumulate else \
            cl.Buffer(context, cl.mem_flags.READ_WRITE, size=result.nbytes)
        handles = {name: keep[name].int_ptr for name in vectors}
        # The library reads the segments and ranks back and checks them (one wording everywhere).
        self._lora_launch(dtype, sizes, (keep["x"].int_ptr, 0, 0), (keep["a"].int_ptr, 0, 0, 0),
                          (keep["b"].int_ptr, 0, 0, 0), (keep["y"].int_ptr, 0, 0), handles, scale, accumulate, True,
                          None, None)
        _arrays.download(queue, result, keep["y"])
        if out is None:
            return result
        out[...] = result
        return out

    def _lora_apply_device(self, x, a, b, out, vectors, dtype, sizes, scale, accumulate, validate):
        who = "lora_apply"
        queue = x.queue
        if queue is None:
            raise Error(f"{who}: the pyopencl array x has no queue to enqueue on")
        px = _arrays.device_matrix(who, "x", x)
        pa = _arrays.device_stack(who, "lora_a", a)
        pb = _arrays.device_stack(who, "lora_b", b)
        if out is None:
            out = _arrays.cl().array.empty(queue, (sizes[0], sizes[1]), x.dtype)
        py = _arrays.device_matrix(who, "out", out)
        handles, keep, pending = {}, [], []
        for name, v in vectors.items():
            if isinstance(v, np.ndarray):
                buffer = _arrays.upload(queue.context, v)
                keep.append(buffer)
                handles[name] = buffer.int_ptr
                validate = True  # the host's values: nothing on the device to wait for
            else:
                handle, offset = _arrays.device_vector(who, name, v)
                if offset:
                    raise Error(f"{who}: {name} must start at the start of its buffer")
                handles[name] = handle
                pending.append(v)
        if validate:
            # The read-back runs on the runtime's queue before the launch's wait list is waited
            # for: values still being written behind events are waited for here.
            for v in pending:
                v.finish()
        events = _arrays.wait_list(x, a, b, out, *pending)
        event = self._lora_launch(dtype, sizes, px, pa, pb, py, handles, scale, accumulate, validate,
                                  queue.int_ptr, events)
        _arrays.hand_event(out, event)
        del keep
        return out

    def choose_lora(self, operation: str, m: int, n: int, k: int, max_rank: int, *, adapters: int = 1,
                    segments: int = 0, dtype: Any = np.float32) -> Choice:
        """The profile entry (or built-in default) that would serve a LoRA launch: ``operation``
        "lora_apply", "lora_shrink" or "lora_expand", of M rows, N outputs, K inputs, ``adapters``
        of rank at most ``max_rank``, in ``segments`` segments (0: without segment arrays), x of
        ``dtype``."""
        who = "choose_lora"
        codes = {"lora_shrink": _capi.LORA_SHRINK, "lora_expand": _capi.LORA_EXPAND, "lora_apply": _capi.LORA_APPLY}
        if operation not in codes:
            raise Error(f"{who}: operation must be lora_apply, lora_shrink or lora_expand, got {operation!r}")
        code = _arrays.dtype_code(who, "dtype", np.dtype(dtype))
        handle = c_void_p()
        raise_for(_capi.lib.ocltk_choose_lora(self._live(), codes[operation], code, m, n, k, adapters, max_rank,
                                              segments, byref(handle)))
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

    def nf4_route(self, expert_ids: ArrayLike, x: ArrayLike, *, experts: int):
        """Groups a top-k routing's (token, slot) pairs by expert, on the device: the offsets and
        rows that :meth:`nf4_forward` takes, and the way back for :meth:`nf4_scatter`.

        ``expert_ids`` is uint32 tokens x top_k (each token's chosen experts; an id >= ``experts``
        drops its pair), ``x`` tokens x features (float32, float16 or bfloat16). Returns
        ``(offsets, pair_row, row_token, gathered)``: offsets uint32 (experts + 1), pair_row
        uint32 tokens x top_k (each pair's grouped row, 0xFFFFFFFF for a dropped pair),
        row_token uint32 (tokens * top_k: the token of each grouped row) and gathered
        (tokens * top_k x features in x's type: x's rows in grouped order; rows past
        ``offsets[experts]`` are not written). Within an expert rows keep token order. numpy in,
        numpy out; pyopencl in (arrays from the start of their buffers), pyopencl out on x's
        queue, with no host copy.
        """
        who = "nf4_route"
        device = _arrays.kind(who, "x", x)
        if _arrays.kind(who, "expert_ids", expert_ids) != device:
            raise Error(f"{who}: expert_ids and x must both be numpy arrays or both pyopencl arrays")
        if expert_ids.dtype != np.uint32 or expert_ids.ndim != 2:
            raise Error(f"{who}: expert_ids must be a 2-D uint32 array (tokens x top_k), got {expert_ids.dtype} "
                        f"{_arrays.shape_str(expert_ids.shape)}")
        tokens, top_k = expert_ids.shape
        dtype = _arrays.dtype_code(who, "x", x.dtype)
        if x.ndim != 2 or x.shape[0] != tokens:
            raise Error(f"{who}: x must be tokens x features = ({tokens}, features), got {_arrays.shape_str(x.shape)}")
        features = x.shape[1]
        if not isinstance(experts, (int, np.integer)) or isinstance(experts, bool):
            raise Error(f"{who}: experts expects an integer, got {experts!r}")
        pairs = tokens * top_k
        shapes = ((int(experts) + 1,), (tokens, top_k), (pairs,), (pairs, features))
        dtypes = (np.uint32, np.uint32, np.uint32, x.dtype)
        if device:
            cla = _arrays.cl().array
            queue = x.queue
            if queue is None:
                raise Error(f"{who}: the pyopencl array x has no queue to enqueue on")
            handles = [self._start_of(who, name, a) for name, a in (("expert_ids", expert_ids), ("x", x))]
            outs = [cla.empty(queue, shape, t) for shape, t in zip(shapes, dtypes)]
            count, events = _arrays.wait_list(expert_ids, x)
            event = c_void_p()
            raise_for(_capi.lib.ocltk_nf4_route(self._live(), tokens, top_k, int(experts), features, dtype, *handles,
                                                *[self._start_of(who, "out", o) for o in outs], queue.int_ptr, count,
                                                events, byref(event)))
            _arrays.hand_event(outs, event)
            return tuple(outs)
        cl = _arrays.cl()
        queue = self.queue
        ins = [_arrays.upload(queue.context, a) for a in (expert_ids, x)]
        results = [np.empty(shape, t) for shape, t in zip(shapes, dtypes)]
        buffers = [cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size=max(r.nbytes, 4)) for r in results]
        raise_for(_capi.lib.ocltk_nf4_route(self._live(), tokens, top_k, int(experts), features, dtype,
                                            *[b.int_ptr for b in ins], *[b.int_ptr for b in buffers], None, 0, None,
                                            None))
        for r, b in zip(results, buffers):
            _arrays.download(queue, r, b)
        return tuple(results)

    def nf4_scatter(self, y: ArrayLike, pair_row: ArrayLike, weights: ArrayLike, *,
                    out: Optional[ArrayLike] = None) -> ArrayLike:
        """The way back from :meth:`nf4_route`: ``out[t] = sum_s weights[t, s] * y[pair_row[t, s]]``
        (dropped pairs add nothing), summed in float32 and stored in y's type.

        ``y`` is grouped rows x N (float32, float16 or bfloat16), ``pair_row`` uint32 and
        ``weights`` float32 tokens x top_k; the result is tokens x N. ``out``, when given,
        receives it (left as it was when the call raises).
        """
        who = "nf4_scatter"
        device = _arrays.kind(who, "y", y)
        for what, array in (("pair_row", pair_row), ("weights", weights), ("out", out)):
            if array is not None and _arrays.kind(who, what, array) != device:
                raise Error(f"{who}: y, pair_row, weights and out must all be numpy arrays or all pyopencl arrays")
        dtype = _arrays.dtype_code(who, "y", y.dtype)
        if y.ndim != 2:
            raise Error(f"{who}: y must be 2-D, rows x N, got shape {_arrays.shape_str(y.shape)}")
        if pair_row.dtype != np.uint32 or pair_row.ndim != 2:
            raise Error(f"{who}: pair_row must be a 2-D uint32 array (tokens x top_k), got {pair_row.dtype} "
                        f"{_arrays.shape_str(pair_row.shape)}")
        tokens, top_k = pair_row.shape
        if weights.dtype != np.float32 or weights.shape != pair_row.shape:
            raise Error(f"{who}: weights must be float32 of pair_row's shape {_arrays.shape_str(pair_row.shape)}, "
                        f"got {weights.dtype} {_arrays.shape_str(weights.shape)}")
        rows, features = y.shape
        if out is not None and (out.dtype != y.dtype or out.shape != (tokens, features)):
            raise Error(f"{who}: out must be {y.dtype} ({tokens}, {features}), got {out.dtype} "
                        f"{_arrays.shape_str(out.shape)}")
        if device:
            queue = y.queue
            if queue is None:
                raise Error(f"{who}: the pyopencl array y has no queue to enqueue on")
            result = out if out is not None else _arrays.cl().array.empty(queue, (tokens, features), y.dtype)
            handles = [self._start_of(who, name, a) for name, a in
                       (("y", y), ("pair_row", pair_row), ("weights", weights), ("out", result))]
            count, events = _arrays.wait_list(y, pair_row, weights, result)
            event = c_void_p()
            raise_for(_capi.lib.ocltk_nf4_scatter(self._live(), tokens, top_k, features, dtype, handles[0], rows,
                                                  handles[1], handles[2], handles[3], queue.int_ptr, count, events,
                                                  byref(event)))
            _arrays.hand_event(result, event)
            return result
        cl = _arrays.cl()
        queue = self.queue
        ins = [_arrays.upload(queue.context, a) for a in (y, pair_row, weights)]
        result = np.empty((tokens, features), y.dtype)
        dout = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, size=max(result.nbytes, 4))
        raise_for(_capi.lib.ocltk_nf4_scatter(self._live(), tokens, top_k, features, dtype, ins[0].int_ptr, rows,
                                              ins[1].int_ptr, ins[2].int_ptr, dout.int_ptr, None, 0, None, None))
        _arrays.download(queue, result, dout)
        if out is None:
            return result
        out[...] = result
        return out

    @staticmethod
    def _start_of(who: str, what: str, array: Any) -> Any:
        """The buffer handle of a contiguous pyopencl array that starts at its buffer's start (the
        routing kernels read packed arrays from there); None for an empty one."""
        handle, offset = _arrays.device_vector(who, what, array)
        if offset:
            raise Error(f"{who}: {what} must start at the start of its buffer")
        return handle or None

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

"""What the package accepts as arrays: numpy arrays on the host, pyopencl.array.Array on a device."""
from __future__ import annotations

import sys
from typing import Any, Tuple

import numpy as np

from . import _capi
from ._errors import Error


def cl():
    """pyopencl, imported on first use (import ocltk and the host NF4 tools work without it)."""
    import pyopencl
    import pyopencl.array  # noqa: F401  (pyopencl.array is a submodule)

    return pyopencl


def is_device(x: Any) -> bool:
    """Whether x is a pyopencl.array.Array (pyopencl cannot hold one without being imported)."""
    module = sys.modules.get("pyopencl.array")
    return module is not None and isinstance(x, module.Array)


def kind(who: str, what: str, x: Any) -> bool:
    """True for a pyopencl array, False for a numpy array; Error for anything else."""
    if isinstance(x, np.ndarray):
        return False
    if is_device(x):
        return True
    raise Error(f"{who}: {what} must be a numpy array or a pyopencl.array.Array, got {type(x).__name__}")


def dtype_code(who: str, what: str, dtype: np.dtype) -> int:
    """The C API's element type of a float32, float16 or ml_dtypes.bfloat16 array."""
    if dtype == np.float32:
        return _capi.F32
    if dtype == np.float16:
        return _capi.F16
    if dtype.name == "bfloat16":
        return _capi.BF16
    raise Error(f"{who}: {what} must be float32, float16 or ml_dtypes.bfloat16, got {dtype}")


def dtype_of(code: int) -> np.dtype:
    if code == _capi.F32:
        return np.dtype(np.float32)
    if code == _capi.F16:
        return np.dtype(np.float16)
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def shape_str(shape: Tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def device_matrix(who: str, what: str, a: Any) -> Tuple[int, int, int]:
    """(buffer handle, element offset, leading dimension) of a 2-D pyopencl array with
    contiguous rows; rows may be apart (a slice of a wider matrix)."""
    if a.ndim != 2:
        raise Error(f"{who}: {what} must be 2-D, got shape {shape_str(a.shape)}")
    item = a.dtype.itemsize
    rows, cols = a.shape
    s0, s1 = a.strides
    if a.offset % item:
        raise Error(f"{who}: {what} starts {a.offset} bytes into its buffer, not a whole number of elements")
    if cols > 1 and s1 != item:
        raise Error(f"{who}: {what} must have contiguous rows (element stride {s1} bytes, expected {item})")
    ld = cols
    if rows > 1:
        if s0 % item or s0 < cols * item:
            raise Error(f"{who}: {what} has a row stride of {s0} bytes, not a leading dimension >= its {cols} columns")
        ld = s0 // item
    base = a.base_data
    return (base.int_ptr if base is not None else 0), a.offset // item, ld


def device_vector(who: str, what: str, a: Any) -> Tuple[int, int]:
    """(buffer handle, element offset) of a contiguous pyopencl array."""
    item = a.dtype.itemsize
    if not a.flags.forc:
        raise Error(f"{who}: {what} must be contiguous")
    if a.offset % item:
        raise Error(f"{who}: {what} starts {a.offset} bytes into its buffer, not a whole number of elements")
    base = a.base_data
    return (base.int_ptr if base is not None else 0), a.offset // item


def wait_list(*arrays: Any):
    """The pending events of pyopencl arrays, as (count, ctypes array or None)."""
    events = [e for a in arrays if a is not None for e in a.events]
    if not events:
        return 0, None
    return len(events), (_capi.c_void_p * len(events))(*[e.int_ptr for e in events])


def hand_event(out: Any, event) -> None:
    """Gives `out` the launch's event. The launch waited for every event `out` held (they were
    in its wait list), so its event stands for them all: it replaces them, and `out.events`
    stays one long (pyopencl's add_event would append and, past 12, block the host on old ones,
    making a loop of launches wait for the device)."""
    out.events[:] = [cl().Event.from_int_ptr(event.value, retain=False)]

"""ctypes bindings of libocltk.so.0, the C API of runtime/include/ocltk/ocltk.h (docs/c-api.md).

The library is looked up in this order: the file named by OCLTK_LIBRARY; libocltk.so.0 in this
package's folder (an installed wheel); libocltk.so.0 on the loader's search path.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, Structure, c_char_p, c_float, c_int, c_int64, c_size_t, c_uint32, c_uint8, c_void_p
from pathlib import Path

SUCCESS = 0
INVALID_ARGUMENT = 1
NOT_FOUND = 2
PROFILE_ERROR = 3
BUILD_ERROR = 4
DEVICE_ERROR = 5
IO_ERROR = 6
UNSUPPORTED = 7
OUT_OF_HOST_MEMORY = 8

F32, F16, BF16 = 0, 1, 2


class Nf4Weights(Structure):
    """ocltk_nf4_weights."""

    _fields_ = [
        ("experts", c_int64),
        ("out_features", c_int64),
        ("in_features", c_int64),
        ("block_size", c_int64),
        ("element_offset", c_int64),
        ("packed", c_void_p),
        ("packed_offset", c_size_t),
        ("scales", c_void_p),
        ("scales_offset", c_size_t),
        ("codebook", c_void_p),
    ]


def _load() -> ctypes.CDLL:
    explicit = os.environ.get("OCLTK_LIBRARY")
    candidates = [explicit] if explicit else [str(Path(__file__).with_name("libocltk.so.0")), "libocltk.so.0"]
    errors = []
    for candidate in candidates:
        if os.sep in candidate and not os.path.exists(candidate):
            errors.append(f"{candidate}: no such file")
            continue
        try:
            return ctypes.CDLL(candidate)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("ocltk: cannot load the C library libocltk.so.0 (" + "; ".join(errors) + ")")


lib = _load()

_queue_wait_event = [c_void_p, c_uint32, POINTER(c_void_p), POINTER(c_void_p)]
_SIGNATURES = {
    "ocltk_last_error": (c_char_p, []),
    "ocltk_last_cl_error": (c_int, []),
    "ocltk_status_string": (c_char_p, [c_int]),
    "ocltk_version": (c_int, []),
    "ocltk_version_string": (c_char_p, []),
    "ocltk_runtime_open": (c_int, [c_char_p, c_char_p, POINTER(c_void_p)]),
    "ocltk_runtime_wrap": (c_int, [c_void_p, c_void_p, c_void_p, c_char_p, POINTER(c_void_p)]),
    "ocltk_runtime_release": (None, [c_void_p]),
    "ocltk_runtime_context": (c_void_p, [c_void_p]),
    "ocltk_runtime_device": (c_void_p, [c_void_p]),
    "ocltk_runtime_queue": (c_void_p, [c_void_p]),
    "ocltk_runtime_device_name": (c_char_p, [c_void_p]),
    "ocltk_gemm_nt": (c_int, [c_void_p, c_int, c_int, c_int64, c_int64, c_int64, c_float,
                              c_void_p, c_size_t, c_size_t, c_void_p, c_size_t, c_size_t, c_void_p, c_size_t, c_size_t]
                      + _queue_wait_event),
    "ocltk_gemm_nt_accum": (c_int, [c_void_p, c_int, c_int, c_int64, c_int64, c_int64, c_float,
                                    c_void_p, c_size_t, c_size_t, c_void_p, c_size_t, c_size_t, c_void_p, c_size_t,
                                    c_size_t] + _queue_wait_event),
    "ocltk_nf4_forward": (c_int, [c_void_p, POINTER(Nf4Weights), c_int, c_int64, c_void_p, c_void_p, c_void_p,
                                  c_int, c_int64, c_int64] + _queue_wait_event),
    "ocltk_nf4_backward": (c_int, [c_void_p, POINTER(Nf4Weights), c_int, c_int64, c_void_p, c_void_p, c_void_p,
                                   c_int, c_int64, c_int64] + _queue_wait_event),
    "ocltk_nf4_codebook": (None, [POINTER(c_float)]),
    "ocltk_nf4_quantize": (c_int, [c_void_p, c_int, c_size_t, c_int64, POINTER(c_uint8), c_size_t, POINTER(c_float),
                                   c_size_t]),
    "ocltk_nf4_dequantize": (c_int, [POINTER(c_uint8), c_size_t, POINTER(c_float), c_size_t, POINTER(c_float),
                                     c_int64, c_int64, c_size_t, POINTER(c_float)]),
    "ocltk_choose_gemm_nt": (c_int, [c_void_p, c_int, c_int, c_int64, c_int64, c_int64, POINTER(c_void_p)]),
    "ocltk_choose_nf4": (c_int, [c_void_p, c_int, POINTER(Nf4Weights), c_int, c_int64, c_int64, c_int64,
                                 POINTER(c_void_p)]),
    "ocltk_last_choice": (c_int, [c_void_p, POINTER(c_void_p)]),
    "ocltk_choice_release": (None, [c_void_p]),
    "ocltk_choice_kernel": (c_char_p, [c_void_p]),
    "ocltk_choice_shape_class": (c_char_p, [c_void_p]),
    "ocltk_choice_algorithm": (c_char_p, [c_void_p]),
    "ocltk_choice_source": (c_char_p, [c_void_p]),
    "ocltk_choice_match": (c_char_p, [c_void_p]),
    "ocltk_choice_param_count": (c_size_t, [c_void_p]),
    "ocltk_choice_param_name": (c_char_p, [c_void_p, c_size_t]),
    "ocltk_choice_param_value": (c_int, [c_void_p, c_size_t]),
    "ocltk_choice_describe": (c_char_p, [c_void_p]),
}
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _function = getattr(lib, _name)
    _function.restype = _restype
    _function.argtypes = _argtypes


def last_error() -> str:
    return lib.ocltk_last_error().decode("utf-8", "replace")

"""NF4 expert weights: the packed format, the host quantizer, and bitsandbytes' files.

Logical weights W[E, N, K] are flattened c = (e*N + n)*K + k; two 4-bit codes a byte (the
even coefficient in the high nibble); one float32 absmax scale per flat block of
``block_size`` coefficients; W = codebook[code] * scale. This is bitsandbytes' layout
(``quantize_4bit(quant_type="nf4")``), so its files load as they are (:func:`load_bitsandbytes`).
"""
from __future__ import annotations

import ctypes
import json
import os
import struct
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays, _capi
from ._errors import Error, raise_for

__all__ = ["Weights", "quantize", "dequantize", "load_bitsandbytes", "CODEBOOK"]


def _codebook() -> np.ndarray:
    table = np.empty(16, np.float32)
    _capi.lib.ocltk_nf4_codebook(table.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
    table.flags.writeable = False
    return table


CODEBOOK: np.ndarray = _codebook()
"""NF4's 16 levels (bitsandbytes' table), float32, read-only."""


def _geometry_counts(experts: int, n: int, k: int, block_size: int, element_offset: int) -> Tuple[int, int]:
    count = experts * n * k
    if count == 0:
        return 0, 0
    return (element_offset + count + 1) // 2, (element_offset + count + block_size - 1) // block_size


class Weights:
    """A window of NF4 expert weights: E x N x K coefficients from ``packed`` and ``scales``.

    ``packed`` (uint8, any shape, flattened) and ``scales`` (float32) are numpy arrays, uploaded
    once per OpenCL context on first use, or pyopencl arrays used where they are. The window
    starts ``element_offset`` coefficients into its first block (0 <= element_offset <
    block_size); ``codebook`` (16 float32) defaults to NF4's. ``packed`` must hold exactly
    (element_offset + E*N*K + 1) // 2 bytes and ``scales`` one value per block touched.
    """

    def __init__(self, packed: Any, scales: Any, *, experts: int, out_features: int, in_features: int,
                 block_size: int, element_offset: int = 0, codebook: Optional[Any] = None) -> None:
        who = "nf4.Weights"
        for name, value, least in (("experts", experts, 0), ("out_features", out_features, 1),
                                   ("in_features", in_features, 1), ("block_size", block_size, 1),
                                   ("element_offset", element_offset, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
                raise Error(f"{who}: {name} expects an integer >= {least}, got {value!r}")
        experts, n, k, block_size, element_offset = (int(v) for v in
                                                     (experts, out_features, in_features, block_size, element_offset))
        if block_size < 32 or block_size > 4096 or block_size & (block_size - 1):
            raise Error(f"{who}: block size {block_size} is not a power of two from 32 to 4096")
        if element_offset >= block_size:
            raise Error(f"{who}: element_offset {element_offset} is not inside the first block [0, {block_size})")
        self._device = _arrays.kind(who, "packed", packed)
        if _arrays.kind(who, "scales", scales) != self._device:
            raise Error(f"{who}: packed and scales must both be numpy arrays or both pyopencl arrays")
        if packed.dtype != np.uint8:
            raise Error(f"{who}: packed must be uint8, got {packed.dtype}")
        if scales.dtype != np.float32:
            raise Error(f"{who}: scales must be float32, got {scales.dtype}")
        need_packed, need_scales = _geometry_counts(experts, n, k, block_size, element_offset)
        if packed.size != need_packed:
            raise Error(f"{who}: packed holds {packed.size} bytes, but {experts} experts x {n} x {k} from element "
                        f"offset {element_offset} need {need_packed}")
        if scales.size != need_scales:
            raise Error(f"{who}: scales holds {scales.size} values, but the window needs {need_scales} blocks of "
                        f"{block_size}")
        if codebook is None:
            codebook = CODEBOOK
        elif _arrays.is_device(codebook):
            codebook = codebook.get()
        codebook = np.asarray(codebook)
        if codebook.dtype != np.float32 or codebook.size != 16:
            raise Error(f"{who}: codebook must hold 16 float32 values, got {codebook.size} {codebook.dtype}")
        if not self._device:
            packed = np.ascontiguousarray(packed).reshape(-1)
            scales = np.ascontiguousarray(scales).reshape(-1)
        self.packed = packed
        self.scales = scales
        self.codebook = np.ascontiguousarray(codebook).reshape(16)
        self.experts, self.out_features, self.in_features = experts, n, k
        self.block_size, self.element_offset = block_size, element_offset
        self._uploads: Dict[int, Tuple[Any, ...]] = {}

    @property
    def shape(self) -> Tuple[int, int, int]:
        """(experts, out_features, in_features): E x N x K."""
        return self.experts, self.out_features, self.in_features

    def __repr__(self) -> str:
        where = "pyopencl" if self._device else "numpy"
        return (f"ocltk.nf4.Weights(experts={self.experts}, out_features={self.out_features}, "
                f"in_features={self.in_features}, block_size={self.block_size}, "
                f"element_offset={self.element_offset}, {where})")

    def dequantize(self) -> np.ndarray:
        """The weights as float32, E x N x K (on the host)."""
        packed = self.packed.get() if self._device else self.packed
        scales = self.scales.get() if self._device else self.scales
        return dequantize(packed, scales, self.shape, self.block_size, element_offset=self.element_offset,
                          codebook=self.codebook)

    def _geometry_struct(self) -> _capi.Nf4Weights:
        s = _capi.Nf4Weights()
        s.experts, s.out_features, s.in_features = self.experts, self.out_features, self.in_features
        s.block_size, s.element_offset = self.block_size, self.element_offset
        return s

    def _struct(self, runtime: Any, queue: Any) -> Tuple[_capi.Nf4Weights, Tuple[Any, ...]]:
        """The C struct for a launch on `queue`, and the buffers it points at (kept alive)."""
        cl = _arrays.cl()
        s = self._geometry_struct()
        context = queue.context
        key = context.int_ptr
        if key not in self._uploads:
            flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
            codebook = cl.Buffer(context, flags, hostbuf=self.codebook)
            if self._device:
                self._uploads[key] = (codebook,)
            elif self.packed.size:
                self._uploads[key] = (codebook, cl.Buffer(context, flags, hostbuf=self.packed),
                                      cl.Buffer(context, flags, hostbuf=self.scales))
            else:
                self._uploads[key] = (codebook, None, None)
        uploads = self._uploads[key]
        s.codebook = uploads[0].int_ptr
        if self._device:
            s.packed, s.packed_offset = _arrays.device_vector("nf4.Weights", "packed", self.packed)
            s.scales, s.scales_offset = _arrays.device_vector("nf4.Weights", "scales", self.scales)
            return s, uploads + (self.packed, self.scales)
        s.packed = uploads[1].int_ptr if uploads[1] is not None else None
        s.scales = uploads[2].int_ptr if uploads[2] is not None else None
        return s, uploads


def _float_pointer(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def quantize(w: np.ndarray, block_size: int = 64) -> Tuple[np.ndarray, np.ndarray]:
    """Quantizes ``w`` (any shape, flattened in C order; float32, float16 or bfloat16) exactly as
    bitsandbytes' ``quantize_4bit(quant_type="nf4")`` on its GPU: returns ``(packed, scales)``,
    uint8 of (count + 1) // 2 bytes and float32 of one absmax per block."""
    who = "nf4.quantize"
    if not isinstance(w, np.ndarray):
        raise Error(f"{who}: w must be a numpy array, got {type(w).__name__}")
    code = _arrays.dtype_code(who, "w", w.dtype)
    if not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool):
        raise Error(f"{who}: block_size expects an integer, got {block_size!r}")
    host = np.ascontiguousarray(w).reshape(-1)
    count = host.size
    packed = np.empty((count + 1) // 2, np.uint8)
    scales = np.empty(max(-(-count // int(block_size)), 0) if block_size > 0 else 0, np.float32)
    raise_for(_capi.lib.ocltk_nf4_quantize(host.ctypes.data_as(ctypes.c_void_p), code, count, int(block_size),
                                           packed.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), packed.size,
                                           _float_pointer(scales), scales.size))
    return packed, scales


def dequantize(packed: np.ndarray, scales: np.ndarray, shape: Union[int, Sequence[int]], block_size: int = 64, *,
               element_offset: int = 0, codebook: Optional[np.ndarray] = None) -> np.ndarray:
    """The float32 weights of ``shape`` from ``packed`` (uint8) and ``scales`` (float32): the
    window's coefficients start ``element_offset`` positions into the stream."""
    who = "nf4.dequantize"
    for name, value in (("packed", packed), ("scales", scales)):
        if not isinstance(value, np.ndarray):
            raise Error(f"{who}: {name} must be a numpy array, got {type(value).__name__}")
    if packed.dtype != np.uint8:
        raise Error(f"{who}: packed must be uint8, got {packed.dtype}")
    if scales.dtype != np.float32:
        raise Error(f"{who}: scales must be float32, got {scales.dtype}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise Error(f"{who}: shape {_arrays.shape_str(shape)} has a negative size")
    table = CODEBOOK if codebook is None else np.ascontiguousarray(codebook, np.float32).reshape(-1)
    if table.size != 16:
        raise Error(f"{who}: codebook must hold 16 values, got {table.size}")
    p = np.ascontiguousarray(packed).reshape(-1)
    s = np.ascontiguousarray(scales).reshape(-1)
    out = np.empty(shape, np.float32)
    raise_for(_capi.lib.ocltk_nf4_dequantize(p.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), p.size,
                                             _float_pointer(s), s.size, _float_pointer(table), int(element_offset),
                                             int(block_size), out.size, _float_pointer(out)))
    return out


# ---- bitsandbytes' files ------------------------------------------------------------------

_SAFETENSORS_DTYPES = {"U8": "u1", "I8": "i1", "I16": "<i2", "I32": "<i4", "I64": "<i8", "F16": "<f2", "F32": "<f4",
                       "F64": "<f8", "BF16": "bfloat16", "BOOL": "?"}


def _read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Every tensor of a safetensors file (an 8-byte little-endian header length, a JSON header
    of dtype, shape and byte range per tensor, then the data)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise Error(f"{path}: cannot read ({e.strerror})", _capi.IO_ERROR) from None
    if len(blob) < 8:
        raise Error(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (length,) = struct.unpack("<Q", blob[:8])
    if length > len(blob) - 8:
        raise Error(f"{path}: not a safetensors file (header of {length} bytes in a {len(blob)}-byte file)")
    try:
        header = json.loads(blob[8:8 + length])
    except ValueError as e:
        raise Error(f"{path}: not a safetensors file (header is not JSON: {e})") from None
    data = memoryview(blob)[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype_name = _SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype_name is None:
            raise Error(f"{path}: tensor {name} has dtype {info.get('dtype')}, which ocltk does not read")
        if dtype_name == "bfloat16":
            import ml_dtypes

            dtype = np.dtype(ml_dtypes.bfloat16)
        else:
            dtype = np.dtype(dtype_name)
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        if end > len(data) or end - begin != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            raise Error(f"{path}: tensor {name} ({info['dtype']} {list(shape)}) does not fit its byte range "
                        f"[{begin}, {end})")
        tensors[name] = np.frombuffer(data[begin:end], dtype).reshape(shape)
    return tensors


def load_bitsandbytes(path: Union[str, "os.PathLike[str]"], prefix: str) -> Weights:
    """Reads NF4 weights saved by bitsandbytes/transformers from a ``Linear4bit`` (or a 3-D
    expert tensor quantized alike) in a safetensors file.

    ``prefix`` names the module (``"model.layers.0.mlp.down_proj"``); its tensors are
    ``weight`` (packed codes), ``weight.absmax``, ``weight.quant_map`` (the codebook) and
    ``weight.quant_state.bitsandbytes__nf4`` (blocksize, shape), with double quantization
    ``weight.nested_absmax`` and ``weight.nested_quant_map`` (absmax stored as 8-bit codes,
    dequantized here as bitsandbytes does). A 2-D weight gives one expert; a 3-D one stacks
    its experts on the first axis.
    """
    path = os.fspath(path)
    tensors = _read_safetensors(path)
    base = prefix if prefix.endswith(".") or not prefix else prefix + "."
    key = base + "weight"

    def tensor(name: str) -> np.ndarray:
        if name not in tensors:
            raise Error(f"{path}: no tensor {name} (a Linear4bit saved with its quantization state has one)")
        return tensors[name]

    if key not in tensors:
        modules = sorted(n[: -len(".weight.quant_state.bitsandbytes__nf4")] for n in tensors
                         if n.endswith(".weight.quant_state.bitsandbytes__nf4"))
        raise Error(f"{path}: no tensor {key}; NF4 modules in the file: {', '.join(modules) or 'none'}")
    state_key = key + ".quant_state.bitsandbytes__nf4"
    if state_key not in tensors:
        other = [n for n in tensors if n.startswith(key + ".quant_state.bitsandbytes__")]
        if other:
            raise Error(f"{path}: {key} is quantized as {other[0].rsplit('__', 1)[1]}, not nf4")
        tensor(state_key)
    try:
        state = json.loads(tensors[state_key].tobytes().decode("utf-8"))
        blocksize = int(state["blocksize"])
        shape = tuple(int(s) for s in state["shape"])
    except (ValueError, KeyError, TypeError) as e:
        raise Error(f"{path}: {state_key} is not bitsandbytes' quantization state ({e})") from None
    if state.get("quant_type", "nf4") != "nf4":
        raise Error(f"{path}: {key} is quantized as {state['quant_type']}, not nf4")
    if len(shape) == 2:
        experts, n, k = 1, shape[0], shape[1]
    elif len(shape) == 3:
        experts, n, k = shape
    else:
        raise Error(f"{path}: {key} has shape {list(shape)}; ocltk reads 2-D (N x K) or 3-D (E x N x K) weights")
    packed = tensors[key]
    if packed.dtype != np.uint8:
        raise Error(f"{path}: {key} must be uint8 packed codes, got {packed.dtype}")
    absmax = tensor(key + ".absmax")
    if "nested_blocksize" in state:
        # Double quantization: absmax = nested_quant_map[code] * nested_absmax[block] + offset,
        # in float32, as bitsandbytes' dequantize_blockwise and its offset add compute it.
        if absmax.dtype != np.uint8:
            raise Error(f"{path}: {key}.absmax must hold uint8 codes under double quantization, got {absmax.dtype}")
        nested_map = tensor(key + ".nested_quant_map").astype(np.float32, copy=False).reshape(-1)
        nested_absmax = tensor(key + ".nested_absmax").astype(np.float32, copy=False).reshape(-1)
        nested_block = int(state["nested_blocksize"])
        codes = absmax.reshape(-1)
        blocks = np.arange(codes.size) // nested_block
        if nested_map.size != 256 or (codes.size and blocks[-1] >= nested_absmax.size):
            raise Error(f"{path}: {key}'s nested quantization state does not cover its {codes.size} absmax values")
        scales = nested_map[codes] * nested_absmax[blocks] + np.float32(state.get("nested_offset", 0.0))
    else:
        if absmax.dtype != np.float32:
            raise Error(f"{path}: {key}.absmax must be float32, got {absmax.dtype}")
        scales = absmax.reshape(-1)
    codebook = tensors.get(key + ".quant_map")
    codebook = None if codebook is None else codebook.astype(np.float32, copy=False).reshape(-1)
    return Weights(packed.reshape(-1), np.ascontiguousarray(scales, np.float32), experts=experts, out_features=n,
                   in_features=k, block_size=blocksize, codebook=codebook)

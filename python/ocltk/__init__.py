"""ocltk: tuned OpenCL kernels for LoRA (NT GEMM) and NF4 expert GEMMs, from Python.

A thin layer over ocltk's C API (libocltk.so.0, docs/c-api.md); docs/python.md is the guide.

    import numpy as np, ocltk
    rt = ocltk.Runtime()                      # the default device (OCLTK_DEVICE, else first GPU)
    c = rt.gemm_nt(a, b)                      # alpha * a @ b.T, numpy in and out
    w = ocltk.nf4.load_bitsandbytes("model.safetensors", "model.layers.0.mlp.experts")
    y = rt.nf4_forward(x, w, offsets)         # rows grouped by expert

With pyopencl arrays (``Runtime.from_queue(queue)``, or any runtime on the arrays' context)
the operations are enqueued on the arrays' queue with no host copy and return pyopencl arrays.
Bad input raises :class:`Error` (a ValueError), device failures :class:`DeviceError`
(a RuntimeError), each with one line naming what is at fault.
"""
from . import nf4
from ._capi import lib as _lib
from ._errors import DeviceError, Error
from ._runtime import Choice, Runtime

__all__ = ["Runtime", "Choice", "Error", "DeviceError", "nf4", "version", "__version__"]


def version() -> str:
    """The C library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.ocltk_version_string().decode()


__version__ = version()

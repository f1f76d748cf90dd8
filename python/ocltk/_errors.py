"""The two exceptions of the package and the translation of the C API's statuses into them."""
from __future__ import annotations

from . import _capi


class Error(ValueError):
    """Bad input: a shape, type, buffer, offset, device selector or file that is wrong.

    The message is one sentence naming the thing at fault, the same the ``ocltk`` command prints;
    nothing was written (an ``out`` array is left as it was). ``status`` is the C API's status
    (``ocltk_status``: 1 invalid argument, 2 not found, 3 profile, 6 I/O, 7 unsupported).
    """

    def __init__(self, message: str, status: int = _capi.INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.status = status


class DeviceError(RuntimeError):
    """A failure of the device or of OpenCL (a program that did not build, an enqueue refused).

    ``status`` is the C API's status (4 build, 5 device, 8 out of host memory), ``cl_error`` the
    OpenCL status behind it (0 where none).
    """

    def __init__(self, message: str, status: int = _capi.DEVICE_ERROR, cl_error: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.cl_error = cl_error


_DEVICE_STATUSES = (_capi.BUILD_ERROR, _capi.DEVICE_ERROR, _capi.OUT_OF_HOST_MEMORY)


def raise_for(status: int) -> None:
    """Raises the exception for a C API status other than success, with the thread's message."""
    if status == _capi.SUCCESS:
        return
    message = _capi.last_error() or _capi.lib.ocltk_status_string(status).decode()
    if status in _DEVICE_STATUSES:
        raise DeviceError(message, status, _capi.lib.ocltk_last_cl_error())
    raise Error(message, status)

"""Fixtures of the Python package's tests: one runtime on the default device for the whole run
(kernels are built once), a pyopencl queue of its own for the shared-queue paths, fresh random
data per test (seed printed on failure), the CPU reference in double."""
import os
from pathlib import Path

import numpy as np
import pytest

import ocltk

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def rt():
    runtime = ocltk.Runtime()
    yield runtime
    runtime.close()


@pytest.fixture(scope="session")
def queue(rt):
    """A pyopencl queue in a context of its own on the runtime's device."""
    import pyopencl as cl

    context = cl.Context([rt.queue.device])
    return cl.CommandQueue(context)


@pytest.fixture
def rng(request):
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def dot_bound(a, b, k, c_old=0.0):
    """|C - C_ref| bound of a float32 dot product of length k (docs/verification.md)."""
    u = 2.0 ** -24
    gamma = k * u / (1 - k * u)
    return gamma * (np.abs(a) @ np.abs(b).T) + u * np.abs(c_old) + 1e-30


def assert_gemm_close(got, a, b, alpha=1.0, c_old=None):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    old = np.zeros((a.shape[0], b.shape[0])) if c_old is None else c_old.astype(np.float64)
    want = alpha * (a64 @ b64.T) + old
    bound = abs(alpha) * dot_bound(a64, b64, a.shape[1]) + 2.0 ** -24 * np.abs(old) + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= bound * 1.0000001), f"max error {err.max()} against bound {bound[err.argmax() // err.shape[1]]}"

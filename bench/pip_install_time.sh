#!/usr/bin/env bash
# The fresh-machine figure of docs/python.md: `pip install .` into a new virtual environment
# with pip's cache and ccache off (wheels downloaded, the library compiled from scratch), then
# `import ocltk` and a gemm_nt checked against numpy; each step timed.
#   bench/pip_install_time.sh [VENV_DIR]     (default: a new temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-$(mktemp -d)/venv}
python3 -m venv "$venv"
t0=$(date +%s.%N)
PIP_NO_CACHE_DIR=1 CCACHE_DISABLE=1 "$venv/bin/pip" install -q --disable-pip-version-check .
t1=$(date +%s.%N)
(cd / && "$venv/bin/python" -c '
import numpy as np, ocltk
rt = ocltk.Runtime()
a = np.random.rand(7, 33).astype(np.float32); b = np.random.rand(65, 33).astype(np.float32)
assert np.allclose(rt.gemm_nt(a, b), a @ b.T, rtol=1e-5, atol=1e-5)
print("ocltk", ocltk.__version__, "on", rt.device_name, "from", ocltk.__file__)')
t2=$(date +%s.%N)
python3 -c "print(f'pip install .: {$t1 - $t0:.1f} s; import + first gemm_nt (its kernel built): {$t2 - $t1:.1f} s')"

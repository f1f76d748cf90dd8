#!/usr/bin/env bash
# Sets up a Debian 12 machine for ocltk and builds it: installs the Debian packages it
# needs (only those missing), configures and builds into ./build (Release).
#   scripts/setup.sh                 install + build
#   OCLTK_SKIP_INSTALL=1 scripts/setup.sh   build only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  ocl-icd-opencl-dev opencl-c-headers ocl-icd-libopencl1 pocl-opencl-icd clinfo
  libclblast-dev libboost-dev libyaml-cpp-dev zlib1g-dev libbenchmark-dev libgtest-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [[ ${#missing[@]} -gt 0 && -z "${OCLTK_SKIP_INSTALL:-}" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root, or install them first: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- C API: the Python package's tests and the Rust example (docs/c-api.md, docs/python.md) ----
# Debian's python3-venv where python3 cannot make a virtual environment, Debian's rustc where no
# rustc is on PATH (ctest builds examples/rust/ with it); then the PyPI packages of the Python
# tests, pinned to the versions they run with, in the build's own virtual environment
# (build/venv), whose interpreter ctest's test_python uses.
capi_missing=()
python3 -m venv --help >/dev/null 2>&1 || capi_missing+=(python3 python3-venv)
command -v rustc >/dev/null 2>&1 || capi_missing+=(rustc)
if [[ ${#capi_missing[@]} -gt 0 && -z "${OCLTK_SKIP_INSTALL:-}" ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${capi_missing[*]}" >&2
    echo "setup: run as root, or install them first: sudo apt-get install -y ${capi_missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${capi_missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${capi_missing[@]}" >/dev/null
fi
python_requirements=(numpy==2.4.6 pyopencl==2026.1.4 ml_dtypes==0.7.0 pytest==9.2.0)
python_venv=build/venv
if [[ -z "${OCLTK_SKIP_INSTALL:-}" ]]; then
  [[ -x $python_venv/bin/python ]] || python3 -m venv "$python_venv"
  "$python_venv/bin/python" -m pip install -q --disable-pip-version-check "${python_requirements[@]}"
fi
cmake_python=()
[[ -x $python_venv/bin/python ]] && cmake_python=(-DPython3_EXECUTABLE="$PWD/$python_venv/bin/python")
# ---- end of the C API's block ----

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cmake_python[@]}" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built ./build/ocltk"

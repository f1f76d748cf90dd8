#!/usr/bin/env bash
# Sets up a Debian 12 machine for ocltk and builds it: installs the Debian packages it
# needs (only those missing), configures and builds into ./build (Release), and configures
# ./build-sanitize (clang, AddressSanitizer + UBSan, the fuzz targets), which the test suite
# builds and runs from ./build's ctest (docs/robustness.md).
#   scripts/setup.sh                 install + build
#   OCLTK_SKIP_INSTALL=1 scripts/setup.sh   build only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  ocl-icd-opencl-dev opencl-c-headers ocl-icd-libopencl1 pocl-opencl-icd clinfo
  libclblast-dev libboost-dev libyaml-cpp-dev zlib1g-dev libbenchmark-dev libgtest-dev
  oclgrind clang libclang-rt-14-dev
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

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DOCLTK_SANITIZED_BUILD_DIR="$PWD/build-sanitize" >/dev/null
cmake --build build -j"$(nproc)"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DOCLTK_SANITIZE=ON >/dev/null
echo "setup: built ./build/ocltk; configured ./build-sanitize (built by the test suite)"

#!/usr/bin/env bash
# The H200 measurement as one command on the lent GPU machine (see results/README.md):
#   ../shared/gpu/stage.sh .gpu build/ocltk build/bench/ocltk_bench build/bench/ocltk_bench_nf4 \
#       ../shared/gpu/cublas_ref.py bench/run_h200.sh
#   (device tool, carry .gpu)  source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" tune-gemm
#                              source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" nf4
# (two calls, each inside the device tool's 10-minute limit; the second reads the
# profile the first wrote, from OUT/nvidia-h200.yaml or PROFILE=...).
# Tunes every kernel, benchmarks ours (defaults and tuned) beside CLBlast, and times
# cuBLAS on the same shapes in the same call. Everything lands in OUT/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_h200.sh OUT tune-gemm|nf4}
phase=${2:-tune-gemm}
mkdir -p "$out"
profile=${PROFILE:-$out/nvidia-h200.yaml}
ref="python3 $here/cublas_ref.py"
export OCLTK_CACHE_DIR=/tmp/ocltk-cache
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; "$here/ocltk" devices; } > "$out/device.txt" 2>&1
if [ "$phase" = tune-gemm ]; then
start=$(date +%s)
"$here/ocltk" tune --out "$profile" > "$out/tune.txt" 2> "$out/tune-progress.txt"
echo "tune exit $? wall $(( $(date +%s) - start )) s" >> "$out/tune.txt"
"$here/ocltk_bench" --ocltk_profile="$profile" --benchmark_repetitions=3 \
  --benchmark_out="$out/h200-gemm_nt.json" --benchmark_out_format=json > "$out/bench-gemm_nt.txt" 2>&1
$ref gemm --dtype f32 --shapes 1x4096x4096,16x4096x4096,4096x16x4096,4096x64x4096,4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
  --json "$out/cublas-gemm.json" > /dev/null
$ref gemm --dtype f32 --accumulate --shapes 4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
  --json "$out/cublas-gemm-accum.json" > /dev/null
fi
if [ "$phase" = nf4 ]; then
"$here/ocltk_bench_nf4" --ocltk_profile="$profile" \
  --benchmark_out="$out/h200-nf4.json" --benchmark_out_format=json > "$out/bench-nf4.txt" 2>&1
$ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-mixtral.json" > /dev/null
$ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-fine.json" > /dev/null
$ref copy > "$out/copy.json"
fi

#!/usr/bin/env bash
# The H200 measurements, one phase per device-tool call (each inside its 10-minute limit):
#   ../shared/gpu/stage.sh .gpu build/ocltk build/bench/ocltk_bench build/bench/ocltk_bench_nf4 \
#       ../shared/gpu/cublas_ref.py bench/run_h200.sh /usr/bin/clblast_tuner_xgemm
#   (device tool, carry .gpu)  source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" tune
#                              source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" clblast
#                              source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" record
# tune:    the whole default `ocltk tune` (timed), its report, then ocltk_bench (gemm_nt) and
#          ocltk_bench_nf4 with the profile it wrote, beside CLBlast, and cuBLAS on the same
#          shapes in the same call.
# clblast: CLBlast's own tuner (clblast_tuner_xgemm, 2048^3, all four stages, timed) and, in
#          the same call, `ocltk tune` of the large class plus a 2048^3 shape, then the bench.
# record:  an exhaustive --record of every kernel and class (the recorded spaces that
#          `tune --replay` and tests/test_tuner.cpp search offline).
# Everything lands in OUT/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_h200.sh OUT tune|clblast|record}
phase=${2:-tune}
mkdir -p "$out"
profile=${PROFILE:-$out/nvidia-h200.yaml}
ref="python3 $here/cublas_ref.py"
export OCLTK_CACHE_DIR=/tmp/ocltk-cache
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; "$here/ocltk" devices; } > "$out/device.txt" 2>&1
case "$phase" in
tune)
  start=$(date +%s.%N)
  "$here/ocltk" tune --out "$profile" --report "$out/report" --record "$out/tune-record.jsonl" \
    > "$out/tune.txt" 2> "$out/tune-progress.txt"
  echo "tune exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/tune.txt"
  "$here/ocltk_bench" --ocltk_profile="$profile" --benchmark_repetitions=3 \
    --benchmark_out="$out/h200-gemm_nt.json" --benchmark_out_format=json > "$out/bench-gemm_nt.txt" 2>&1
  $ref gemm --dtype f32 --shapes 1x4096x4096,16x4096x4096,4096x16x4096,4096x64x4096,4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm.json" > /dev/null
  $ref gemm --dtype f32 --accumulate --shapes 4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm-accum.json" > /dev/null
  "$here/ocltk_bench_nf4" --ocltk_profile="$profile" \
    --benchmark_out="$out/h200-nf4.json" --benchmark_out_format=json > "$out/bench-nf4.txt" 2>&1
  $ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-mixtral.json" > /dev/null
  $ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-fine.json" > /dev/null
  $ref copy > "$out/copy.json"
  ;;
clblast)
  start=$(date +%s.%N)
  "$here/clblast_tuner_xgemm" -m 2048 -n 2048 -k 2048 > "$out/clblast-tuner.txt" 2>&1
  echo "clblast_tuner_xgemm exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/clblast-tuner.txt"
  printf 'shapes:\n  - {kernel: gemm_nt, m: 2048, n: 2048, k: 2048}\n' > "$out/shapes-2048.yaml"
  start=$(date +%s.%N)
  "$here/ocltk" tune --kernels gemm_nt --classes large --shapes "$out/shapes-2048.yaml" --budget 120 --cold \
    --out "$out/large.yaml" --report "$out/report-large" > "$out/tune-large.txt" 2> "$out/tune-large-progress.txt"
  echo "tune exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/tune-large.txt"
  "$here/ocltk_bench" --ocltk_profile="$out/large.yaml" --benchmark_repetitions=3 --benchmark_filter='large' \
    --benchmark_out="$out/h200-gemm_nt-large.json" --benchmark_out_format=json > "$out/bench-large.txt" 2>&1
  $ref gemm --dtype f32 --shapes 2048x2048x2048,4096x4096x4096 --json "$out/cublas-large.json" > /dev/null
  ;;
record)
  start=$(date +%s.%N)
  "$here/ocltk" tune --strategy exhaustive --cold --repeats 2 --budget "${RECORD_BUDGET:-540}" --cache - \
    --record "$out/h200-space.jsonl" --out "$out/exhaustive.yaml" > "$out/record.txt" 2> "$out/record-progress.txt"
  echo "record exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/record.txt"
  ;;
*)
  echo "unknown phase $phase" >&2
  exit 2
  ;;
esac
# One archive: the device tool brings back only a few files per call.
tar czf "/tmp/h200-$phase.tgz" -C "$out" . && mv "/tmp/h200-$phase.tgz" "$out/"

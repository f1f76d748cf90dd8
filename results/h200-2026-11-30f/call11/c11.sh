#!/usr/bin/env bash
# Device call 11 of 2026-11-30f: the NF4 forward small_batch bench (fine-grained, 4096 rows)
# with the shipped profile (tiled) and with a candidate that takes the whole tune's tc entry
# for small_batch (call 10), f32 and bf16 input; cuBLAS on the same shape.
out=$1
export OCLTK_CACHE_DIR=/tmp/oc
f='nf4_forward/fine.*rows4096/small_batch/(ours|ours_bf16)/'
timeout 100 .gpu/ocltk_bench_nf4 --ocltk_profile=.gpu/nvidia-h200.yaml --ocltk_calls=10 --benchmark_filter="$f" > $out/bench-shipped.txt 2>&1
timeout 100 .gpu/ocltk_bench_nf4 --ocltk_profile=results/h200-2026-11-30f/call11/candidate.yaml --ocltk_calls=10 --benchmark_filter="$f" > $out/bench-candidate.txt 2>&1
timeout 40 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 4096 --json $out/cublas-fine.json > /dev/null 2>&1
grep -E "^nf4_forward" $out/bench-*.txt | sed 's/  */ /g' | cut -c1-330
grep -E "bf16_dequantized_ms" $out/cublas-fine.json

#!/usr/bin/env bash
# Device call 12 of 2026-11-30e: the NF4 forward bf16 decode bench with the shipped profile
# and with a candidate (the lab's faster bf16 points at Mixtral-like 8 and 64 rows), and
# fine-grained 512 rows, which call 11's bench did not reach; cuBLAS on the Mixtral shape.
out=$1
export OCLTK_CACHE_DIR=/tmp/oc
timeout 70 .gpu/ocltk_bench_nf4 --ocltk_profile=.gpu/candidate.yaml --ocltk_calls=20 \
  --benchmark_filter='nf4_forward/(mixtral.*rows(8|64)|fine.*rows512)/decode/(ours_bf16|ours)/' > $out/bench-candidate.txt 2>&1
timeout 50 .gpu/ocltk_bench_nf4 --ocltk_profile=.gpu/shipped.yaml --ocltk_calls=20 \
  --benchmark_filter='nf4_forward/mixtral.*rows(8|64)/decode/ours_bf16/' > $out/bench-shipped.txt 2>&1
timeout 40 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64 > $out/cublas-mixtral.json 2>&1
grep -E "^nf4_forward|copy_gbps:" $out/bench-*.txt | sed 's/  */ /g' | cut -c1-260
grep -E "rows|bf16_dequantized_ms" $out/cublas-mixtral.json

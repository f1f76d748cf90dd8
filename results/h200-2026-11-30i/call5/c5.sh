#!/usr/bin/env bash
# Call 5 of results/h200-2026-11-30i: test_nf4 on GPU 0; on GPU 1 the fine-grained decode
# bench at 512 rows (backward and bf16 forward) with the shipped profile, then bitsandbytes.
here=$(cd "$(dirname "$0")" && pwd); out=$1; mkdir -p "$out"
{ CUDA_VISIBLE_DEVICES=0 timeout 150 "$here/test_nf4" > "$out/test_nf4.txt" 2>&1; echo "test_nf4 exit $?" >> "$out/test_nf4.txt"; } &
CUDA_VISIBLE_DEVICES=1 timeout 300 "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
  --benchmark_filter='nf4_backward/fine.*rows512/decode/ours/|nf4_forward/fine.*rows512/decode/ours_bf16/' \
  --benchmark_out="$out/h200-nf4-fine512.json" --benchmark_out_format=json > "$out/bench-nf4-fine512.txt" 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 100 python3 "$here/bnb_ref.py" --experts 64 --out-features 1408 --in-features 2048 \
  --rows 512 --json "$out/bnb-nf4-fine512.json" > /dev/null 2> "$out/bnb-progress.txt"
wait
tar czf /tmp/c5.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/c5.tgz "$out/"

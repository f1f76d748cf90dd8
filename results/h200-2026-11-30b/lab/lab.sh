#!/usr/bin/env bash
# NF4 lanes NB/LUT experiment on the H200 (issue 3 decode figure).
here=$(cd "$(dirname "$0")" && pwd); out=$1; mkdir -p "$out"
export OCLTK_CACHE_DIR=/tmp/oc
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/device.txt"
f='nf4_forward/mixtral_8x14336x4096/rows(8|64)/decode/ours'
for v in v0 v1 v2 v3 v4 v5 v6 v7; do
  echo "== $v" >> "$out/lab.txt"; grep -A1 "algorithm: lanes" "$here/$v.yaml" | grep params >> "$out/lab.txt"
  timeout 60 "$here/ocltk_bench_nf4" --ocltk_profile="$here/$v.yaml" --benchmark_filter="$f" --ocltk_calls=20 >> "$out/lab.txt" 2>&1
  echo "+$SECONDS s" >> "$out/lab.txt"
done
timeout 60 "$here/ocltk_bench_nf4" --ocltk_profile="$here/v0.yaml" --benchmark_filter="$f" >> "$out/lab.txt" 2>&1
printf 'shapes:\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 8, block_size: 64}\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 64, block_size: 64}\n' > "$out/shapes.yaml"
cp "$here/v0.yaml" "$out/tuned.yaml"
timeout 200 "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes.yaml" --budget 150 \
  --out "$out/tuned.yaml" --record "$out/tune-record.jsonl" > "$out/tune.txt" 2> "$out/tune-progress.txt"
timeout 60 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned.yaml" --benchmark_filter="nf4_forward/.*/decode/ours" --ocltk_calls=20 > "$out/bench-tuned.txt" 2>&1
python3 "$here/cublas_ref.py" nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64 --json "$out/cublas-nf4.json" > "$out/cublas.txt" 2>&1
python3 "$here/cublas_ref.py" copy > "$out/copy.json" 2>&1
echo "done +$SECONDS s" >> "$out/device.txt"
tar czf /tmp/lab.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/lab.tgz "$out/"

#!/usr/bin/env bash
# Call 6 of results/h200-2026-11-30i: nf4_backward decode tuned at one row per expert with
# TR 1 in the space (its TR 1 variants seeded through OCLTK_PROFILE_PATH), one shape per
# H200, then the backward decode bench with each tuned profile.
here=$(cd "$(dirname "$0")" && pwd); out=$1; mkdir -p "$out"
one() {  # one GPU NAME E N K ROWS
  local gpu=$1 name=$2
  printf 'shapes:\n  - {kernel: nf4_backward, experts: %s, n: %s, k: %s, rows: %s, block_size: 64}\n' $3 $4 $5 $6 > "$out/shapes-$name.yaml"
  cp "$here/nvidia-h200.yaml" "$out/tuned-$name.yaml"
  CUDA_VISIBLE_DEVICES=$gpu OCLTK_PROFILE_PATH="$here/seed" OCLTK_CACHE_DIR=/tmp/oc$gpu timeout 120 "$here/ocltk" tune \
    --kernels nf4_backward --classes decode --shapes "$out/shapes-$name.yaml" --budget 75 --out "$out/tuned-$name.yaml" \
    --record "$out/tune-$name.jsonl" > "$out/tune-$name.txt" 2>/dev/null
  echo "tune $name exit $? at +$SECONDS s" >> "$out/device.txt"
  CUDA_VISIBLE_DEVICES=$gpu OCLTK_CACHE_DIR=/tmp/oc$gpu timeout 100 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned-$name.yaml" \
    --ocltk_calls=20 --benchmark_filter="nf4_backward/$7.*rows$6/decode/ours/" > "$out/bench-$name.txt" 2>&1
  echo "bench $name exit $? at +$SECONDS s" >> "$out/device.txt"
}
one 0 mixtral 8 14336 4096 8 mixtral &
one 1 fine 64 1408 2048 64 fine
wait
tar czf /tmp/c6.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/c6.tgz "$out/"

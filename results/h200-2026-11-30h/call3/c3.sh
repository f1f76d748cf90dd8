#!/usr/bin/env bash
# Device call 3 of 2026-11-30h (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30h/call3/c3.sh $OUT
# .gpu holds this checkout's ocltk_bench_nf4 and cublas_ref.py.
# GPU 0: the bench with candidate-ks2.yaml (the f32 entries to ship: tc at KS 2 for decode at
#        8 rows per expert and small_batch, tc for prefill) on every f32 row of both shapes
#        from 64 (Mixtral-like) / 512 (fine-grained), and the bf16 decode rows.
# GPU 1: candidate-w64.yaml (decode at WGS 64, KS 1, PF 0) on the two f32 decode rows; cuBLAS.
out=${1:?OUT}
here=results/h200-2026-11-30h/call3
s=$(date +%s)
mark() { echo "$1 at +$(( $(date +%s) - s )) s" >> $out/marks.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $out/device.txt
bench() {  # bench GPU PROFILE NAME FILTER
  CUDA_VISIBLE_DEVICES=$1 OCLTK_CACHE_DIR=/tmp/oc$1-$3 CUDA_CACHE_PATH=/tmp/nv$1 timeout 300 .gpu/ocltk_bench_nf4 \
    --ocltk_profile=$2 --ocltk_calls=20 --benchmark_filter="$4" \
    --benchmark_out=$out/$3.json --benchmark_out_format=json > $out/$3.txt 2>&1
  echo "exit $?" >> $out/$3.txt
  mark "$3"
}
rows='nf4_forward/(mixtral.*rows(64|512|4096)/[a-z_]*/ours|fine.*rows(512|4096|32768)/[a-z_]*/ours|mixtral.*rows(8|64)/decode/ours_bf16|fine.*rows(64|512)/decode/ours_bf16)/'
bench 0 $here/candidate-ks2.yaml g0-ks2 "$rows" &
side0=$!
bench 1 $here/candidate-w64.yaml g1-w64 'nf4_forward/(mixtral.*rows64/decode/ours|fine.*rows512/decode/ours)/'
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64,512,4096 --json $out/cublas-mixtral.json > /dev/null 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 64,512,4096,32768 --json $out/cublas-fine.json > /dev/null 2>&1
mark cublas
wait $side0
mark all
cd $out && for f in g*.txt; do echo "== $f"; grep -E "^nf4_forward|exit|copy" $f | sed 's/  */ /g' | cut -c1-170; done
cat marks.txt

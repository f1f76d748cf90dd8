#!/usr/bin/env bash
# Device call 1 of 2026-11-30g (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30g/call1/c1.sh $OUT
# .gpu holds this checkout's ocltk_bench_nf4, test_nf4 and lab, and old_bench_nf4 (78a6bdd's
# ocltk_bench_nf4: the kernel before TC_ADDR / TC_FMA).
# GPU 0: test_nf4; the lab (TC_PRMT: which products decode rows g by permutes, bf16 x);
#        the old and the new binary with the shipped profile on the tc rows.
# GPU 1: the new binary with the shipped profile and candidates A and B on the rows their
#        entries change; cuBLAS on both shapes.
out=${1:?OUT}
here=results/h200-2026-11-30g/call1
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
s=$(date +%s)
mark() { echo "$1 at +$(( $(date +%s) - s )) s" >> $out/marks.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $out/device.txt
bench() {  # bench GPU BINARY PROFILE NAME FILTER
  CUDA_VISIBLE_DEVICES=$1 OCLTK_CACHE_DIR=/tmp/oc$1-$4 CUDA_CACHE_PATH=/tmp/nv$1 timeout 200 $2 \
    --ocltk_profile=$3 --ocltk_calls=20 --benchmark_filter="$5" \
    --benchmark_out=$out/$4.json --benchmark_out_format=json > $out/$4.txt 2>&1
  echo "exit $?" >> $out/$4.txt
  mark "$4"
}
tcrows='nf4_forward/(mixtral.*rows(8|64)/decode/(ours|ours_bf16)|fine.*rows(64|512)/decode/ours_bf16)/'
(
  CUDA_VISIBLE_DEVICES=0 OCLTK_CACHE_DIR=/tmp/oc0t timeout 150 .gpu/test_nf4 > $out/test_nf4.txt 2>&1
  echo "exit $?" >> $out/test_nf4.txt; mark test_nf4
  mkdir -p $out/lab
  for r in "1 mixtral1" "8 mixtral8" "1 fine1 1408 64 2048" "8 fine8 1408 64 2048"; do
    set -- $r; rpe=$1 name=$2; shift 2
    CUDA_VISIBLE_DEVICES=0 LAB_TYPE=2 timeout 120 .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $here/lab_bf16.txt "$@" > $out/lab/$name.txt 2>&1
  done
  mark lab
  bench 0 .gpu/old_bench_nf4 .gpu/nvidia-h200.yaml g0-old-shipped "$tcrows"
  bench 0 .gpu/ocltk_bench_nf4 .gpu/nvidia-h200.yaml g0-new-shipped "$tcrows"
) &
side0=$!
ch='nf4_forward/(mixtral.*rows(8|64)/decode/ours_bf16|fine.*rows8/decode/ours_bf16|mixtral.*rows512/small_batch/ours_bf16|fine.*rows4096/small_batch/ours_bf16|mixtral.*rows4096/prefill/(ours|ours_bf16)|fine.*rows32768/prefill/(ours|ours_bf16))/'
bench 1 .gpu/ocltk_bench_nf4 .gpu/nvidia-h200.yaml g1-new-shipped "$ch"
bench 1 .gpu/ocltk_bench_nf4 $here/candidate-a.yaml g1-new-a 'nf4_forward/(mixtral.*rows(8|64)/decode/ours_bf16|fine.*rows8/decode/ours_bf16|mixtral.*rows4096/prefill/ours_bf16|fine.*rows32768/prefill/ours_bf16)/'
bench 1 .gpu/ocltk_bench_nf4 $here/candidate-b.yaml g1-new-b 'nf4_forward/(fine.*rows8/decode/ours_bf16|mixtral.*rows512/small_batch/ours_bf16|fine.*rows4096/small_batch/ours_bf16|mixtral.*rows4096/prefill/(ours|ours_bf16)|fine.*rows32768/prefill/(ours|ours_bf16))/'
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096 --json $out/cublas-mixtral.json > /dev/null 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 8,64,512,4096,32768 --json $out/cublas-fine.json > /dev/null 2>&1
mark cublas
wait $side0
mark all
cd $out && for f in g*.txt; do echo "== $f"; grep -E "^nf4_forward|exit" $f | sed 's/  */ /g' | cut -c1-150; done
tail -3 test_nf4.txt
for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-120; done
cat marks.txt

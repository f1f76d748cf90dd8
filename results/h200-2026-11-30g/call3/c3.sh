#!/usr/bin/env bash
# Device call 3 of 2026-11-30g (kind nvidia-h200), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30g/call3/c3.sh $OUT
# Lab: L2 prefetch of the codes in tc (TC_L2PF=1: code loads with .L2::256B; TC_L2PF=2:
# prefetch.global.L2 of each row's line TC_L2D groups past the register loads), bf16 x at
# both shapes, 1 and 8 rows per expert, and f32 x at Mixtral-like 8 rows per expert; then
# the bench of the Mixtral-like rows 1 with the shipped profile (its new bf16 lanes entry).
# Everything is packed into OUT/call3.tgz.
out=${1:?OUT}
here=results/h200-2026-11-30g/call3
w=/tmp/call3; rm -rf $w; mkdir -p $w/lab
for r in "2 1 mixtral1" "2 8 mixtral8" "2 1 fine1 1408 64 2048" "2 8 fine8 1408 64 2048" "0 8 f32_mixtral8"; do
  set -- $r; t=$1 rpe=$2 name=$3; shift 3
  v=$here/lab_bf16.txt; [ $t = 0 ] && v=$here/lab_f32.txt
  LAB_TYPE=$t timeout 100 .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $v "$@" > $w/lab/$name.txt 2>&1
done
OCLTK_CACHE_DIR=/tmp/oc3 timeout 150 .gpu/ocltk_bench_nf4 --ocltk_profile=.gpu/nvidia-h200.yaml --ocltk_calls=20 \
  --benchmark_filter='nf4_forward/mixtral.*rows(1|8)/decode/(ours|ours_bf16)/' \
  --benchmark_out=$w/bench-rows1.json --benchmark_out_format=json > $w/bench-rows1.txt 2>&1
tar czf $out/call3.tgz -C $w .
cd $w && grep -E "^nf4_forward" bench-rows1.txt | sed 's/  */ /g' | cut -c1-130
for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-110; done

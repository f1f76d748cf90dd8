#!/usr/bin/env bash
# Device call 2 of 2026-11-30g (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30g/call2/c2.sh $OUT
# The shipped figures: bench/run_h200.sh nf4-forward-all (the NF4 forward bench with the
# shipped profile at every row count beside dequantize + CLBlast and cuBLAS, test_nf4),
# then the lab on one H200: half-type tc points (bf16 x) at both shapes, 1 and 8 rows per
# expert, and which of TC_ADDR / TC_FMA slows f32 x at RT 2. Everything is packed into
# OUT/call2.tgz (the device tool brings back few files).
out=${1:?OUT}
here=results/h200-2026-11-30g/call2
w=/tmp/call2; rm -rf $w; mkdir -p $w/lab
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
bash .gpu/run_h200.sh $w nf4-forward-all
for r in "2 1 mixtral1" "2 8 mixtral8" "2 1 fine1 1408 64 2048" "2 8 fine8 1408 64 2048" "0 8 f32_mixtral8"; do
  set -- $r; t=$1 rpe=$2 name=$3; shift 3
  v=$here/lab_bf16.txt; [ $t = 0 ] && v=$here/lab_f32.txt
  CUDA_VISIBLE_DEVICES=0 LAB_TYPE=$t timeout 100 .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $v "$@" > $w/lab/$name.txt 2>&1
done
echo "lab done at $(date)" >> $w/device.txt
tar czf $out/call2.tgz -C $w .
cd $w && for f in bench-nf4-forward-*.txt; do echo "== $f"; grep -E "^nf4_forward" $f | sed 's/  */ /g' | cut -c1-130; done
tail -2 test_nf4.txt; cat device.txt | grep " at "
for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-110; done

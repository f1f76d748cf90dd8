#!/usr/bin/env bash
# Device call 4 of 2026-11-30h (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30h/call4/c4.sh $OUT
# .gpu holds the lab (h200-2026-11-30e/lab/lab.cpp + ../lab/lab_lut_grid.patch). The tree's
# kernels/nf4_forward_tc.cl had tc_f32_sums.patch applied (the switch, default 4; reverted after).
# The lab with f32 x: TC_F32_SUMS 1, 2, 4 (independent C fragments of the f32 step's four
# mma) at the shipped f32 points; GPU 0: Mixtral-like at 8 and 64 rows per expert; GPU 1:
# fine-grained at 8 and 64.
out=${1:?OUT}
here=results/h200-2026-11-30h/call4
mkdir -p $out/lab
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $out/device.txt
lab() {  # lab GPU NAME RPE [N E K]
  local gpu=$1 name=$2 rpe=$3
  shift 3
  CUDA_VISIBLE_DEVICES=$gpu LAB_TYPE=0 timeout 200 .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $here/lab_sums.txt "$@" > $out/lab/$name.txt 2>&1
  echo "exit $?" >> $out/lab/$name.txt
}
( lab 0 mixtral8 8; lab 0 mixtral64 64 ) &
lab 1 fine8 8 1408 64 2048
lab 1 fine64 64 1408 64 2048
wait
cd $out && for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ bytes smem//; s/registers/regs/' | cut -c1-120; done

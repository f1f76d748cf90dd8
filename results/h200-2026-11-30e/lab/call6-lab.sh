#!/usr/bin/env bash
# Lab, device call 6 of 2026-11-30e (not a benchmark): nf4_forward_tc.cl built with
# TC_READONLY (its loads of codes, scales and x alone, never decoded) beside one full point,
# bf16 x: does the access pattern itself reach the floor? Usage: call6-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c6_bf16.txt
run 2 8 bf16_rows8 $lab/c6_bf16.txt
run 2 1 bf16_fine1 $lab/c6_bf16.txt 1408 64 2048
run 2 8 bf16_fine8 $lab/c6_bf16.txt 1408 64 2048
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/err.absdot [0-9.e+-]* //; s/  */ /g' $f | cut -c1-90; done

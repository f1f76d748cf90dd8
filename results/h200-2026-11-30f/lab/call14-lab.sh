#!/usr/bin/env bash
# Lab, device call 14 of 2026-11-30f (not a benchmark): fewer integer-pipe instructions in
# tc: whole groups address their codes and x by constant offsets (TC_ADDR=1), shifts as
# multiplies on the FMA pipe (TC_FMA=1: the table offsets and the upper selector); bf16 x,
# both shapes, 1 and 8 rows per expert. (It ran kernels/nf4_forward_tc.cl with the switches
# in place; they are kept as tc_lab14.patch, and make_lab_kernels.sh writes tc_lab14.cl.)
# Usage: call9-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work
run() {  # run ROWS_PER_EXPERT NAME [N E K]
  local rpe=$1 name=$2; shift 2
  LAB_TYPE=2 .gpu/lab $lab/tc_lab14.cl kernels $rpe $lab/c14_bf16.txt "$@" > $work/$name.txt 2>&1
}
run 1 bf16_rows1
run 8 bf16_rows8
run 1 bf16_fine1 1408 64 2048
run 8 bf16_fine8 1408 64 2048
for f in $work/*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/ptxas *\.//' | cut -c1-118; done

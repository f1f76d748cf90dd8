#!/usr/bin/env bash
# Lab, device call 6 of 2026-11-30f (not a benchmark): whole iterations of TC_SLOTS groups
# without tests between them (TC_FULLITER, loads ahead clamped to the last group) against
# whole groups only; WGS 64; bf16 x at both shapes, f32 x at Mixtral-like 8 rows per expert.
# Usage: call6-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c6_bf16.txt
run 2 8 bf16_rows8 $lab/c6_bf16.txt
run 2 1 bf16_fine1 $lab/c6_bf16.txt 1408 64 2048
run 2 8 bf16_fine8 $lab/c6_bf16.txt 1408 64 2048
run 0 8 f32_rows8 $lab/c6_f32.txt
for f in $work/*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/ptxas *\.//' | cut -c1-118; done

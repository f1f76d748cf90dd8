#!/usr/bin/env bash
# Lab, device call 5 of 2026-11-30e (not a benchmark): nf4_forward_tc.cl, bf16 x, with the
# W loads' cache hints (TC_L2HINT 0: plain, 1: nc.L2::256B, 2: cg, 3: nc.L1::no_allocate
# .L2::256B) and x loaded ahead with the codes or per step (TC_XPF). Usage: call5-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c5_bf16.txt
run 2 8 bf16_rows8 $lab/c5_bf16.txt
run 2 1 bf16_fine1 $lab/c5_bf16.txt 1408 64 2048
run 2 8 bf16_fine8 $lab/c5_bf16.txt 1408 64 2048
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/err.absdot [0-9.e+-]* //; s/  */ /g' $f | cut -c1-90; done

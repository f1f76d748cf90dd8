#!/usr/bin/env bash
# Lab, device call 9 of 2026-11-30e (not a benchmark): nf4_forward_tc.cl loading codes in
# groups of 4 steps (128 contiguous bytes of each row over its 4 lanes; scales fetched once
# per group and shared by shuffles), PF groups ahead, x a step ahead, with and without the L2 hint,
# x in bf16 and f32;
# then test_nf4 on the H200. Usage: call9-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c9_bf16.txt
run 2 8 bf16_rows8 $lab/c9_bf16.txt
run 2 1 bf16_fine1 $lab/c9_bf16.txt 1408 64 2048
run 2 8 bf16_fine8 $lab/c9_bf16.txt 1408 64 2048
run 0 1 f32_rows1 $lab/c9_f32.txt
run 0 8 f32_rows8 $lab/c9_f32.txt
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
timeout 200 .gpu/test_nf4 > $work/test_nf4.txt 2>&1; echo "test_nf4 exit $?" >> $work/test_nf4.txt
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' $f | cut -c1-140; done
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED \]" $work/test_nf4.txt | tail -30; tail -2 $work/test_nf4.txt; grep -A8 "Failure" $work/test_nf4.txt | head -30

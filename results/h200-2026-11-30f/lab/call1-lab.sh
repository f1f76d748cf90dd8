#!/usr/bin/env bash
# Lab, device call 1 of 2026-11-30f (not a benchmark): nf4_forward_tc.cl with its A
# registers from the pair table (DEC 0), half from byte permutes (DEC 1) or all (DEC 2), the
# first groups' loads hoisted above the segment and table setup (TC_HOIST, default on; one
# variant without), register caps; bf16 x (f16 for three); then test_nf4 on the H200.
# Usage: call1-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c1_bf16.txt
run 2 8 bf16_rows8 $lab/c1_bf16.txt
run 2 1 bf16_fine1 $lab/c1_bf16.txt 1408 64 2048
run 1 1 f16_rows1 $lab/c1_f16.txt
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
timeout 240 .gpu/test_nf4 > $work/test_nf4.txt 2>&1; echo "test_nf4 exit $?" >> $work/test_nf4.txt
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' $f | cut -c1-150; done
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED \]" $work/test_nf4.txt | tail -30; tail -2 $work/test_nf4.txt; grep -A8 "Failure" $work/test_nf4.txt | head -30

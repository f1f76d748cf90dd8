#!/usr/bin/env bash
# Lab, device call 3 of 2026-11-30e (not a benchmark): nf4_forward_tc.cl built per element
# type (NF4_TYPE, as the runtime now builds it), with PF steps of codes loaded ahead (x per
# step from L1), with and without the L2 hint on the W loads (TC_L2HINT), x in bf16 and f32;
# then test_nf4 on the H200. Usage: call4-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local ty=$1 rpe=$2 name=$3 list=$4; shift 4
  LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1 $lab/c4_bf16.txt
run 2 8 bf16_rows8 $lab/c4_bf16.txt
run 2 1 bf16_fine1 $lab/c4_bf16.txt 1408 64 2048
run 2 8 bf16_fine8 $lab/c4_bf16.txt 1408 64 2048
run 0 1 f32_rows1 $lab/c4_f32.txt
run 0 8 f32_rows8 $lab/c4_f32.txt
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
timeout 200 .gpu/test_nf4 > $work/test_nf4.txt 2>&1; echo "test_nf4 exit $?" >> $work/test_nf4.txt
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' $f | cut -c1-140; done
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED \]" $work/test_nf4.txt | tail -30; tail -2 $work/test_nf4.txt; grep -A8 "Failure" $work/test_nf4.txt | head -30

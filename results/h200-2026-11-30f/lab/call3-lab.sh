#!/usr/bin/env bash
# Lab, device call 3 of 2026-11-30f (not a benchmark): nf4_forward_tc.cl with whole groups
# of 4 steps run without a test between steps (so lookups overlap the previous step's
# products), DEC 0/1/2, against this session's start (tc_head.cl) in the same call; bf16 x,
# Mixtral-like 1 and 8 rows per expert, fine-grained 1 row; test_nf4; one ncu try.
# Usage: call3-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run KERNEL TYPE ROWS_PER_EXPERT NAME LIST [N E K]
  local k=$1 ty=$2 rpe=$3 name=$4 list=$5; shift 5
  LAB_TYPE=$ty .gpu/lab $k kernels $rpe $list "$@" > $work/$name.txt 2>&1
}
run $lab/tc_head.cl 2 1 head_rows1 $lab/c3_head.txt
run kernels/nf4_forward_tc.cl 2 1 bf16_rows1 $lab/c3_bf16.txt
run $lab/tc_head.cl 2 8 head_rows8 $lab/c3_head.txt
run kernels/nf4_forward_tc.cl 2 8 bf16_rows8 $lab/c3_bf16.txt
run kernels/nf4_forward_tc.cl 2 1 bf16_fine1 $lab/c3_bf16.txt 1408 64 2048
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
timeout 200 .gpu/test_nf4 > $work/test_nf4.txt 2>&1; echo "test_nf4 exit $?" >> $work/test_nf4.txt
LAB_TYPE=2 timeout 90 ncu --launch-skip 3 --launch-count 1 --section WarpStateStats --section SchedulerStats --section Occupancy --section MemoryWorkloadAnalysis .gpu/lab kernels/nf4_forward_tc.cl kernels 1 $lab/c3_ncu.txt > $work/ncu.txt 2>&1; echo "ncu exit $?" >> $work/ncu.txt
tar czf $out/lab.tgz -C $work .
for f in $work/*rows*.txt $work/*fine*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-150; done
grep -E "^\[  (PASSED|FAILED)|FAILED \]" $work/test_nf4.txt | tail -10; tail -1 $work/test_nf4.txt
grep -v "^==PROF==" $work/ncu.txt | grep -E "Stall|stall|Issue|Eligible|Active Warps|Occupancy|Throughput|ncu exit|Warp Cycles|rror" | head -40

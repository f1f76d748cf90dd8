#!/usr/bin/env bash
# Lab, device call 2 of 2026-11-30f (not a benchmark): tc_lab.cl (a copy of
# nf4_forward_tc.cl with switches that each remove one part: x loads, mma, scale shuffles,
# table lookups; or split the mma chain in two) at Mixtral-like 1 row per expert, bf16 x;
# teams splitting K, a register cap; the plain read kernel of the same pattern beside.
# Usage: call2-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
which ncu nsys nvcc > $work/tools.txt 2>&1; ls /usr/local/cuda*/bin >> $work/tools.txt 2>&1
LAB_TYPE=2 .gpu/lab $lab/tc_lab.cl kernels 1 $lab/c2_bf16.txt > $work/bf16_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab results/h200-2026-11-30e/lab/read_tc_lab.cl kernels 1 $lab/c2_ro.txt > $work/ro_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab $lab/tc_lab.cl kernels 8 $lab/c2_bf16.txt > $work/bf16_rows8.txt 2>&1
tar czf $out/lab.tgz -C $work .
cat $work/tools.txt | head -5
for f in $work/*rows*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-150; done

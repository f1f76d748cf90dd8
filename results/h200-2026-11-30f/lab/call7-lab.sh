#!/usr/bin/env bash
# Lab, device call 7 of 2026-11-30f (not a benchmark): is the read pattern fast at tc's
# occupancy? read_pad_lab.cl (the plain read kernel with local memory padding that holds it
# to 8, 16 or 32 warps an SM) at D groups in flight; and tc's compute alone (tc_lab7.cl,
# LAB_NOLOAD: codes and scales made up, not loaded). Mixtral-like shape, bf16 x.
# Usage: call7-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work
LAB_TYPE=2 .gpu/lab $lab/read_pad_lab.cl kernels 1 $lab/c7_pad.txt > $work/pad_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab $lab/tc_lab7.cl kernels 1 $lab/c7_tc.txt > $work/tc_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab $lab/tc_lab7.cl kernels 8 $lab/c7_tc.txt > $work/tc_rows8.txt 2>&1
for f in $work/*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/ptxas *\.//' | cut -c1-130; done

#!/usr/bin/env bash
# Lab, device call 8 of 2026-11-30f (not a benchmark): tc's compute alone, part by part
# (tc_lab7.cl: no loads; then no x; no scale shuffles; no mma), Mixtral-like 1 row per
# expert, bf16 x; the PTX NVIDIA's compiler made of each variant is kept (ptx/).
# Usage: call8-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work/ptx
LAB_PTX_DIR=$work/ptx LAB_TYPE=2 .gpu/lab $lab/tc_lab7.cl kernels 1 $lab/c8_tc.txt > $work/tc_rows1.txt 2>&1
for f in $work/*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/ptxas *\.//' | cut -c1-130; done
ls -la $work/ptx | head

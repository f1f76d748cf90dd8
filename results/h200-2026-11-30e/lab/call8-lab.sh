#!/usr/bin/env bash
# Lab, device call 8 of 2026-11-30e (not a benchmark): nf4_forward_tc.cl built read-only
# (TC_READONLY) and whole, each without one of: the scale loads (TC_NO_SCALES), the pair
# table's fill (TC_NO_FILL, so its products are wrong), the x loads (TC_NO_X): which costs
# the read pattern its bandwidth? bf16 x.
# Usage: call8-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
LAB_TYPE=2 .gpu/lab kernels/nf4_forward_tc.cl kernels 1 $lab/c8.txt > $work/ro_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab kernels/nf4_forward_tc.cl kernels 1 $lab/c8.txt 1408 64 2048 > $work/ro_fine1.txt 2>&1
tar czf $out/lab.tgz -C $work .
for f in $work/*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 0 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/err.absdot [0-9.e+-]* //; s/  */ /g' $f | cut -c1-90; done

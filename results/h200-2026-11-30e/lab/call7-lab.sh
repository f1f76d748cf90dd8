#!/usr/bin/env bash
# Lab, device call 7 of 2026-11-30e (not a benchmark): read_tc_lab.cl, the W reads of
# nf4_forward_tc alone in its grid: the kernel's pattern (8 rows × 32 bytes an instruction)
# against a coalesced one (4 rows × 128 bytes), with D groups of 4 steps in flight.
# Usage: call7-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
LAB_TYPE=2 .gpu/lab $lab/read_tc_lab.cl kernels 1 $lab/c7_ro.txt > $work/ro_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab $lab/read_tc_lab.cl kernels 1 $lab/c7_ro.txt 1408 64 2048 > $work/ro_fine1.txt 2>&1
tar czf $out/lab.tgz -C $work .
for f in $work/*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 0 barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/err.absdot [0-9.e+-]* //; s/  */ /g' $f | cut -c1-90; done

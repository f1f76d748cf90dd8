#!/usr/bin/env bash
# Lab, device call 3 (not a benchmark): kernels/nf4_forward_lanes.cl with the pair table (LUT=2)
# under register limits (-cl-nv-maxrregcount), at 1 row per expert (Mixtral-like and
# fine-grained) and 8 rows per expert. Usage: call3-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30d/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work/ptx
.gpu/lab kernels/nf4_forward_lanes.cl kernels 1 $lab/c3_rows1.txt > $work/rows1.txt 2>&1
.gpu/lab kernels/nf4_forward_lanes.cl kernels 1 $lab/c3_fine.txt 1408 64 2048 > $work/fine1.txt 2>&1
.gpu/lab kernels/nf4_forward_lanes.cl kernels 8 $lab/c3_rows8.txt > $work/rows8.txt 2>&1
tar czf $out/lab.tgz -C $work .
cat $work/rows1.txt $work/fine1.txt $work/rows8.txt

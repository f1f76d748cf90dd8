#!/usr/bin/env bash
# Lab, device call 4 (not a benchmark): the shipped pair-table lanes kernel (kernels/
# nf4_forward_lanes.cl, as measured in call 2) against the same with lanes_fullbatch.diff
# applied (whole-batch loads by pointer increments, no branch per row), at 1 row per expert
# (Mixtral-like and fine-grained) and 8 rows per expert. Output files name the shipped one
# "shipped" and the other "fullbatch". Usage: call4-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30d/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
mkdir -p /tmp/lab-kernels
cp kernels/nf4_forward_lanes.cl /tmp/lab-kernels/shipped.cl
patch -s -o /tmp/lab-kernels/fullbatch.cl kernels/nf4_forward_lanes.cl $lab/lanes_fullbatch.diff
for k in /tmp/lab-kernels/shipped.cl /tmp/lab-kernels/fullbatch.cl; do
  n=$(basename $k .cl)
  .gpu/lab $k kernels 1 $lab/c4_rows1.txt > $work/rows1-$n.txt 2>&1
  .gpu/lab $k kernels 1 $lab/c4_rows1.txt 1408 64 2048 > $work/fine1-$n.txt 2>&1
  .gpu/lab $k kernels 8 $lab/c4_rows8.txt > $work/rows8-$n.txt 2>&1
done
tar czf $out/lab.tgz -C $work .
for f in $work/*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //' $f; done

#!/usr/bin/env bash
# Lab, device call 6 (not a benchmark): kernels/nf4_forward_warps.cl (warp shuffles: the lab passes
# -DOCLTK_PTX=1 itself, as the runtime does on NVIDIA) against the shipped lanes point, at 1
# row per expert (Mixtral-like and fine-grained) and 8 rows per expert; then test_nf4 on the
# H200 (stage build/tests/test_nf4 as .gpu/test_nf4; needs the checkout at /work/main).
# Usage: call6-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30d/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run ROWS_PER_EXPERT LIST NAME [N E K]: its lanes lines on the lanes kernel, warps lines on warps
  local rpe=$1 list=$2 name=$3; shift 3
  grep '^lanes' $list > /tmp/l.txt; grep '^warps' $list > /tmp/w.txt
  { .gpu/lab kernels/nf4_forward_lanes.cl kernels $rpe /tmp/l.txt "$@"; .gpu/lab kernels/nf4_forward_warps.cl kernels $rpe /tmp/w.txt "$@" | tail -n +2; } > $work/$name.txt 2>&1
}
run 1 $lab/c6_rows1.txt rows1
run 1 $lab/c6_rows1.txt fine1 1408 64 2048
run 8 $lab/c6_rows8.txt rows8
timeout 120 .gpu/test_nf4 > $work/test_nf4.txt 2>&1; echo "test_nf4 exit $?" >> $work/test_nf4.txt
tar czf $out/lab.tgz -C $work .
for f in $work/rows1.txt $work/fine1.txt $work/rows8.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//' $f; done
tail -3 $work/test_nf4.txt; grep -B2 -A8 "Failure" $work/test_nf4.txt | head -40

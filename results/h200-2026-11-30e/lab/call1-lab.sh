#!/usr/bin/env bash
# Lab, device call 1 of 2026-11-30e (not a benchmark): kernels/nf4_forward_tc.cl (mma.sync
# through inline PTX; the lab passes -DOCLTK_PTX=1 as the runtime does on NVIDIA) with x in
# bf16 (LAB_TYPE=2) and f32 (LAB_TYPE=0), beside the shipped lanes pair-table point, at 1 and
# 8 rows per expert, Mixtral-like and fine-grained; cuBLAS in the same call.
# Usage: call1-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30e/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work
run() {  # run TYPE ROWS_PER_EXPERT NAME [N E K]
  local ty=$1 rpe=$2 name=$3; shift 3
  { LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_lanes.cl kernels $rpe $lab/c1_base.txt "$@";
    LAB_TYPE=$ty .gpu/lab kernels/nf4_forward_tc.cl kernels $rpe $lab/c1_tc.txt "$@" | tail -n +2; } > $work/$name.txt 2>&1
}
run 2 1 bf16_rows1
run 2 8 bf16_rows8
run 2 1 bf16_fine1 1408 64 2048
run 2 8 bf16_fine8 1408 64 2048
run 0 1 f32_rows1
run 0 8 f32_rows8
run 0 1 f32_fine1 1408 64 2048
{ python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64; python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 64,512; python3 .gpu/cublas_ref.py copy; } > $work/cublas.txt 2>&1
tar czf $out/lab.tgz -C $work .
for f in $work/*.txt; do echo "== $(basename $f)"; sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used 1 barriers, //; s/ min [0-9.]*//; s/ *WRONG//' $f | cut -c1-150; done

#!/usr/bin/env bash
# Device call 4 of 2026-11-30f: the lab's x two steps ahead (TC_XA=2) and L1-bypassing code
# loads (TC_NOALLOC) on the DEC 1 point; then the NF4 forward decode bench with the candidate
# profile (shipped + DEC 1 for bf16 at Mixtral-like 8 and 64 rows) and cuBLAS on both shapes.
# Usage: c4.sh OUT
out=$1
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work
LAB_TYPE=2 .gpu/lab kernels/nf4_forward_tc.cl kernels 1 $lab/c4_bf16.txt > $work/bf16_rows1.txt 2>&1
LAB_TYPE=2 .gpu/lab kernels/nf4_forward_tc.cl kernels 8 $lab/c4_bf16.txt > $work/bf16_rows8.txt 2>&1
LAB_TYPE=2 .gpu/lab kernels/nf4_forward_tc.cl kernels 1 $lab/c4_bf16.txt 1408 64 2048 > $work/bf16_fine1.txt 2>&1
export OCLTK_CACHE_DIR=/tmp/oc
timeout 260 .gpu/ocltk_bench_nf4 --ocltk_profile=results/h200-2026-11-30f/call4/candidate.yaml --ocltk_calls=20 \
  --benchmark_filter='nf4_forward/(mixtral.*rows(8|64)|fine.*rows(64|512))/decode/(ours_bf16|ours)/' > $out/bench-candidate.txt 2>&1
timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64 > $out/cublas-mixtral.json 2>&1
timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 64,512 > $out/cublas-fine.json 2>&1
for f in $work/*.txt; do echo "== $(basename $f)"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ *WRONG//; s/ bytes smem//; s/registers/regs/' | cut -c1-130; done
grep -E "^nf4_forward|copy_gbps:|ERROR|error" $out/bench-*.txt | sed 's/  */ /g' | cut -c1-300
grep -E "rows|bf16_dequantized_ms" $out/cublas-*.json

#!/usr/bin/env bash
# Lab, device call 13 of 2026-11-30f (not a benchmark): throughput of single instruction
# kinds, two interleaved (pipes_lab.cl: imad + lop3, prmt + imad, lop3 + ffma, prmt + ffma;
# prmt, imad, ffma alone again), 7168 workgroups of 128 work-items, each 256 rounds of 8
# independent chains. Usage: call13-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30f/lab
work=$out/lab; mkdir -p $work
LAB_TYPE=0 .gpu/lab $lab/pipes_lab.cl kernels 1 $lab/c13_pipes.txt > $work/pipes.txt 2>&1
grep -v "warning generated" $work/pipes.txt | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ *WRONG//; s/ bytes smem//; s/registers/regs/; s/err.absdot [0-9.e+-]* //' | cut -c1-120

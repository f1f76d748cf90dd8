#!/usr/bin/env bash
# Lab, device call 2 (not a benchmark): kernels/nf4_forward_lanes.cl with the pair table (LUT=2)
# against LUT=1 at 1 row per expert (Mixtral-like and fine-grained) and 8 rows per expert,
# with the registers and SASS of the variants. Usage: call2-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30d/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work/ptx
export LAB_PTX_DIR=$work/ptx
.gpu/lab kernels/nf4_forward_lanes.cl kernels 1 $lab/c2_rows1.txt > $work/rows1.txt 2>&1
.gpu/lab kernels/nf4_forward_lanes.cl kernels 1 $lab/c2_fine.txt 1408 64 2048 > $work/fine1.txt 2>&1
.gpu/lab kernels/nf4_forward_lanes.cl kernels 8 $lab/c2_rows8.txt > $work/rows8.txt 2>&1
tb=$(python3 -c "import triton, os; print(os.path.dirname(triton.__file__))" 2>/dev/null)/backends/nvidia/bin
for f in $work/ptx/*.ptx; do
  n=$(basename $f .ptx)
  echo "== $n" >> $work/regs.txt
  sed -i "s/^\.version [0-9.]*/.version 8.7/" $f
  $tb/ptxas -v -arch=sm_90 $f -o $work/ptx/$n.cubin >> $work/regs.txt 2>&1
done
for n in l1_ship l2_ship l2_w128_c32_r8_n16 l2_w256_c16_r4_t8_n16; do
  [ -f $work/ptx/$n.cubin ] && $tb/cuobjdump -sass $work/ptx/$n.cubin > $work/$n.sass 2>&1
done
rm -f $work/ptx/*.cubin
tar czf $out/lab.tgz -C $work .
cat $work/rows1.txt $work/fine1.txt $work/rows8.txt
grep -A4 "^== " $work/regs.txt | grep -E "^== |registers" | paste - - | awk '{print $2, $6}' | column -c 200

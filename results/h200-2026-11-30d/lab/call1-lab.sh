#!/usr/bin/env bash
# Lab, device call 1 (not a benchmark): lanes variants at 1 and 8 rows per expert, the read floor of
# the lanes grid, and the registers and SASS of the variants. Usage: call1-lab.sh OUT
set -u
out=${1:?OUT}
lab=results/h200-2026-11-30d/lab
work=/tmp/lab-out; rm -rf $work; mkdir -p $work/ptx
nvidia-smi > $work/nvidia-smi.txt 2>&1
export LAB_PTX_DIR=$work/ptx
.gpu/lab $lab/read_lab.cl kernels 1 $lab/r1.txt > $work/read.txt 2>&1
.gpu/lab $lab/lanes_lab.cl kernels 1 $lab/v1.txt > $work/rows1.txt 2>&1
.gpu/lab $lab/lanes_lab.cl kernels 8 $lab/v8.txt > $work/rows8.txt 2>&1
tb=$(python3 -c "import triton, os; print(os.path.dirname(triton.__file__))" 2>/dev/null)/backends/nvidia/bin
ls -la $tb > $work/tools.txt 2>&1
$tb/ptxas --version >> $work/tools.txt 2>&1
for f in $work/ptx/*.ptx; do
  n=$(basename $f .ptx)
  echo "== $n" >> $work/regs.txt
  for v in 9.0 8.8 8.7 8.6 8.5 8.4 8.3 8.2 8.1 8.0; do
    sed -i "s/^\.version [0-9.]*/.version $v/" $f
    $tb/ptxas -v -arch=sm_90 $f -o $work/ptx/$n.cubin > $work/ptxas.log 2>&1 && break
  done
  cat $work/ptxas.log >> $work/regs.txt
done
for n in base addr4_prmt addr4_prmt_shfl pairf_prmt_shfl loadonly a_r4t8n16 base_r4t8n16; do
  [ -f $work/ptx/$n.cubin ] && $tb/cuobjdump -sass $work/ptx/$n.cubin > $work/$n.sass 2>&1
done
rm -f $work/ptx/*.cubin
tar czf $out/lab.tgz -C $work .
tail -n 80 $work/rows1.txt $work/read.txt $work/rows8.txt
grep -A3 "== base$\|== addr4_prmt$" $work/regs.txt

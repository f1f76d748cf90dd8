#!/bin/bash
# call 2: lab diagnostics of gemm_nt_tc at bf16 8192^3 (tclab, no ocltk runtime)
set -u
L=.gpu/tc/lab; O=$OUT/c2; mkdir -p $O/ptx
source .gpu/tc/gpu/env.sh
export LD_LIBRARY_PATH=$PWD/.gpu/tc/gpu/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
D="-DMWG=128 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=2 -DSTAGES=2 -DCPASYNC=1 -DSWZ=2 -DGM=8"
D3="-DMWG=128 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=2 -DSTAGES=3 -DCPASYNC=1 -DSWZ=1 -DGM=8"
S="-DMWG=256 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=4 -DSTAGES=2 -DCPASYNC=0 -DSWZ=1 -DGM=8"
S4="-DMWG=256 -DNWG=128 -DKCH=4 -DMWARPS=4 -DNWARPS=2 -DSTAGES=2 -DCPASYNC=1 -DSWZ=1 -DGM=8"
export PTX_DIR=$O/ptx
$L/tclab $L/lab.cl 8192 8192 8192 10 \
 "D|$D|255|128|128|128" "D_nocopy|$D -DLAB_NOCOPY=1|255|128|128|128" "D_noldsm|$D -DLAB_NOLDSM=1|255|128|128|128" \
 "D_nocopy_noldsm|$D -DLAB_NOCOPY=1 -DLAB_NOLDSM=1|255|128|128|128" "D_nomma|$D -DLAB_NOMMA=1|255|128|128|128" \
 "D3|$D3|255|128|128|128" "D3_nocopy|$D3 -DLAB_NOCOPY=1|255|128|128|128" \
 "D_gm1|${D/GM=8/GM=1}|255|128|128|128" "D_gm16|${D/GM=8/GM=16}|255|128|128|128" "D_gm4|${D/GM=8/GM=4}|255|128|128|128" \
 "S|$S|255|256|128|256" "S_nocopy|$S -DLAB_NOCOPY=1|255|256|128|256" "S_noldsm|$S -DLAB_NOLDSM=1|255|256|128|256" \
 "S_nocopy_noldsm|$S -DLAB_NOCOPY=1 -DLAB_NOLDSM=1|255|256|128|256" "S_nomma|$S -DLAB_NOMMA=1|255|256|128|256" \
 "S4|$S4|255|256|128|256" "S4_nocopy|$S4 -DLAB_NOCOPY=1|255|256|128|256" "S4_nocopy_noldsm|$S4 -DLAB_NOCOPY=1 -DLAB_NOLDSM=1|255|256|128|256" \
 2>&1 | tee $O/lab.txt
unset PTX_DIR
NCU=$(which ncu 2>/dev/null || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $NCU" > $O/ncu.txt
if [ -n "$NCU" ]; then
  timeout 150 $NCU --target-processes all -k regex:gemm_nt -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy \
    $L/tclab $L/lab.cl 8192 8192 8192 1 "D|$D|255|128|128|128" >> $O/ncu.txt 2>&1
  timeout 120 $NCU --target-processes all -k regex:gemm_nt -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy \
    $L/tclab $L/lab.cl 8192 8192 8192 1 "S|$S|255|256|128|256" >> $O/ncu.txt 2>&1
fi
python3 .gpu/tc/gpu/cublas_ref.py gemm --shapes 8192x8192x8192 --dtype bf16 --json $O/cublas_bf16.json > $O/cublas.txt 2>&1
cd $OUT && tar czf c2.tgz c2 && rm -rf c2

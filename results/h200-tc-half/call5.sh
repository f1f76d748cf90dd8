#!/bin/bash
# call 5: lab (cp.async .ca across points, epilogue), bench of candidate profile points, cuBLAS, GPU tests
set -u
L=.gpu/tc/lab; G=.gpu/tc/gpu; R=.gpu/tc/run; O=$OUT/c5; mkdir -p $O/prof $O/json
source $G/env.sh
D="-DMWG=128 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=2 -DSTAGES=2 -DSWZ=2"
D1="-DMWG=128 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=2 -DSTAGES=2 -DSWZ=1"
D3="-DMWG=128 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=2 -DSTAGES=3 -DSWZ=1"
DK2="-DMWG=128 -DNWG=128 -DKCH=2 -DMWARPS=2 -DNWARPS=2 -DSTAGES=4 -DSWZ=1"
T="-DMWG=128 -DNWG=256 -DKCH=4 -DMWARPS=2 -DNWARPS=4 -DSTAGES=2 -DSWZ=1"
SC="-DMWG=256 -DNWG=128 -DKCH=4 -DMWARPS=2 -DNWARPS=4 -DSTAGES=2 -DSWZ=1"
S4C="-DMWG=256 -DNWG=128 -DKCH=4 -DMWARPS=4 -DNWARPS=2 -DSTAGES=2 -DSWZ=1"
(nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > $O/clocks.csv 2>&1 &)
$L/tclab $L/ca.cl 8192 8192 8192 10 \
 "D_cg|$D -DGM=8 -DCPASYNC=1|255|128|128|128" "D_ca|$D -DGM=8 -DCPASYNC=2|255|128|128|128" \
 "D_ca_gm4|$D -DGM=4 -DCPASYNC=2|255|128|128|128" "D_ca_gm16|$D -DGM=16 -DCPASYNC=2|255|128|128|128" "D_ca_gm1|$D -DGM=1 -DCPASYNC=2|255|128|128|128" \
 "D_ca_r168|$D -DGM=8 -DCPASYNC=2|168|128|128|128" "D1_ca|$D1 -DGM=8 -DCPASYNC=2|255|128|128|128" "D3_ca|$D3 -DGM=8 -DCPASYNC=2|255|128|128|128" \
 "DK2_ca|$DK2 -DGM=8 -DCPASYNC=2|255|128|128|128" "T_cg|$T -DGM=8 -DCPASYNC=1|255|128|256|256" "T_ca|$T -DGM=8 -DCPASYNC=2|255|128|256|256" \
 "SC_ca|$SC -DGM=8 -DCPASYNC=2|255|256|128|256" "S4C_ca|$S4C -DGM=8 -DCPASYNC=2|255|256|128|256" "S4C_cg|$S4C -DGM=8 -DCPASYNC=1|255|256|128|256" \
 "D_ca|$D -DGM=8 -DCPASYNC=2|255|128|128|128" 2>&1 | tee $O/lab.txt
$L/tclab $L/lab.cl 8192 8192 8192 10 "D_ca_nomma|$D -DGM=8 -DCPASYNC=1 -DLAB_CA=1 -DLAB_NOMMA=1|255|128|128|128" 2>&1 | tee -a $O/lab.txt
$L/tclab $L/head.cl 8192 8192 8192 10 "head_D_cg|$D -DGM=8 -DCPASYNC=1|255|128|128|128" 2>&1 | tee -a $O/lab.txt
$L/tclab $L/epi.cl 8192 8192 8192 10 "epi_D_cg|$D -DGM=8 -DCPASYNC=1|255|128|128|128" "epi_D_ca|$D -DGM=8 -DCPASYNC=2|255|128|128|128" 2>&1 | tee -a $O/lab.txt
B="GM: 8, LDSM: 1, REGS: 255"
declare -a V=(
 "ship|large_half|CPASYNC: 0, GM: 8, KCH: 4, LDSM: 1, MWARPS: 2, MWG: 256, NWARPS: 4, NWG: 128, REGS: 255, STAGES: 2, SWZ: 1"
 "d_ca|large_half|CPASYNC: 2, GM: 8, KCH: 4, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, REGS: 255, STAGES: 2, SWZ: 2"
 "d_cg|large_half|CPASYNC: 1, GM: 8, KCH: 4, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, REGS: 255, STAGES: 2, SWZ: 2"
 "t_ca|large_half|CPASYNC: 2, GM: 8, KCH: 4, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 4, NWG: 256, REGS: 255, STAGES: 2, SWZ: 1"
 "x3_ship|large_tf32x3|CPASYNC: 0, GM: 4, KCH: 2, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, REGS: 255, STAGES: 2, SWZ: 2"
 "x3_ca|large_tf32x3|CPASYNC: 2, GM: 4, KCH: 2, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, REGS: 255, STAGES: 2, SWZ: 2"
 "x3_ca_s4|large_tf32x3|CPASYNC: 2, GM: 4, KCH: 2, LDSM: 1, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, REGS: 255, STAGES: 4, SWZ: 1"
)
for v in "${V[@]}"; do
  IFS='|' read -r name cls params <<< "$v"
  export OCLTK_CACHE_DIR=/tmp/cache5/$name; mkdir -p $OCLTK_CACHE_DIR
  python3 $R/mkprof.py $R/h200.yaml $O/prof/$name.yaml "$params" $cls
  if [ $cls = large_half ]; then F='^gemm_nt_(bf16|f16)/large_half/8192x8192x8192/ours_tuned'; else F='^gemm_nt_tf32x3/large_tf32x3/4096x4096x4096/ours_tuned'; fi
  timeout 90 $G/ocltk_bench --ocltk_profile=$O/prof/$name.yaml --ocltk_calls=10 --benchmark_repetitions=3 --benchmark_filter="$F" \
    --benchmark_out=$O/json/$name.json --benchmark_out_format=json > $O/json/$name.txt 2>&1
  grep -h "manual_time_median" $O/json/$name.txt | awk -v n=$name '{print n, $1, $2, $3}'
done 2>&1 | tee $O/bench.txt
for t in bf16 f16; do python3 $G/cublas_ref.py gemm --shapes 8192x8192x8192 --dtype $t --json $O/cublas_$t.json > /dev/null 2>&1; done
python3 $G/cublas_ref.py gemm --shapes 4096x4096x4096 --dtype f32 --json $O/cublas_f32.json > /dev/null 2>&1
grep -h '"ms"' $O/cublas_*.json
export OCLTK_CACHE_DIR=/tmp/cache5/tests
timeout 200 $G/test_gemm_nt_tc > $O/test_gemm_nt_tc.txt 2>&1; echo "tests rc=$?"; tail -3 $O/test_gemm_nt_tc.txt
cd $OUT && tar czf c5.tgz c5 && rm -rf c5

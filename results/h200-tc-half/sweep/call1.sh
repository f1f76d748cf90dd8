#!/bin/bash
# call 1: points of tc at bf16 8192^3, PTX + ptxas register/spill counts, cuBLAS bf16
set -u
G=.gpu/tc/gpu; R=.gpu/tc/run; O=$OUT/c1; mkdir -p $O/prof $O/json
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $O/smi.txt 2>&1
( which ptxas cuobjdump nvdisasm; ls /usr/local/cuda*/bin 2>/dev/null | head; python3 -c 'import triton,os;print(os.path.dirname(triton.__file__))'; find / -xdev -name 'ptxas*' -type f 2>/dev/null | head ) > $O/tools.txt 2>&1
P="GM: 8, LDSM: 1, REGS: 255"
declare -a V=(
 "ship|CPASYNC: 0, KCH: 4, MWARPS: 2, MWG: 256, NWARPS: 4, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 0"
 "ship_pf|CPASYNC: 0, KCH: 4, MWARPS: 2, MWG: 256, NWARPS: 4, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 1"
 "w42_k2s4|CPASYNC: 1, KCH: 2, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 4, SWZ: 1, PREFRAG: 0"
 "w42_k2s4_pf|CPASYNC: 1, KCH: 2, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 4, SWZ: 1, PREFRAG: 1"
 "w42_k2s3_pf|CPASYNC: 1, KCH: 2, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 3, SWZ: 1, PREFRAG: 1"
 "w42_k4s2_pf|CPASYNC: 1, KCH: 4, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 1"
 "w42_k4r_pf|CPASYNC: 0, KCH: 4, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 1"
 "w42_k4r|CPASYNC: 0, KCH: 4, MWARPS: 4, MWG: 256, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 0"
 "w24_k2s4_pf|CPASYNC: 1, KCH: 2, MWARPS: 2, MWG: 256, NWARPS: 4, NWG: 128, STAGES: 4, SWZ: 1, PREFRAG: 1"
 "t128x256_k2s4_pf|CPASYNC: 1, KCH: 2, MWARPS: 2, MWG: 128, NWARPS: 4, NWG: 256, STAGES: 4, SWZ: 1, PREFRAG: 1"
 "t128_k2s4_pf|CPASYNC: 1, KCH: 2, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, STAGES: 4, SWZ: 1, PREFRAG: 1"
 "t128_k4s2_sw2|CPASYNC: 1, KCH: 4, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 2, PREFRAG: 0"
 "t128_k4s2_sw2_pf|CPASYNC: 1, KCH: 4, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 2, PREFRAG: 1"
 "t128_k4s2_pf|CPASYNC: 1, KCH: 4, MWARPS: 2, MWG: 128, NWARPS: 2, NWG: 128, STAGES: 2, SWZ: 1, PREFRAG: 1"
 "t128w8_k2s4_pf|CPASYNC: 1, KCH: 2, MWARPS: 2, MWG: 128, NWARPS: 4, NWG: 128, STAGES: 4, SWZ: 1, PREFRAG: 1, REGS: 128"
)
source $G/env.sh
for v in "${V[@]}"; do
  name=${v%%|*}; params=${v#*|}
  export OCLTK_CACHE_DIR=/tmp/cache1/$name; mkdir -p $OCLTK_CACHE_DIR
  case "$params" in *REGS*) pp="GM: 8, LDSM: 1, $params";; *) pp="$P, $params";; esac
  python3 $R/mkprof.py $R/h200.yaml $O/prof/$name.yaml "$pp"
  timeout 60 $G/ocltk_bench --ocltk_profile=$O/prof/$name.yaml --ocltk_calls=10 --benchmark_repetitions=2 \
    --benchmark_filter='^gemm_nt_bf16/large_half/8192x8192x8192/ours_tuned' \
    --benchmark_out=$O/json/$name.json --benchmark_out_format=json > $O/json/$name.txt 2>&1
  echo "$name $(grep -h 'ours_tuned ' $O/json/$name.txt | awk '{print $2}' | tr '\n' ' ') $(grep -ci error $O/json/$name.txt)" | tee -a $O/summary.txt
done
python3 $G/cublas_ref.py gemm --shapes 8192x8192x8192 --dtype bf16 --json $O/cublas_bf16.json > $O/cublas.txt 2>&1
cat $O/cublas.txt
PT=$(which ptxas 2>/dev/null || find / -xdev -name ptxas -type f 2>/dev/null | head -1)
echo "ptxas: $PT" | tee $O/ptxas.txt
mkdir -p $O/ptx
for f in /tmp/cache1/*/*.bin; do
  b=$(basename $(dirname $f))_$(basename $f .bin)
  python3 $R/extract.py $f $O/ptx/$b.ptx 16 > $O/ptx/$b.key 2>&1
  if grep -q "mma.sync" $O/ptx/$b.ptx; then
    echo "== $b $(grep -o 'maxnreg [0-9]*' $O/ptx/$b.ptx | head -1)" >> $O/ptxas.txt
    [ -n "$PT" ] && $PT -arch=sm_90 -v $O/ptx/$b.ptx -o $O/ptx/$b.cubin >> $O/ptxas.txt 2>&1
  else rm -f $O/ptx/$b.ptx $O/ptx/$b.key; fi
done
CO=$(dirname "$PT")/cuobjdump; ND=$(dirname "$PT")/nvdisasm
ls $(dirname "$PT") >> $O/tools.txt 2>&1
for c in $O/ptx/*.cubin; do [ -x "$ND" ] && $ND -c $c > ${c%.cubin}.sass 2>&1 || { [ -x "$CO" ] && $CO -sass $c > ${c%.cubin}.sass 2>&1; }; rm -f $c; done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1

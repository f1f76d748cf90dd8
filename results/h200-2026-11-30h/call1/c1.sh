#!/usr/bin/env bash
# Device call 1 of 2026-11-30h (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30h/call1/c1.sh $OUT
# (During the call the lut kernel was kernels/nf4_forward_lut.cl; it now lives in ../lab/.)
# .gpu holds this checkout's ocltk_bench_nf4, test_nf4, lab (results/h200-2026-11-30h/lab)
# and cublas_ref.py.
# GPU 0: test_nf4 (lut and the split dispatches); the lab at one row per expert, bf16 x:
#        lut points and tc's shipped points on the Mixtral-like shape, the diagnostic
#        copies (make_lab_kernels.sh), f32 x at three points, 8 rows per expert (TR).
# GPU 1: the same lab on the fine-grained shape; the bench with the shipped profile and with
#        candidate-lut.yaml on the one-row-per-expert rows; cuBLAS on both shapes.
out=${1:?OUT}
here=results/h200-2026-11-30h/call1
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
s=$(date +%s)
mark() { echo "$1 at +$(( $(date +%s) - s )) s" >> $out/marks.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $out/device.txt
mkdir -p $out/lab /tmp/labk
bash results/h200-2026-11-30h/lab/make_lab_kernels.sh /tmp/labk || echo "make_lab_kernels failed" >> $out/marks.txt
lab() {  # lab GPU TYPE NAME KERNEL VARIANTS RPE [N E K]
  local gpu=$1 type=$2 name=$3 kernel=$4 variants=$5 rpe=$6
  shift 6
  CUDA_VISIBLE_DEVICES=$gpu LAB_TYPE=$type timeout 150 .gpu/lab $kernel kernels $rpe $variants "$@" > $out/lab/$name.txt 2>&1
  echo "exit $?" >> $out/lab/$name.txt
}
bench() {  # bench GPU PROFILE NAME FILTER
  CUDA_VISIBLE_DEVICES=$1 OCLTK_CACHE_DIR=/tmp/oc$1-$3 CUDA_CACHE_PATH=/tmp/nv$1 timeout 200 .gpu/ocltk_bench_nf4 \
    --ocltk_profile=$2 --ocltk_calls=20 --benchmark_filter="$4" \
    --benchmark_out=$out/$3.json --benchmark_out_format=json > $out/$3.txt 2>&1
  echo "exit $?" >> $out/$3.txt
  mark "$3"
}
(
  CUDA_VISIBLE_DEVICES=0 OCLTK_CACHE_DIR=/tmp/oc0t timeout 150 .gpu/test_nf4 --gtest_filter='*Lut*:*Splits*' > $out/test_nf4.txt 2>&1
  echo "exit $?" >> $out/test_nf4.txt; mark test_nf4
  lab 0 2 mixtral1-lut kernels/nf4_forward_lut.cl $here/lab_lut.txt 1
  lab 0 2 mixtral1-tc kernels/nf4_forward_tc.cl $here/lab_tc.txt 1
  for d in noload nolookup nobuild readonly; do lab 0 2 mixtral1-$d /tmp/labk/lut_$d.cl $here/lab_diag.txt 1; done
  lab 0 0 mixtral1-f32 kernels/nf4_forward_lut.cl $here/lab_diag.txt 1
  lab 0 2 mixtral8-tr kernels/nf4_forward_lut.cl $here/lab_tr.txt 8
  lab 0 2 mixtral8-tc kernels/nf4_forward_tc.cl $here/lab_tc.txt 8
  mark lab0
) &
side0=$!
lab 1 2 fine1-lut kernels/nf4_forward_lut.cl $here/lab_lut.txt 1 1408 64 2048
lab 1 2 fine1-tc kernels/nf4_forward_tc.cl $here/lab_tc.txt 1 1408 64 2048
for d in noload readonly; do lab 1 2 fine1-$d /tmp/labk/lut_$d.cl $here/lab_diag.txt 1 1408 64 2048; done
mark lab1
rows='nf4_forward/(mixtral.*rows(1|8)/decode/(ours|ours_bf16)|fine.*rows(8|64)/decode/(ours|ours_bf16))/'
bench 1 .gpu/nvidia-h200.yaml g1-shipped "$rows"
bench 1 $here/candidate-lut.yaml g1-lut "$rows"
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64 --json $out/cublas-mixtral.json > /dev/null 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 8,64 --json $out/cublas-fine.json > /dev/null 2>&1
mark cublas
wait $side0
mark all
cd $out && for f in g*.txt; do echo "== $f"; grep -E "^nf4_forward|exit" $f | sed 's/  */ /g' | cut -c1-150; done
tail -3 test_nf4.txt
for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ bytes smem//; s/registers/regs/' | cut -c1-120; done
cat marks.txt

#!/usr/bin/env bash
# Device call 2 of 2026-11-30h (kind nvidia-h200-x2), from the checkout root:
#   source .gpu/env.sh && bash results/h200-2026-11-30h/call2/c2.sh $OUT
# .gpu holds this checkout's ocltk_bench_nf4, test_nf4 and lab (results/h200-2026-11-30h/lab),
# old_bench_nf4 and old_tc.cl (cefc0db's bench and tc kernel: f32 at 4 segment rows a
# pass), cublas_ref.py and the shipped profile.
# GPU 0: test_nf4; the lab with f32 x, old and new tc kernel, at 8 and 64 rows per expert
#        (Mixtral-like) and 8 (fine-grained); the old binary with the shipped profile.
# GPU 1: the new binary with the shipped profile and candidates A and B on the f32 rows;
#        cuBLAS on both shapes.
out=${1:?OUT}
here=results/h200-2026-11-30h/call2
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
s=$(date +%s)
mark() { echo "$1 at +$(( $(date +%s) - s )) s" >> $out/marks.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $out/device.txt
mkdir -p $out/lab
lab() {  # lab GPU NAME KERNEL RPE [N E K]
  local gpu=$1 name=$2 kernel=$3 rpe=$4
  shift 4
  CUDA_VISIBLE_DEVICES=$gpu LAB_TYPE=0 timeout 150 .gpu/lab $kernel kernels $rpe $here/lab_f32.txt "$@" > $out/lab/$name.txt 2>&1
  echo "exit $?" >> $out/lab/$name.txt
}
bench() {  # bench GPU BINARY PROFILE NAME FILTER
  CUDA_VISIBLE_DEVICES=$1 OCLTK_CACHE_DIR=/tmp/oc$1-$4 CUDA_CACHE_PATH=/tmp/nv$1 timeout 240 $2 \
    --ocltk_profile=$3 --ocltk_calls=20 --ocltk_copy_gbps=4240 --benchmark_filter="$5" \
    --benchmark_out=$out/$4.json --benchmark_out_format=json > $out/$4.txt 2>&1
  echo "exit $?" >> $out/$4.txt
  mark "$4"
}
f32rows='nf4_forward/(mixtral.*rows(64|512|4096)/[a-z_]*/ours|fine.*rows(512|4096|32768)/[a-z_]*/ours)/'
(
  CUDA_VISIBLE_DEVICES=0 OCLTK_CACHE_DIR=/tmp/oc0t timeout 200 .gpu/test_nf4 > $out/test_nf4.txt 2>&1
  echo "exit $?" >> $out/test_nf4.txt; mark test_nf4
  lab 0 mixtral8-new kernels/nf4_forward_tc.cl 8
  lab 0 mixtral8-old .gpu/old_tc.cl 8
  lab 0 mixtral64-new kernels/nf4_forward_tc.cl 64
  lab 0 mixtral64-old .gpu/old_tc.cl 64
  lab 0 fine8-new kernels/nf4_forward_tc.cl 8 1408 64 2048
  lab 0 fine8-old .gpu/old_tc.cl 8 1408 64 2048
  mark lab
  bench 0 .gpu/old_bench_nf4 .gpu/nvidia-h200.yaml g0-old-shipped "$f32rows"
) &
side0=$!
bench 1 .gpu/ocltk_bench_nf4 .gpu/nvidia-h200.yaml g1-new-shipped "$f32rows"
bench 1 .gpu/ocltk_bench_nf4 $here/candidate-a.yaml g1-new-a "$f32rows"
bench 1 .gpu/ocltk_bench_nf4 $here/candidate-b.yaml g1-new-b "$f32rows"
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 64,512,4096 --json $out/cublas-mixtral.json > /dev/null 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 60 python3 .gpu/cublas_ref.py nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 512,4096,32768 --json $out/cublas-fine.json > /dev/null 2>&1
mark cublas
wait $side0
mark all
cd $out && for f in g*.txt; do echo "== $f"; grep -E "^nf4_forward|exit" $f | sed 's/  */ /g' | cut -c1-150; done
tail -3 test_nf4.txt
for f in lab/*.txt; do echo "== $f"; grep -v "warning generated" $f | sed 's/ build [ 0-9.]* s//; s/relerr [0-9.e+-]* //; s/used [01] barriers, //; s/ min [0-9.]*//; s/ bytes smem//; s/registers/regs/' | cut -c1-120; done
cat marks.txt

#!/usr/bin/env bash
# bench/reproduce.sh DEVICE OUT [--phase LIST] [--profile FILE] [--bin DIR] [--budget S] [--commit SHA]
#
# Every figure of results/NAME/ (docs/performance.md says what each means), in phases that
# can run in separate calls (a GPU lent 10 minutes at a time):
#   tune           ocltk tune with its defaults, from no profile, into OUT/profile.yaml
#                  (--profile FILE: FILE is copied there instead, nothing is tuned)
#   bench-NAME     one benchmark of BENCHES below with OUT/profile.yaml -> OUT/bench-NAME.json;
#                  `bench` runs them all
#   api-overhead   the host's cost of a launch through the C API and the Python binding against
#                  the C++ API (bench/api_overhead.py) -> OUT/api-overhead.json; needs the Python
#                  package's dependencies (build/venv from scripts/setup.sh, else python3)
#   refs           cuBLAS, the copy bandwidth and bitsandbytes on the benchmarks' shapes, where
#                  PyTorch has a CUDA device (bench/cublas_ref.py, bench/torch_lora_ref.py,
#                  bench/bnb_ref.py)
#   tables         python3 bench/tables.py: OUT/tables.md, README.md and docs/performance.md
#                  (for OUT under this repository's results/)
# Default: all of them, in that order. DEVICE is ocltk's device selector (index or name
# substring). Each phase writes OUT/log-PHASE.txt: its first line names the phase, the
# commit of the binaries (--commit, else BIN/COMMIT, else git) and the start; its last the
# exit status and seconds. A phase replaces its own files and leaves the others.
# BIN (--bin): the folder of ocltk, ocltk_bench, ocltk_bench_nf4, ocltk_bench_lora and ocltk_api_overhead
# (also BIN/bench/), and libocltk.so.0 (also BIN/runtime/);
# default build/. Nothing outside this repository and BIN is read.
# shellcheck disable=SC2317  # the phase functions run through run_phase, which shellcheck cannot follow
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# NAME          BINARY           ARGUMENTS (beside device, profile and output)
BENCHES=(
  "gemm_nt               ocltk_bench      --benchmark_repetitions=3"
  "gemm_nt_dram          ocltk_bench      --benchmark_repetitions=3 --ocltk_flush=256 --benchmark_filter=^gemm_nt(_accum)?(_bf16)?/lora_(shrink|expand)(_half)?/.*/ours_tuned"
  "nf4_forward_mixtral   ocltk_bench_nf4  --benchmark_filter=^nf4_forward/mixtral_"
  "nf4_backward_mixtral  ocltk_bench_nf4  --benchmark_filter=^nf4_backward/mixtral_"
  "nf4_forward_fine      ocltk_bench_nf4  --benchmark_filter=^nf4_forward/fine_grained_"
  "nf4_backward_fine     ocltk_bench_nf4  --benchmark_filter=^nf4_backward/fine_grained_"
  "lora                  ocltk_bench_lora --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true"
)
usage() { sed -n '2,3p' "$0" | sed 's/^# //' >&2; exit 2; }
[ $# -ge 2 ] || usage
device=$1 out=$2
shift 2
phases=tune,bench,api-overhead,refs,tables profile='' bin=$repo/build budget='' commit=''
while [ $# -gt 0 ]; do
  case $1 in
  --phase) phases=${2:?--phase needs a list}; shift 2 ;;
  --profile) profile=$(realpath "${2:?--profile needs a file}") || exit 2; shift 2 ;;
  --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
  --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
  --commit) commit=${2:?--commit needs a commit}; shift 2 ;;
  *) echo "reproduce.sh: unknown option $1" >&2; usage ;;
  esac
done
binary() {  # the path of binary $1 in BIN or BIN/bench
  local f
  for f in "$bin/$1" "$bin/bench/$1"; do [ -x "$f" ] && { echo "$f"; return; }; done
  echo "reproduce.sh: no $1 in $bin or $bin/bench (build first, or give --bin)" >&2
  exit 2
}
if [ -z "$commit" ] && [ -f "$bin/COMMIT" ]; then commit=$(tr -dc '0-9a-f' < "$bin/COMMIT" | head -c 40); fi
if [ -z "$commit" ] && git -C "$repo" rev-parse HEAD > /dev/null 2>&1; then
  commit=$(git -C "$repo" rev-parse --short=12 HEAD)
  [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ] && commit="$commit-dirty"
fi
commit=${commit:-unknown}
ocltk=$(binary ocltk)
mkdir -p "$out" || exit 2
# No profile but the one given: neither the user's folder nor OCLTK_PROFILE_PATH may serve.
empty=$(mktemp -d) && trap 'rm -rf "$empty"' EXIT
export XDG_CONFIG_HOME=$empty
unset OCLTK_PROFILE_PATH
{ "$ocltk" devices; command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"; } \
  > "$out/device.txt" 2>&1
# `devices` marks the device DEVICE selects with '*'; none marked: DEVICE selects nothing.
chosen=$(OCLTK_DEVICE=$device "$ocltk" devices 2> /dev/null | grep '^ \*\[')
[ -n "$chosen" ] || { echo "reproduce.sh: device '$device' not found (see ocltk devices)" >&2; exit 2; }
calls=1  # calls per timed iteration: 20 on a GPU, where one call per iteration times the launch gap
[[ $chosen == *"(gpu)" ]] && calls=20
rc=0
run_phase() {  # run_phase NAME CMD...: CMD's output in OUT/log-NAME.txt between the run lines
  local name=$1 start status
  shift
  start=$(date +%s)
  echo "phase=$name commit=$commit started=$(date -u +%Y-%m-%dT%H:%M:%SZ) device=$device" > "$out/log-$name.txt"
  "$@" >> "$out/log-$name.txt" 2>&1
  status=$?
  echo "exit=$status seconds=$(($(date +%s) - start))" >> "$out/log-$name.txt"
  echo "reproduce.sh: $name exit $status ($(($(date +%s) - start)) s)"
  [ $status = 0 ] || rc=1
}
need_profile() {
  [ -n "$profile" ] && { cp "$profile" "$out/profile.yaml" || exit 1; }
  [ -f "$out/profile.yaml" ] || { echo "reproduce.sh: no $out/profile.yaml: run phase tune or give --profile" >&2; exit 2; }
}
refs() {
  if ! python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2> /dev/null; then
    echo "no CUDA device with PyTorch: the benches' CLBlast rows are the only reference"
    return 0
  fi
  local ref="python3 $here/cublas_ref.py" s=0
  # The gemm_nt shapes of ocltk_bench's gpu size set (bench/bench_gemm_nt.cpp).
  $ref gemm --shapes 1x4096x4096,16x4096x4096,4096x16x4096,4096x64x4096,4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm.json" > /dev/null || s=1
  $ref gemm --accumulate --shapes 4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm-accum.json" > /dev/null || s=1
  # Its 16-bit rows (gemm_nt_bf16 with its LoRA shrinks, gemm_nt_accum_bf16 its LoRA expands,
  # gemm_nt_f16); gemm_nt_tf32x3 compares with the f32 SGEMM above.
  $ref gemm --dtype bf16 --shapes 8192x8192x8192,4096x16x4096,4096x64x4096 \
    --json "$out/cublas-gemm-bf16.json" > /dev/null || s=1
  $ref gemm --dtype bf16 --accumulate --shapes 4096x4096x16,4096x4096x64 \
    --json "$out/cublas-gemm-bf16-accum.json" > /dev/null || s=1
  $ref gemm --dtype f16 --shapes 8192x8192x8192 --json "$out/cublas-gemm-f16.json" > /dev/null || s=1
  # And at the bytes the 16-bit LoRA rows move (shrink and expand-accumulate, ranks 16 and 64).
  $ref copy --bytes 33816576,34603008,67371008,68157440 --json "$out/copy.json" > /dev/null || s=1
  # The LoRA shapes from DRAM, as the gemm_nt_dram benchmark times them: 256 MiB flushed
  # through the caches before each call (the H200's L2 holds 50 MB).
  local lora=4096x16x4096,4096x64x4096,4096x4096x16,4096x4096x64 expands=4096x4096x16,4096x4096x64 t
  for t in f32 bf16; do
    $ref gemm --dtype "$t" --flush 256 --shapes "$lora" --json "$out/cublas-gemm-$t-dram.json" > /dev/null || s=1
    $ref gemm --dtype "$t" --flush 256 --accumulate --shapes "$expands" \
      --json "$out/cublas-gemm-$t-accum-dram.json" > /dev/null || s=1
  done
  $ref copy --flush 256 --bytes 33816576,34603008,67371008,68157440,67633152,69206016,134742016,136314880 \
    --json "$out/copy-dram.json" > /dev/null || s=1
  # The LoRA rows of ocltk_bench_lora (bench/bench_lora.cpp): two matmuls, or a loop over segments.
  python3 "$here/torch_lora_ref.py" --json "$out/torch-lora.json" > /dev/null || s=1
  # The NF4 shapes and rows of ocltk_bench_nf4 (bench/bench_nf4.cpp).
  local mixtral=(--experts 8 --out-features 14336 --in-features 4096 --rows "1,8,64,512,4096")
  local fine=(--experts 64 --out-features 1408 --in-features 2048 --rows "1,8,64,512,4096,32768")
  $ref nf4 "${mixtral[@]}" --json "$out/cublas-nf4-mixtral.json" > /dev/null || s=1
  $ref nf4 "${fine[@]}" --json "$out/cublas-nf4-fine.json" > /dev/null || s=1
  if python3 -c 'import bitsandbytes' 2> /dev/null; then
    python3 "$here/bnb_ref.py" "${mixtral[@]}" --json "$out/bnb-nf4-mixtral.json" > /dev/null || s=1
    python3 "$here/bnb_ref.py" "${fine[@]}" --json "$out/bnb-nf4-fine.json" > /dev/null || s=1
  else
    echo "no bitsandbytes: its reference is skipped"
  fi
  return "$s"
}
api_overhead() {
  local py=$repo/build/venv/bin/python lib f  # the setup's venv (scripts/setup.sh), else python3
  [ -x "$py" ] || py=python3
  for f in "$bin/runtime/libocltk.so.0" "$bin/libocltk.so.0"; do [ -f "$f" ] && { lib=$f; break; }; done
  [ -n "${lib:-}" ] || { echo "no libocltk.so.0 in $bin/runtime or $bin: the C API's library is needed"; return 1; }
  PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH} OCLTK_LIBRARY=$lib "$py" "$here/api_overhead.py" \
    --binary "$(binary ocltk_api_overhead)" --device "$device" --json "$out/api-overhead.json"
}
tables() {
  case $(realpath "$out")/ in
  "$repo"/results/*/) python3 "$here/tables.py" ;;
  *) echo "$out is not under $repo/results/: copy it there, then run python3 bench/tables.py" ;;
  esac
}
for phase in ${phases//,/ }; do
  case $phase in
  tune)
    if [ -n "$profile" ]; then
      need_profile
      run_phase tune echo "profile given, not tuned: ${profile#"$repo"/}"
    else
      run_phase tune "$ocltk" tune --device "$device" --out "$out/profile.yaml" --cache - --quiet ${budget:+--budget "$budget"}
    fi ;;
  bench | bench-*)
    [ "$phase" = bench ] || printf '%s\n' "${BENCHES[@]}" | grep -q "^${phase#bench-} " ||
      { echo "reproduce.sh: no benchmark named ${phase#bench-}" >&2; exit 2; }
    need_profile
    for line in "${BENCHES[@]}"; do
      read -r name exe args <<< "$line"
      [ "$phase" = bench ] || [ "$phase" = "bench-$name" ] || continue
      # shellcheck disable=SC2086  # args: flags, split on purpose
      run_phase "bench-$name" "$(binary "$exe")" --ocltk_device="$device" --ocltk_profile="$out/profile.yaml" \
        --ocltk_calls=$calls $args --benchmark_out="$out/bench-$name.json" --benchmark_out_format=json
    done ;;
  api-overhead) run_phase api-overhead api_overhead ;;
  refs) run_phase refs refs ;;
  tables) tables ;;
  *) echo "reproduce.sh: unknown phase $phase (tune, bench, bench-NAME, api-overhead, refs, tables)" >&2; exit 2 ;;
  esac
done
exit $rc

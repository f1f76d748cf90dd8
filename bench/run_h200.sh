#!/usr/bin/env bash
# The H200 measurements, one phase per device-tool call (each inside its 10-minute limit):
#   ../shared/gpu/stage.sh .gpu build/ocltk build/bench/ocltk_bench build/bench/ocltk_bench_nf4 \
#       ../shared/gpu/cublas_ref.py bench/run_h200.sh /usr/bin/clblast_tuner_xgemm
#   (device tool, carry .gpu)  source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" tune
#                              source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" clblast
#                              source .gpu/env.sh && bash .gpu/run_h200.sh "$OUT" record
# tune:    the whole default `ocltk tune` (timed), its report, then ocltk_bench (gemm_nt) and
#          ocltk_bench_nf4 with the profile it wrote, beside CLBlast, and cuBLAS on the same
#          shapes in the same call.
# clblast: CLBlast's own tuner (clblast_tuner_xgemm, 2048^3, all four stages, timed) and, in
#          the same call, `ocltk tune` of the large class plus a 2048^3 shape, then the bench.
# samecall (kind nvidia-h200-x2): CLBlast's tuner on GPU 0 while, on GPU 1, `ocltk tune` of
#          the large class with a 2048^3 shape, the whole default tune and the benches.
# record2 (kind nvidia-h200-x2): exhaustive recordings of gemm_nt and nf4_forward side by
#          side, then the NF4 forward decode tuned and benched at the Mixtral-like shape.
# record-nf4 (kind nvidia-h200-x2): the NF4 spaces, nf4_forward and nf4_backward side by side.
# spaces-nf4 (kind nvidia-h200-x2): nf4_forward's whole space on one H200; on the other the
#          whole default tune (empty caches, timed), then nf4_backward's space.
# spaces-nf4-fwd (kind nvidia-h200-x2): nf4_forward's decode and small_batch spaces on one
#          H200; on the other the whole default tune, the NF4 decode bench with the shipped
#          profile (stage configs/nvidia-h200.yaml too), cuBLAS, then the prefill space.
# record-nf4-fwd-split (kind nvidia-h200-x2): nf4_forward's decode space on one H200 and its
#          small_batch and prefill spaces on the other, seed 7, for the whole call.
# whole-nf4-bench (kind nvidia-h200-x2): the whole default tune on one H200; on the other
#          the Mixtral-like NF4 decode bench with the shipped profile and cuBLAS.
# lut2-bench (kind nvidia-h200-x2): the NF4 forward decode bench with the shipped profile and
#          cuBLAS on one H200; test_nf4, and the decode class tuned for the Mixtral-like shape and
#          benched, on the other.
# tc-bench (kind nvidia-h200-x2): test_nf4, then the whole default tune (timed, empty caches) on
#          one H200; on the other the NF4 forward decode bench with the shipped profile (ours
#          with f32 and with bf16 input, beside dequantize + CLBlast; 8, 64 and 512 rows) and
#          cuBLAS.
# tc-final (kind nvidia-h200-x2): tc-bench without the whole tune.
# nf4-forward-all (kind nvidia-h200-x2): the NF4 forward bench with the shipped profile at every
#          row count (ours with f32 and with bf16 input; dequantize + CLBlast at the decode rows
#          8 and 64 of the Mixtral-like shape and 64 and 512 of the fine-grained one), and cuBLAS
#          on the same shapes and rows: the Mixtral-like shape on one H200, test_nf4 and then
#          the fine-grained shape on the other.
# nf4-refs (kind nvidia-h200-x2): each shape on one H200: the NF4 forward bench with the shipped
#          profile at every row count (ours with f32 and with bf16 input) and the backward at the
#          decode rows, then cuBLAS (cublas_ref.py nf4) and bitsandbytes' own CUDA kernels
#          (bench/bnb_ref.py: gemv_4bit at 1 row per expert, else dequantize_4bit + matmul;
#          stage it too) on the same shapes and rows, on the same GPU.
# bwd-tune (kind nvidia-h200-x2): each shape on one H200: the NF4 decode bench (backward, and
#          the forward with bf16 input) with the shipped profile, nf4_backward's decode class
#          tuned for that shape's decode problems into a copy of the shipped profile and the
#          bench again with it, then cuBLAS and bitsandbytes (bench/bnb_ref.py) on the same shape.
# bwd-final (kind nvidia-h200-x2): test_nf4 (stage it; the checkout reachable as /work/main),
#          then per shape on one H200: nf4_backward's decode class tuned for that shape's decode
#          problems (TUNE_BUDGET s) into a copy of the shipped profile, the NF4 decode bench
#          (backward; forward with f32 and bf16 input) with it, cuBLAS and bitsandbytes.
# tc-bwd (kind nvidia-h200-x2): bwd-final for the backward alone, with f32 and with bf16 grads
#          (ours, ours_bf16), after the tc backward joined nf4_backward (TEST_LIMIT s for test_nf4).
# tc-bwd-bf16 (kind nvidia-h200-x2): per shape on one H200, the backward decode tuned and
#          benched, then bf16-grad candidates of tc pinned and benched (see the phase).
# bf16-tune (kind nvidia-h200-x2, or nvidia-h200 one shape after the other): per shape, both directions' decode problems tuned
#          with f32 and with bf16 input (tune --shapes with input_bits: 16), then benched.
# fwd-cands (kind nvidia-h200-x2, or nvidia-h200 one shape after the other): forward tc
#          candidates (FWD_CANDIDATES) pinned per shape and benched beside the shipped profile.
# regs-sweep (kind nvidia-h200): test_program_cache and test_nf4's register-target test (stage
#          both), then the NF4 decode bench with the shipped profile and with copies of it whose
#          entries ask for each register target of REGS_VALUES (with_register_target).
# ab-decode (kind nvidia-h200): the NF4 decode bench (every decode row count, both directions,
#          ours and ours_bf16) with an older profile (stage it as old.yaml) and with the shipped
#          profile, twice in turn, then cuBLAS on the same shapes (see the phase for overrides).
# f32-rows (kind nvidia-h200): FWD_CANDIDATES pinned as nf4_forward's f32 entries at 2 and 4
#          rows per expert of each shape and benched beside the shipped profile.
# fill-lab, fill-diag, hoist-lab (kind nvidia-h200, 2026-12-01e): the grid of warps and tc sized
#          to FILL workgroups per compute unit (not kept), the registers of those builds, and
#          warps' first pass requested before the workgroup's setup (see each phase).
# topk (kind nvidia-h200, 2026-12-01e): the decode bench with top-k routing (--ocltk_routing)
#          beside dequantize + CLBlast, then the even decode rows with cuBLAS (see the phase).
# route-cands (kind nvidia-h200, 2026-12-01e): profiles with entries at routed problems against
#          the shipped one, at routed and even decode rows (see the phase).
# maxrows-check (kind nvidia-h200, for 2026-12-01f): the decode cases whose choice the longest
#          segment (max_rows) changed, with the shipped profile and with the one before it (see
#          the phase; results/replay-2026-12-01f/).
# compact-lab, host-lab, sparse-lab, final-d (kind nvidia-h200, 2026-12-01d): compact launches (a grid slot
#          per expert with rows), the host's time per launch (the lab tool hostcost), prepared
#          launches and events only where asked for (see each phase; results/h200-2026-12-01d/).
# ncu-decode, dep-ab, lw-lab, lw-confirm, final-n, final-tests (kind nvidia-h200, 2026-12-01): Nsight
#          Compute on the decode kernels through bench/ptx_lab.py, the load-wait experiments and
#          tc's LW parameter (see each phase; results/h200-2026-12-01/README.md).
# whole-decode-bench (kind nvidia-h200-x2): the whole default tune on one H200; the NF4 forward
#          decode bench (both shapes) with the shipped profile and cuBLAS on the other.
# record:  an exhaustive --record of every kernel and class (the recorded spaces that
#          `tune --replay` and tests/test_tuner.cpp search offline).
# Everything lands in OUT/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_h200.sh OUT tune|clblast|samecall|record2|record-nf4|spaces-nf4|spaces-nf4-fwd|record-nf4-fwd-split|whole-nf4-bench|lut2-bench|tc-bench|tc-final|nf4-forward-all|nf4-refs|bwd-tune|bwd-final|tc-bwd|tc-bwd-bf16|bf16-tune|fwd-cands|regs-sweep|ab-decode|f32-rows|xs-ab|xs-variants|fr-lab|final-m|confirm-m|last-m|ncu-decode|dep-ab|lw-lab|lw-confirm|final-n|final-tests|pl-final|bulk-lab|chains-ab|lt-final|decode-final|bwd-lt|maxrows-check|compact-lab|host-lab|sparse-lab|final-d|whole-decode-bench|record}
phase=${2:-tune}
mkdir -p "$out"
call_start=$(date +%s)
profile=${PROFILE:-$out/nvidia-h200.yaml}
ref="python3 $here/cublas_ref.py"
export OCLTK_CACHE_DIR=/tmp/ocltk-cache

# gpu0/gpu1: env prefixes that give a command only the first or only the second GPU
# (CUDA_VISIBLE_DEVICES, which NVIDIA's OpenCL honours; else the ocltk device index).
pick_gpus() {
  if [ "$(CUDA_VISIBLE_DEVICES=1 "$here/ocltk" devices | grep -c '\] NVIDIA')" = 1 ]; then
    gpu0="env CUDA_VISIBLE_DEVICES=0"; gpu1="env CUDA_VISIBLE_DEVICES=1"
  else
    gpu0="env OCLTK_DEVICE=0"; gpu1="env OCLTK_DEVICE=1"
  fi
}
# pick_gpus, then each GPU's commands on half of the cores, with an ocltk program cache and
# an NVIDIA compute cache of their own, so neither side reuses the other's builds.
split_gpus() {
  pick_gpus
  local ncpu half
  ncpu=$(nproc); half=$((ncpu / 2))
  gpu0="taskset -c 0-$((half - 1)) $gpu0 OCLTK_CACHE_DIR=/tmp/ocltk-cache0 CUDA_CACHE_PATH=/tmp/nv-cache0"
  gpu1="taskset -c $half-$((ncpu - 1)) $gpu1 OCLTK_CACHE_DIR=/tmp/ocltk-cache1 CUDA_CACHE_PATH=/tmp/nv-cache1"
}
# timed NAME LABEL CMD...: runs CMD with stdout in OUT/NAME.txt and stderr in
# OUT/NAME-progress.txt, then appends "LABEL exit RC wall SECONDS s" to OUT/NAME.txt.
timed() {
  local name=$1 label=$2 start rc
  shift 2
  start=$(date +%s.%N)
  "$@" > "$out/$name.txt" 2> "$out/$name-progress.txt"
  rc=$?
  echo "$label exit $rc wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/$name.txt"
}
# mark WHAT: "WHAT at +SECONDS s" (since the call started) into OUT/device.txt.
mark() { echo "$1 at +$(( $(date +%s) - call_start )) s" >> "$out/device.txt"; }
# record_space NAME "DEV" BUDGET TUNE-ARGS...: an exhaustive recording (seeded order) into
# OUT/h200-space-NAME.jsonl, its profile into OUT/exhaustive-NAME.yaml.
record_space() {
  local name=$1 dev=$2 budget=$3
  shift 3
  timed "record-$name" record $dev "$here/ocltk" tune "$@" --strategy exhaustive --cold --repeats 2 \
    --budget "$budget" --cache - --record "$out/h200-space-$name.jsonl" --out "$out/exhaustive-$name.yaml"
}
# whole_tune "DEV": the whole default tune with empty caches of its own, as on a user's
# first run, with its report and every evaluated point.
whole_tune() {
  timed tune tune $1 OCLTK_CACHE_DIR=/tmp/ocltk-cache-whole "$here/ocltk" tune --out "$profile" \
    --report "$out/report" --record "$out/tune-record.jsonl"
}
# cuBLAS on the benches' gemm_nt and NF4 shapes, and the copy bandwidth.
cublas_refs() {
  $ref gemm --dtype f32 --shapes 1x4096x4096,16x4096x4096,4096x16x4096,4096x64x4096,4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm.json" > /dev/null
  $ref gemm --dtype f32 --accumulate --shapes 4096x4096x16,4096x4096x64,2048x2048x2048,4096x4096x4096 \
    --json "$out/cublas-gemm-accum.json" > /dev/null
  $ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-mixtral.json" > /dev/null
  $ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512,4096 --json "$out/cublas-nf4-fine.json" > /dev/null
  $ref copy > "$out/copy.json"
}
# shipped_nf4_decode "DEV" LIMIT FILTER: the NF4 bench cases FILTER with the shipped profile
# (staged beside this script), 20 calls back to back, cut at LIMIT seconds.
shipped_nf4_decode() {
  $1 timeout "$2" "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
    --benchmark_filter="$3" \
    --benchmark_out="$out/h200-nf4-decode.json" --benchmark_out_format=json > "$out/bench-nf4-decode.txt" 2>&1
  mark "bench done"
}
# cublas_decode mixtral|fine...: cuBLAS on those NF4 shapes at 1, 8 and 64 rows (fine: and 512), and the
# copy bandwidth, on the second GPU (away from what runs on the first).
cublas_decode() {
  local shape
  export CUDA_VISIBLE_DEVICES=1
  for shape in "$@"; do
    case $shape in
    mixtral) timeout 60 $ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64 \
               --json "$out/cublas-nf4-mixtral.json" > /dev/null ;;
    fine) timeout 40 $ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512 \
            --json "$out/cublas-nf4-fine.json" > /dev/null ;;
    esac
  done
  timeout 30 $ref copy > "$out/copy.json"
  unset CUDA_VISIBLE_DEVICES
  mark "cuBLAS done"
}
# ncu_lab NAME "PTX_LAB_ARGS": bench/ptx_lab.py (stage it) on the program cache OUT/cache
# (filled by a bench run first) with those arguments, timed and checked, its PTX kept as
# OUT/NAME.ptx with ptxas's report and the SASS (OUT/NAME.sass), then one launch profiled by
# `ncu --set full`: OUT/ncu-NAME-details.txt, -sass.csv (per instruction) and -raw.csv.
ncu_lab() {
  local name=$1 lab_args=$2 ncu
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # shellcheck disable=SC2086  # lab_args: flags, split on purpose
  timeout 120 python3 "$here/ptx_lab.py" --cache "$out/cache" $lab_args --dump-ptx "$out/$name.ptx" \
    --json "$out/lab.jsonl" > "$out/lab-$name.txt" 2>&1
  echo "lab $name rc=$?" >> "$out/device.txt"
  if [ -s "$out/$name.ptx" ]; then
    /usr/local/cuda/bin/ptxas -arch=sm_90 -v "$out/$name.ptx" -o "/tmp/$name.cubin" > "$out/$name-ptxas.txt" 2>&1 &&
      /usr/local/cuda/bin/cuobjdump -sass "/tmp/$name.cubin" > "$out/$name.sass" 2>&1
  fi
  # shellcheck disable=SC2086
  timeout 240 "$ncu" --set full --import-source no --kernel-name nf4_forward --launch-skip 2 --launch-count 1 \
    -f -o "/tmp/ncu-$name" python3 "$here/ptx_lab.py" --cache "$out/cache" $lab_args --reps 1 --calls 2 \
    > "$out/ncu-$name-run.txt" 2>&1
  echo "ncu $name rc=$?" >> "$out/device.txt"
  "$ncu" -i "/tmp/ncu-$name.ncu-rep" --page details --print-details all > "$out/ncu-$name-details.txt" 2>&1
  "$ncu" -i "/tmp/ncu-$name.ncu-rep" --page source --print-source sass --csv > "$out/ncu-$name-sass.csv" 2>&1
  "$ncu" -i "/tmp/ncu-$name.ncu-rep" --page raw --csv > "$out/ncu-$name-raw.csv" 2>&1
  mark "lab $name done"
}
# down_lab NAME CACHE PARAMS: ptx_lab.py on the warps program of PARAMS (REGS 128) in
# OUT/CACHE, timed at the Mixtral-like down projection (8 experts, N 4096, K 14336, one f32 row
# each), into OUT/down-NAME.txt and OUT/down.jsonl.
down_lab() {
  timeout 90 python3 "$here/ptx_lab.py" --cache "$out/$2" --algo warps --params "$3" --regs 128 --dtype f32 \
    --rows 8 --experts 8 --n 4096 --k 14336 --json "$out/down.jsonl" > "$out/down-$1.txt" 2>&1
  echo "down $1 rc=$?" >> "$out/device.txt"
}
# one_row_shipped NAME: the shipped profile's forward at one row per expert (Mixtral-like 8
# rows, fine-grained 64), f32 and bf16, into OUT/h200-nf4-NAME.json.
one_row_shipped() {
  nf4_bench "" "$1" "$here/nvidia-h200.yaml" 60 \
    'nf4_forward/(mixtral[^/]*/rows8|fine[^/]*/rows64)/decode/(ours|ours_bf16)/' --ocltk_rows=8,64 \
    --benchmark_min_time=0.05
}
# pl_down_labs: down_lab of the Mixtral-like one-row point in OUT/cache at PL 0 (shipped), 1
# and 2 (pl-final and bulk-lab: builds with an experimental PL parameter, not kept).
pl_down_labs() {
  local pl name
  for pl in 0 1 2; do
    name=pl$pl
    [ "$pl" = 0 ] && name=shipped
    down_lab "$name" cache "WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,PL=$pl,XL=4096"
  done
}
# ab_decode: the runs of the ab-decode phase (see there).
ab_decode() {
  local round
  ab_bench() {  # ab_bench NAME PROFILE
    nf4_bench "" "$1" "$2" 150 "${AB_FILTER:-nf4_(forward|backward)/.*/decode/(ours|ours_bf16)/}" \
      --ocltk_rows="${AB_ROWS:-1,8,16,64,128,512}" --benchmark_min_time=0.03
    mark "bench $1 done"
  }
  for round in $(seq "${AB_ROUNDS:-2}"); do
    if [ -n "${AB_OLD_BIN:-}" ]; then  # its own program cache: ptx_lab.py must find one build's entries
      OCLTK_CACHE_DIR="$out/cache-old" bench_bin="$here/$AB_OLD_BIN" ab_bench "old$round" "$here/old.yaml"
    else
      ab_bench "old$round" "$here/old.yaml"
    fi
    ab_bench "new$round" "$here/nvidia-h200.yaml"
  done
  rm -rf "$out/cache-old"
  if [ "${AB_CUBLAS:-1}" = 1 ]; then
    timeout 60 $ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows "${AB_CUBLAS_MIXTRAL:-8,16,64,128}" \
      --json "$out/cublas-nf4-mixtral.json" > /dev/null
    timeout 40 $ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows "${AB_CUBLAS_FINE:-64,512}" \
      --json "$out/cublas-nf4-fine.json" > /dev/null
  fi
}
# backward_shapes NAME ROWS E N K: OUT/shapes-NAME.yaml, the nf4_backward problems of that
# shape at each of ROWS (comma-separated), block 64, for tune --shapes.
backward_shapes() {
  local r
  { echo shapes:; for r in ${2//,/ }; do
      echo "  - {kernel: nf4_backward, experts: $3, n: $4, k: $5, rows: $r, block_size: 64}"; done; } > "$out/shapes-$1.yaml"
}
# pin_tc_entries SRC DST KERNEL PARAMS E N K ROWS BITS: DST is the profile SRC with `tc` PARAMS
# (e.g. "KG: 2, NSPLIT: 1, PF: 1, RT: 1, WGS: 256"; "ALGORITHM|PARAMS" for another algorithm,
# e.g. "warps|CW: 16, RB: 16, TR: 2") as KERNEL's decode entries for the problems
# E x N x K, block 64, at each of ROWS and input widths BITS (comma-separated), appended to
# the class's list (its first entry, the default problem's, stays first) after any entry of
# those problems is dropped (input_bits 32 and none alike). Fails, writing nothing, where
# KERNEL has no decode list.
pin_tc_entries() {
  python3 - "$@" <<'PY'
import re, sys
src, dst, kernel, params, e, n, k, rows, bits = sys.argv[1:]
algorithm, params = (p.strip() for p in params.split("|", 1)) if "|" in params else ("tc", params)
lines = open(src).read().split("\n")
head = lines.index(f"  {kernel}:")
start = head + 1
while start < len(lines) and lines[start] != "    decode:" and lines[start].startswith("    "):
    start += 1
if start >= len(lines) or lines[start] != "    decode:" or not lines[start + 1].lstrip().startswith("- "):
    sys.exit(f"{src}: {kernel} has no decode list to pin into")
start += 1
indent = re.match(r" *", lines[start]).group(0)
end = start
while end < len(lines) and (lines[end].startswith(indent + "- ") or lines[end].startswith(indent + "  ")):
    end += 1  # the decode entries, up to the next class

def problem(text):  # "{a: 1, b: 2}" -> {"a": 1, "b": 2}, input_bits 32 dropped (what none means)
    p = dict((key.strip(), int(v)) for key, v in (item.split(":") for item in text.strip("{} ").split(",")))
    if p.get("input_bits") == 32:
        del p["input_bits"]
    return p

wanted = [f"{{block_size: 64, experts: {e}, input_bits: {b}, k: {k}, n: {n}, rows: {r}}}"
          for r in rows.split(",") for b in bits.split(",")]
drop = [problem(w) for w in wanted]
kept, entry = [], []
for line in lines[start:end] + [indent + "- end"]:
    if line.startswith(indent + "- ") and entry:
        if not any(l.strip().startswith("problem: ") and problem(l.strip()[9:]) in drop for l in entry):
            kept += entry
        entry = []
    entry.append(line)
new = [f"{indent}- algorithm: {algorithm}\n{indent}  params: {{{params}}}\n{indent}  problem: {w}" for w in wanted]
open(dst, "w").write("\n".join(lines[:start] + kept + new + lines[end:]))
PY
}
# staged_test_nf4 LIMIT FILTER: test_nf4 (where staged beside this script) with gtest FILTER
# (all tests where empty), cut at TEST_LIMIT or LIMIT seconds, into OUT/test_nf4.txt; its exit
# status into OUT/device.txt.
staged_test_nf4() {
  [ -x "$here/test_nf4" ] || return 0
  local args=()
  [ -n "$2" ] && args=(--gtest_filter="$2")
  timeout "${TEST_LIMIT:-$1}" "$here/test_nf4" "${args[@]}" > "$out/test_nf4.txt" 2>&1
  echo "test_nf4 rc=$?" >> "$out/device.txt"
}
# override_tc_params SRC DST OVERRIDE: DST is the profile SRC with OVERRIDE (e.g. "XS: 1,
# REGS: 168") in the parameters of every nf4_forward `tc` entry, replacing those keys there.
override_tc_params() {
  python3 - "$@" <<'PY'
import re, sys
text, override = open(sys.argv[1]).read(), sys.argv[3].strip()
keys = [item.split(":")[0].strip() for item in override.split(",")]
head = text.index("\n  nf4_forward:\n")
end = re.search(r"\n  \S", text[head + 1:])
end = head + 1 + end.start() if end else len(text)
def edit(m):
    items = [i.strip() for i in m.group(2).split(",") if i.strip() and i.split(":")[0].strip() not in keys]
    return m.group(1) + ", ".join([override] + items) + "}"
body = re.sub(r"(- algorithm: tc\n\s+params: \{)([^}]*)\}", edit, text[head:end])
open(sys.argv[2], "w").write(text[:head] + body + text[end:])
PY
}
# nf4_bench "DEV" NAME PROFILE LIMIT FILTER [FLAGS...]: ocltk_bench_nf4's cases FILTER with
# PROFILE, 20 calls an iteration and FLAGS, cut at LIMIT seconds, into OUT/h200-nf4-NAME.json
# and OUT/bench-nf4-NAME.txt. $bench_bin, where set, names another bench binary (an older
# build staged beside it, for A/B runs of kernels).
nf4_bench() {
  local dev=$1 name=$2 profile=$3 limit=$4 filter=$5
  shift 5
  $dev timeout "$limit" "${bench_bin:-$here/ocltk_bench_nf4}" --ocltk_profile="$profile" --ocltk_calls=20 "$@" \
    --benchmark_filter="$filter" \
    --benchmark_out="$out/h200-nf4-$name.json" --benchmark_out_format=json > "$out/bench-nf4-$name.txt" 2>&1
}
# bench_pinned "DEV" TAG SRC KERNEL NAME E N K ROWS BITS TIMEOUT FILTER: each of $cands (tc param
# sets, or ALGORITHM|PARAMS, separated by ';') pinned into a copy of SRC (pin_tc_entries:
# KERNEL's decode entries at ROWS and BITS) and benched with FILTER (and $bench_extra's flags),
# into OUT/TAG-NAME-I.yaml, OUT/h200-nf4-NAME-TAGI.json and OUT/bench-nf4-NAME-TAGI.txt; the
# list in OUT/TAGidates-NAME.txt.
bench_pinned() {
  local dev=$1 tag=$2 src=$3 kernel=$4 name=$5 e=$6 n=$7 k=$8 rows=$9 bits=${10} limit=${11} filter=${12} i=0 cand
  IFS=';' read -ra list <<< "$cands"
  for cand in "${list[@]}"; do
    i=$((i + 1))
    pin_tc_entries "$src" "$out/$tag-$name-$i.yaml" "$kernel" "$cand" "$e" "$n" "$k" "$rows" "$bits" ||
      { mark "candidate $i of $name not pinned"; continue; }
    # shellcheck disable=SC2086  # bench_extra: flags, split on purpose
    nf4_bench "$dev" "$name-$tag$i" "$out/$tag-$name-$i.yaml" "$limit" "$filter" ${bench_extra:-}
    echo "$tag$i: $cand" >> "$out/${tag}idates-$name.txt"
    mark "bench $name candidate $i done"
  done
}
# host_cost: the lab tool hostcost (results/h200-2026-12-01d/hostcost.cpp; stage it) with the
# shipped profile, at the fine-grained shape and at a tiny one, into OUT/hostcost-*.txt.
host_cost() {
  [ -x "$here/hostcost" ] || return 0
  timeout 120 "$here/hostcost" "$here/nvidia-h200.yaml" > "$out/hostcost-fine.txt" 2>&1
  timeout 120 "$here/hostcost" "$here/nvidia-h200.yaml" small > "$out/hostcost-small.txt" 2>&1
  mark "hostcost done"
}
# sparse_pins FINE MIXTRAL: each of FINE pinned as nf4_forward's entries at 1 and 8 fine-grained
# rows, each of MIXTRAL at one Mixtral-like row, f32 and bf16 (pin_rows; ALGORITHM|PARAMS
# separated by ';'), benched at those rows.
sparse_pins() {
  pin_rows sfine fine 64 1408 2048 1,8 32,16 'nf4_forward/fine[^/]*/rows(1|8)/decode/(ours|ours_bf16)/' "$1"
  pin_rows smix mixtral 8 14336 4096 1 32,16 'nf4_forward/mixtral[^/]*/rows1/decode/(ours|ours_bf16)/' "$2"
}
# decode_refs: cuBLAS bf16 on dequantized weights at the decode rows of both NF4 shapes
# (cublas_ref.py nf4) and the copy bandwidth, into OUT/cublas-nf4-*.json and OUT/copy.json.
decode_refs() {
  timeout 60 $ref nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64 \
    --json "$out/cublas-nf4-mixtral.json" > /dev/null
  timeout 60 $ref nf4 --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512 \
    --json "$out/cublas-nf4-fine.json" > /dev/null
  timeout 30 $ref copy > "$out/copy.json"
}
# old_bench NAME FILTER ROWS: the decode bench of the build before (stage it as
# ocltk_bench_nf4_old) with its profile (old.yaml) and a program cache of its own, at ROWS,
# into OUT/h200-nf4-NAME.json.
old_bench() {
  OCLTK_CACHE_DIR="$out/cache-old" bench_bin="$here/ocltk_bench_nf4_old" nf4_bench "" "$1" "$here/old.yaml" 200 "$2" \
    --ocltk_rows="$3" --benchmark_min_time=0.03
}
# pin_rows TAG NAME E N K ROWS BITS FILTER CANDIDATES: bench_pinned of nf4_forward's decode
# entries at ROWS and BITS of the shape E x N x K for each of CANDIDATES (as $cands), in a copy
# of the shipped profile, benched at those rows only with FILTER.
pin_rows() {
  cands=$9 bench_extra="--ocltk_rows=$6 --benchmark_min_time=0.03" \
    bench_pinned "" "$1" "$here/nvidia-h200.yaml" nf4_forward "$2" "$3" "$4" "$5" "$6" "$7" 60 "$8"
}
# fill_profile SRC DST F: DST is SRC with the dense forward decode entries of both shapes (the
# shipped points of 2026-12-01d, listed here) pinned with FILL: F (pin_tc_entries, one after
# the other).
fill_profile() {
  local src=$1 dst=$2 f=$3 tmp
  tmp=$(mktemp)
  cp "$src" "$tmp"
  while IFS='!' read -r e n k rows bits cand; do
    pin_tc_entries "$tmp" "$tmp.next" nf4_forward "$cand, FILL: $f" "$e" "$n" "$k" "$rows" "$bits" || return 1
    mv "$tmp.next" "$tmp"
  done <<'LIST'
8!14336!4096!8!32,16!warps|CW: 32, NB: 1, PF: 0, RB: 8, REGS: 128, TR: 1, WGS: 256, XL: 4096
8!14336!4096!16!16!tc|KS: 1, NB: 1, PF: 1, RT: 2, WGS: 128
8!14336!4096!64!16!tc|KS: 1, NB: 1, PF: 1, RT: 2, WGS: 128
8!14336!4096!64!32!tc|FR: 8, KS: 2, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 1
64!1408!2048!64!32!warps|CW: 16, LT: 1, NB: 1, PF: 0, RB: 16, REGS: 128, TR: 1, WGS: 128
64!1408!2048!64!16!tc|KS: 1, NB: 1, PF: 0, RT: 4, WGS: 128
64!1408!2048!512!32!tc|FR: 8, KS: 1, NB: 1, PF: 0, REGS: 168, RT: 2, WGS: 128, XS: 1
64!1408!2048!512!16!tc|KS: 1, NB: 1, PF: 0, RT: 4, WGS: 128
LIST
  mv "$tmp" "$dst"
}
# serial_if_one_gpu: after split_gpus, on one H200 (kind nvidia-h200) gives both sides the
# first GPU and all cores and sets serial=1, so that a phase runs its sides one after the other.
serial_if_one_gpu() {
  serial=0
  [ "$(nvidia-smi -L | grep -c GPU)" -lt 2 ] || return 0
  local ncpu
  ncpu=$(nproc)
  gpu0=${gpu0/taskset -c 0-$((ncpu / 2 - 1))/taskset -c 0-$((ncpu - 1))}
  gpu1=$gpu0
  serial=1
}
# with_register_target SRC DST V: DST is the profile SRC with REGS: V in the parameters of
# every entry whose algorithm lists REGS in its parameter table (as `ocltk profile show`
# prints it: nf4_forward's tc, warps and lanes, nf4_backward's tc and stream), in place of
# any REGS there.
with_register_target() {
  local show status
  show=$(mktemp) || return 1
  "$here/ocltk" profile show "$1" > "$show" || { rm -f "$show"; return 1; }
  python3 - "$@" "$show" <<'PY'
import re, sys
src, dst, v, show = sys.argv[1:]
takes = set()  # (kernel, algorithm) whose shown parameters include REGS
for row in open(show):
    tokens = row.split()
    if len(tokens) < 3 or not any(t.startswith("REGS=") for t in tokens):
        continue
    i = 2
    while i < len(tokens) and "=" in tokens[i]:
        i += 1  # the problem's k=v tokens
    takes.add((tokens[0], tokens[i]))
kernel = algorithm = None
out = []
for line in open(src).read().split("\n"):
    if m := re.match(r"  (\w+):$", line):
        kernel = m.group(1)
    if m := re.match(r"\s*- algorithm: (\w+)$", line):
        algorithm = m.group(1)
    m = re.match(r"(\s*params: \{)(.*)\}$", line)
    if m and (kernel, algorithm) in takes:
        items = [i for i in m.group(2).split(", ") if i and not i.startswith("REGS:")]
        line = m.group(1) + ", ".join(sorted(items + [f"REGS: {v}"])) + "}"
    out.append(line)
open(dst, "w").write("\n".join(out))
PY
  status=$?
  rm -f "$show"
  return $status
}
mixtral_shapes() {
  printf 'shapes:\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 8, block_size: 64}\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 64, block_size: 64}\n' \
    > "$out/shapes-mixtral.yaml"
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; "$here/ocltk" devices; } > "$out/device.txt" 2>&1
case "$phase" in
tune)
  timed tune tune "$here/ocltk" tune --out "$profile" --report "$out/report" --record "$out/tune-record.jsonl"
  "$here/ocltk_bench" --ocltk_profile="$profile" --benchmark_repetitions=3 \
    --benchmark_out="$out/h200-gemm_nt.json" --benchmark_out_format=json > "$out/bench-gemm_nt.txt" 2>&1
  "$here/ocltk_bench_nf4" --ocltk_profile="$profile" \
    --benchmark_out="$out/h200-nf4.json" --benchmark_out_format=json > "$out/bench-nf4.txt" 2>&1
  cublas_refs
  ;;
clblast)
  start=$(date +%s.%N)
  "$here/clblast_tuner_xgemm" -m 2048 -n 2048 -k 2048 > "$out/clblast-tuner.txt" 2>&1
  echo "clblast_tuner_xgemm exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/clblast-tuner.txt"
  printf 'shapes:\n  - {kernel: gemm_nt, m: 2048, n: 2048, k: 2048}\n' > "$out/shapes-2048.yaml"
  timed tune-large tune "$here/ocltk" tune --kernels gemm_nt --classes large --shapes "$out/shapes-2048.yaml" \
    --budget 120 --cold --out "$out/large.yaml" --report "$out/report-large"
  mark "large tune done"
  "$here/ocltk_bench" --ocltk_profile="$out/large.yaml" --benchmark_repetitions=3 --benchmark_filter='large' \
    --benchmark_out="$out/h200-gemm_nt-large.json" --benchmark_out_format=json > "$out/bench-large.txt" 2>&1
  $ref gemm --dtype f32 --shapes 2048x2048x2048,4096x4096x4096 --json "$out/cublas-large.json" > /dev/null
  ;;
samecall)
  # On the two-GPU kind (nvidia-h200-x2): CLBlast's tuner on one H200 and our tuning on the
  # other, started together in one call (CLBlast's tuner alone takes ~580 s of the 600-s
  # limit of a call, so the two cannot run one after the other). Then, on our GPU, the
  # whole default tune, the large class with a 2048^3 shape, and the benches.
  pick_gpus
  theirs=$gpu0; ours=$gpu1
  # Separate cores too: CLBlast's tuner compiles one candidate at a time and must not wait
  # behind our compile threads (it ran 2 % to 60 % slower per compile when they shared).
  ncpu=$(nproc)
  theirs="taskset -c 0-3 $theirs"; ours="taskset -c 4-$((ncpu - 1)) $ours"
  echo "CLBlast tuner: $theirs; ocltk: $ours" >> "$out/device.txt"
  ( start=$(date +%s.%N)
    $theirs timeout "${CLBLAST_LIMIT:-592}" "$here/clblast_tuner_xgemm" -device 0 -m 2048 -n 2048 -k 2048 \
      > "$out/clblast-tuner.txt" 2>&1
    echo "clblast_tuner_xgemm exit $? wall $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/clblast-tuner.txt"
  ) &
  clblast=$!
  sleep 20 && nvidia-smi > "$out/nvidia-smi-both-busy.txt" 2>&1 &
  printf 'shapes:\n  - {kernel: gemm_nt, m: 2048, n: 2048, k: 2048}\n' > "$out/shapes-2048.yaml"
  timed tune-large tune $ours "$here/ocltk" tune --kernels gemm_nt --classes large --shapes "$out/shapes-2048.yaml" \
    --budget 70 --cold --out "$out/large.yaml" --report "$out/report-large" --record "$out/large-record.jsonl"
  mark "large tune done"
  $ours "$here/ocltk_bench" --ocltk_profile="$out/large.yaml" --benchmark_repetitions=3 --benchmark_filter='large' \
    --benchmark_out="$out/h200-gemm_nt-large.json" --benchmark_out_format=json > "$out/bench-large.txt" 2>&1
  whole_tune "$ours"
  $ours "$here/ocltk_bench" --ocltk_profile="$profile" --benchmark_repetitions=3 \
    --benchmark_out="$out/h200-gemm_nt.json" --benchmark_out_format=json > "$out/bench-gemm_nt.txt" 2>&1
  $ours "$here/ocltk_bench_nf4" --ocltk_profile="$profile" \
    --benchmark_out="$out/h200-nf4.json" --benchmark_out_format=json > "$out/bench-nf4.txt" 2>&1
  CUDA_VISIBLE_DEVICES=1 cublas_refs
  # Spare time on our GPU while CLBlast's tuner runs: NF4 decode tuned longer, into a copy
  # of the profile (the other entries kept), and the NF4 bench again with it.
  left=$(awk "BEGIN{print int(${CALL_END:-575} - ($(date +%s) - $call_start))}")
  if [ "$left" -gt 100 ]; then
    cp "$profile" "$out/nvidia-h200-nf4.yaml"
    $ours OCLTK_CACHE_DIR=/tmp/ocltk-cache-whole "$here/ocltk" tune --kernels nf4_forward,nf4_backward \
      --classes decode --budget $((left - 70)) --out "$out/nvidia-h200-nf4.yaml" \
      > "$out/tune-nf4-decode.txt" 2> "$out/tune-nf4-decode-progress.txt"
    $ours "$here/ocltk_bench_nf4" --ocltk_profile="$out/nvidia-h200-nf4.yaml" --benchmark_filter='/decode/' \
      > "$out/bench-nf4-decode.txt" 2>&1
  fi
  mark "ours done"
  wait $clblast
  cp clblast_xgemm_*.json "$out/" 2>/dev/null
  ;;
record2)
  # On the two-GPU kind: exhaustive recordings (seeded order) of gemm_nt on one H200 and
  # nf4_forward on the other, then on the second the NF4 forward decode tuned for the
  # Mixtral-like shape (the recording's programs are cached by then) and benched.
  split_gpus
  record_space gemm_nt "$gpu0" "${RECORD_BUDGET:-380}" --kernels gemm_nt &
  rec0=$!
  record_space nf4_forward "$gpu1" "${NF4_RECORD_BUDGET:-250}" --kernels nf4_forward
  mixtral_shapes
  $gpu1 "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-mixtral.yaml" --budget 50 \
    --out "$out/nf4-decode.yaml" > "$out/tune-nf4-decode.txt" 2> "$out/tune-nf4-decode-progress.txt"
  $gpu1 timeout 100 "$here/ocltk_bench_nf4" --ocltk_profile="$out/nf4-decode.yaml" --benchmark_filter='nf4_forward/.*/decode/' \
    > "$out/bench-nf4-decode.txt" 2>&1
  mark "nf4 done"
  wait $rec0
  ;;
record-nf4)
  # On the two-GPU kind: the whole NF4 spaces, nf4_forward on one H200 and nf4_backward on
  # the other (seeded exhaustive order; NF4 programs build slowly, so every class of a
  # kernel shares one run and its programs).
  split_gpus
  record_space nf4_forward "$gpu0" "${RECORD_BUDGET:-560}" --kernels nf4_forward &
  record_space nf4_backward "$gpu1" "${RECORD_BUDGET:-560}" --kernels nf4_backward &
  wait
  ;;
spaces-nf4)
  # On the two-GPU kind: nf4_forward's whole space (every class) recorded on one H200; on
  # the other, the whole default tune with empty caches of its own (timed, as a user's first
  # run), then nf4_backward's space with the time left.
  split_gpus
  end=${CALL_END:-560}
  record_space nf4_forward "$gpu0" $((end - 30)) --kernels nf4_forward &
  rec0=$!
  whole_tune "$gpu1"
  left=$(( end - 20 - ($(date +%s) - call_start) ))
  mark "whole tune done (nf4_backward budget $left s)"
  if [ "$left" -gt 60 ]; then record_space nf4_backward "$gpu1" "$left" --kernels nf4_backward; fi
  wait $rec0
  mark "all done"
  ;;
spaces-nf4-fwd)
  # On the two-GPU kind: nf4_forward's decode and small_batch spaces recorded on one H200;
  # on the other the whole default tune with empty caches of its own (timed), the NF4
  # decode bench with the shipped profile (staged beside this script) beside dequantize +
  # CLBlast, cuBLAS on the same shapes, then nf4_forward's prefill space with the time left.
  split_gpus
  end=${CALL_END:-555}
  record_space nf4_forward "$gpu0" $((end - 30)) --kernels nf4_forward --classes decode,small_batch &
  rec0=$!
  whole_tune "$gpu1"
  mark "whole tune done"
  shipped_nf4_decode "$gpu1" 150 'rows(1|8|64)/decode/(ours|baseline_dequant_clblast)'
  cublas_decode mixtral fine
  left=$(( end - 15 - ($(date +%s) - call_start) ))
  mark "prefill budget $left s"
  if [ "$left" -gt 30 ]; then
    record_space nf4_forward-prefill "$gpu1" "$left" --kernels nf4_forward --classes prefill
  fi
  wait $rec0
  mark "all done"
  ;;
record-nf4-fwd-split)
  # On the two-GPU kind: nf4_forward's spaces recorded side by side for the whole call,
  # decode alone on one H200 and small_batch + prefill on the other, in the exhaustive
  # order of seed 7 (another sample than the default seed's).
  split_gpus
  end=${CALL_END:-555}
  record_space nf4_forward-decode "$gpu1" $((end - 25)) --kernels nf4_forward --classes decode --seed 7 &
  rec1=$!
  record_space nf4_forward-sbpf "$gpu0" $((end - 25)) --kernels nf4_forward --classes small_batch,prefill --seed 7
  wait $rec1
  mark "all done"
  ;;
whole-nf4-bench)
  # On the two-GPU kind: the whole default tune with empty caches on one H200 (timed: the
  # 5-minute figure, and how the budget is shared over the classes); on the other the NF4
  # decode bench with the shipped profile (staged beside this script) beside dequantize +
  # CLBlast, and cuBLAS on the same shapes.
  split_gpus
  whole_tune "$gpu0" &
  tune0=$!
  shipped_nf4_decode "$gpu1" 200 'mixtral.*rows(1|8|64)/decode/(ours|baseline_dequant_clblast)'
  cublas_decode mixtral
  wait $tune0
  mark "all done"
  ;;
lut2-bench)
  # On the two-GPU kind: on one H200 the NF4 forward decode bench with the shipped profile
  # (its pair-table entries) beside dequantize + CLBlast at the Mixtral-like and fine-grained
  # shapes, then cuBLAS on the same shapes; on the other test_nf4 (stage it too; the checkout
  # must be reachable as /work/main for its data), then nf4_forward's decode class tuned for
  # the Mixtral-like problems and that profile benched.
  split_gpus
  (
    $gpu0 timeout 150 "$here/test_nf4" > "$out/test_nf4.txt" 2>&1
    echo "test_nf4 exit $?" >> "$out/test_nf4.txt"
    mark "test_nf4 done"
    mixtral_shapes
    timed tune-decode tune-decode $gpu0 "$here/ocltk" tune --kernels nf4_forward --classes decode \
      --shapes "$out/shapes-mixtral.yaml" --budget 120 --out "$out/tuned-decode.yaml"
    $gpu0 timeout 120 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned-decode.yaml" --ocltk_calls=20 \
      --benchmark_filter='nf4_forward/mixtral.*rows(8|64)/decode/ours' > "$out/bench-tuned-decode.txt" 2>&1
    mark "tuned decode done"
  ) &
  side0=$!
  shipped_nf4_decode "$gpu1" 330 'nf4_forward/(mixtral|fine).*rows(1|8|64|512)/decode/(ours|baseline_dequant_clblast)'
  cublas_decode mixtral fine
  wait $side0
  mark "all done"
  ;;
tc-bench|tc-final)
  # On the two-GPU kind: on one H200 test_nf4 (stage it too; the checkout must be reachable
  # as /work/main for its data), then the whole default tune with empty caches (timed); on
  # the other the NF4 forward decode bench with the shipped profile, ours with f32 and with
  # bf16 input (its tc entries) beside dequantize + CLBlast, at both shapes, then cuBLAS.
  split_gpus
  (
    $gpu0 timeout 150 "$here/test_nf4" > "$out/test_nf4.txt" 2>&1
    echo "test_nf4 exit $?" >> "$out/test_nf4.txt"
    mark "test_nf4 done"
    [ "$phase" = tc-bench ] && whole_tune "$gpu0"
  ) &
  side0=$!
  shipped_nf4_decode "$gpu1" 380 'nf4_forward/(mixtral|fine).*rows(8|64|512)/decode/(ours|ours_bf16|baseline_dequant_clblast)/'
  cublas_decode mixtral fine
  wait $side0
  mark "all done"
  ;;
nf4-forward-all)
  # Each shape's bench and its cuBLAS reference on one H200 (same GPU, same call).
  split_gpus
  all_rows() {  # all_rows "DEV" NAME FILTER CUBLAS-ARGS...
    local dev=$1 name=$2 filter=$3
    shift 3
    $dev timeout 330 "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
      --benchmark_filter="$filter" \
      --benchmark_out="$out/h200-nf4-forward-$name.json" --benchmark_out_format=json > "$out/bench-nf4-forward-$name.txt" 2>&1
    mark "bench $name done"
    $dev timeout 60 $ref nf4 "$@" --json "$out/cublas-nf4-$name.json" > /dev/null 2>&1
    mark "cuBLAS $name done"
  }
  (
    $gpu0 timeout 150 "$here/test_nf4" > "$out/test_nf4.txt" 2>&1
    echo "test_nf4 exit $?" >> "$out/test_nf4.txt"
    mark "test_nf4 done"
    all_rows "$gpu0" fine 'nf4_forward/fine.*/(ours|ours_bf16|rows(64|512)/decode/baseline_dequant_clblast)/' \
      --experts 64 --out-features 1408 --in-features 2048 --rows 1,8,64,512,4096,32768
  ) &
  side0=$!
  all_rows "$gpu1" mixtral 'nf4_forward/mixtral.*/(ours|ours_bf16|rows(8|64)/decode/baseline_dequant_clblast)/' \
    --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096
  $gpu1 timeout 30 $ref copy > "$out/copy.json" 2>&1
  wait $side0
  mark "all done"
  ;;
nf4-refs)
  # Each shape's bench, its cuBLAS and its bitsandbytes reference on one H200 (same GPU, same call).
  split_gpus
  refs() {  # refs "DEV" NAME FILTER ROWS REF-ARGS...
    local dev=$1 name=$2 filter=$3 rows=$4
    shift 4
    $dev timeout 300 "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
      --benchmark_filter="$filter" \
      --benchmark_out="$out/h200-nf4-$name.json" --benchmark_out_format=json > "$out/bench-nf4-$name.txt" 2>&1
    mark "bench $name done"
    $dev timeout 60 $ref nf4 "$@" --rows "$rows" --json "$out/cublas-nf4-$name.json" > /dev/null 2>&1
    mark "cuBLAS $name done"
    $dev timeout 150 python3 "$here/bnb_ref.py" "$@" --rows "$rows" --json "$out/bnb-nf4-$name.json" \
      > /dev/null 2> "$out/bnb-nf4-$name-progress.txt"
    mark "bitsandbytes $name done"
  }
  refs "$gpu0" fine 'nf4_forward/fine.*/(ours|ours_bf16)/|nf4_backward/fine.*/decode/ours/' 1,8,64,512,4096,32768 \
    --experts 64 --out-features 1408 --in-features 2048 &
  side0=$!
  refs "$gpu1" mixtral 'nf4_forward/mixtral.*/(ours|ours_bf16)/|nf4_backward/mixtral.*/decode/ours/' 1,8,64,512,4096 \
    --experts 8 --out-features 14336 --in-features 4096
  $gpu1 timeout 30 $ref copy > "$out/copy.json" 2>&1
  wait $side0
  mark "all done"
  ;;
bwd-tune|bwd-final|tc-bwd)
  split_gpus
  bwd() {  # bwd "DEV" NAME FILTER ROWS BENCH-ROWS REF-ARGS...
    local dev=$1 name=$2 filter=$3 rows=$4 bench_rows=$5 e n k
    shift 5
    e=$2; n=$4; k=$6
    if [ "$phase" = bwd-tune ]; then
      $dev timeout 150 "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
        --benchmark_filter="$filter" \
        --benchmark_out="$out/h200-nf4-$name-shipped.json" --benchmark_out_format=json > "$out/bench-nf4-$name-shipped.txt" 2>&1
      mark "bench $name (shipped profile) done"
    fi
    backward_shapes "$name" "$bench_rows" "$e" "$n" "$k"
    cp "$here/nvidia-h200.yaml" "$out/tuned-$name.yaml"
    timed "tune-$name" tune $dev "$here/ocltk" tune --kernels nf4_backward --classes decode --shapes "$out/shapes-$name.yaml" \
      --budget "${TUNE_BUDGET:-120}" --out "$out/tuned-$name.yaml" --record "$out/tune-$name.jsonl"
    mark "tune $name done"
    $dev timeout 220 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned-$name.yaml" --ocltk_calls=20 \
      --benchmark_filter="$filter" \
      --benchmark_out="$out/h200-nf4-$name-tuned.json" --benchmark_out_format=json > "$out/bench-nf4-$name-tuned.txt" 2>&1
    mark "bench $name (tuned) done"
    $dev timeout 60 $ref nf4 "$@" --rows "$rows" --json "$out/cublas-nf4-$name.json" > /dev/null 2>&1
    $dev timeout 150 python3 "$here/bnb_ref.py" "$@" --rows "$rows" --json "$out/bnb-nf4-$name.json" \
      > /dev/null 2> "$out/bnb-nf4-$name-progress.txt"
    mark "cuBLAS and bitsandbytes $name done"
  }
  fwd=ours_bf16
  [ "$phase" = bwd-final ] && fwd='(ours|ours_bf16)'
  if [ "$phase" = tc-bwd ]; then  # the backward only, with f32 and with bf16 grads
    mix="nf4_backward/mixtral.*/decode/(ours|ours_bf16)/" fine="nf4_backward/fine.*/decode/(ours|ours_bf16)/"
  else
    mix="nf4_backward/mixtral.*/decode/ours/|nf4_forward/mixtral.*/decode/$fwd/"
    fine="nf4_backward/fine.*/decode/ours/|nf4_forward/fine.*/decode/$fwd/"
  fi
  (
    if [ "$phase" != bwd-tune ]; then
      $gpu0 timeout "${TEST_LIMIT:-150}" "$here/test_nf4" > "$out/test_nf4.txt" 2>&1
      echo "test_nf4 exit $?" >> "$out/test_nf4.txt"
      mark "test_nf4 done"
    fi
    bwd "$gpu0" mixtral "$mix" 1,8,64 8,64 \
      --experts 8 --out-features 14336 --in-features 4096
  ) &
  side0=$!
  bwd "$gpu1" fine "$fine" 1,8,64,512 64,512 \
    --experts 64 --out-features 1408 --in-features 2048
  $gpu1 timeout 30 $ref copy > "$out/copy.json" 2>&1
  wait $side0
  mark "all done"
  ;;
tc-bwd-bf16)
  # Each shape on one H200: nf4_backward's decode class tuned (f32 grads, TUNE_BUDGET s; the
  # fine-grained side FINE_CLASSES, e.g. decode,small_batch,prefill, in FINE_BUDGET s) for the shape's
  # decode problems into a copy of the shipped profile, the backward decode bench (f32 and bf16
  # grads) with it, then bf16 candidates for tc (TC_CANDIDATES: param sets separated by ';'),
  # each added as an input_bits 16 entry at 8 rows per expert to a copy of the tuned profile
  # and benched with bf16 grads; bitsandbytes last.
  split_gpus
  cands=${TC_CANDIDATES:-"KG: 1, NSPLIT: 1, PF: 2, RT: 1, WGS: 128;KG: 2, NSPLIT: 1, PF: 2, RT: 1, WGS: 128;KG: 4, NSPLIT: 1, PF: 1, RT: 1, WGS: 128;KG: 2, NSPLIT: 1, PF: 1, RT: 1, WGS: 64"}
  tcb16() {  # tcb16 "DEV" NAME BENCH-ROWS CANDIDATE-ROWS E N K CLASSES BUDGET
    local dev=$1 name=$2 bench_rows=$3 cand_rows=$4 e=$5 n=$6 k=$7 classes=$8 budget=$9
    backward_shapes "$name" "$bench_rows" "$e" "$n" "$k"
    cp "$here/nvidia-h200.yaml" "$out/tuned-$name.yaml"
    timed "tune-$name" tune $dev "$here/ocltk" tune --kernels nf4_backward --classes "$classes" --shapes "$out/shapes-$name.yaml" \
      --budget "$budget" --out "$out/tuned-$name.yaml" --record "$out/tune-$name.jsonl"
    mark "tune $name done"
    $dev timeout 200 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned-$name.yaml" --ocltk_calls=20 \
      --benchmark_filter="nf4_backward/$name.*/decode/(ours|ours_bf16)/" \
      --benchmark_out="$out/h200-nf4-$name-tuned.json" --benchmark_out_format=json > "$out/bench-nf4-$name-tuned.txt" 2>&1
    mark "bench $name (tuned) done"
    bench_pinned "$dev" cand "$out/tuned-$name.yaml" nf4_backward "$name" "$e" "$n" "$k" "$cand_rows" 16 60 \
      "nf4_backward/$name.*/rows(${cand_rows//,/|})/decode/ours_bf16/"
    $dev timeout 100 python3 "$here/bnb_ref.py" --experts "$e" --out-features "$n" --in-features "$k" --rows "$bench_rows" \
      --json "$out/bnb-nf4-$name.json" > /dev/null 2> "$out/bnb-nf4-$name-progress.txt"
    mark "bitsandbytes $name done"
  }
  ( [ -n "${TEST_LIMIT:-}" ] && { $gpu0 timeout "$TEST_LIMIT" "$here/test_nf4" --gtest_filter='*Tc*' > "$out/test_nf4.txt" 2>&1
      echo "test_nf4 exit $?" >> "$out/test_nf4.txt"; mark "test_nf4 done"; }
    tcb16 "$gpu0" mixtral 8,64 64 8 14336 4096 decode "${TUNE_BUDGET:-100}" ) &
  side0=$!
  tcb16 "$gpu1" fine 64,512 512 64 1408 2048 "${FINE_CLASSES:-decode}" "${FINE_BUDGET:-${TUNE_BUDGET:-100}}"
  $gpu1 timeout 30 $ref copy > "$out/copy.json" 2>&1
  wait $side0
  mark "all done"
  ;;
bf16-tune)
  # Each shape on one H200: both directions' decode class tuned (TUNE_BUDGET s) for the
  # shape's decode problems with f32 and with bf16 input (`input_bits: 16` shapes) into a copy
  # of the shipped profile, then the decode bench (ours, ours_bf16, both directions) with it.
  # SHAPES picks the shapes (default "mixtral fine"); the program caches (NVIDIA's PTX) are
  # kept for ptxas -v.
  split_gpus
  tune16() {  # tune16 "DEV" NAME BENCH-ROWS E N K
    local dev=$1 name=$2 bench_rows=$3 e=$4 n=$5 k=$6 r kern bits
    { echo shapes:; for kern in nf4_forward nf4_backward; do for r in ${bench_rows//,/ }; do for bits in 32 16; do
        echo "  - {kernel: $kern, experts: $e, n: $n, k: $k, rows: $r, block_size: 64, input_bits: $bits}"
      done; done; done; } > "$out/shapes16-$name.yaml"
    cp "$here/nvidia-h200.yaml" "$out/tuned16-$name.yaml"
    timed "tune16-$name" tune $dev "$here/ocltk" tune --kernels nf4_forward,nf4_backward --classes decode \
      --shapes "$out/shapes16-$name.yaml" --budget "${TUNE_BUDGET:-240}" --out "$out/tuned16-$name.yaml" \
      --record "$out/tune16-$name.jsonl"
    mark "tune16 $name done"
    $dev timeout 240 "$here/ocltk_bench_nf4" --ocltk_profile="$out/tuned16-$name.yaml" --ocltk_calls=20 \
      --benchmark_filter="nf4_(forward|backward)/$name.*/rows(${bench_rows//,/|})/decode/(ours|ours_bf16)/" \
      --benchmark_out="$out/h200-nf4-$name-tuned16.json" --benchmark_out_format=json > "$out/bench-nf4-$name-tuned16.txt" 2>&1
    mark "bench $name (tuned16) done"
  }
  serial_if_one_gpu
  shapes=${SHAPES:-mixtral fine}  # e.g. SHAPES=mixtral: that shape alone
  side0=
  if [[ " $shapes " == *" mixtral "* ]]; then tune16 "$gpu0" mixtral 8,64 8 14336 4096 & side0=$!; fi
  [ "$serial" = 1 ] && [ -n "$side0" ] && wait $side0
  if [[ " $shapes " == *" fine "* ]]; then tune16 "$gpu1" fine 64,512 64 1408 2048; fi
  [ -n "$side0" ] && wait $side0
  tar czf "$out/ptx-cache.tgz" -C /tmp ocltk-cache0 ocltk-cache1 2>/dev/null
  mark "all done"
  ;;
fwd-cands)
  # Per shape on one H200, each of FWD_CANDIDATES (tc param sets separated by ';') pinned as
  # the nf4_forward decode entry of that shape's decode rows (f32 and 16-bit input) in a copy
  # of the shipped profile (any entry of the same problem dropped), and the forward decode
  # bench (ours, ours_bf16) with it, after the same bench with the shipped profile. test_nf4's
  # Tc tests first (TEST_LIMIT s); the program caches (NVIDIA's PTX) are kept for ptxas -v.
  # Used on 2026-11-30 (results/h200-2026-11-30k) with the cp.async ring (CP) of
  # tc_cp_ring.patch there.
  split_gpus
  cands=${FWD_CANDIDATES:-"KS: 1, NB: 1, PF: 1, RT: 2, WGS: 128;KS: 1, NB: 1, PF: 0, RT: 4, WGS: 128;KS: 1, NB: 1, PF: 2, RT: 1, WGS: 128"}
  fwdc() {  # fwdc "DEV" NAME ROWS E N K
    local dev=$1 name=$2 rows=$3 e=$4 n=$5 k=$6
    $dev timeout 90 "$here/ocltk_bench_nf4" --ocltk_profile="$here/nvidia-h200.yaml" --ocltk_calls=20 \
      --benchmark_filter="nf4_forward/$name.*/rows(${rows//,/|})/decode/(ours|ours_bf16)/" \
      --benchmark_out="$out/h200-nf4-$name-shipped.json" --benchmark_out_format=json > "$out/bench-nf4-$name-shipped.txt" 2>&1
    mark "bench $name shipped done"
    bench_pinned "$dev" fcand "$here/nvidia-h200.yaml" nf4_forward "$name" "$e" "$n" "$k" "$rows" 16,32 90 \
      "nf4_forward/$name.*/rows(${rows//,/|})/decode/(ours|ours_bf16)/"
  }
  serial_if_one_gpu
  ( [ -n "${TEST_LIMIT:-}" ] && { $gpu0 timeout "$TEST_LIMIT" "$here/test_nf4" --gtest_filter='*Tc*' > "$out/test_nf4.txt" 2>&1
      echo "test_nf4 exit $?" >> "$out/test_nf4.txt"; mark "test_nf4 done"; }
    fwdc "$gpu0" mixtral 8,64 8 14336 4096 ) &
  side0=$!
  [ "$serial" = 1 ] && wait $side0
  fwdc "$gpu1" fine 64,512 64 1408 2048
  wait $side0
  tar czf "$out/ptx-cache.tgz" -C /tmp ocltk-cache0 ocltk-cache1 2>/dev/null
  mark "all done"
  ;;
regs-sweep)
  # On one H200: test_program_cache and test_nf4's RegisterTarget test (TEST_LIMIT s), then
  # the NF4 decode bench (both directions, ours and ours_bf16; Mixtral-like 8, 16 and 64 rows,
  # fine-grained 64 and 512) with the shipped profile and with each REGS_VALUES copy of it
  # (with_register_target), 0.03 s of timed calls a case. Used on 2026-11-30
  # (results/h200-2026-11-30l).
  ( timeout "${TEST_LIMIT:-120}" "$here/test_program_cache"
    timeout "${TEST_LIMIT:-120}" "$here/test_nf4" --gtest_filter='*RegisterTarget*' ) > "$out/tests.txt" 2>&1
  mark "tests done"
  regs_bench() {  # regs_bench NAME PROFILE
    nf4_bench "" "$1" "$2" 150 \
      'nf4_(forward|backward)/(mixtral.*rows(8|16|64)|fine.*rows(64|512))/decode/(ours|ours_bf16)/' \
      --ocltk_rows=8,16,64,512 --benchmark_min_time=0.03
    mark "bench $1 done"
  }
  regs_bench regs0 "$here/nvidia-h200.yaml"
  for v in ${REGS_VALUES:-128 168 255 96}; do
    with_register_target "$here/nvidia-h200.yaml" "$out/regs$v.yaml" "$v" ||
      { mark "REGS $v not applied"; continue; }
    regs_bench "regs$v" "$out/regs$v.yaml"
  done
  mark "all done"
  ;;
ab-decode)
  # On one H200: the NF4 decode bench (AB_ROWS, default Mixtral-like 1 to 128 rows and
  # fine-grained 1 to 512; AB_FILTER, default forward and backward, ours and ours_bf16; 0.03 s
  # of timed calls a case) with $here/old.yaml, then the shipped profile, AB_ROUNDS times (2:
  # A B A B), then (AB_CUBLAS=1) cuBLAS bf16 on dequantized weights at the same shapes
  # (AB_CUBLAS_MIXTRAL and AB_CUBLAS_FINE: their rows). AB_OLD_BIN names a bench binary staged
  # beside this script for the old profile's runs (an older build). Used on 2026-11-30
  # (results/h200-2026-11-30l and -m) to check changes against the state before.
  ab_decode
  mark "all done"
  ;;
final-m)
  # On one H200 (2026-11-30m): test_profile's register-target tests (stage it); ab-decode
  # (see there; AB_* as there); then `tune --shapes` of nf4_forward's decode class at the
  # Mixtral-like rows 32 and 64 (f32) into a copy of the shipped profile, which it warm-starts
  # from, so that REGS is refined around the best found on a GPU: TUNE_BUDGET s (150), less
  # where the call's 590 s would not leave that much.
  export OCLTK_CACHE_DIR="$out/cache"
  if [ -x "$here/test_profile" ]; then
    timeout 60 "$here/test_profile" --gtest_filter='*RegisterTarget*' > "$out/test_profile.txt" 2>&1
    echo "test_profile rc=$?" >> "$out/device.txt"
  fi
  ab_decode
  mark "a/b done"
  printf 'shapes:\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 32, block_size: 64}\n  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 64, block_size: 64}\n' \
    > "$out/shapes-f32.yaml"
  cp "$here/nvidia-h200.yaml" "$out/tuned-f32.yaml"
  budget=$((590 - 40 - $(date +%s) + call_start))
  [ "$budget" -gt "${TUNE_BUDGET:-150}" ] && budget=${TUNE_BUDGET:-150}
  if [ "$budget" -ge 30 ]; then
    timed tune-f32 tune "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-f32.yaml" \
      --budget "$budget" --out "$out/tuned-f32.yaml" --record "$out/tune-f32.jsonl"
    mark "tune done ($budget s)"
  fi
  mark "all done"
  ;;
f32-rows)
  # On one H200: each of FWD_CANDIDATES (ALGORITHM|PARAMS separated by ';') pinned as the
  # nf4_forward decode entries for f32 input at 2 and 4 rows per expert (Mixtral-like 16 and
  # 32 rows, fine-grained 128 and 256) in a copy of the shipped profile, and the forward bench
  # (ours, f32 input; 0.03 s of timed calls a case) with it, after the shipped profile. Used
  # on 2026-11-30 (results/h200-2026-11-30l) for segment rows per pass of `warps` (TR).
  cands=${FWD_CANDIDATES:-"warps|CW: 16, NB: 1, PF: 0, RB: 16, REGS: 128, TR: 2, WGS: 128"}
  f32rows() {  # f32rows NAME ROWS E N K
    local filter="nf4_forward/$1.*/rows(${2//,/|})/decode/ours/"
    nf4_bench "" "$1-shipped" "$here/nvidia-h200.yaml" 90 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
    mark "bench $1 shipped done"
    bench_extra="--ocltk_rows=$2 --benchmark_min_time=0.03" \
      bench_pinned "" fcand "$here/nvidia-h200.yaml" nf4_forward "$1" "$3" "$4" "$5" "$2" 32 60 "$filter"
  }
  f32rows mixtral 16,32 8 14336 4096
  f32rows fine 128,256 64 1408 2048
  mark "all done"
  ;;
xs-ab)
  # (Calls 1 and 2 of 2026-11-30m ran xs-ab and xs-variants on an uncommitted build whose XS
  # had three values: 0, 1 = the pre-pass loaded a step ahead, 2 = in the step. f353205 keeps
  # 0 and the in-step pre-pass as 1, so those two phases' XS 2 needs that build.)
  # On one H200: test_nf4's tc tests (stage it; TEST_LIMIT s), then the forward bench with
  # f32 input (ours; 0.03 s of timed calls a case) with the shipped profile, whose tc entries
  # split x in a pre-pass (XS 1, the default since 2026-11-30m), and with a copy whose
  # nf4_forward tc entries load the split parts in their step (XS 2) or split x in every
  # warp (XS 0), alternated twice, at the rows of the f32 tc entries and beside them; then
  # FWD_CANDIDATES pinned as the f32 decode entries at 1, 2 and 4 rows per expert.
  staged_test_nf4 240 '*Tc*:*RegisterTarget*'
  export OCLTK_CACHE_DIR="$out/cache"  # NVIDIA's PTX of every program, for ptxas -v at home
  for xs in 0 2; do override_tc_params "$here/nvidia-h200.yaml" "$out/xs$xs.yaml" "XS: $xs"; done
  mark "profiles ready"
  xs_rows() {  # xs_rows NAME ROWS
    local filter="nf4_forward/$1.*/rows(${2//,/|})/(decode|small_batch|prefill)/ours/"
    for round in 1 2; do
      nf4_bench "" "$1-xs1-$round" "$here/nvidia-h200.yaml" 120 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
      nf4_bench "" "$1-xs2-$round" "$out/xs2.yaml" 120 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
      nf4_bench "" "$1-xs0-$round" "$out/xs0.yaml" 120 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
      mark "bench $1 round $round done"
    done
  }
  xs_rows mixtral 8,16,32,64,512
  xs_rows fine 64,128,256,512,4096,32768
  cands=${FWD_CANDIDATES:-"tc|KS: 2, NB: 1, PF: 1, RT: 2, WGS: 128, XS: 1;tc|KS: 2, NB: 1, PF: 1, RT: 2, WGS: 128, XS: 2"}
  filter_m='nf4_forward/mixtral.*/rows(8|16|32)/decode/ours/'
  bench_extra="--ocltk_rows=8,16,32 --benchmark_min_time=0.03" \
    bench_pinned "" xcand "$here/nvidia-h200.yaml" nf4_forward mixtral 8 14336 4096 8,16,32 32 60 "$filter_m"
  filter_f='nf4_forward/fine.*/rows(64|128|256)/decode/ours/'
  bench_extra="--ocltk_rows=64,128,256 --benchmark_min_time=0.03" \
    bench_pinned "" xcand "$here/nvidia-h200.yaml" nf4_forward fine 64 1408 2048 64,128,256 32 60 "$filter_f"
  mark "all done"
  ;;
xs-variants)
  # On one H200: test_nf4's tc tests (stage it; TEST_LIMIT s), then the forward bench with
  # f32 input (ours; 0.03 s of timed calls a case) with copies of the shipped profile whose nf4_forward tc entries take each of XS_VARIANTS
  # (parameter overrides separated by ';', e.g. "XS: 2, REGS: 168"), after the copy with XS 0
  # (each warp splits its x, as before 2026-11-30m), alternated twice, at f32 rows served by
  # tc; then FWD_CANDIDATES (ALGORITHM|PARAMS separated by ';') pinned as the f32 decode
  # entries at 4 and 8 rows per expert.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*Tc*'
  variants="XS: 0;${XS_VARIANTS:-XS: 1, REGS: 168;XS: 2, REGS: 168;XS: 2}"
  IFS=';' read -ra vlist <<< "$variants"
  i=0
  for v in "${vlist[@]}"; do
    override_tc_params "$here/nvidia-h200.yaml" "$out/xv$i.yaml" "$v"
    echo "xv$i: $v" >> "$out/variants.txt"
    i=$((i + 1))
  done
  mark "profiles ready"
  xv_rows() {  # xv_rows NAME ROWS
    local filter="nf4_forward/$1.*/rows(${2//,/|})/(decode|small_batch|prefill)/ours/" j
    for round in 1 2; do
      for j in $(seq 0 $((i - 1))); do
        nf4_bench "" "$1-xv$j-$round" "$out/xv$j.yaml" 120 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
      done
      mark "bench $1 round $round done"
    done
  }
  xv_rows mixtral 32,64,512
  xv_rows fine 512,4096,32768
  cands=${FWD_CANDIDATES:-"tc|KS: 2, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 2;tc|KS: 1, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 2"}
  bench_extra="--ocltk_rows=32,64 --benchmark_min_time=0.03" \
    bench_pinned "" vcand "$out/xv0.yaml" nf4_forward mixtral 8 14336 4096 32,64 32 60 \
    'nf4_forward/mixtral.*/rows(32|64)/decode/ours/'
  bench_extra="--ocltk_rows=256,512 --benchmark_min_time=0.03" \
    bench_pinned "" vcand "$out/xv0.yaml" nf4_forward fine 64 1408 2048 256,512 32 60 \
    'nf4_forward/fine.*/rows(256|512)/decode/ours/'
  mark "all done"
  ;;
fr-lab)
  # On one H200 (2026-11-30m): test_nf4's tc tests (stage it; TEST_LIMIT s); then per shape,
  # at 1 to 8 rows per expert with f32 input, the shipped profile, FWD_CANDIDATES pinned as
  # the decode entries, and OLD_CANDIDATES pinned and benched with an older bench binary
  # (ocltk_bench_nf4_old, staged beside it: four products a step, XS 2 = the pre-pass); then
  # the small_batch and prefill rows with every nf4_forward tc entry overridden by each of
  # XS_VARIANTS (new binary) and OLD_VARIANTS (old binary).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*Tc*'
  new_cands=${FWD_CANDIDATES:-"tc|KS: 2, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 1, FR: 8;tc|KS: 2, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 1, FR: 4;tc|KS: 1, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 1, FR: 4;tc|KS: 2, NB: 1, PF: 1, RT: 2, WGS: 128, XS: 1, FR: 4, REGS: 168"}
  old_cands=${OLD_CANDIDATES:-"tc|KS: 2, NB: 1, PF: 0, RT: 2, WGS: 128, XS: 2"}
  lab_shape() {  # lab_shape NAME ROWS E N K
    local filter="nf4_forward/$1.*/rows(${2//,/|})/decode/ours/"
    nf4_bench "" "$1-shipped" "$here/nvidia-h200.yaml" 90 "$filter" --ocltk_rows="$2" --benchmark_min_time=0.03
    cands=$new_cands bench_extra="--ocltk_rows=$2 --benchmark_min_time=0.03" \
      bench_pinned "" new "$here/nvidia-h200.yaml" nf4_forward "$1" "$3" "$4" "$5" "$2" 32 60 "$filter"
    cands=$old_cands bench_bin="$here/ocltk_bench_nf4_old" bench_extra="--ocltk_rows=$2 --benchmark_min_time=0.03" \
      bench_pinned "" old "$here/nvidia-h200.yaml" nf4_forward "$1" "$3" "$4" "$5" "$2" 32 60 "$filter"
    mark "lab $1 done"
  }
  lab_shape mixtral 8,16,32,64 8 14336 4096
  lab_shape fine 64,128,256,512 64 1408 2048
  overrides() {  # overrides TAG "VARIANTS": OUT/TAGi.yaml, each tc entry of nf4_forward overridden
    local tag=$1 i=0 v
    IFS=';' read -ra vlist <<< "$2"
    for v in "${vlist[@]}"; do
      override_tc_params "$here/nvidia-h200.yaml" "$out/$tag$i.yaml" "$v"
      echo "$tag$i: $v" >> "$out/variants.txt"
      i=$((i + 1))
    done
  }
  overrides nv "${XS_VARIANTS:-XS: 1, FR: 8, REGS: 168}"
  overrides ov "${OLD_VARIANTS:-XS: 2, REGS: 168}"
  big='nf4_forward/(mixtral.*rows512|fine.*rows(4096|32768))/(small_batch|prefill)/ours/'
  for round in 1 2; do
    for f in "$out"/nv*.yaml; do
      nf4_bench "" "big-$(basename "$f" .yaml)-$round" "$f" 120 "$big" --ocltk_rows=512,4096,32768 --benchmark_min_time=0.03
    done
    for f in "$out"/ov*.yaml; do
      bench_bin="$here/ocltk_bench_nf4_old" \
        nf4_bench "" "big-$(basename "$f" .yaml)-$round" "$f" 120 "$big" --ocltk_rows=512,4096,32768 --benchmark_min_time=0.03
    done
    mark "big round $round done"
  done
  mark "all done"
  ;;
confirm-m)
  # On one H200 (2026-11-30m): the f32 forward bench at Mixtral-like rows 32 and 64 and
  # fine-grained rows 256 with the shipped profile and with $here/tuned-call4.yaml (call 4's
  # tune of those problems), alternated twice; then `tune --shapes` of the same three problems
  # (TUNE_BUDGET s, 120) into a copy of the shipped profile, and the bench with its profile.
  export OCLTK_CACHE_DIR="$out/cache"
  filter='nf4_forward/(mixtral[^/]*/rows(32|64)|fine[^/]*/rows256)/decode/ours/'
  for round in 1 2; do
    nf4_bench "" "shipped-$round" "$here/nvidia-h200.yaml" 90 "$filter" --ocltk_rows=32,64,256 --benchmark_min_time=0.03
    nf4_bench "" "tuned4-$round" "$here/tuned-call4.yaml" 90 "$filter" --ocltk_rows=32,64,256 --benchmark_min_time=0.03
    mark "bench round $round done"
  done
  { echo shapes:
    for r in 32 64; do echo "  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: $r, block_size: 64}"; done
    echo "  - {kernel: nf4_forward, experts: 64, n: 1408, k: 2048, rows: 256, block_size: 64}"; } > "$out/shapes-f32.yaml"
  cp "$here/nvidia-h200.yaml" "$out/tuned-f32.yaml"
  timed tune-f32 tune "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-f32.yaml" \
    --budget "${TUNE_BUDGET:-120}" --out "$out/tuned-f32.yaml" --record "$out/tune-f32.jsonl"
  mark "tune done"
  nf4_bench "" "tuned5" "$out/tuned-f32.yaml" 90 "$filter" --ocltk_rows=32,64,256 --benchmark_min_time=0.03
  mark "all done"
  ;;
last-m)
  # On one H200 (2026-11-30m): the whole test_nf4 (stage it; TEST_LIMIT s); FWD_CANDIDATES
  # pinned as the f32 decode entry of fine-grained rows 256 and 512 and benched after the
  # shipped profile; then `tune --shapes` naming the decode class's own problem
  # (fine-grained rows 256) and Mixtral-like rows 64 (TUNE_BUDGET s, 60) into a copy of the
  # shipped profile, and the bench with the profile it wrote (it must load: one entry a
  # problem).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 200 ''
  filter='nf4_forward/(mixtral[^/]*/rows64|fine[^/]*/rows(256|512))/decode/ours/'
  nf4_bench "" shipped "$here/nvidia-h200.yaml" 60 "$filter" --ocltk_rows=64,256,512 --benchmark_min_time=0.03
  cands=${FWD_CANDIDATES:-"tc|FR: 4, KS: 1, NB: 1, PF: 0, REGS: 168, RT: 2, WGS: 128, XS: 1"} \
    bench_extra="--ocltk_rows=256 --benchmark_min_time=0.03" \
    bench_pinned "" lcand "$here/nvidia-h200.yaml" nf4_forward fine 64 1408 2048 256 32 60 \
    'nf4_forward/fine[^/]*/rows256/decode/ours/'
  cands=${FWD_CANDIDATES512:-"tc|FR: 8, KS: 2, NB: 1, PF: 0, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 8, KS: 1, NB: 1, PF: 0, REGS: 168, RT: 2, WGS: 128, XS: 1"} \
    bench_extra="--ocltk_rows=512 --benchmark_min_time=0.03" \
    bench_pinned "" lcand "$here/nvidia-h200.yaml" nf4_forward fine512 64 1408 2048 512 32 60 \
    'nf4_forward/fine[^/]*/rows512/decode/ours/'
  { echo shapes:
    echo "  - {kernel: nf4_forward, experts: 64, n: 1408, k: 2048, rows: 256, block_size: 64}"
    echo "  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 64, block_size: 64}"; } > "$out/shapes-f32.yaml"
  cp "$here/nvidia-h200.yaml" "$out/tuned-f32.yaml"
  timed tune-f32 tune "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-f32.yaml" \
    --budget "${TUNE_BUDGET:-60}" --out "$out/tuned-f32.yaml" --record "$out/tune-f32.jsonl"
  mark "tune done"
  nf4_bench "" tuned "$out/tuned-f32.yaml" 60 "$filter" --ocltk_rows=64,256,512 --benchmark_min_time=0.03
  mark "all done"
  ;;
ncu-decode)
  # On one H200 (2026-12-01): the decode kernels as OpenCL runs them, seen by Nsight Compute.
  # The bench (shipped profile, Mixtral-like 8 and 32 rows, f32 and bf16) fills the program
  # cache with NVIDIA's PTX; bench/ptx_lab.py (stage it) runs each entry's PTX through the
  # CUDA driver, checks it against a float64 reference and times it (20 launches per event
  # pair), then `ncu --set full` profiles one launch of each: details and per-SASS
  # stall samples (OUT/ncu-NAME-*.txt, .csv), the SASS itself (OUT/NAME.sass).
  export OCLTK_CACHE_DIR="$out/cache"
  nf4_bench "" shipped "$here/nvidia-h200.yaml" 90 'nf4_forward/mixtral[^/]*/rows(8|32)/decode/(ours|ours_bf16)/' \
    --ocltk_rows=8,32 --benchmark_min_time=0.03
  mark "bench done"
  # NAME|ptx_lab arguments
  labs=${LAB_CASES:-"warps8|--algo warps --params WGS=128,CW=16,RB=16,TR=1,NB=1,PF=0 --regs 128 --dtype f32 --rows 8
tc8bf16|--algo tc --params WGS=128,RT=2,PF=1,KS=1,NB=1 --type-variant 2 --dtype bf16 --rows 8
tc32|--algo tc --params WGS=128,RT=2,PF=0,KS=1,NB=1,FR=4,XS=1 --type-variant 0 --regs 128 --dtype f32 --rows 32"}
  while IFS='|' read -r name lab_args; do
    [ -n "$name" ] && ncu_lab "$name" "$lab_args"
  done <<< "$labs"
  rm -rf "$out/cache"
  mark "all done"
  ;;
dep-ab)
  # On one H200 (2026-12-01, calls 3 and 4): uncommitted builds whose loads a group ahead wait
  # for the codes of the group being multiplied in every loop (tc, and warps at PF 1; call 4's
  # build is results/h200-2026-12-01/call4/dep-v2.patch; LW 1 is what came of it). The forward
  # decode bench with the shipped profile, the build before the change (stage its
  # bench as ocltk_bench_nf4_old and the profile again as old.yaml) and after, alternated
  # (AB_ROUNDS); then candidates with loads ahead pinned (Mixtral-like 8 rows f32: warps PF 1;
  # 32 rows f32 and 8 rows bf16: tc with PF 1 or 2), and Nsight Compute on the new bf16 point
  # (ptx_lab.py, as ncu-decode).
  export OCLTK_CACHE_DIR="$out/cache"
  AB_FILTER=${AB_FILTER:-'nf4_forward/.*/decode/(ours|ours_bf16)/'} AB_ROWS=${AB_ROWS:-8,32,64,256,512} AB_CUBLAS=0 \
    AB_OLD_BIN=${AB_OLD_BIN:-ocltk_bench_nf4_old} ab_decode
  pin_rows pin mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
    "${WARPS_CANDIDATES:-"warps|CW: 16, NB: 1, PF: 1, RB: 16, REGS: 0, TR: 1, WGS: 128;warps|CW: 16, NB: 1, PF: 1, RB: 16, REGS: 168, TR: 1, WGS: 128;warps|CW: 16, NB: 1, PF: 1, RB: 8, REGS: 128, TR: 1, WGS: 128"}"
  pin_rows pin mix32 8 14336 4096 32 32 'nf4_forward/mixtral[^/]*/rows32/decode/ours/' \
    "${TC32_CANDIDATES:-"tc|FR: 4, KS: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 4, KS: 1, NB: 1, PF: 1, REGS: 0, RT: 2, WGS: 128, XS: 1"}"
  pin_rows pin mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
    "${BF16_CANDIDATES:-"tc|KS: 1, NB: 1, PF: 2, RT: 1, WGS: 128;tc|KS: 1, NB: 1, PF: 1, RT: 2, WGS: 256;tc|KS: 1, NB: 1, PF: 1, RT: 1, WGS: 128"}"
  mark "candidates done"
  ncu_lab tc8bf16 "--algo tc --params WGS=128,RT=2,PF=1,KS=1,NB=1 --type-variant 2 --dtype bf16 --rows 8"
  rm -rf "$out/cache"
  mark "all done"
  ;;
lw-lab)
  # On one H200 (2026-12-01, call 6; call 5 ran an uncommitted LW 1 that loaded a round's
  # groups together): tc's LW 1 (the loads ahead issued once the codes of the group about to
  # be multiplied are in, in a steady loop without tests) pinned beside the shipped
  # entries, per decode problem; the shipped
  # profile with the build before LW (ocltk_bench_nf4_old, its own program cache) and after,
  # once each (LW 0 must not move); then Nsight Compute on one LW 1 point (ptx_lab.py).
  export OCLTK_CACHE_DIR="$out/cache"
  OCLTK_CACHE_DIR="$out/cache-old" bench_bin="$here/ocltk_bench_nf4_old" nf4_bench "" old "$here/nvidia-h200.yaml" 90 \
    'nf4_forward/mixtral[^/]*/rows(8|32|64)/decode/(ours|ours_bf16)/' --ocltk_rows=8,32,64 --benchmark_min_time=0.03
  nf4_bench "" new "$here/nvidia-h200.yaml" 90 \
    'nf4_forward/mixtral[^/]*/rows(8|32|64)/decode/(ours|ours_bf16)/' --ocltk_rows=8,32,64 --benchmark_min_time=0.03
  mark "shipped done"
  pin_rows lw mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
    "tc|KS: 1, LW: 1, NB: 1, PF: 1, RT: 2, WGS: 128;tc|KS: 1, LW: 1, NB: 1, PF: 1, RT: 1, WGS: 128;tc|KS: 1, LW: 1, NB: 1, PF: 2, RT: 1, WGS: 128"
  pin_rows lw mix64bf16 8 14336 4096 64 16 'nf4_forward/mixtral[^/]*/rows64/decode/ours_bf16/' \
    "tc|KS: 1, LW: 1, NB: 1, PF: 1, RT: 2, WGS: 128;tc|KS: 1, LW: 1, NB: 1, PF: 2, RT: 1, WGS: 128"
  pin_rows lw mix32 8 14336 4096 32 32 'nf4_forward/mixtral[^/]*/rows32/decode/ours/' \
    "tc|FR: 4, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 4, KS: 1, LW: 1, NB: 1, PF: 2, REGS: 168, RT: 1, WGS: 128, XS: 1"
  pin_rows lw mix64 8 14336 4096 64 32 'nf4_forward/mixtral[^/]*/rows64/decode/ours/' \
    "tc|FR: 8, KS: 2, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 8, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1"
  pin_rows lw fine256 64 1408 2048 256 32 'nf4_forward/fine[^/]*/rows256/decode/ours/' \
    "tc|FR: 4, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1"
  pin_rows lw fine64bf16 64 1408 2048 64 16 'nf4_forward/fine[^/]*/rows64/decode/ours_bf16/' \
    "tc|KS: 1, LW: 1, NB: 1, PF: 1, RT: 2, WGS: 128;tc|KS: 1, LW: 1, NB: 1, PF: 1, RT: 2, WGS: 64"
  mark "candidates done"
  ncu_lab lw8bf16 "--algo tc --params WGS=128,RT=2,PF=1,KS=1,NB=1,LW=1 --type-variant 2 --dtype bf16 --rows 8"
  rm -rf "$out/cache" "$out/cache-old"
  mark "all done"
  ;;
lw-confirm)
  # On one H200 (2026-12-01): test_nf4's tc tests (stage test_nf4; TEST_LIMIT s), then LW 1
  # candidates for the f32 entries of fine-grained rows 256 and 512 pinned and benched, the
  # shipped profile and the candidates alternated (LW_ROUNDS), and the profile given as
  # LW_PROFILE (stage it as lw.yaml; the shipped one where absent) beside the shipped one.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 300 '*TcAtSeveral*:*EveryAlgorithm*'
  filter='nf4_forward/fine[^/]*/rows(256|512)/decode/ours/'
  for round in $(seq "${LW_ROUNDS:-2}"); do
    nf4_bench "" "shipped$round" "$here/nvidia-h200.yaml" 60 "$filter" --ocltk_rows=256,512 --benchmark_min_time=0.03
    pin_rows "r$round" fine256 64 1408 2048 256 32 'nf4_forward/fine[^/]*/rows256/decode/ours/' \
      "${FINE256_CANDIDATES:-"tc|FR: 4, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 4, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 128, RT: 2, WGS: 128, XS: 1"}"
    pin_rows "r$round" fine512 64 1408 2048 512 32 'nf4_forward/fine[^/]*/rows512/decode/ours/' \
      "${FINE512_CANDIDATES:-"tc|FR: 8, KS: 1, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1;tc|FR: 8, KS: 2, LW: 1, NB: 1, PF: 1, REGS: 168, RT: 2, WGS: 128, XS: 1"}"
    if [ -f "$here/lw.yaml" ]; then
      nf4_bench "" "lwprofile$round" "$here/lw.yaml" 60 "$filter" --ocltk_rows=256,512 --benchmark_min_time=0.03
    fi
    mark "round $round done"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
final-n)
  # On one H200 (2026-12-01): the NF4 forward decode bench with the profile before LW (stage
  # HEAD's as old.yaml) and the shipped one, alternated (AB_ROUNDS), then cuBLAS on the same
  # shapes; then `tune --shapes` of the default decode problem (fine-grained rows 256, f32)
  # into a copy of old.yaml (TUNE_BUDGET s), and the bench with the profile it wrote.
  export OCLTK_CACHE_DIR="$out/cache"
  AB_FILTER='nf4_forward/.*/decode/(ours|ours_bf16)/' AB_ROWS=8,32,64,256,512 ab_decode
  { echo shapes:
    echo "  - {kernel: nf4_forward, experts: 64, n: 1408, k: 2048, rows: 256, block_size: 64}"; } > "$out/shapes-f32.yaml"
  cp "$here/old.yaml" "$out/tuned-f32.yaml"
  timed tune-f32 tune "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-f32.yaml" \
    --budget "${TUNE_BUDGET:-60}" --out "$out/tuned-f32.yaml" --record "$out/tune-f32.jsonl"
  mark "tune done"
  nf4_bench "" tuned "$out/tuned-f32.yaml" 60 'nf4_forward/fine[^/]*/rows256/decode/ours/' --ocltk_rows=256 \
    --benchmark_min_time=0.03
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-lab)
  # On one H200 (2026-12-01b): warps with x staged in local memory (XL) pinned beside the
  # shipped entries at one row per expert (Mixtral-like 8 rows, fine-grained 64; f32 and
  # bf16), the shipped profile benched before and after; then Nsight Compute on the
  # Mixtral-like f32 point with XL 4096 (ptx_lab.py, as ncu-decode).
  export OCLTK_CACHE_DIR="$out/cache"
  xl_filter='nf4_forward/(mixtral[^/]*/rows8|fine[^/]*/rows64)/decode/(ours|ours_bf16)/'
  nf4_bench "" shipped1 "$here/nvidia-h200.yaml" 60 "$xl_filter" --ocltk_rows=8,64 --benchmark_min_time=0.03
  w="warps|NB: 1, RB: 16, TR: 1"
  pin_rows xl mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
    "${XL_MIX8:-"$w, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 4096;$w, CW: 16, PF: 1, REGS: 168, WGS: 128, XL: 4096;$w, CW: 16, PF: 0, REGS: 128, WGS: 256, XL: 4096;warps|NB: 1, RB: 8, TR: 1, CW: 32, PF: 0, REGS: 128, WGS: 128, XL: 4096;warps|NB: 4, RB: 16, TR: 1, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 4096"}"
  pin_rows xl mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
    "${XL_MIX8BF16:-"$w, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 4096;$w, CW: 16, PF: 1, REGS: 168, WGS: 128, XL: 4096"}"
  pin_rows xl fine64 64 1408 2048 64 32 'nf4_forward/fine[^/]*/rows64/decode/ours/' \
    "${XL_FINE64:-"$w, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 2048;warps|NB: 4, RB: 16, TR: 1, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 2048"}"
  pin_rows xl fine64bf16 64 1408 2048 64 16 'nf4_forward/fine[^/]*/rows64/decode/ours_bf16/' \
    "${XL_FINE64BF16:-"$w, CW: 16, PF: 0, REGS: 128, WGS: 128, XL: 2048;$w, CW: 16, PF: 1, REGS: 168, WGS: 128, XL: 2048"}"
  mark "candidates done"
  nf4_bench "" shipped2 "$here/nvidia-h200.yaml" 60 "$xl_filter" --ocltk_rows=8,64 --benchmark_min_time=0.03
  ncu_lab xl8 "--algo warps --params WGS=128,CW=16,RB=16,TR=1,NB=1,PF=0,XL=4096 --regs 128 --dtype f32 --rows 8"
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-confirm)
  # On one H200 (2026-12-01b): warps candidates at Mixtral-like 8 rows f32 with and without
  # staged x (XL 4096) at WGS 256, alternated with the shipped profile (XL_ROUNDS rounds).
  export OCLTK_CACHE_DIR="$out/cache"
  w="warps|NB: 1, RB: 16, TR: 1, CW: 16"
  for round in $(seq "${XL_ROUNDS:-2}"); do
    nf4_bench "" "shipped$round" "$here/nvidia-h200.yaml" 60 'nf4_forward/mixtral[^/]*/rows8/decode/(ours|ours_bf16)/' \
      --ocltk_rows=8 --benchmark_min_time=0.05
    pin_rows "r$round" mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
      "${XL_MIX8:-"$w, PF: 0, REGS: 128, WGS: 256, XL: 4096;$w, PF: 0, REGS: 128, WGS: 256, XL: 0;$w, PF: 0, REGS: 0, WGS: 256, XL: 4096;$w, PF: 1, REGS: 168, WGS: 256, XL: 4096;warps|NB: 1, RB: 8, TR: 1, CW: 32, PF: 0, REGS: 128, WGS: 256, XL: 4096"}"
    pin_rows "r$round" mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
      "${XL_MIX8BF16:-"$w, PF: 0, REGS: 128, WGS: 256, XL: 4096;$w, PF: 0, REGS: 128, WGS: 128, XL: 4096"}"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-points)
  # On one H200 (2026-12-01b): warps points with staged x (XL) around xl-confirm's best, at
  # one row per expert of both shapes, f32 and bf16, alternated with the shipped profile
  # (XL_ROUNDS rounds).
  export OCLTK_CACHE_DIR="$out/cache"
  a="warps|NB: 1, TR: 1, CW: 32, RB: 8"
  b="warps|NB: 1, TR: 1, CW: 16, RB: 16"
  for round in $(seq "${XL_ROUNDS:-2}"); do
    one_row_shipped "shipped$round"
    pin_rows "r$round" mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
      "$a, PF: 0, REGS: 128, WGS: 256, XL: 4096;$a, PF: 0, REGS: 0, WGS: 256, XL: 4096;$a, PF: 0, REGS: 128, WGS: 128, XL: 4096;warps|NB: 1, TR: 1, CW: 32, RB: 4, PF: 0, REGS: 128, WGS: 256, XL: 4096;warps|NB: 4, TR: 1, CW: 32, RB: 8, PF: 0, REGS: 128, WGS: 256, XL: 4096"
    pin_rows "r$round" mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
      "$a, PF: 0, REGS: 128, WGS: 256, XL: 4096;$b, PF: 0, REGS: 128, WGS: 256, XL: 4096;warps|NB: 1, TR: 1, CW: 32, RB: 4, PF: 0, REGS: 128, WGS: 256, XL: 4096"
    pin_rows "r$round" fine64 64 1408 2048 64 32 'nf4_forward/fine[^/]*/rows64/decode/ours/' \
      "$a, PF: 0, REGS: 128, WGS: 256, XL: 2048;$b, PF: 0, REGS: 128, WGS: 256, XL: 2048"
    pin_rows "r$round" fine64bf16 64 1408 2048 64 16 'nf4_forward/fine[^/]*/rows64/decode/ours_bf16/' \
      "$a, PF: 0, REGS: 128, WGS: 256, XL: 2048;$b, PF: 0, REGS: 128, WGS: 256, XL: 2048"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-final)
  # On one H200 (2026-12-01b): test_nf4's warps and built-in-choice tests (stage test_nf4;
  # TEST_LIMIT s); the NF4 forward decode bench with the profile before XL (stage HEAD's as
  # old.yaml) and the shipped one, alternated (AB_ROUNDS), then cuBLAS on the same shapes;
  # then Nsight Compute (ptx_lab.py) on the shipped Mixtral-like one-row point and on the
  # staged point at PF 1 (REGS 168), 2.5x slower in xl-confirm.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 200 '*Warps*:*HalfTypesAndBuiltin*'
  mark "test_nf4 done"
  AB_FILTER='nf4_forward/.*/decode/(ours|ours_bf16)/' AB_ROWS=8,16,64 AB_CUBLAS_MIXTRAL=8,16,64 AB_CUBLAS_FINE=64 \
    ab_decode
  mark "ab done"
  pin_rows pf mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
    "warps|NB: 1, TR: 1, CW: 16, RB: 16, PF: 1, REGS: 168, WGS: 256, XL: 4096"
  ncu_lab xl8w "--algo warps --params WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096 --regs 128 --dtype f32 --rows 8"
  ncu_lab xl8pf "--algo warps --params WGS=256,CW=16,RB=16,TR=1,NB=1,PF=1,XL=4096 --regs 168 --dtype f32 --rows 8"
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-pf)
  # On one H200 (2026-12-01b, call 5, with an intermediate build whose staged sweep loaded x
  # from local memory just before use, so that PF 1 loaded only the next pass's codes and
  # scales ahead; not kept): warps with staged x and PF 1 pinned at
  # Mixtral-like 8 rows (f32; bf16 for the notes) and a bf16 point at fine-grained 64 rows,
  # alternated with the shipped profile (XL_ROUNDS rounds); then, through ptx_lab.py on the
  # programs those runs built, the Mixtral-like down projection (N 4096, K 14336, 8 rows, f32:
  # x staged in 4 segments) at the point before XL and the shipped one; then Nsight Compute
  # on the WGS 128, REGS 168 point. First test_nf4's warps test (stage test_nf4; TEST_LIMIT s).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 120 '*Warps*'
  a="warps|NB: 1, TR: 1, CW: 32, RB: 8, XL: 4096"
  for round in $(seq "${XL_ROUNDS:-2}"); do
    one_row_shipped "shipped$round"
    pin_rows "r$round" mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
      "${XL_PF:-"$a, PF: 1, REGS: 168, WGS: 256;$a, PF: 1, REGS: 168, WGS: 128;$a, PF: 1, REGS: 128, WGS: 256;warps|NB: 1, TR: 1, CW: 16, RB: 16, XL: 4096, PF: 1, REGS: 168, WGS: 128;$a, PF: 1, REGS: 0, WGS: 128;warps|NB: 1, TR: 1, CW: 16, RB: 16, XL: 0, PF: 0, REGS: 128, WGS: 128"}"
    pin_rows "r$round" mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' \
      "${XL_PF_BF16:-"$a, PF: 1, REGS: 168, WGS: 128;$a, PF: 0, REGS: 128, WGS: 256"}"
    pin_rows "r$round" fine64bf16 64 1408 2048 64 16 'nf4_forward/fine[^/]*/rows64/decode/ours_bf16/' \
      "warps|NB: 1, TR: 1, CW: 16, RB: 16, XL: 2048, PF: 0, REGS: 128, WGS: 128;warps|NB: 1, TR: 1, CW: 32, RB: 8, XL: 2048, PF: 1, REGS: 168, WGS: 128"
  done
  mark "candidates done"
  down_lab before cache WGS=128,CW=16,RB=16,TR=1,NB=1,PF=0,XL=0
  down_lab shipped cache WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096
  ncu_lab xlpf128 "--algo warps --params WGS=128,CW=32,RB=8,TR=1,NB=1,PF=1,XL=4096 --regs 168 --dtype f32 --rows 8"
  rm -rf "$out/cache"
  mark "all done"
  ;;
xl-ab)
  # On one H200 (2026-12-01b): the committed XL build (stage its bench as
  # ocltk_bench_nf4_old; x staged where K <= XL only) against the working tree's (x staged in
  # segments of XL codes), both with the shipped profile, alternated (AB_ROUNDS), at the
  # Mixtral-like and fine-grained decode rows; each binary with its own program cache.
  export OCLTK_CACHE_DIR="$out/cache"
  for round in $(seq "${AB_ROUNDS:-3}"); do
    OCLTK_CACHE_DIR="$out/cache-old" bench_bin="$here/ocltk_bench_nf4_old" nf4_bench "" "old$round" \
      "$here/nvidia-h200.yaml" 60 'nf4_forward/(mixtral[^/]*/rows8|fine[^/]*/rows64)/decode/(ours|ours_bf16)/' \
      --ocltk_rows=8,64 --benchmark_min_time=0.05
    nf4_bench "" "new$round" "$here/nvidia-h200.yaml" 60 \
      'nf4_forward/(mixtral[^/]*/rows8|fine[^/]*/rows64)/decode/(ours|ours_bf16)/' --ocltk_rows=8,64 \
      --benchmark_min_time=0.05
  done
  mark "ab done"
  # test_nf4's warps test (stage test_nf4; TEST_LIMIT s); then the Mixtral-like down
  # projection (N 4096, K 14336, 8 rows, f32) through ptx_lab.py: the shipped point in both
  # builds (the older loads x from global memory past K = XL, the newer stages it in
  # segments) and the point before XL (pinned first, to build it).
  staged_test_nf4 120 '*Warps*'
  pin_rows before mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' \
    "warps|NB: 1, TR: 1, CW: 16, RB: 16, XL: 0, PF: 0, REGS: 128, WGS: 128"
  down_lab before cache WGS=128,CW=16,RB=16,TR=1,NB=1,PF=0,XL=0
  down_lab shipped cache WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096
  down_lab shipped-old cache-old WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096
  rm -rf "$out/cache" "$out/cache-old"
  mark "all done"
  ;;
xl-tr2)
  # On one H200 (2026-12-01b): warps with two tile rows staged (TR 2, XL 2048: K 4096 in two
  # segments) at Mixtral-like 8 and 16 rows (one and two per expert), f32 and bf16, beside
  # the shipped profile (its rows-8 f32 entry has TR 1: two rows of an expert take two passes
  # over its weights), XL_ROUNDS rounds.
  export OCLTK_CACHE_DIR="$out/cache"
  t="warps|NB: 1, TR: 2, XL: 2048"
  cands="$t, CW: 32, RB: 8, PF: 0, REGS: 128, WGS: 256;$t, CW: 32, RB: 8, PF: 0, REGS: 168, WGS: 128;$t, CW: 16, RB: 16, PF: 0, REGS: 128, WGS: 256;$t, CW: 16, RB: 16, PF: 0, REGS: 0, WGS: 128;$t, CW: 16, RB: 8, PF: 0, REGS: 128, WGS: 256"
  for round in $(seq "${XL_ROUNDS:-1}"); do
    nf4_bench "" "shipped$round" "$here/nvidia-h200.yaml" 60 'nf4_forward/mixtral[^/]*/rows(8|16)/decode/(ours|ours_bf16)/' \
      --ocltk_rows=8,16 --benchmark_min_time=0.05
    for r in 8 16; do
      pin_rows "r$round" "mix${r}" 8 14336 4096 "$r" 32 "nf4_forward/mixtral[^/]*/rows$r/decode/ours/" "$cands"
      pin_rows "r$round" "mix${r}bf16" 8 14336 4096 "$r" 16 "nf4_forward/mixtral[^/]*/rows$r/decode/ours_bf16/" "$cands"
    done
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
pl-final)
  # On one H200 (2026-12-01c): test_nf4's warps, built-in and profile-choice tests (stage
  # test_nf4; TEST_LIMIT s); warps with codes and scales prefetched into L2 PL passes ahead
  # (PL 1, 2, 4) at the shipped one-row points, f32 and bf16, beside the shipped profile
  # (PL_ROUNDS rounds); the forward decode bench with HEAD's profile (stage it as old.yaml:
  # bf16 Mixtral-like 8 rows on tc) and this one alternated, then cuBLAS; then the Mixtral-like
  # down projection through ptx_lab.py without and with PL. PL was a build with
  # results/h200-2026-12-01c/call1/pl-per-lane-prefetch.diff applied (not kept).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*Warps*:*HalfTypesAndBuiltin*:*ProfileEntryFollows*'
  mark "test_nf4 done"
  a="warps|NB: 1, TR: 1, CW: 32, RB: 8, PF: 0, REGS: 128, WGS: 256, XL: 4096"
  b="warps|NB: 1, TR: 1, CW: 16, RB: 16, PF: 0, REGS: 128, WGS: 128"
  for round in $(seq "${PL_ROUNDS:-2}"); do
    one_row_shipped "shipped$round"
    pin_rows "r$round" mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' "$a, PL: 1;$a, PL: 2;$a, PL: 4"
    pin_rows "r$round" mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' "$a, PL: 1;$a, PL: 2"
    pin_rows "r$round" fine64 64 1408 2048 64 32 'nf4_forward/fine[^/]*/rows64/decode/ours/' "$b, PL: 1;$b, PL: 2"
  done
  mark "pl done"
  AB_FILTER='nf4_forward/.*/decode/(ours|ours_bf16)/' AB_ROWS=8,16,64 AB_CUBLAS_MIXTRAL=8,16,64 AB_CUBLAS_FINE=64 \
    ab_decode
  mark "ab done"
  pl_down_labs
  rm -rf "$out/cache"
  mark "all done"
  ;;
bulk-lab)
  # On one H200 (2026-12-01c, call 2): warps with a sweep's codes and scales past its first
  # pass prefetched into L2 by one cp.async.bulk.prefetch a row (PL 1), and the first batch's
  # whole rows before the tables are filled (PL 2), at the shipped Mixtral-like 8 and 16 rows
  # and fine-grained 64 rows points, beside the shipped profile (PL_ROUNDS rounds); test_nf4's
  # warps test first (stage test_nf4); the down projection through ptx_lab.py last. PL was a
  # build with results/h200-2026-12-01c/call2/pl-bulk-prefetch.diff applied (not kept).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 120 '*Warps*'
  mark "test_nf4 done"
  a="warps|NB: 1, TR: 1, CW: 32, RB: 8, PF: 0, REGS: 128, WGS: 256, XL: 4096"
  b="warps|NB: 1, TR: 1, CW: 16, RB: 16, PF: 0, REGS: 128, WGS: 128"
  c="warps|NB: 1, TR: 2, CW: 16, RB: 16, PF: 0, REGS: 0, WGS: 128"
  for round in $(seq "${PL_ROUNDS:-2}"); do
    nf4_bench "" "shipped$round" "$here/nvidia-h200.yaml" 60 \
      'nf4_forward/(mixtral[^/]*/rows(8|16)|fine[^/]*/rows64)/decode/(ours|ours_bf16)/' --ocltk_rows=8,16,64 \
      --benchmark_min_time=0.05
    pin_rows "r$round" mix8 8 14336 4096 8 32 'nf4_forward/mixtral[^/]*/rows8/decode/ours/' "$a, PL: 1;$a, PL: 2"
    pin_rows "r$round" mix8bf16 8 14336 4096 8 16 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' "$a, PL: 2"
    pin_rows "r$round" mix16 8 14336 4096 16 32 'nf4_forward/mixtral[^/]*/rows16/decode/ours/' "$c, PL: 1;$c, PL: 2"
    pin_rows "r$round" fine64 64 1408 2048 64 32 'nf4_forward/fine[^/]*/rows64/decode/ours/' "$b, PL: 1;$b, PL: 2"
  done
  mark "pl done"
  pl_down_labs
  rm -rf "$out/cache"
  mark "all done"
  ;;
chains-ab)
  # On one H200 (2026-12-01c, call 3): three builds of ocltk_bench_nf4 with the shipped profile,
  # alternated (AB_ROUNDS), each with its own program cache, at the forward decode rows that
  # take warps or lanes: HEAD's (stage it as ocltk_bench_nf4_old), one whose row kernels know
  # that a tile's row 0 is always there (stage as ocltk_bench_nf4_A: no test a row at TR 1),
  # and this build, which also sums a W row's products in four chains instead of two. Then
  # ptx_lab.py at the down projection on each build's shipped Mixtral-like one-row program
  # (registers, spills), and Nsight Compute on this build's.
  filt='nf4_forward/(mixtral[^/]*/rows(1|8|16)|fine[^/]*/rows(8|64))/decode/(ours|ours_bf16)/'
  for round in $(seq "${AB_ROUNDS:-3}"); do
    OCLTK_CACHE_DIR="$out/cache-old" bench_bin="$here/ocltk_bench_nf4_old" nf4_bench "" "old$round" \
      "$here/nvidia-h200.yaml" 90 "$filt" --ocltk_rows=1,8,16,64 --benchmark_min_time=0.05
    OCLTK_CACHE_DIR="$out/cache-A" bench_bin="$here/ocltk_bench_nf4_A" nf4_bench "" "A$round" \
      "$here/nvidia-h200.yaml" 90 "$filt" --ocltk_rows=1,8,16,64 --benchmark_min_time=0.05
    OCLTK_CACHE_DIR="$out/cache" nf4_bench "" "B$round" "$here/nvidia-h200.yaml" 90 "$filt" \
      --ocltk_rows=1,8,16,64 --benchmark_min_time=0.05
    mark "round $round done"
  done
  for build in old:cache-old A:cache-A B:cache; do
    down_lab "${build%%:*}" "${build#*:}" WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096
  done
  ncu_lab b8 "--algo warps --params WGS=256,CW=32,RB=8,TR=1,NB=1,PF=0,XL=4096 --regs 128 --dtype f32 --rows 8"
  python3 "$here/ncu_hot.py" "$out/ncu-b8-sass.csv" > "$out/ncu-b8-hot.txt" 2>&1
  rm -rf "$out/cache" "$out/cache-A" "$out/cache-old" "$out"/ncu-b8-raw.csv
  gzip -f "$out/ncu-b8-details.txt" "$out/ncu-b8-sass.csv" 2>/dev/null
  mark "all done"
  ;;
lt-final)
  # On one H200 (2026-12-01c, call 4): test_nf4's warps, lanes, built-in and profile-choice
  # tests (stage test_nf4; TEST_LIMIT s); then the forward decode bench with the profile before
  # (stage 44e1aa1's as old.yaml) and the one whose warps entries at TR 2 and at the
  # fine-grained one-row point take LT 1, alternated (AB_ROUNDS), and cuBLAS.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*Warps*:*Lanes*:*HalfTypesAndBuiltin*:*ProfileEntryFollows*'
  mark "test_nf4 done"
  AB_FILTER='nf4_forward/.*/decode/(ours|ours_bf16)/' AB_ROWS=1,8,16,64,128 AB_CUBLAS_MIXTRAL=8,16,64 \
    AB_CUBLAS_FINE=64,128 ab_decode
  rm -rf "$out/cache"
  mark "all done"
  ;;
decode-final)
  # On one H200 (2026-12-01c, call 5): the shipped profile's forward and backward at the
  # decode rows of both shapes (1, 8, 64 and 512 rows), f32 and bf16, beside dequantize +
  # CLBlast, then cuBLAS bf16 on dequantized weights at the same rows and the copy bandwidth.
  export OCLTK_CACHE_DIR="$out/cache"
  nf4_bench "" decode "$here/nvidia-h200.yaml" 400 \
    'nf4_(forward|backward)/.*/rows(1|8|64|512)/decode/(ours|ours_bf16|baseline_dequant_clblast)/' \
    --ocltk_rows=1,8,64,512
  mark "bench done"
  decode_refs
  rm -rf "$out/cache"
  mark "all done"
  ;;
compact-lab)
  # On one H200 (2026-12-01d, call 1): test_nf4's compact-launch tests (the scan of the
  # offsets by warp ballots: stage test_nf4), the host's time per launch (stage the lab tool
  # hostcost: ours through nf4_forward_segmented and nf4_forward_with, and a bare
  # clEnqueueNDRangeKernel, at the fine-grained shape with one row and at a tiny one), then
  # the decode bench at 1 and 8 rows, where launches over 64 experts are compact, with the
  # build before (stage it as ocltk_bench_nf4_old, and the shipped profile as old.yaml) and
  # this one, alternated.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 200 '*Compact*:*StreamSplits*'
  mark "test_nf4 done"
  host_cost
  AB_OLD_BIN=ocltk_bench_nf4_old AB_ROWS=1,8 AB_CUBLAS=0 ab_decode
  rm -rf "$out/cache"
  mark "all done"
  ;;
host-lab)
  # On one H200 (2026-12-01d, call 2): test_nf4's compact-launch and launch-event tests
  # (stage test_nf4), the host's time per launch (stage hostcost) after prepared launches and
  # events only where asked for; the decode bench at 1 and 8 rows with the build before
  # (ocltk_bench_nf4_old, old.yaml: every call asks for an event) and this one with every call
  # asking for one (--ocltk_events=all: the runtime's change alone) and with the last only
  # (the bench's default now), alternated twice; then candidates for the one-active-expert
  # forward entries pinned (SPARSE_FINE, SPARSE_MIXTRAL: ALGORITHM|PARAMS separated by ';').
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 200 '*Compact*:*LaunchEvents*'
  mark "test_nf4 done"
  host_cost
  host_filter='nf4_(forward|backward)/.*/decode/(ours|ours_bf16)/'
  for round in 1 2; do
    old_bench "old$round" "$host_filter" 1,8
    nf4_bench "" "all$round" "$here/nvidia-h200.yaml" 150 "$host_filter" --ocltk_rows=1,8 --benchmark_min_time=0.03 \
      --ocltk_events=all
    nf4_bench "" "last$round" "$here/nvidia-h200.yaml" 150 "$host_filter" --ocltk_rows=1,8 --benchmark_min_time=0.03
    mark "round $round done"
  done
  rm -rf "$out/cache-old"
  sparse_pins "${SPARSE_FINE:-warps|CW: 16, LT: 1, NB: 1, PF: 0, RB: 4, REGS: 128, TR: 1, WGS: 64}" \
    "${SPARSE_MIXTRAL:-warps|CW: 32, NB: 1, PF: 0, RB: 4, REGS: 128, TR: 1, WGS: 256, XL: 4096}"
  rm -rf "$out/cache"
  mark "all done"
  ;;
sparse-lab)
  # On one H200 (2026-12-01d, call 5): the shipped profile's forward at one row on few experts
  # (Mixtral-like 1 row, fine-grained 1 and 8 rows), then SPARSE_FINE and SPARSE_MIXTRAL
  # (ALGORITHM|PARAMS separated by ';') pinned there, as in host-lab.
  export OCLTK_CACHE_DIR="$out/cache"
  nf4_bench "" shipped "$here/nvidia-h200.yaml" 100 \
    'nf4_forward/(fine[^/]*/rows(1|8)|mixtral[^/]*/rows1)/decode/(ours|ours_bf16)/' --ocltk_rows=1,8 \
    --benchmark_min_time=0.03
  sparse_pins "${SPARSE_FINE:?}" "${SPARSE_MIXTRAL:?}"
  rm -rf "$out/cache"
  mark "all done"
  ;;
final-d)
  # On one H200 (2026-12-01d, call 3): test_nf4's compact-launch, launch-event, dispatch-split,
  # built-in-choice and profile-choice tests (stage test_nf4); the host's time per launch
  # (stage hostcost); the decode bench at 1, 8, 64 and 512 rows, both directions, with the
  # build and profile before (ocltk_bench_nf4_old, old.yaml) and these, alternated twice; then
  # dequantize + CLBlast with these, cuBLAS bf16 on dequantized weights and the copy bandwidth.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*Compact*:*LaunchEvents*:*StreamSplits*:*HalfTypesAndBuiltin*:*ProfileEntryFollows*'
  mark "test_nf4 done"
  host_cost
  final_filter='nf4_(forward|backward)/.*/decode/(ours|ours_bf16)/'
  for round in 1 2; do
    old_bench "old$round" "$final_filter" 1,8,64,512
    nf4_bench "" "new$round" "$here/nvidia-h200.yaml" 200 "$final_filter" --ocltk_rows=1,8,64,512 \
      --benchmark_min_time=0.03
    mark "round $round done"
  done
  rm -rf "$out/cache-old"
  nf4_bench "" baseline "$here/nvidia-h200.yaml" 200 'nf4_(forward|backward)/.*/decode/baseline_dequant_clblast/' \
    --ocltk_rows=1,8,64,512 --benchmark_min_time=0.03
  mark "baseline done"
  decode_refs
  rm -rf "$out/cache"
  mark "all done"
  ;;
fill-lab)
  # Needs a build with results/h200-2026-12-01e/warps_fill.patch applied (FILL was not kept).
  # On one H200 (2026-12-01e, call 1): test_nf4's warps and tc forward points (stage test_nf4;
  # one point of each sizes its grid by FILL); then the forward decode bench (rows 8, 16, 64,
  # 512 of both shapes, f32 and bf16 input) with the shipped profile and with copies of it whose
  # dense decode entries take FILL_VALUES (the shipped points otherwise), alternated: shipped,
  # each value, shipped, each value again.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 240 '*WarpsAtSeveral*:*TcAtSeveral*'
  mark "test_nf4 done"
  fill_filter='nf4_forward/.*/rows(8|16|64|512)/decode/(ours|ours_bf16)/'
  for round in 1 2; do
    nf4_bench "" "shipped$round" "$here/nvidia-h200.yaml" 200 "$fill_filter" --ocltk_rows=8,16,64,512 \
      --benchmark_min_time=0.03
    mark "shipped $round done"
    for f in ${FILL_VALUES:-1 2 3 4}; do
      fill_profile "$here/nvidia-h200.yaml" "$out/fill$f.yaml" "$f" || { mark "fill $f not pinned"; continue; }
      nf4_bench "" "fill$f-$round" "$out/fill$f.yaml" 200 "$fill_filter" --ocltk_rows=8,16,64,512 \
        --benchmark_min_time=0.03
      mark "fill $f round $round done"
    done
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
fill-diag)
  # On one H200 (2026-12-01e, call 2): why FILL lost in fill-lab. The Mixtral-like forward
  # decode bench at 8 and 64 rows, and the fine-grained one at 64 and 512, with the shipped
  # profile and with DIAG_CANDS pinned (E!N!K!ROWS!BITS!ALGORITHM|PARAMS separated by ';'), then
  # ptxas -v on every program of the cache (through bench/ptx_lab.py's reader: stage it): the
  # registers and spills of each build. First test_nf4's warps points (stage it).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 120 '*WarpsAtSeveral*'
  mark "test_nf4 done"
  diag_filter='nf4_forward/(mixtral[^/]*/rows(8|64)|fine[^/]*/rows(64|512))/decode/(ours|ours_bf16)/'
  nf4_bench "" shipped "$here/nvidia-h200.yaml" 150 "$diag_filter" --ocltk_rows=8,64,512 --benchmark_min_time=0.03
  i=0
  IFS=';' read -ra diag_list <<< "${DIAG_CANDS:?}"
  for cand in "${diag_list[@]}"; do
    i=$((i + 1))
    IFS='!' read -r e n k rows bits params <<< "$cand"
    pin_tc_entries "$here/nvidia-h200.yaml" "$out/diag$i.yaml" nf4_forward "$params" "$e" "$n" "$k" "$rows" "$bits" ||
      { mark "diag $i not pinned"; continue; }
    echo "diag$i: $cand" >> "$out/diag-candidates.txt"
    nf4_bench "" "diag$i" "$out/diag$i.yaml" 100 "nf4_forward/[^/]*_${e}x${n}x${k}/rows$rows/decode/(ours|ours_bf16)/" \
      --ocltk_rows="$rows" --benchmark_min_time=0.03
    mark "diag $i done"
  done
  keep=()
  [ -n "${KEEP_PTX:-}" ] && { mkdir -p "$out/ptx"; keep=("$out/ptx"); }
  python3 - "$here" "$out/cache" "${keep[@]}" > "$out/ptxas.txt" 2>&1 <<'PY'
import subprocess, sys
sys.path.insert(0, sys.argv[1])
from ptx_lab import cache_entries  # stage bench/ptx_lab.py beside this script
for path, key, binary in cache_entries(sys.argv[2]):
    ptx = binary.rstrip(b"\0")
    opts = [l for l in key.splitlines() if l.startswith(("options=", "max-registers="))]
    open("/tmp/diag.ptx", "wb").write(ptx)
    r = subprocess.run(["/usr/local/cuda/bin/ptxas", "-arch=sm_90", "-v", "/tmp/diag.ptx", "-o", "/tmp/diag.cubin"],
                       capture_output=True, text=True)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if "registers" in l or "spill" in l or "Compiling" in l]
    print(path.split("/")[-1], " | ".join(opts))
    for l in lines:
        print("   ", l.strip())
    if len(sys.argv) > 3 and b".entry nf4_forward(" in ptx:  # KEEP_PTX: the PTX and SASS kept
        name = sys.argv[3] + "/" + path.split("/")[-1][:-4]
        open(name + ".ptx", "wb").write(ptx)
        open(name + ".opts", "w").write("\n".join(opts) + "\n")
        subprocess.run("/usr/local/cuda/bin/cuobjdump -sass /tmp/diag.cubin > " + name + ".sass", shell=True)
PY
  rm -rf "$out/cache"
  mark "all done"
  ;;
hoist-lab)
  # Needs a build with results/h200-2026-12-01e/warps_hoist.patch applied (not kept).
  # On one H200 (2026-12-01e, call 5): test_nf4's warps, compact and built-in-choice tests (stage
  # test_nf4), then the forward decode bench with the build before (stage it as
  # ocltk_bench_nf4_old, the shipped profile as old.yaml) and this one, where warps at NB 1
  # request a warp's first pass of W before the workgroup's setup, alternated AB_ROUNDS times.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 200 '*WarpsAtSeveral*:*Compact*:*HalfTypesAndBuiltin*:*ProfileEntryFollows*'
  mark "test_nf4 done"
  AB_OLD_BIN=ocltk_bench_nf4_old AB_CUBLAS=0 AB_FILTER='nf4_forward/.*/decode/(ours|ours_bf16)/' AB_ROWS=1,8,16,64 \
    ab_decode
  rm -rf "$out/cache"
  mark "all done"
  ;;
topk)
  # On one H200 (2026-12-01e, call 6): the NF4 decode bench with top-k routing
  # (--ocltk_routing): Mixtral-like top-2 at 1, 4, 8 and 16 tokens (2 to 32 rows), fine-grained
  # top-6 at 1, 4, 8 and 16 tokens (6 to 96 rows), both directions, ours, ours_bf16 and
  # dequantize + CLBlast, with the shipped profile; then the evenly spread decode rows (1, 8, 64)
  # and cuBLAS bf16 on dequantized weights at those (cublas_ref.py spreads rows evenly) and the
  # copy bandwidth.
  export OCLTK_CACHE_DIR="$out/cache"
  nf4_bench "" top2-mixtral "$here/nvidia-h200.yaml" 200 "nf4_(forward|backward)/mixtral.*/(ours|ours_bf16|baseline_dequant_clblast)/" \
    --ocltk_routing=top2 --ocltk_rows=2,8,16,32 --benchmark_min_time=0.03
  mark "top2 mixtral done"
  nf4_bench "" top6-fine "$here/nvidia-h200.yaml" 200 "nf4_(forward|backward)/fine.*/(ours|ours_bf16|baseline_dequant_clblast)/" \
    --ocltk_routing=top6 --ocltk_rows=6,24,48,96 --benchmark_min_time=0.03
  mark "top6 fine done"
  nf4_bench "" even "$here/nvidia-h200.yaml" 200 'nf4_(forward|backward)/.*/decode/(ours|ours_bf16)/' \
    --ocltk_rows=1,8,64 --benchmark_min_time=0.03
  mark "even done"
  decode_refs
  rm -rf "$out/cache"
  mark "all done"
  ;;
maxrows-check)
  # Not yet run (written 2026-12-01f, when no device was lent): the forward decode cases whose
  # choice changed when the choice began to count the longest segment (results/replay-2026-12-01f/
  # changed-call7.md; 14 of them unmeasured), with the shipped profile and with the one before
  # it, alternated (stage `git show 944d890:configs/nvidia-h200.yaml` as cand-before.yaml beside
  # this script). That profile names no max_rows, so this runtime serves its routed entries as
  # the runtime before did and the cases get the choices they had then. Then join the two with
  # results/replay-2026-12-01f/join.py.
  export OCLTK_CACHE_DIR="$out/cache"
  i=0
  for name in ${ROUTE_PROFILES:-shipped before shipped before}; do
    i=$((i + 1))
    profile="$here/cand-$name.yaml"
    [ "$name" = shipped ] && profile="$here/nvidia-h200.yaml"
    nf4_bench "" "r$i-$name-top2" "$profile" 100 'nf4_forward/mixtral.*/(ours|ours_bf16)/' --ocltk_routing=top2 \
      --ocltk_rows=12,16,32 --benchmark_min_time=0.03
    nf4_bench "" "r$i-$name-top6" "$profile" 100 'nf4_forward/fine.*/(ours|ours_bf16)/' --ocltk_routing=top6 \
      --ocltk_rows=6,12,24 --benchmark_min_time=0.03
    nf4_bench "" "r$i-$name-even" "$profile" 100 \
      'nf4_forward/(mixtral[^/]*/rows(24|32)|fine[^/]*/rows(1|2|4|8|16|24|32|96|128))/decode/(ours|ours_bf16)/' \
      --ocltk_rows=1,2,4,8,16,24,32,96,128 --benchmark_min_time=0.03
    mark "profile $name ($i) done"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
route-cands)
  # On one H200 (2026-12-01e, call 7): the forward decode bench with top-k routing (Mixtral-like
  # top-2 at 2 to 32 rows, fine-grained top-6 at 6 to 96 rows) and at even rows around them,
  # ours and ours_bf16, with each profile of ROUTE_PROFILES in turn (shipped: the shipped one;
  # NAME: cand-NAME.yaml staged beside this script: entries added at routed problems, with
  # `active` in their problem).
  export OCLTK_CACHE_DIR="$out/cache"
  i=0
  for name in ${ROUTE_PROFILES:-shipped A B shipped A B}; do
    i=$((i + 1))
    profile="$here/cand-$name.yaml"
    [ "$name" = shipped ] && profile="$here/nvidia-h200.yaml"
    nf4_bench "" "r$i-$name-top2" "$profile" 100 'nf4_forward/mixtral.*/(ours|ours_bf16)/' --ocltk_routing=top2 \
      --ocltk_rows=2,8,16,32 --benchmark_min_time=0.03
    nf4_bench "" "r$i-$name-top6" "$profile" 100 'nf4_forward/fine.*/(ours|ours_bf16)/' --ocltk_routing=top6 \
      --ocltk_rows=6,24,48,72,96 --benchmark_min_time=0.03
    nf4_bench "" "r$i-$name-even" "$profile" 100 \
      'nf4_forward/(mixtral[^/]*/rows(16|32|64)|fine[^/]*/rows(32|64|128))/decode/(ours|ours_bf16)/' \
      --ocltk_rows=16,32,64,128 --benchmark_min_time=0.03
    mark "profile $name ($i) done"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
bwd-lt)
  # On one H200 (2026-12-01c, call 6): the backward stream with a tile's row 0 untested (LT 1)
  # in every shipped stream entry (all at TR 1) against the shipped ones, alternated
  # (AB_ROUNDS), at the backward decode rows of both shapes; test_nf4's stream tests first
  # (stage test_nf4). LT on the stream backward was a build with
  # results/h200-2026-12-01c/call6/stream-lt.diff applied (no change measured, not kept).
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 120 '*Stream*'
  mark "test_nf4 done"
  python3 - "$here/nvidia-h200.yaml" "$out/lt.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
head = text.index("\n  nf4_backward:\n")
body = re.sub(r"(- algorithm: stream\n\s+params: \{)", r"\1LT: 1, ", text[head:])
open(sys.argv[2], "w").write(text[:head] + body)
PY
  for round in $(seq "${AB_ROUNDS:-3}"); do
    for variant in shipped:"$here/nvidia-h200.yaml" lt:"$out/lt.yaml"; do
      nf4_bench "" "${variant%%:*}$round" "${variant#*:}" 90 'nf4_backward/.*/decode/(ours|ours_bf16)/' \
        --ocltk_rows=1,8,64 --benchmark_min_time=0.05
    done
    mark "round $round done"
  done
  rm -rf "$out/cache"
  mark "all done"
  ;;
final-tests)
  # On one H200 (2026-12-01): the whole test_nf4 (stage it; TEST_LIMIT s); then `tune --shapes`
  # of the Mixtral-like decode problem with bf16 input (rows 8, input_bits 16; TUNE_BUDGET s)
  # into a copy of the shipped profile, whose summary shows the space it searched (tc's XS and
  # FR at their defaults for 16-bit input), and the bench with the profile it wrote.
  export OCLTK_CACHE_DIR="$out/cache"
  staged_test_nf4 330 ''
  mark "test_nf4 done"
  { echo shapes:
    echo "  - {kernel: nf4_forward, experts: 8, n: 14336, k: 4096, rows: 8, block_size: 64, input_bits: 16}"; } \
    > "$out/shapes-bf16.yaml"
  cp "$here/nvidia-h200.yaml" "$out/tuned-bf16.yaml"
  timed tune-bf16 tune "$here/ocltk" tune --kernels nf4_forward --classes decode --shapes "$out/shapes-bf16.yaml" \
    --budget "${TUNE_BUDGET:-60}" --out "$out/tuned-bf16.yaml" --record "$out/tune-bf16.jsonl"
  mark "tune done"
  nf4_bench "" tuned "$out/tuned-bf16.yaml" 60 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' --ocltk_rows=8 \
    --benchmark_min_time=0.03
  nf4_bench "" shipped "$here/nvidia-h200.yaml" 60 'nf4_forward/mixtral[^/]*/rows8/decode/ours_bf16/' --ocltk_rows=8 \
    --benchmark_min_time=0.03
  rm -rf "$out/cache"
  mark "all done"
  ;;
whole-decode-bench)
  # On the two-GPU kind: the whole default tune with empty caches on one H200 (timed); on
  # the other the NF4 forward decode bench with the shipped profile beside dequantize +
  # CLBlast at the Mixtral-like and fine-grained shapes, then cuBLAS on the same shapes.
  split_gpus
  whole_tune "$gpu0" &
  tune0=$!
  shipped_nf4_decode "$gpu1" 330 'nf4_forward/(mixtral|fine).*rows(1|8|64|512)/decode/(ours|baseline_dequant_clblast)'
  cublas_decode mixtral fine
  wait $tune0
  mark "all done"
  ;;
record)
  timed record record "$here/ocltk" tune --strategy exhaustive --cold --repeats 2 --budget "${RECORD_BUDGET:-540}" \
    --cache - --record "$out/h200-space.jsonl" --out "$out/exhaustive.yaml"
  ;;
*)
  echo "unknown phase $phase" >&2
  exit 2
  ;;
esac
# The device tool brings back only a few files per call: leave the archive alone in OUT.
tar czf "/tmp/h200-$phase.tgz" -C "$out" . && find "$out" -mindepth 1 -delete && mv "/tmp/h200-$phase.tgz" "$out/"

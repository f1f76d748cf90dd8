#!/usr/bin/env bash
# The first-tune figure (docs/tuning.md, "A device nobody tuned"): how close the default
# `ocltk tune` on a fresh machine, empty caches, comes to the best known point of every class.
#
#   bench/first_tune.sh OUT [LONG_BUDGET_S]     (default 1200: a 20-minute long tune)
#
# 1. best known: a long tune (LONG_BUDGET_S, warm program caches, every point measured anew:
#    a resume cache of its own) -> OUT/best.yaml; or FIRST_TUNE_BEST=FILE names a profile to
#    take as best known instead (the shipped H200 profile, say), and this step is skipped;
# 2. the first tune: the default command with HOME, the XDG folders, ocltk's, PoCL's and
#    NVIDIA's caches in empty folders -> OUT/first.yaml, its wall time in OUT/first.txt;
#    FIRST_TUNE_PRIORS=others sets this device's own profiles and recordings aside (a device
#    nobody tuned, on one somebody did);
# 3. both profiles measured in one run of ocltk_bench_profiles, FIRST_TUNE_REPETITIONS (15)
#    repetitions interleaved, with the first tune's caches, and per class the first tune's
#    point timed in alternation with the best known's, launch by launch (--ocltk_paired_with):
#    -> OUT/bench.json.gz (about 1.3 MB of JSON, a tenth of it compressed), and the table per
#    class -> OUT/table.md, whose figure is that paired ratio. On the 2-core PoCL machine the
#    fastest of 15 repetitions of the very same point in its two rows differed by up to 30 %,
#    more than the 10 % the figure asks for; its paired ratio read 0.98-1.03 a repetition.
# Needs ./build (scripts/setup.sh) and a quiet machine: about 30 minutes with step 1 on PoCL
# (the default tune takes its budget, 165 s on a CPU device, 285 s on a GPU; step 3 about 15
# minutes on the 2-core PoCL machine). OCLTK_DEVICE selects the device as for every ocltk
# command. FIRST_TUNE_BIN=DIR takes ocltk and ocltk_bench_profiles from DIR (or DIR/bench)
# instead of ./build: binaries staged for the lent GPU. FIRST_TUNE_STEPS=tune runs steps 1-2
# only, FIRST_TUNE_STEPS=bench step 3 only, on what an earlier call left in OUT (its fresh
# caches included): a GPU lent 10 minutes a call runs them in two calls.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  sed -n '2,27p' "$0" >&2
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
long=${2:-1200}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${FIRST_TUNE_BIN:-$root/build}
steps=${FIRST_TUNE_STEPS:-tune,bench}
binary() {  # the path of binary $1 in BIN or BIN/bench
  local f
  for f in "$bin/$1" "$bin/bench/$1"; do [[ -x "$f" ]] && { echo "$f"; return; }; done
  echo "first_tune.sh: no $1 in $bin or $bin/bench (build first, or set FIRST_TUNE_BIN)" >&2
  exit 1
}
ocltk=$(binary ocltk)
bench=$(binary ocltk_bench_profiles)
fresh=$out/fresh

if [[ ,$steps, == *,tune,* ]]; then
  if [[ -n "${FIRST_TUNE_BEST:-}" ]]; then
    cp "$FIRST_TUNE_BEST" "$out/best.yaml"
  else
    rm -rf "$out/long-cache"
    "$ocltk" tune --budget "$long" --out "$out/best.yaml" --cache "$out/long-cache" --record "$out/long.jsonl" \
      > "$out/long.txt" 2> "$out/long-progress.txt"
  fi

  rm -rf "$fresh" "$out/first.yaml"
  mkdir -p "$fresh/home" "$fresh/pocl" "$fresh/cuda"
  priors=()
  [[ -n "${FIRST_TUNE_PRIORS:-}" ]] && priors=(--priors "$FIRST_TUNE_PRIORS")
  TIMEFORMAT='wall %R s'
  {
    time env -u XDG_CACHE_HOME -u XDG_CONFIG_HOME -u OCLTK_CACHE_DIR -u OCLTK_PROFILE_PATH \
      HOME="$fresh/home" POCL_CACHE_DIR="$fresh/pocl" CUDA_CACHE_PATH="$fresh/cuda" \
      "$ocltk" tune --out "$out/first.yaml" --report "$out/first-report" "${priors[@]}" \
      > "$out/first.txt" 2> "$out/first-progress.txt"
  } 2>> "$out/first.txt"
fi

[[ ,$steps, == *,bench,* ]] || exit 0
# The first tune's caches hold its programs: only the best known profile's are built here
# (on NVIDIA, building all of both took over 400 s).
started=$SECONDS
env -u XDG_CACHE_HOME -u OCLTK_CACHE_DIR HOME="$fresh/home" POCL_CACHE_DIR="$fresh/pocl" CUDA_CACHE_PATH="$fresh/cuda" \
  "$bench" --ocltk_profiles="best=$out/best.yaml,first=$out/first.yaml" --ocltk_paired_with=best \
  --benchmark_repetitions="${FIRST_TUNE_REPETITIONS:-15}" \
  --benchmark_enable_random_interleaving=true --benchmark_out="$out/bench.json" --benchmark_out_format=json \
  > "$out/bench.txt" 2>&1
echo "bench wall $((SECONDS - started)) s" >> "$out/bench.txt"
python3 "$root/bench/first_tune_table.py" "$out/bench.json" best | tee "$out/table.md"
gzip -9f "$out/bench.json"
tail -n 2 "$out/first.txt"

#!/usr/bin/env python3
"""Markdown table of ours vs CLBlast from an ocltk_bench Google Benchmark JSON file.

    python3 bench/ratios.py results/pocl-gemm_nt.json [more.json ...]
    python3 bench/ratios.py results/h200-gemm_nt.json --cublas results/h200-cublas.json [--cublas ...]

Rows are named OP/CLASS/MxNxK/IMPLEMENTATION (Google Benchmark appends /manual_time).
Per OP, class and shape it prints GFLOP/s of ours_default, ours_tuned and clblast and the
ratios tuned/clblast and default/clblast (above 1: ours is faster). With repetitions it
uses the median aggregate; a row that failed or was not verified shows its reason.
--cublas FILE (repeatable) adds a cuBLAS column and tuned/cublas from the JSON that
shared/gpu/cublas_ref.py gemm [--accumulate] --json FILE writes.
Standard library only.
"""
import json
import statistics
import sys

import benchjson  # beside this script

IMPLS = ("ours_default", "ours_tuned", "clblast")


def row_key(bench):
    """(op, class, shape, impl) from a benchmark's run name, or None for other rows."""
    parts = [p for p in bench.get("run_name", bench["name"]).split("/") if ":" not in p and p != "manual_time"]
    if len(parts) < 4 or parts[3] not in IMPLS:
        return None
    return tuple(parts[:4])


def collect(benchmarks):
    """{(op, class, shape): {impl: cell}}, a cell being GFLOP/s (float) or a reason (str)."""
    return benchjson.collect(benchmarks, row_key, lambda b: b.get("GFLOP/s"), statistics.median)


def fmt(cell):
    if cell is None:
        return "–"
    if isinstance(cell, str):
        return "failed: " + cell.replace("|", "\\|")[:80]
    return f"{cell:.3g}" if cell < 100 else f"{cell:.0f}"


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return f"{a / b:.2f}"
    return "–"


def read_cublas(paths):
    """{(op, "MxNxK"): GFLOP/s} from cublas_ref.py gemm JSON files."""
    rates = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f).get("results", []):
                if r.get("dtype", "f32") != "f32":
                    continue
                op = "gemm_nt_accum" if r.get("accumulate") else "gemm_nt"
                rates[(op, f"{r['m']}x{r['n']}x{r['k']}")] = r["TFLOP/s"] * 1000.0
    return rates


def report(path, cublas):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    context = data.get("context", {})
    table, labels = collect(data.get("benchmarks", []))
    print(f"### {path}")
    print()
    print(f"- device: {context.get('device', '?')} ({context.get('device_vendor', '?')}), "
          f"driver {context.get('device_driver', '?')}")
    print(f"- date: {context.get('date', '?')}; ocltk {context.get('ocltk_version', '?')}, "
          f"CLBlast {context.get('clblast_version', '?')}")
    print(f"- profile: {context.get('ocltk_profile', '?')}")
    print(f"- timer: {context.get('ocltk_timer', '?')}; "
          f"calls per iteration: {context.get('ocltk_calls_per_iteration', '?')}")
    print()
    print("GFLOP/s (2MNK over the timed interval); ratios above 1 mean ours is faster.")
    print()
    extra_head = " cublas | tuned/cublas |" if cublas else ""
    extra_rule = " ---: | ---: |" if cublas else ""
    print("| op | class | M×N×K | ours_default | ours_tuned | clblast | tuned/clblast | default/clblast |"
          f"{extra_head} tuned choice |")
    print(f"| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |{extra_rule} --- |")
    for op, cls, shape in table:  # in the order the benchmark ran them
        cells = table[(op, cls, shape)]
        d, t, c = (cells.get(i) for i in IMPLS)
        choice = labels.get((op, cls, shape, "ours_tuned"), "").removeprefix("choice=").replace("|", "\\|")
        extra = ""
        if cublas:
            cb = cublas.get((op, shape))
            extra = f" {fmt(cb)} | {ratio(t, cb)} |"
        print(f"| {op} | {cls} | {shape.replace('x', '×')} | {fmt(d)} | {fmt(t)} | {fmt(c)} | "
              f"{ratio(t, c)} | {ratio(d, c)} |{extra} {choice} |")
    print()


def main(argv):
    args, cublas_paths = [], []
    rest = iter(argv[1:])
    for a in rest:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--cublas" or a.startswith("--cublas="):
            path = a.partition("=")[2] if "=" in a else next(rest, "")
            if not path:
                print("ratios.py: --cublas needs a file", file=sys.stderr)
                return 2
            cublas_paths.append(path)
        else:
            args.append(a)
    if not args:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        cublas = read_cublas(cublas_paths)
    except (OSError, json.JSONDecodeError, KeyError) as e:
        print(f"ratios.py: --cublas: {e}", file=sys.stderr)
        return 1
    for path in args:
        try:
            report(path, cublas)
        except (OSError, json.JSONDecodeError) as e:
            print(f"ratios.py: {path}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

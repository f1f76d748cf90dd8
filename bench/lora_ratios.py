#!/usr/bin/env python3
"""The LoRA ratios of docs/lora.md from an ocltk_bench_lora Google Benchmark JSON file.

    python3 bench/lora_ratios.py results/DEVICE-lora.json [--torch results/DEVICE-torch-lora.json]

Rows are named lora_apply/CLASS/SHAPE/TYPE/IMPLEMENTATION (Google Benchmark appends
/manual_time). Prints, as Markdown tables, times in ms (the median aggregate with
--benchmark_repetitions, else the median of the runs) and:
  decode:        ours_tuned against ocltk_two_calls and clblast_two_calls (f32; above 1: ours
                 is faster), and floor_fraction;
  multi_decode:  ours_tuned against ocltk_per_segment per type, and floor_fraction;
  types:         each half type's time against f32's, ours_tuned.
--torch FILE adds cuBLAS looped per segment from bench/torch_lora_ref.py's JSON, matched by
class, shape and type. A row that failed or was not verified shows its reason.
Standard library only.
"""
import json
import statistics
import sys

import benchjson  # beside this script

IMPLS = ("ours_tuned", "ours_default", "ocltk_two_calls", "clblast_two_calls", "ocltk_per_segment")


def row_key(bench):
    """(class, shape, type, impl) from a benchmark's run name, or None for other rows."""
    parts = [p for p in bench.get("run_name", bench["name"]).split("/") if ":" not in p and p != "manual_time"]
    if len(parts) < 5 or parts[0] != "lora_apply" or parts[4] not in IMPLS:
        return None
    return tuple(parts[1:5])


def ms_of(bench):
    """The row's time per call in ms (manual time, reported in the row's time unit)."""
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[bench.get("time_unit", "ns")]
    return bench["real_time"] * scale


def fmt(cell):
    if cell is None:
        return "–"
    if isinstance(cell, str):
        return "failed: " + cell.replace("|", "\\|")[:60]
    return f"{cell:.3g}"


def ratio(slow, fast):
    if isinstance(slow, (int, float)) and isinstance(fast, (int, float)) and fast > 0:
        return f"{slow / fast:.2f}x"
    return "–"


def read_torch(path):
    """{(class, shape, type): ms} from torch_lora_ref.py's JSON."""
    with open(path, encoding="utf-8") as f:
        return {(r["class"], r["shape"], r["dtype"]): r["ms"] for r in json.load(f).get("results", [])}


def main(argv):
    paths, torch_paths = [], []
    args = iter(argv[1:])
    for a in args:
        if a == "--torch":
            torch_paths.append(next(args, None))
        else:
            paths.append(a)
    if not paths or None in torch_paths:
        print(__doc__, file=sys.stderr)
        return 2
    benchmarks = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            benchmarks += json.load(f)["benchmarks"]
    times, _ = benchjson.collect(benchmarks, row_key, ms_of, statistics.median)
    floors, _ = benchjson.collect(benchmarks, row_key, lambda b: b.get("floor_fraction"), statistics.median)
    torch = {}
    for path in torch_paths:
        torch.update(read_torch(path))

    print("## Fused apply at decode sizes (f32: ocltk's and CLBlast's two calls)\n")
    print("| shape | type | ours ms | ocltk two calls ms | CLBlast two calls ms | vs ocltk | vs CLBlast | of floor |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (cls, shape, dtype), cells in times.items():
        if cls != "decode":
            continue
        ours = cells.get("ours_tuned")
        floor = floors.get((cls, shape, dtype), {}).get("ours_tuned")
        print(f"| {shape} | {dtype} | {fmt(ours)} | {fmt(cells.get('ocltk_two_calls'))} | "
              f"{fmt(cells.get('clblast_two_calls'))} | {ratio(cells.get('ocltk_two_calls'), ours)} | "
              f"{ratio(cells.get('clblast_two_calls'), ours)} | "
              f"{f'{floor:.0%}' if isinstance(floor, float) else '–'} |")

    print("\n## Many adapters in one launch against one launch per segment\n")
    header = "| shape | type | ours ms | per segment ms | vs per segment | of floor |"
    if torch:
        header += " cuBLAS per segment ms | vs cuBLAS |"
    print(header)
    print("| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if torch else ""))
    for (cls, shape, dtype), cells in times.items():
        if cls != "multi_decode":
            continue
        ours = cells.get("ours_tuned")
        floor = floors.get((cls, shape, dtype), {}).get("ours_tuned")
        line = (f"| {shape} | {dtype} | {fmt(ours)} | {fmt(cells.get('ocltk_per_segment'))} | "
                f"{ratio(cells.get('ocltk_per_segment'), ours)} | "
                f"{f'{floor:.0%}' if isinstance(floor, float) else '–'} |")
        if torch:
            t = torch.get((cls, shape, dtype))
            line += f" {fmt(t)} | {ratio(t, ours)} |"
        print(line)

    print("\n## Half types against f32 (ours_tuned)\n")
    print("| class | shape | f32 ms | f16 ms | bf16 ms | f32 / f16 | f32 / bf16 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    shapes = {}
    for (cls, shape, dtype), cells in times.items():
        shapes.setdefault((cls, shape), {})[dtype] = cells.get("ours_tuned")
    for (cls, shape), by_type in shapes.items():
        f32, f16, bf16 = by_type.get("f32"), by_type.get("f16"), by_type.get("bf16")
        print(f"| {cls} | {shape} | {fmt(f32)} | {fmt(f16)} | {fmt(bf16)} | {ratio(f32, f16)} | {ratio(f32, bf16)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Markdown table of ours vs dequantize + CLBlast from an ocltk_bench_nf4 JSON file.

    python3 bench/nf4_ratios.py results/pocl-nf4.json [more.json ...]

Rows are named DIRECTION/SHAPE/rowsR/CLASS/IMPLEMENTATION (Google Benchmark appends
/manual_time). Per direction, shape and row count it prints the time of ours, of
baseline_dequant_clblast (what OpenCL users run today) and of baseline_clblast_only (the
GEMMs alone on f32 weights dequantized beforehand), the speed-ups over both, and ours'
GB/s and floor fraction (the time its needed bytes take at the measured copy bandwidth,
over the measured time; see bench/bench_nf4.cpp). The last column checks the issue's
target for decode rows: on a CPU device ours at least 3x baseline_dequant_clblast, on a
GPU at least 0.75 of the copy bandwidth. With repetitions it uses the median aggregate;
a row that failed or was not verified shows its reason. Standard library only.
"""
import json
import statistics
import sys

import benchjson  # beside this script

IMPLS = ("ours", "baseline_dequant_clblast", "baseline_clblast_only")
CPU_SPEEDUP_TARGET = 3.0
GPU_FLOOR_TARGET = 0.75
TIME_SCALE_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def row_key(bench):
    """(direction, shape, rows, class, impl) from a run name, or None for other rows."""
    parts = [p for p in bench.get("run_name", bench["name"]).split("/") if p != "manual_time"]
    if len(parts) < 5 or parts[4] not in IMPLS or not parts[2].startswith("rows"):
        return None
    return parts[0], parts[1], int(parts[2][4:]), parts[3], parts[4]


def cell_of(bench):
    """{"ms", "GB/s", "floor_fraction", ...} of one row."""
    scale = TIME_SCALE_TO_MS.get(bench.get("time_unit", "ns"), 1e-6)
    cell = {"ms": bench["real_time"] * scale}
    for counter in ("GB/s", "floor_fraction", "active_experts"):
        if counter in bench:
            cell[counter] = bench[counter]
    return cell


def median_cell(cells):
    return {name: statistics.median(c[name] for c in cells if name in c) for name in cells[0]}


def collect(benchmarks):
    """{(direction, shape, rows, class): {impl: cell}}; a failed cell is a reason (str)."""
    return benchjson.collect(benchmarks, row_key, cell_of, median_cell)


def number(x):
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def fmt_ms(cell):
    if cell is None:
        return "–"
    if isinstance(cell, str):
        return "failed: " + cell.replace("|", "\\|")[:80]
    return number(cell["ms"])


def field(cell, name, percent=False):
    if not isinstance(cell, dict) or name not in cell:
        return "–"
    return f"{cell[name] * 100:.2g}%" if percent else number(cell[name])


def speedup(ours, other):
    if isinstance(ours, dict) and isinstance(other, dict) and ours["ms"] > 0:
        return other["ms"] / ours["ms"]
    return None


def target(cls, cpu, up, ours):
    """The issue's target for decode rows, or "" for other classes."""
    if cls != "decode":
        return ""
    if cpu:
        if up is None:
            return "?"
        verdict = "met" if up >= CPU_SPEEDUP_TARGET else f"missed ({up / CPU_SPEEDUP_TARGET:.2f} of it)"
        return f"≥{CPU_SPEEDUP_TARGET:g}× baseline: {verdict}"
    if not isinstance(ours, dict) or "floor_fraction" not in ours:
        return "?"
    f = ours["floor_fraction"]
    verdict = "met" if f >= GPU_FLOOR_TARGET else f"missed ({f / GPU_FLOOR_TARGET:.2f} of it)"
    return f"≥{GPU_FLOOR_TARGET:.0%} of copy: {verdict}"


def report(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    context = data.get("context", {})
    table, labels = collect(data.get("benchmarks", []))
    cpu = context.get("device_type") == "cpu"
    print(f"### {path}")
    print()
    print(f"- device: {context.get('device', '?')} ({context.get('device_vendor', '?')}), "
          f"driver {context.get('device_driver', '?')}, type {context.get('device_type', '?')}")
    print(f"- date: {context.get('date', '?')}; load average at start: {context.get('load_avg', '?')}; "
          f"ocltk {context.get('ocltk_version', '?')}, CLBlast {context.get('clblast_version', '?')}")
    print(f"- profile: {context.get('ocltk_profile', '?')}")
    print(f"- copy bandwidth: {context.get('copy_gbps', '?')} GB/s ({context.get('copy_gbps_source', '?')})")
    print(f"- timer: {context.get('ocltk_timer', '?')}; "
          f"calls per iteration: {context.get('ocltk_calls_per_iteration', '?')}; sizes: {context.get('ocltk_sizes', '?')}")
    print()
    print("Times in ms per call; speed-ups above 1 mean ours is faster. GB/s and floor are ours': "
          "needed bytes (4-bit payload + scales of the experts with rows + f32 activations) over the time, "
          "and that over the copy bandwidth.")
    print()
    print("| direction | shape | rows | class | experts with rows | ours ms | dequant+CLBlast ms | speed-up | "
          "CLBlast only ms | vs CLBlast only | ours GB/s | ours floor | baseline floor | target | ours choice |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for key, cells in table.items():
        direction, shape, rows, cls = key
        ours, base, only = (cells.get(i) for i in IMPLS)
        up, up_only = speedup(ours, base), speedup(ours, only)
        active = next((field(c, "active_experts") for c in (ours, base, only) if isinstance(c, dict)), "–")
        choice = labels.get(key + ("ours",), "").removeprefix("choice=").replace("|", "\\|")
        print(f"| {direction.removeprefix('nf4_')} | {shape} | {rows} | {cls} | {active} | {fmt_ms(ours)} | "
              f"{fmt_ms(base)} | {'–' if up is None else f'{up:.2f}'} | {fmt_ms(only)} | "
              f"{'–' if up_only is None else f'{up_only:.2f}'} | {field(ours, 'GB/s')} | "
              f"{field(ours, 'floor_fraction', True)} | {field(base, 'floor_fraction', True)} | "
              f"{target(cls, cpu, up, ours)} | {choice} |")
    print()


def main(argv):
    args = argv[1:]
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__.strip(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    for path in args:
        try:
            report(path)
        except (OSError, json.JSONDecodeError, KeyError, ValueError) as e:
            print(f"nf4_ratios.py: {path}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

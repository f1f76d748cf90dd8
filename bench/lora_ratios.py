#!/usr/bin/env python3
"""The LoRA ratios of docs/lora.md from an ocltk_bench_lora Google Benchmark JSON file.

    python3 bench/lora_ratios.py results/DEVICE/bench-lora.json [--torch results/DEVICE/torch-lora.json]

Rows are named lora_apply/CLASS/SHAPE/TYPE/IMPLEMENTATION (Google Benchmark appends
/manual_time). Prints, as Markdown tables, times in ms (the median aggregate with
--benchmark_repetitions, else the median of the runs) and:
  decode:        ours_tuned against ocltk_two_calls and clblast_two_calls (f32; above 1: ours
                 is faster), and floor_fraction;
  multi_decode:  ours_tuned against ocltk_per_segment per type, and floor_fraction;
  types:         each half type's time against f32's, ours_tuned.
--torch FILE adds cuBLAS looped per segment from bench/torch_lora_ref.py's JSON, matched by
class, shape and type. A row that failed or was not verified shows its reason.
bench/tables.py imports lora_rows() for its LoRA tables. Standard library only.
"""
import json
import statistics
import sys

import benchjson  # beside this script

IMPLS = ("ours_tuned", "ours_default", "ocltk_two_calls", "clblast_two_calls", "ocltk_per_segment")
# lora_rows()' field of each implementation's time besides ours_tuned's ("ms").
TIME_FIELDS = {"ours_default": "default_ms", "ocltk_two_calls": "two_calls_ms",
               "clblast_two_calls": "clblast_ms", "ocltk_per_segment": "per_segment_ms"}


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


def cell_of(bench):
    return {"ms": ms_of(bench), "floor": bench.get("floor_fraction")}


def median_cell(cells):
    floors = [c["floor"] for c in cells if c["floor"] is not None]
    return {"ms": statistics.median(c["ms"] for c in cells), "floor": statistics.median(floors) if floors else None}


def read_torch(path):
    """{(class, shape, type): ms} from torch_lora_ref.py's JSON."""
    with open(path, encoding="utf-8") as f:
        return {(r["class"], r["shape"], r["dtype"]): r["ms"] for r in json.load(f).get("results", [])}


def lora_rows(benchmarks, torch=None):
    """One dict per (class, shape, type) of ocltk_bench_lora's rows, in file order: class,
    shape, type; ms and floor (ours_tuned's time and floor_fraction), default_ms, two_calls_ms,
    clblast_ms, per_segment_ms (the other implementations), cublas_ms (from `torch`, the
    {(class, shape, type): ms} of read_torch) and label (ours_tuned's). A time is a float, the
    reason (str) of a row that failed or was not verified, or None where the row is absent."""
    table, labels = benchjson.collect(benchmarks, row_key, cell_of, median_cell)
    rows = []
    for (cls, shape, dtype), cells in table.items():
        def time_of(impl):
            cell = cells.get(impl)
            return cell["ms"] if isinstance(cell, dict) else cell

        ours = cells.get("ours_tuned")
        row = {"class": cls, "shape": shape, "type": dtype, "ms": time_of("ours_tuned"),
               "floor": ours.get("floor") if isinstance(ours, dict) else None,
               "cublas_ms": (torch or {}).get((cls, shape, dtype)),
               "label": labels.get((cls, shape, dtype, "ours_tuned"), "")}
        for impl, field in TIME_FIELDS.items():
            row[field] = time_of(impl)
        rows.append(row)
    return rows


def speedup(slow, fast):
    """slow / fast where both are measured times, else None (above 1: `fast` is faster)."""
    if isinstance(slow, (int, float)) and isinstance(fast, (int, float)) and fast > 0:
        return slow / fast
    return None


def fmt(cell):
    if cell is None:
        return "–"
    if isinstance(cell, str):
        return "failed: " + cell.replace("|", "\\|")[:60]
    return f"{cell:.3g}"


def ratio(slow, fast):
    x = speedup(slow, fast)
    return "–" if x is None else f"{x:.2f}x"


def percent(floor):
    return f"{floor:.0%}" if isinstance(floor, float) else "–"


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
    torch = {}
    for path in torch_paths:
        torch.update(read_torch(path))
    rows = lora_rows(benchmarks, torch)

    print("## Fused apply at decode sizes (f32: ocltk's and CLBlast's two calls)\n")
    print("| shape | type | ours ms | ocltk two calls ms | CLBlast two calls ms | vs ocltk | vs CLBlast | of floor |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if r["class"] != "decode":
            continue
        ours = r["ms"]
        print(f"| {r['shape']} | {r['type']} | {fmt(ours)} | {fmt(r['two_calls_ms'])} | {fmt(r['clblast_ms'])} | "
              f"{ratio(r['two_calls_ms'], ours)} | {ratio(r['clblast_ms'], ours)} | {percent(r['floor'])} |")

    print("\n## Many adapters in one launch against one launch per segment\n")
    header = "| shape | type | ours ms | per segment ms | vs per segment | of floor |"
    if torch:
        header += " cuBLAS per segment ms | vs cuBLAS |"
    print(header)
    print("| --- | --- | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if torch else ""))
    for r in rows:
        if r["class"] != "multi_decode":
            continue
        ours = r["ms"]
        line = (f"| {r['shape']} | {r['type']} | {fmt(ours)} | {fmt(r['per_segment_ms'])} | "
                f"{ratio(r['per_segment_ms'], ours)} | {percent(r['floor'])} |")
        if torch:
            line += f" {fmt(r['cublas_ms'])} | {ratio(r['cublas_ms'], ours)} |"
        print(line)

    print("\n## Half types against f32 (ours_tuned)\n")
    print("| class | shape | f32 ms | f16 ms | bf16 ms | f32 / f16 | f32 / bf16 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    shapes = {}
    for r in rows:
        shapes.setdefault((r["class"], r["shape"]), {})[r["type"]] = r["ms"]
    for (cls, shape), by_type in shapes.items():
        f32, f16, bf16 = by_type.get("f32"), by_type.get("f16"), by_type.get("bf16")
        print(f"| {cls} | {shape} | {fmt(f32)} | {fmt(f16)} | {fmt(bf16)} | {ratio(f32, f16)} | {ratio(f32, bf16)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

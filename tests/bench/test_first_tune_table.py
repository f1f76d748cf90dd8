"""bench/first_tune_table.py, the first-tune figure's table (issue #31), on synthetic
ocltk_bench_profiles output: ratios, the 10 % margin, and a profile holding the reference's
very point counted as within whatever its measured ratio."""
import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "first_tune_table.py"


def row(op, cls, profile, label, ms, family):
    return {"name": f"{op}/{cls}/{profile}/iterations:10/manual_time", "run_name": f"{op}/{cls}/{profile}/manual_time",
            "run_type": "iteration", "family_index": family, "real_time": ms, "time_unit": "ms", "verified": 1,
            "label": label}


def table(tmp_path, rows, name="bench.json"):
    path = tmp_path / name
    text = json.dumps({"context": {}, "benchmarks": rows})
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    out = subprocess.run([sys.executable, str(SCRIPT), str(path), "best"], check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def test_counts_the_margin_and_the_reference_point(tmp_path):
    r = random.Random()
    base = [r.uniform(0.01, 50) for _ in range(4)]
    same = "tiled KWG=16 VW=16"
    rows = []
    cases = [
        ("gemm_nt", "gemv", "reduce VW=8", 1.05),  # within the margin at another point
        ("gemm_nt", "large", "xgemm KWG=8", 1.3),  # beyond it at another point: a miss
        ("lora_apply", "decode", same, 1.2),  # beyond it at the very same point: the run's noise
        ("nf4_forward", "decode", "stream TR=8", 0.8),  # faster
    ]
    for _ in range(3):  # repetitions: the median is taken
        for family, (op, cls, label, ratio) in enumerate(cases):
            rows += [row(op, cls, "best", same, base[family], family),
                     row(op, cls, "first", label, base[family] * ratio, family)]
    lines = table(tmp_path, rows)
    body = {tuple(c.strip() for c in l.split("|")[1:3]): l for l in lines if l.startswith("| ") and "---" not in l}
    assert "**1.300**" in body[("gemm_nt", "large")]
    assert "1.050" in body[("gemm_nt", "gemv")] and "**" not in body[("gemm_nt", "gemv")]
    assert "1.200 (same point)" in body[("lora_apply", "decode")] and "**" not in body[("lora_apply", "decode")]
    assert "0.800" in body[("nf4_forward", "decode")]
    assert lines[-1] == "first: 3 of 4 classes within 10 % of best (1 of them on its very point; 3 by the medians)."


def test_takes_the_fastest_repetition(tmp_path):
    # One slow repetition of the first profile (the machine's load of that moment) sets its
    # median past the margin; its fastest repetition is within it.
    r = random.Random()
    base = r.uniform(0.01, 50)
    rows = []
    for rep, slow in enumerate([1.0, 1.3, 1.3, 1.0, 1.3]):
        rows += [row("gemm_nt", "gemv", "best", "tiled VW=16", base * (1.02 if rep % 2 else 1.0), 0),
                 row("gemm_nt", "gemv", "first", "reduce VW=8", base * 1.05 * slow, 0)]
    lines = table(tmp_path, rows)
    body = [l for l in lines if l.startswith("| gemm_nt | gemv |")][0]
    assert "| 1.050 |" in body and "**" not in body
    assert "| 1.365 |" in body
    assert lines[-1] == "first: 1 of 1 classes within 10 % of best (0 of them on its very point; 0 by the medians)."


def test_reads_the_compressed_file_as_the_plain_one(tmp_path):
    # bench/first_tune.sh keeps bench.json.gz; its table must be the plain file's.
    r = random.Random()
    rows = []
    for rep in range(3):
        for family, (cls, ratio) in enumerate([("gemv", r.uniform(0.8, 1.3)), ("large", r.uniform(0.8, 1.3))]):
            base = r.uniform(0.01, 50)
            rows += [row("gemm_nt", cls, "best", "tiled VW=16", base, family),
                     row("gemm_nt", cls, "first", "reduce VW=8", base * ratio, family)]
    plain = table(tmp_path, rows)
    assert table(tmp_path, rows, "bench.json.gz") == plain
    assert plain[-1].startswith("first: ") and len([l for l in plain if l.startswith("| gemm_nt |")]) == 2


def test_a_class_the_reference_lacks_is_shown_but_not_counted(tmp_path):
    # A class newer than the best known profile (one row of the first profile alone): its
    # figure is printed like any, and the count is of the classes both profiles measured.
    r = random.Random()
    base, alone = r.uniform(0.01, 50), r.uniform(0.01, 50)
    rows = []
    for _ in range(3):
        rows += [row("gemm_nt", "gemv", "best", "tiled VW=16", base, 0),
                 row("gemm_nt", "gemv", "first", "tiled VW=16", base * 1.02, 0),
                 row("gemm_nt", "lora_shrink_tf32x3", "first", "tcs KCH=8", alone, 1)]
    lines = table(tmp_path, rows)
    body = [l for l in lines if l.startswith("| gemm_nt | lora_shrink_tf32x3 |")][0]
    assert body == "| gemm_nt | lora_shrink_tf32x3 | – | %.4g | – | – |" % alone
    assert lines[-1] == ("first: 1 of 1 classes within 10 % of best (1 of them on its very point; 1 by the medians); "
                         "1 without a figure of best, not counted.")

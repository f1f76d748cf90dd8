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


def pair_row(op, cls, profile, reference, ratio, family):
    # A row of --ocltk_paired_with=REFERENCE: PROFILE's choice in alternation with REFERENCE's.
    return {"name": f"{op}/{cls}/{profile}~{reference}/iterations:10/manual_time",
            "run_name": f"{op}/{cls}/{profile}~{reference}/manual_time", "run_type": "iteration",
            "family_index": family, "real_time": 1.0, "time_unit": "ms", "verified": 1, "ratio": ratio,
            "pair_median": ratio, "label": "x / y"}


def test_judges_by_the_paired_ratio_where_the_run_has_one(tmp_path):
    # Separate rows drift apart (a slow moment for one profile's repetitions); the paired rows,
    # both points a launch apart, are the figure: their median over repetitions.
    r = random.Random()
    rows = []
    cases = [  # (class, the separate rows' ratio, the paired ratios of three repetitions)
        ("gemv", 1.25, [1.02, 0.99, 1.30]),  # the separate rows miss; paired median 1.02: within
        ("large", 1.01, [1.15, 1.12, 0.90]),  # the separate rows are within; paired median 1.12: a miss
        ("small_batch", 1.04, [1.03, 1.05, 1.04]),
    ]
    for rep in range(3):
        for family, (cls, ratio, pairs) in enumerate(cases):
            base = r.uniform(0.01, 50)
            rows += [row("gemm_nt", cls, "best", "tiled VW=16", base, family),
                     row("gemm_nt", cls, "first", "reduce VW=8", base * ratio, family),
                     pair_row("gemm_nt", cls, "first", "best", pairs[rep], family)]
    lines = table(tmp_path, rows)
    assert lines[0] == "| kernel | class | best ms | first ms | first / best | medians' ratio | paired ratio |"
    body = {l.split("|")[2].strip(): l for l in lines if l.startswith("| gemm_nt |")}
    assert body["gemv"].endswith("| 1.020 |") and "**" not in body["gemv"]
    assert body["large"].endswith("| **1.120** |")
    assert body["small_batch"].endswith("| 1.040 |")
    assert "first~best" not in "\n".join(lines), "a paired row is no profile of its own"
    assert lines[-1] == ("first: 2 of 3 classes within 10 % of best by the paired ratio (0 of them on its very "
                         "point; 2 by the fastest repetitions, 2 by the medians).")


def test_a_class_without_a_paired_row_takes_the_fastest_repetitions(tmp_path):
    # A class whose paired row failed (or a run of several profiles where one lacks the class)
    # is judged as before, its paired cell "–".
    r = random.Random()
    base = [r.uniform(0.01, 50) for _ in range(2)]
    rows = []
    for _ in range(3):
        rows += [row("gemm_nt", "gemv", "best", "tiled VW=16", base[0], 0),
                 row("gemm_nt", "gemv", "first", "reduce VW=8", base[0] * 1.3, 0),
                 pair_row("gemm_nt", "gemv", "first", "best", 1.05, 0),
                 row("gemm_nt", "large", "best", "xgemm KWG=16", base[1], 1),
                 row("gemm_nt", "large", "first", "xgemm KWG=32", base[1] * 1.3, 1)]
    lines = table(tmp_path, rows)
    large = [l for l in lines if l.startswith("| gemm_nt | large |")][0]
    assert "**1.300**" in large and large.endswith("| – |")
    assert lines[-1].startswith("first: 1 of 2 classes within 10 % of best by the paired ratio (1 without one, "
                                "by the fastest repetitions)")


def test_a_paired_ratio_of_zero_is_no_figure(tmp_path):
    # A repetition whose reference read 0 ms has no ratio (ocltk_bench_profiles writes none; an
    # older file may hold 0): it does not pull the median down.
    r = random.Random()
    base = r.uniform(0.01, 50)
    rows = []
    for ratio in [1.3, 0.0, 0.0, 1.25, 1.2]:
        rows += [row("gemm_nt", "gemv", "best", "tiled VW=16", base, 0),
                 row("gemm_nt", "gemv", "first", "reduce VW=8", base * 1.3, 0),
                 pair_row("gemm_nt", "gemv", "first", "best", ratio, 0)]
    body = [l for l in table(tmp_path, rows) if l.startswith("| gemm_nt | gemv |")][0]
    assert body.endswith("| **1.250** |")

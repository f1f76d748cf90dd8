#!/usr/bin/env python3
"""Markdown table per kernel and class from an ocltk_bench_profiles JSON file: each
profile's time (ms, the fastest of its repetitions) and its ratio to the reference
profile's, beside the ratio of their medians.

    python3 bench/first_tune_table.py RUN.json[.gz] REFERENCE [--within 0.10]

REFERENCE names the profile the others are compared with (bench/first_tune.sh: best).
A ratio above 1 + within is marked; the last line counts the classes within it, by the
fastest repetitions and by the medians. The fastest repetition is the figure: on a shared
machine other work only ever slows a repetition, and where both profiles hold the very same
point (whose ratio must be 1) the fastest repetitions differed by about half as much as the
medians in each of four runs (2-core PoCL machines and the H200, 5 repetitions: at most
2.0-14.5 % against 4.4-32.8 %).
A class where a profile holds the very point of REFERENCE (the rows' labels, algorithm and
parameters, are equal) landed on the best known point: it counts as within whatever its
measured ratio, which is then the run's noise, and its cell says "same point".
Standard library only.
"""
import argparse
import gzip
import json
import statistics

import benchjson  # beside this script


def row_key(bench):
    """(op, class, profile) from a run name OP/CLASS/PROFILE/manual_time, or None."""
    parts = [p for p in bench.get("run_name", bench["name"]).split("/") if ":" not in p and p != "manual_time"]
    return tuple(parts[:3]) if len(parts) >= 3 else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("json")
    parser.add_argument("reference")
    parser.add_argument("--within", type=float, default=0.10)
    args = parser.parse_args()
    opener = gzip.open if args.json.endswith(".gz") else open
    with opener(args.json, "rt") as f:
        benchmarks = json.load(f)["benchmarks"]
    ms = lambda b: b["real_time"] if b.get("time_unit") == "ms" else None
    # The fastest repetition from the repetitions themselves (collect prefers a median aggregate).
    repetitions = [b for b in benchmarks if b.get("run_type") != "aggregate"]
    table, labels = benchjson.collect(repetitions, row_key, ms, min)
    medians, _ = benchjson.collect(benchmarks, row_key, ms, statistics.median)
    # Registration order (kernel, then class), whatever order interleaved repetitions ran in.
    registered = {}
    for b in benchmarks:
        key = row_key(b)
        if key is not None:
            registered[key[:2]] = min(registered.get(key[:2], 1 << 30), b.get("family_index", 1 << 30))
    table = dict(sorted(table.items(), key=lambda item: registered.get(item[0], 1 << 30)))
    names = []
    for cells in table.values():
        for name in cells:
            if name != args.reference and name not in names:
                names.append(name)
    print("| kernel | class | %s ms | %s |" % (args.reference, " | ".join(
        "%s ms | %s / %s | medians' ratio" % (n, n, args.reference) for n in names)))
    print("| --- | --- | ---: |" + " ---: | ---: | ---: |" * len(names))
    within = {n: 0 for n in names}
    within_medians = {n: 0 for n in names}
    same_point = {n: 0 for n in names}
    classes = unmatched = 0  # rows with the reference's figure, rows without it
    for (op, cls), cells in table.items():
        ref = cells.get(args.reference)
        row = "| %s | %s | %s |" % (op, cls, "%.4g" % ref if isinstance(ref, float) else ref or "–")
        classes += isinstance(ref, float)
        unmatched += not isinstance(ref, float)
        for n in names:
            cell = cells.get(n)
            if isinstance(cell, float) and isinstance(ref, float):
                ratio = cell / ref
                label = labels.get((op, cls, n))
                same = label is not None and label == labels.get((op, cls, args.reference))
                fits = lambda r: r <= 1 + args.within or same  # noqa: E731
                ok = fits(ratio)
                within[n] += ok
                same_point[n] += same
                row += " %.4g | %s%.3f%s%s |" % (cell, "" if ok else "**", ratio, "" if ok else "**",
                                                 " (same point)" if same else "")
                m, m_ref = medians.get((op, cls), {}).get(n), medians.get((op, cls), {}).get(args.reference)
                if isinstance(m, float) and isinstance(m_ref, float):
                    within_medians[n] += fits(m / m_ref)
                    row += " %.3f |" % (m / m_ref)
                else:
                    row += " – |"
            else:
                row += " %s | – | – |" % ("%.4g" % cell if isinstance(cell, float) else cell or "–")
        print(row)
    for n in names:
        print("\n%s: %d of %d classes within %d %% of %s (%d of them on its very point; %d by the medians)%s." %
              (n, within[n], classes, round(args.within * 100), args.reference, same_point[n], within_medians[n],
               "; %d without a figure of %s, not counted" % (unmatched, args.reference) if unmatched else ""))


if __name__ == "__main__":
    main()

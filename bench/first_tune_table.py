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
A run with paired rows (ocltk_bench_profiles --ocltk_paired_with=REFERENCE: per class a
profile's point timed in alternation with REFERENCE's, launch by launch) is judged by them
instead: the "paired ratio" column, the median over repetitions of each repetition's time
ratio. Two points a launch apart see the same moment of the machine; the fastest repetitions of
separate rows do not: on the 2-core PoCL host the very same point's two rows read 0.87 by their
fastest repetitions and 1.01 paired, one NF4 point 1.13 and 1.05. The last line then also
counts by the fastest repetitions; a class without a paired row is judged by them.
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


def name_parts(bench):
    return [p for p in bench.get("run_name", bench["name"]).split("/") if ":" not in p and p != "manual_time"]


def row_key(bench):
    """(op, class, profile) from a run name OP/CLASS/PROFILE/manual_time, or None."""
    parts = name_parts(bench)
    return tuple(parts[:3]) if len(parts) >= 3 and "~" not in parts[2] else None


def pair_key(reference):
    """(op, class, profile) of a paired row OP/CLASS/PROFILE~REFERENCE, or None."""
    def key(bench):
        parts = name_parts(bench)
        if len(parts) < 3 or not parts[2].endswith("~" + reference):
            return None
        return (parts[0], parts[1], parts[2][:-len(reference) - 1])
    return key


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
    # Paired rows (--ocltk_paired_with=REFERENCE): the median over repetitions of each one's
    # ratio, a profile's launches' time over the reference's, launch by launch in alternation.
    paired, _ = benchjson.collect([b for b in benchmarks if b.get("run_type") != "aggregate"],
                                  pair_key(args.reference),
                                  lambda b: b["ratio"] if (b.get("ratio") or 0) > 0 else None, statistics.median)
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
    has_pairs = bool(paired)
    print("| kernel | class | %s ms | %s |" % (args.reference, " | ".join(
        "%s ms | %s / %s | medians' ratio%s" % (n, n, args.reference, " | paired ratio" if has_pairs else "")
        for n in names)))
    print("| --- | --- | ---: |" + (" ---: | ---: | ---: |" + " ---: |" * has_pairs) * len(names))
    within = {n: 0 for n in names}
    within_fastest = {n: 0 for n in names}
    unpaired = {n: 0 for n in names}  # classes judged by the fastest repetitions in a paired run
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
                pair = paired.get((op, cls), {}).get(n) if has_pairs else None
                pair = pair if isinstance(pair, float) and pair > 0 else None
                # The figure: the paired ratio where the run has one, else the fastest repetitions'.
                figure = pair if pair is not None else ratio
                unpaired[n] += has_pairs and pair is None
                ok = fits(figure)
                within[n] += ok
                within_fastest[n] += fits(ratio)
                same_point[n] += same
                bold = "" if ok or pair is not None else "**"
                row += " %.4g | %s%.3f%s%s |" % (cell, bold, ratio, bold, " (same point)" if same else "")
                m, m_ref = medians.get((op, cls), {}).get(n), medians.get((op, cls), {}).get(args.reference)
                if isinstance(m, float) and isinstance(m_ref, float):
                    within_medians[n] += fits(m / m_ref)
                    row += " %.3f |" % (m / m_ref)
                else:
                    row += " – |"
                if has_pairs:
                    row += " – |" if pair is None else " %s%.3f%s |" % ("" if ok else "**", pair, "" if ok else "**")
            else:
                row += " %s | – | – |%s" % ("%.4g" % cell if isinstance(cell, float) else cell or "–",
                                            " – |" if has_pairs else "")
        print(row)
    for n in names:
        others = "%d by the medians" % within_medians[n]
        if has_pairs:
            others = "%d by the fastest repetitions, %s" % (within_fastest[n], others)
        by = ""
        if has_pairs:
            by = " by the paired ratio" + (" (%d without one, by the fastest repetitions)" % unpaired[n]
                                          if unpaired[n] else "")
        print("\n%s: %d of %d classes within %d %% of %s%s (%d of them on its very point; %s)%s." %
              (n, within[n], classes, round(args.within * 100), args.reference, by, same_point[n], others,
               "; %d without a figure of %s, not counted" % (unmatched, args.reference) if unmatched else ""))


if __name__ == "__main__":
    main()

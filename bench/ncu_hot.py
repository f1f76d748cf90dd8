#!/usr/bin/env python3
"""Summarises Nsight Compute's per-instruction page of one kernel (`ncu -i REP --page source
--print-source sass --csv > F.csv`): the warp-stall reasons over all samples, the executed
instruction mix by opcode, and the instructions that hold the most stall samples with their
three largest reasons. A lab tool beside bench/ptx_lab.py.

  python3 ncu_hot.py F.csv [TOP]
"""
import collections, csv, sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    rows = list(csv.reader(open(sys.argv[1])))
    header, data = rows[1], rows[2:]  # row 0 names the kernel
    col = {h: i for i, h in enumerate(header)}
    samples = "Warp Stall Sampling (All Samples)"
    total = sum(number(r[col[samples]]) for r in data) or 1.0
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    reasons = collections.Counter()
    for r in data:
        for s in stalls:
            reasons[s] += number(r[col[s]])
    print("stall samples %d over %d instructions" % (total, len(data)))
    print(" ".join("%s=%.1f%%" % (k[6:], v / total * 100) for k, v in reasons.most_common(12)))
    executed = [number(r[col["Instructions Executed"]]) for r in data]
    mix = collections.Counter()
    for r, e in zip(data, executed):
        words = r[col["Source"]].split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
        mix[op.split(".")[0]] += e
    all_executed = sum(executed) or 1.0
    print("warp instructions executed %d" % all_executed)
    print(" ".join("%s=%.1f%%" % (k, v / all_executed * 100) for k, v in mix.most_common(20)))
    order = sorted(range(len(data)), key=lambda i: -number(data[i][col[samples]]))
    for i in order[:top]:
        r = data[i]
        worst = sorted(((number(r[col[s]]), s[6:]) for s in stalls), reverse=True)[:3]
        print("%6d %5.2f%% executed %9d  %-60s %s" % (i, number(r[col[samples]]) / total * 100, executed[i],
                                                     r[col["Source"]].strip()[:60],
                                                     ", ".join("%s %d" % (n, v) for v, n in worst if v)))


if __name__ == "__main__":
    main()

"""Joins choices (choices.cpp's output, old and new profile) with the times an h200 bench call
measured for those choices on the same cases: prints, per case whose choice changed, the best
times measured for each choice (every run, fastest first), or '-' where none measured it.
Usage: python3 join.py OLD.txt NEW.txt BENCH.json..."""
import json, re, sys


def parse(choice):
    alg, params = re.match(r"(\w+) \{(.*)\}", choice).groups()
    return alg, dict(p.split("=") for p in params.split())


def same(entry, label):  # an entry's params are a subset of the label's full point
    (ea, ep), (la, lp) = parse(entry), parse(label)
    return ea == la and all(lp.get(k) == v for k, v in ep.items())


def load(path):
    return dict(line.rstrip("\n").split("\t")[:2] for line in open(path))


old, new = load(sys.argv[1]), load(sys.argv[2])
measured = {}
for path in sys.argv[3:]:
    for b in json.load(open(path)).get("benchmarks", []):
        case = b["name"].replace("/manual_time", "")
        label = b.get("label", "").split(") ", 1)[-1]
        if "{" in label:
            measured.setdefault(case, []).append((label, b["real_time"]))


def best(case, choice):
    times = [t for label, t in measured.get(case, []) if same(choice, label)]
    return ", ".join(f"{t:.4f}" for t in sorted(times)) if times else "-"


print("| case | before | ms, each run | now | ms, each run |")
print("| --- | --- | ---: | --- | ---: |")
for case in old:
    if old[case] != new[case]:
        short = lambda c: re.sub(r" LW=0| XL=0| NB=1| PF=0| WGS=128| KS=1| XS=1| LT=1| CW=16| RB=16", "", c)
        print(f"| {case.replace('nf4_forward/', '')} | {short(old[case])} | {best(case, old[case])} | "
              f"{short(new[case])} | {best(case, new[case])} |")

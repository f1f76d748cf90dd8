#!/usr/bin/env python3
"""Lists `cuobjdump -sass` output (sm_70 and newer) with each instruction's scheduling
controls decoded from its encoding: stall cycles, yield, the scoreboard its result sets
(wr), the one its operand reads release (rd), and the scoreboards it waits for. A lab tool:
it shows, for example, which loads share a scoreboard with the loads of a later group
(results/h200-2026-12-01/README.md). The last function of the listing is shown, or the one
named with --function; --from/--to bound the addresses (hex).

  python3 sass_ctrl.py F.sass [--function NAME] [--from 0x4700] [--to 0x4900]
"""
import argparse, re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sass")
    ap.add_argument("--function")
    ap.add_argument("--from", dest="lo", default="0")
    ap.add_argument("--to", dest="hi", default="ffffffffff")
    a = ap.parse_args()
    lo, hi = int(a.lo, 16), int(a.hi, 16)
    functions, current = {}, None
    lines = open(a.sass).read().split("\n")
    i = 0
    while i < len(lines):
        f = re.search(r"Function : (\S+)", lines[i])
        if f:
            current = f.group(1)
            functions[current] = []
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);?\s*/\* (0x[0-9a-f]{16}) \*/", lines[i])
        if m and current is not None and i + 1 < len(lines):
            high = re.search(r"/\* (0x[0-9a-f]{16}) \*/", lines[i + 1])
            if high:
                c = int(high.group(1), 16) >> 41  # bits 105.. of the 128-bit instruction
                functions[current].append((int(m.group(1), 16), m.group(2).strip(), c & 15, (c >> 4) & 1,
                                           (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 63))
                i += 2
                continue
        i += 1
    if not functions:
        raise SystemExit("no function found in " + a.sass)
    name = a.function or list(functions)[-1]
    for addr, text, stall, yld, wr, rd, wait in functions[name]:
        if lo <= addr <= hi:
            waits = "".join(str(b) for b in range(6) if wait >> b & 1)
            print("%05x stall %2d %s wr %s rd %s wait [%-6s] %s" % (addr, stall, " " if yld else "Y",
                                                                    wr if wr != 7 else "-", rd if rd != 7 else "-",
                                                                    waits, text))


if __name__ == "__main__":
    main()

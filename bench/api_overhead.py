#!/usr/bin/env python3
"""The host's cost of a launch through the C API and the Python binding, against the C++ API, at a
decode-sized gemm_nt (docs/c-api.md, "Overhead"), in one run.

Runs build/bench/ocltk_api_overhead (C++ and C API, interleaved on one queue), then times the
Python binding with pyopencl arrays the same way in this process (rounds of --calls launches
enqueued behind a closed gate: the host's time per launch; then --calls launches with the
queue running, per launch until they have run; medians), and prints:

    api       launch us  (cpu us)  end-to-end us   vs C++
    C++             ...       ...            ...
    C API           ...       ...            ...   +x us a launch (+x cpu), +x.x % end to end  (target: 2 %)
    Python          ...       ...            ...   +y us a launch (+y cpu), ...    (target: 20 us a launch)

"launch" is wall time, "(cpu us)" the calling thread's CPU time over the same launches: on a
machine others share, wall time grows with their load and CPU time much less.

    python3 bench/api_overhead.py [--binary build/bench/ocltk_api_overhead] [--device SEL]
        [--m 1 --n 16 --k 4096] [--calls 200] [--rounds 40] [--json results/FILE.json]

Needs the Python package importable (pip install ., or PYTHONPATH=python with OCLTK_LIBRARY).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def python_rows(args):
    import numpy as np
    import pyopencl as cl
    import pyopencl.array as cla

    import ocltk

    rt = ocltk.Runtime(device=args.device)
    queue = rt.queue
    a = cla.to_device(queue, np.full((args.m, args.k), 0.5, np.float32))
    b = cla.to_device(queue, np.full((args.n, args.k), 0.5, np.float32))
    c = cla.empty(queue, (args.m, args.n), np.float32)
    queue.finish()

    def round_of(calls):
        c.finish()  # pyopencl arrays keep their events; start each round with none pending
        queue.finish()
        gate = cl.UserEvent(queue.context)  # as ocltk_api_overhead: the host's time alone
        cl.enqueue_marker(queue, wait_for=[gate])
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        for _ in range(calls):
            rt.gemm_nt(a, b, out=c)
        t1 = time.perf_counter()
        cpu = (time.thread_time() - cpu0) * 1e6 / calls
        gate.set_status(cl.command_execution_status.COMPLETE)
        queue.finish()
        t2 = time.perf_counter()
        for _ in range(calls):
            rt.gemm_nt(a, b, out=c)
        queue.finish()
        t3 = time.perf_counter()
        return (t1 - t0) * 1e6 / calls, cpu, (t3 - t2) * 1e6 / calls

    round_of(10)
    launch, launch_cpu, end_to_end = zip(*(round_of(args.calls) for _ in range(args.rounds)))
    rt.close()
    return {"launch_us": statistics.median(launch), "launch_cpu_us": statistics.median(launch_cpu),
            "end_to_end_us": statistics.median(end_to_end)}


def main():
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(here.parent / "build" / "bench" / "ocltk_api_overhead"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--m", type=int, default=1)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()

    command = [args.binary, "--m", str(args.m), "--n", str(args.n), "--k", str(args.k), "--calls", str(args.calls),
               "--rounds", str(args.rounds)] + (["--device", args.device] if args.device else [])
    native = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    native["python"] = python_rows(args)
    cpp = native["cpp"]
    print(f"{native['device']}: gemm_nt M={args.m} N={args.n} K={args.k}, {args.rounds} rounds of {args.calls} "
          f"launches, medians\n{native['choice']}\n")
    print(f"{'api':8} {'launch us':>10} {'(cpu us)':>9} {'end-to-end us':>14}   vs C++")
    for name, key in (("C++", "cpp"), ("C API", "c"), ("Python", "python")):
        row = native[key]
        line = f"{name:8} {row['launch_us']:10.2f} {row['launch_cpu_us']:9.2f} {row['end_to_end_us']:14.2f}"
        if key != "cpp":
            line += (f"   {row['launch_us'] - cpp['launch_us']:+.2f} us a launch "
                     f"({row['launch_cpu_us'] - cpp['launch_cpu_us']:+.2f} cpu), "
                     f"{100 * (row['end_to_end_us'] / cpp['end_to_end_us'] - 1):+.2f} % end to end")
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(native, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

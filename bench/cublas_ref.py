#!/usr/bin/env python3
"""cuBLAS (through PyTorch) on the shapes ocltk's benchmarks run, so that a ratio to cuBLAS
comes from the same machine and session as ours (bench/reproduce.sh, phase refs).

  python3 bench/cublas_ref.py gemm --shapes 4096x4096x4096,4096x16x4096 [--dtype f32] [--accumulate] [--flush MIB] [--json F]
  python3 bench/cublas_ref.py nf4 --experts 8 --out-features 14336 --in-features 4096 --rows 8,64,4096 [--json F]
  python3 bench/cublas_ref.py copy [--bytes 33554432,67108864] [--flush MIB] [--json F]

gemm: C[M,N] = A[M,K] @ B[N,K]^T, ocltk's NT form; dtype f32 (TF32 off), tf32, f16 or bf16;
      --accumulate times C += A @ B^T instead.
nf4:  what engines run for 4-bit expert weights without an NF4 kernel: bf16 matmuls per expert
      on weights already dequantized (the dequantization is not timed): forward x_e @ W_e^T
      (bf16_dequantized_ms) and input gradient g_e @ W_e (bf16_backward_ms). Rows are spread
      evenly, max(rows / experts, 1) per expert, so "rows" in the output is what was run; with
      the 4-bit floor (payload and f32 scales over the copy bandwidth measured here).
copy: device-to-device copy bandwidth, counting bytes read plus written (1 GiB copied);
      --bytes also at these sizes moved (half read, half written), each timed as 20 copies
      back to back between two events, as ocltk_bench --ocltk_calls=20 times a row: what a
      kernel moving that few bytes reaches, the launch's ramp and tail included.
Times are medians of 25 CUDA-event timings after 5 warm-up calls, inputs random, never zeros.
gemm and nf4 time 20 calls back to back per timing (as ocltk_bench --ocltk_calls=20 times a
row) and give the time per call. Every timing starts behind work already queued on the device
(a spin, or the flush below), so that PyTorch's dispatch of the first call, several
microseconds, is not counted as device time: an earlier version started each single call on an
idle stream, which added that dispatch to the LoRA-sized rows (12-60 us) and flattered the
ratios to them. --flush MIB (gemm, copy --bytes) zeroes MIB MiB of scratch memory before each
timed call, outside its events, and times the calls one at a time: nothing of the operands is
left in L2, as ocltk_bench --ocltk_flush=MIB times a row (the --bytes copies too).
Needs a CUDA device and PyTorch.
"""
import argparse
import json
import sys

import torch

# About a millisecond of device spin at the H200's clocks: more than the host needs to queue
# the calls of one timing.
SPIN_CYCLES = 2_000_000
CALLS = 20  # back-to-back calls per timing without --flush, as ocltk_bench --ocltk_calls=20


def median_ms(fn, reps=25, warmup=5, before=None, calls=1):
    """Median over reps of the device time per call of `calls` back-to-back calls of fn.

    Each timing starts behind work already queued on the device: before() (a flush) when given,
    else a spin of the device (torch.cuda._sleep) long enough for the host to queue the calls.
    The start event thus fires when the device turns to the first call, not while the host is
    still dispatching it: for calls of tens of microseconds, PyTorch's dispatch (several
    microseconds a call) would otherwise be counted as the kernel's time.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if before is not None:
            before()
        else:
            torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth():
    x = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x))
    return {"bytes": 2 * x.numel(), "ms": ms, "GB/s": 2 * x.numel() / ms / 1e6}


def flusher(mib):
    """None, or a function zeroing mib MiB of scratch memory (evicting the operands from L2)."""
    if not mib:
        return None
    scratch = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
    return scratch.zero_


def copy_at_sizes(sizes, calls=CALLS, flush_mib=0):
    out = []
    before = flusher(flush_mib)
    if before is not None:
        calls = 1  # each copy alone after its flush
    for moved in sizes:
        x = torch.randint(0, 255, (moved // 2,), dtype=torch.uint8, device="cuda")
        y = torch.empty_like(x)

        ms = median_ms(lambda: y.copy_(x), before=before, calls=calls)
        out.append({"bytes": 2 * x.numel(), "ms": ms, "GB/s": 2 * x.numel() / ms / 1e6, "flush_mib": flush_mib})
    return out


def gemm(shapes, dtype, accumulate, flush_mib=0):
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    tdtype = {"f32": torch.float32, "tf32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    rows = []
    before = flusher(flush_mib)
    for m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=tdtype)
        b = torch.randn(n, k, device="cuda", dtype=tdtype)
        c = torch.randn(m, n, device="cuda", dtype=tdtype)
        fn = (lambda: c.addmm_(a, b.t())) if accumulate else (lambda: torch.mm(a, b.t()))
        ms = median_ms(fn, before=before, calls=1 if before is not None else CALLS)
        rows.append({"m": m, "n": n, "k": k, "dtype": dtype, "accumulate": accumulate, "ms": ms,
                     "TFLOP/s": 2 * m * n * k / ms / 1e9, "flush_mib": flush_mib})
    return rows


def nf4(experts, n, k, rows_list, block):
    w = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(experts)]
    floor_bytes = experts * n * k // 2 + experts * n * k // block * 4
    bw = copy_bandwidth()["GB/s"]
    out = []
    for rows in rows_list:
        per = max(rows // experts, 1)
        xs = [torch.randn(per, k, device="cuda", dtype=torch.bfloat16) for _ in range(experts)]
        gs = [torch.randn(per, n, device="cuda", dtype=torch.bfloat16) for _ in range(experts)]
        forward = median_ms(lambda: [xs[e] @ w[e].t() for e in range(experts)], calls=CALLS)
        backward = median_ms(lambda: [gs[e] @ w[e] for e in range(experts)], calls=CALLS)
        out.append({"experts": experts, "n": n, "k": k, "rows": per * experts, "block": block,
                    "bf16_dequantized_ms": forward, "bf16_backward_ms": backward, "nf4_floor_bytes": floor_bytes,
                    "nf4_floor_ms": floor_bytes / bw / 1e6, "copy_GB/s": bw})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gemm")
    g.add_argument("--shapes", required=True)
    g.add_argument("--dtype", default="f32", choices=("f32", "tf32", "f16", "bf16"))
    g.add_argument("--accumulate", action="store_true")
    q = sub.add_parser("nf4")
    q.add_argument("--experts", type=int, default=8)
    q.add_argument("--out-features", type=int, default=14336)
    q.add_argument("--in-features", type=int, default=4096)
    q.add_argument("--rows", default="8,64,512,4096")
    q.add_argument("--block-size", type=int, default=64)
    c = sub.add_parser("copy")
    c.add_argument("--bytes", help="also these sizes moved (read + written), comma-separated")
    for s in (g, c):
        s.add_argument("--flush", type=int, default=0, metavar="MIB",
                       help="zero MIB MiB of scratch before each timed call (not timed): a cold L2")
    for s in (g, q, c):
        s.add_argument("--json", help="write the result there too")
    a = p.parse_args()
    if not 0 <= getattr(a, "flush", 0) <= 4096:  # gemm and copy take --flush
        p.error("--flush: expected MiB from 0 to 4096")
    if not torch.cuda.is_available():
        print("cublas_ref.py: no CUDA device", file=sys.stderr)
        return 1
    try:
        if a.what == "copy":
            res = copy_bandwidth()
            if a.bytes:
                res = dict(res, sizes=copy_at_sizes([int(b) for b in a.bytes.split(",")], flush_mib=a.flush))
        elif a.what == "gemm":
            res = gemm([tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")], a.dtype, a.accumulate,
                       a.flush)
        else:
            res = nf4(a.experts, a.out_features, a.in_features, [int(r) for r in a.rows.split(",")], a.block_size)
    except ValueError as e:
        print(f"cublas_ref.py: {e}", file=sys.stderr)
        return 2
    text = json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": res}, indent=1)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

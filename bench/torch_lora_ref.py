#!/usr/bin/env python3
"""cuBLAS (through PyTorch on an NVIDIA GPU) at the shapes of ocltk_bench_lora, for
bench/lora_ratios.py --torch:

    python3 bench/torch_lora_ref.py --json OUT/torch-lora.json [--iters 200]

Rows, each in f32, f16 and bf16, Y += scale * (X @ A^T) @ B^T into an existing Y:
  decode        M = 1, 4, 16 rows, K = N = 4096, one adapter of rank 16: two matmuls (the
                shrink, then the expand added to Y by addmm)
  multi_decode  16 rows over 8 adapters (2 rows each) of ranks 64, 32, 16, 8, 64, 32, 16, 8,
                K = N = 4096: the same two matmuls looped over the segments, each on its
                adapter's first `rank` rows of A and columns of B (what an engine without a
                multi-adapter kernel runs)
Times are CUDA events around `--iters` back-to-back calls after a warm-up, divided by the
calls: the device's time per call, launch gaps between calls included (as the OpenCL
marker-to-end timing of ocltk_bench_lora with --ocltk_calls). The intermediate is in the
row's type here (cuBLAS rounds each matmul's output), where ocltk keeps it in f32.
Shape ids match ocltk_bench_lora's row names.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", required=True, help="output file")
    parser.add_argument("--iters", type=int, default=200, help="calls per timing (default 200)")
    parser.add_argument("--repeats", type=int, default=5, help="timings per row, median kept (default 5)")
    args = parser.parse_args()
    import torch  # imported late so that --help works without it

    if not torch.cuda.is_available():
        print("torch_lora_ref.py: no CUDA device", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    width, scale = 4096, 0.5
    types = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

    def timed(call):
        for _ in range(10):
            call()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / args.iters)
        times.sort()
        return times[len(times) // 2]

    # f32 matmuls may use TF32 on the tensor cores; ocltk's f32 is plain f32.
    torch.backends.cuda.matmul.allow_tf32 = False
    results = []
    for name, dtype in types.items():
        for m in (1, 4, 16):
            r = 16
            x = torch.randn(m, width, device=dev, dtype=dtype, generator=gen)
            a = torch.randn(r, width, device=dev, dtype=dtype, generator=gen)
            b = torch.randn(width, r, device=dev, dtype=dtype, generator=gen)
            y = torch.randn(m, width, device=dev, dtype=dtype, generator=gen)

            def decode(x=x, a=a, b=b, y=y):
                y.addmm_(x @ a.t(), b.t(), alpha=scale)

            results.append({"class": "decode", "shape": f"{m}x{width}x{width}_r{r}", "dtype": name,
                            "impl": "cublas_two_calls", "ms": timed(decode)})
        adapters, max_rank, rows = 8, 64, 16
        ranks = [max(1, max_rank >> (i % 4)) for i in range(adapters)]
        x = torch.randn(rows, width, device=dev, dtype=dtype, generator=gen)
        a = torch.randn(adapters, max_rank, width, device=dev, dtype=dtype, generator=gen)
        b = torch.randn(adapters, width, max_rank, device=dev, dtype=dtype, generator=gen)
        y = torch.randn(rows, width, device=dev, dtype=dtype, generator=gen)
        scales = torch.rand(adapters, generator=torch.Generator().manual_seed(2)).tolist()
        per = rows // adapters
        segments = [(s * per, (s + 1) * per, s % adapters) for s in range(adapters)]

        def multi(x=x, a=a, b=b, y=y):
            for lo, hi, ad in segments:
                rk = ranks[ad]
                y[lo:hi].addmm_(x[lo:hi] @ a[ad, :rk].t(), b[ad, :, :rk].t(), alpha=scale * scales[ad])

        results.append({"class": "multi_decode", "shape": f"{rows}x{width}x{width}_L{adapters}_r{min(ranks)}-{max_rank}",
                        "dtype": name, "impl": "cublas_per_segment", "ms": timed(multi)})
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump({"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                   "iters": args.iters, "repeats": args.repeats, "results": results}, f, indent=1)
    for r in results:
        print(f"{r['class']:13s} {r['shape']:24s} {r['dtype']:5s} {r['impl']:19s} {r['ms']:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

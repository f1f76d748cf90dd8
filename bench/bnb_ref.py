#!/usr/bin/env python3
"""bitsandbytes' own CUDA NF4 kernels on ocltk's NF4 bench shapes, as a reference measured in
the same call as ocltk_bench_nf4 (run it on the GPU machine, whose PyTorch has bitsandbytes).

  python3 bnb_ref.py --experts 8 --out-features 14336 --in-features 4096 --rows 1,8,64,512,4096 \
      [--block-size 64] [--json out.json]

Weights: one bf16 W[N, K] per expert, quantized with bitsandbytes' quantize_4bit (nf4, the
given block size); the flat blocks of one expert are the flat blocks of ocltk's E x N x K
layout, since N*K is a multiple of the block. Rows are spread as ocltk's bench spreads them
(offsets[e] = rows*e/E, so 1 row lands on the last expert alone); only experts with rows are
called. Per row count:
- forward: bnb.matmul_4bit(x_e, W_e.t(), state_e) per expert, as bnb.nn.Linear4bit calls it:
  its gemv_4bit kernel where the expert has 1 row, else dequantize_4bit + a bf16 matmul;
- backward (the input gradient, QLoRA's path): g_e @ dequantize_4bit(W_e), as bnb's
  MatMul4Bit.backward computes it;
- dequantize: dequantize_4bit of the active experts alone.
Each is timed as CUDA-event medians of eager Python calls and of the same calls replayed from
a CUDA graph (no Python or launch overhead between the kernels); never on zeros. Every
forward is checked against x @ W_dequantized^T in f32 (max |error| over the row's sum of
|x*w|). The floor is the 4-bit bytes of the active experts (payload + f32 scales) over the
device-to-device copy bandwidth (bytes read + written) measured here.
"""
import argparse, json, sys
import torch

DEVICE = "cuda"  # a CPU smoke test of the script may set "cpu" (and its own timers)

def median_ms(fn, reps=25, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(); end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]

def graph_ms(fn):
    """fn captured once into a CUDA graph and replayed; None where capture fails."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return median_ms(graph.replay)
    except Exception as err:  # report, keep the eager figure
        print(f"graph capture failed: {err}", file=sys.stderr)
        return None

def copy_gbps():
    x = torch.randint(0, 255, (1 << 30,), dtype=torch.uint8, device=DEVICE); y = torch.empty_like(x)
    return 2 * x.numel() / median_ms(lambda: y.copy_(x)) / 1e6

def spread(rows, experts):
    offsets = [rows * e // experts for e in range(experts + 1)]
    return [(e, offsets[e + 1] - offsets[e]) for e in range(experts) if offsets[e + 1] > offsets[e]]

def run(experts, n, k, rows_list, block):
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
    gbps = copy_gbps()
    weights = []
    for _ in range(experts):
        w = torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16)
        packed, state = F.quantize_4bit(w, blocksize=block, quant_type="nf4")
        weights.append((packed, state))
    dense = {}  # expert -> dequantized bf16 W, for the checks
    def w_dense(e):
        if e not in dense:
            dense[e] = F.dequantize_4bit(*weights[e]).to(torch.bfloat16)
        return dense[e]
    expert_bytes = n * k // 2 + n * k // block * 4
    out = []
    for rows in rows_list:
        active = spread(rows, experts)
        xs = {e: torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16) for e, m in active}
        gs = {e: torch.randn(m, n, device=DEVICE, dtype=torch.bfloat16) for e, m in active}
        fwd = lambda: [bnb.matmul_4bit(xs[e], weights[e][0].t(), weights[e][1]) for e, _ in active]
        bwd = lambda: [gs[e] @ F.dequantize_4bit(*weights[e]) for e, _ in active]
        deq = lambda: [F.dequantize_4bit(*weights[e]) for e, _ in active]
        # Check the forward on up to 4 experts (dense copies of every expert would not fit).
        worst = 0.0
        ys = fwd()
        for (e, _), y in list(zip(active, ys))[:4]:
            x32, w32 = xs[e].float(), w_dense(e).float()
            ref, mag = x32 @ w32.t(), x32.abs() @ w32.abs().t()
            worst = max(worst, ((y.float() - ref).abs() / mag.clamp_min(1e-30)).max().item())
        dense.clear()
        floor_ms = len(active) * expert_bytes / gbps / 1e6
        row = {"experts": experts, "n": n, "k": k, "rows": rows, "block": block, "active_experts": len(active),
               "rows_per_expert": sorted({m for _, m in active}),
               "forward_path": "gemv_4bit" if all(m == 1 for _, m in active) else "dequantize_4bit + bf16 matmul",
               "forward_ms": median_ms(fwd), "forward_graph_ms": graph_ms(fwd),
               "backward_ms": median_ms(bwd), "backward_graph_ms": graph_ms(bwd),
               "dequantize_ms": median_ms(deq), "dequantize_graph_ms": graph_ms(deq),
               "forward_max_err_over_absdot": worst, "nf4_floor_ms": floor_ms, "copy_GB/s": gbps}
        best = min(t for t in (row["forward_ms"], row["forward_graph_ms"]) if t is not None)
        row["forward_floor_pct"] = 100.0 * floor_ms / best
        out.append(row)
        print(json.dumps(row), file=sys.stderr)
    return {"bitsandbytes": bnb.__version__, "torch": torch.__version__, "results": out}

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experts", type=int, default=8); p.add_argument("--out-features", type=int, default=14336)
    p.add_argument("--in-features", type=int, default=4096); p.add_argument("--rows", default="1,8,64,512,4096")
    p.add_argument("--block-size", type=int, default=64); p.add_argument("--json")
    a = p.parse_args()
    res = run(a.experts, a.out_features, a.in_features, [int(r) for r in a.rows.split(",")], a.block_size)
    text = json.dumps({"device": torch.cuda.get_device_name(), **res}, indent=1)
    if a.json:
        open(a.json, "w").write(text)
    print(text)

if __name__ == "__main__":
    sys.exit(main())

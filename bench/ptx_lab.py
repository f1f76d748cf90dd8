#!/usr/bin/env python3
"""Runs one of ocltk's NF4 forward kernels from the PTX NVIDIA's OpenCL compiler made for
it, through the CUDA driver API, so that CUDA-only tools (Nsight Compute: stall reasons per
SASS instruction) can look at the very code OpenCL runs. A lab tool for the lent H200, not
part of the library; the program itself comes from ocltk's program cache (run the bench
with OCLTK_CACHE_DIR set first), or from --ptx.

  python3 ptx_lab.py --cache DIR --algo warps --params WGS=128,CW=16,RB=16,TR=1,NB=1,PF=0 \
      --regs 128 --dtype f32 --experts 8 --n 14336 --k 4096 --rows 8 [--dump-ptx F] [--json F]

--algo warps or tc (the forward); --params the program's -D values to pick its cache entry
(every one must appear in the entry's options; REGS is --regs; --entry FILE picks one of
several matching entries, e.g. two builds sharing a cache); --type-variant adds
-DNF4_TYPE=... for tc's per-type programs (0 f32, 1 f16, 2 bf16). Data are fresh random
codes, scales in [0.5, 1.5), NF4's codebook and normal x; segments as ocltk_bench_nf4 lays
them out (offsets[e] = rows·e / E). The output is checked against a float64 reference on
the dequantized weights before anything is timed. Prints one JSON line.
"""
import argparse, ctypes, glob, json, re, struct, sys

NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]
MAGIC = b"OCLTK-PROGRAM-1\n"


def cache_entries(directory):
    """(path, key text, binary) of every whole entry of an ocltk program cache."""
    for path in sorted(glob.glob(directory + "/*.bin")):
        data = open(path, "rb").read()
        if not data.startswith(MAGIC):
            continue
        at = len(MAGIC)
        (key_size,) = struct.unpack_from("<Q", data, at)
        key = data[at + 8:at + 8 + key_size].decode(errors="replace")
        at += 8 + key_size
        (bin_size,) = struct.unpack_from("<Q", data, at)
        binary = data[at + 16:at + 16 + bin_size]  # after the size and the checksum
        if len(binary) == bin_size:
            yield path, key, binary


def key_options(key):
    for line in key.splitlines():
        if line.startswith("options="):
            return line[len("options="):].split()
    return []


def key_regs(key):
    for line in key.splitlines():
        if line.startswith("max-registers="):
            return int(line.split("=")[1])
    return 0


def pick_ptx(directory, params, regs, entry=None):
    """The PTX of the one cache entry built with `params` and `regs` (or the file `entry`
    among them); several matches (two builds of ocltk sharing a cache) are an error."""
    wanted = ["-D%s=%s" % kv for kv in params.items()]
    found = []
    for path, key, binary in cache_entries(directory):
        opts = key_options(key)
        text = binary.rstrip(b"\0")
        if all(w in opts for w in wanted) and key_regs(key) == regs and b".entry nf4_forward(" in text:
            if entry is None or path.endswith("/" + entry) or path == entry:
                found.append((path, " ".join(opts), text))
    if not found:
        sys.exit("ptx_lab: no cache entry in %s has %s with max-registers %d" % (directory, " ".join(wanted), regs))
    for path, opts, _ in found:
        print("ptx_lab: matching entry %s: %s" % (path, opts), file=sys.stderr)
    if len(found) > 1:
        sys.exit("ptx_lab: %d entries match (builds of other sources?); name one with --entry FILE" % len(found))
    return found[0][2], found[0][1]


class Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, err, what):
        if err != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(err, ctypes.byref(name))
            raise RuntimeError("%s failed: %s (%d)" % (what, name.value.decode() if name.value else "?", err))

    def load(self, ptx):
        size = 1 << 16
        info, error = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
        # CU_JIT_INFO_LOG_BUFFER 3, _SIZE_BYTES 4, CU_JIT_ERROR_LOG_BUFFER 5, _SIZE_BYTES 6, CU_JIT_LOG_VERBOSE 12
        opts = (ctypes.c_int * 5)(3, 4, 5, 6, 12)
        vals = (ctypes.c_void_p * 5)(ctypes.cast(info, ctypes.c_void_p), ctypes.c_void_p(size),
                                    ctypes.cast(error, ctypes.c_void_p), ctypes.c_void_p(size), ctypes.c_void_p(1))
        module = ctypes.c_void_p()
        err = self.lib.cuModuleLoadDataEx(ctypes.byref(module), ctypes.c_char_p(ptx + b"\0"), 5, opts, vals)
        if err != 0:
            print(error.value.decode(errors="replace"), file=sys.stderr)
        self.check(err, "cuModuleLoadDataEx")
        return module, info.value.decode(errors="replace")

    def function(self, module, name):
        fn = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), "cuModuleGetFunction " + name)
        return fn

    def attribute(self, fn, attr):
        v = ctypes.c_int()
        self.check(self.lib.cuFuncGetAttribute(ctypes.byref(v), attr, fn), "cuFuncGetAttribute")
        return v.value

    def launch(self, fn, grid, block, args, stream):
        holders = [ctypes.c_int32(v) if kind == "i" else ctypes.c_int64(v) if kind == "l" else ctypes.c_uint64(v)
                   for kind, v in args]
        ptrs = (ctypes.c_void_p * len(holders))(*[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders])
        self.check(self.lib.cuLaunchKernel(fn, grid[0], grid[1], 1, block, 1, 1, 0, ctypes.c_void_p(stream), ptrs, None),
                   "cuLaunchKernel")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache")
    ap.add_argument("--ptx", help="a PTX file instead of the cache's entry")
    ap.add_argument("--entry", help="the cache entry's file name, where several match")
    ap.add_argument("--algo", choices=["warps", "tc"], required=True)
    ap.add_argument("--params", required=True, help="KEY=VALUE,... of the program's -D values")
    ap.add_argument("--regs", type=int, default=0)
    ap.add_argument("--type-variant", type=int, help="NF4_TYPE of tc's per-type program")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--calls", type=int, default=20, help="launches between two events")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--dump-ptx")
    ap.add_argument("--json")
    a = ap.parse_args()
    params = dict(kv.split("=") for kv in a.params.split(","))
    if a.type_variant is not None:
        params["NF4_TYPE"] = str(a.type_variant)
    p = {k: int(v) for k, v in params.items()}

    import torch
    torch.manual_seed(1)
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    if a.ptx:
        ptx, opts = open(a.ptx, "rb").read(), "file " + a.ptx
    else:
        ptx, opts = pick_ptx(a.cache, params, a.regs, a.entry)
    # NVIDIA's OpenCL adds its launch environment (global offsets, in work-items and in
    # workgroups) from %envreg registers, which a CUDA launch leaves undefined: ocltk never
    # launches with an offset, so they are 0.
    ptx = re.sub(rb"%envreg\d+", b"0", ptx)
    if a.dump_ptx:
        open(a.dump_ptx, "wb").write(ptx)
    cuda = Cuda()
    module, jit_log = cuda.load(ptx)
    fn = cuda.function(module, "nf4_forward")
    regs = cuda.attribute(fn, 4)  # CU_FUNC_ATTRIBUTE_NUM_REGS
    local_bytes = cuda.attribute(fn, 3)  # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES (spills)
    shared_bytes = cuda.attribute(fn, 1)

    E, N, K, R, block = a.experts, a.n, a.k, a.rows, 64
    dev = "cuda"
    packed = torch.randint(0, 256, (E * N * K // 2,), dtype=torch.uint8, device=dev)
    scales = torch.rand(E * N * K // block, device=dev) + 0.5
    codebook = torch.tensor(NF4, dtype=torch.float32, device=dev)
    xdtype = torch.float32 if a.dtype == "f32" else torch.bfloat16
    x = torch.randn(R, K, device=dev).to(xdtype)
    y = torch.zeros(R, N, device=dev, dtype=xdtype)
    offsets = torch.tensor([R * e // E for e in range(E + 1)], dtype=torch.int32, device=dev)
    xs = torch.zeros(R * K, dtype=torch.int32, device=dev)
    shifts = torch.zeros(max(R * (K // 64), 1), dtype=torch.int32, device=dev)
    tc_split = a.algo == "tc" and a.dtype == "f32" and p.get("XS", 1) == 1
    type_code = 0 if a.dtype == "f32" else 2

    wgs = p["WGS"]
    if a.algo == "warps":
        per_group = (wgs // 32) * p["NB"]
        groups0 = -(-(-(-N // p["RB"])) // per_group)
    else:
        per_group = (wgs // 32 // p.get("KS", 1)) * p["NB"]
        groups0 = -(-(-(-N // (16 * p["RT"]))) // per_group)
    # warps: a slot per expert that can have rows, as the runtime's launches without a
    # read-back: a compact grid (the kernel's `compact` = E) where that is fewer than the
    # experts. tc has no `compact` argument: a slot per expert.
    slots = min(R, E) if a.algo == "warps" else E
    compact = [("i", E if slots < E else 0)] if a.algo == "warps" else []
    args = [("i", N), ("i", K), ("i", R), ("i", 0)] + compact + [("l", 0), ("i", 6), ("p", packed.data_ptr()), ("l", 0),
            ("p", scales.data_ptr()), ("l", 0), ("p", codebook.data_ptr()), ("p", x.data_ptr()), ("i", type_code),
            ("p", offsets.data_ptr()), ("p", y.data_ptr())]
    if a.algo == "tc":
        args += [("p", xs.data_ptr() if tc_split else x.data_ptr()), ("p", shifts.data_ptr() if tc_split else x.data_ptr())]
    split_fn = cuda.function(module, "nf4_split_x") if tc_split else None
    stream = torch.cuda.current_stream().cuda_stream

    def run():
        if split_fn is not None:
            items = R * (K // 64) * 4
            cuda.launch(split_fn, ((items + wgs - 1) // wgs, 1), wgs,
                        [("i", R), ("i", K), ("p", x.data_ptr()), ("p", xs.data_ptr()), ("p", shifts.data_ptr())], stream)
        cuda.launch(fn, (groups0, max(slots, 1)), wgs, args, stream)

    run()
    torch.cuda.synchronize()
    # Reference: float64 on the dequantized weights, expert by expert.
    worst = 0.0
    for e in range(E):
        r0, r1 = R * e // E, R * (e + 1) // E
        if r0 == r1:
            continue
        b = packed[e * N * K // 2:(e + 1) * N * K // 2]
        codes = torch.stack([b >> 4, b & 15], dim=1).reshape(-1).long()
        w = codebook.double()[codes] * scales.double()[e * N * K // block:(e + 1) * N * K // block].repeat_interleave(block)
        ref = x[r0:r1].double() @ w.reshape(N, K).t()
        scale = ref.abs().max().item() or 1.0
        worst = max(worst, (y[r0:r1].double() - ref).abs().max().item() / scale)
        del b, codes, w, ref
    tolerance = 1e-4 if a.dtype == "f32" else 2e-2
    if not worst < tolerance:
        sys.exit("ptx_lab: WRONG output: max error %.3g of the largest |y| (tolerance %g)" % (worst, tolerance))

    times = []
    for _ in range(a.reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.calls):
            run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / a.calls)
    times.sort()
    ms = times[len(times) // 2]
    four_bit = E * N * K // 2 + E * N * K // block * 4
    result = {"algo": a.algo, "params": params, "regs_target": a.regs, "dtype": a.dtype, "experts": E, "n": N, "k": K,
              "rows": R, "ms": ms, "min_ms": times[0], "four_bit_GB/s": four_bit / ms / 1e6, "registers": regs,
              "local_bytes": local_bytes, "shared_bytes": shared_bytes, "grid": [groups0, E], "max_rel_err": worst,
              "options": opts, "jit_log": jit_log.strip()[-400:]}
    print(json.dumps(result))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()

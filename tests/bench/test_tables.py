"""bench/tables.py's runs from DRAM (--ocltk_flush, cublas_ref.py --flush), on a synthetic
results folder: they get rows of their own beside the warm ones, never replace them, and the
floor targets of the rows they measure are judged on them."""
import json
import sys
from pathlib import Path

import pytest

sys.dont_write_bytecode = True  # nothing left in bench/ when run outside ctest
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import tables  # noqa: E402

COPY_GBPS = 4000.0
SHRINK = ("gemm_nt", "lora_shrink", "4096x16x4096")
GEMV = ("gemm_nt", "gemv", "1x4096x4096")
SHRINK_BYTES = (4096 * 4096 + 16 * 4096 + 4096 * 16) * 4  # A, B and C in f32
GEMV_BYTES = (4096 + 4096 * 4096 + 4096) * 4
# The row's times: warm its operands sit in L2 and it reads 94 % of floor, from DRAM 56 %.
WARM_MS, DRAM_MS, COLD_MS = 0.018, 0.030, 0.035
CUBLAS_WARM_MS, CUBLAS_DRAM_MS = 0.043, 0.049


def gbps(nbytes, ms):
    return nbytes / (ms * 1e6)


def bench_rows(key, impl, ms, nbytes, label="choice=profile.yaml (match: device+driver) xgemm {KWG=16}"):
    """Google Benchmark's rows of one benchmark with --benchmark_repetitions=3: the repetitions
    around `ms`, then the mean and median aggregates (tables.py takes the median)."""
    run_name = "/".join(key + (impl, "min_time:0.025", "manual_time"))

    def row(t, **extra):
        return {"name": run_name, "run_name": run_name, "real_time": t, "time_unit": "ms", "GB/s": gbps(nbytes, t),
                "GFLOP/s": 1.0, "verified": 1.0, "label": label, **extra}

    reps = [row(ms * f, run_type="iteration", repetition_index=i) for i, f in enumerate((0.98, 1.0, 1.05))]
    return reps + [row(ms * 1.01, run_type="aggregate", aggregate_name="mean"),
                   row(ms, run_type="aggregate", aggregate_name="median")]


def write(folder, name, data):
    (folder / name).write_text(json.dumps(data))


def context(flush_mib="0"):
    return {"device": "NVIDIA H200", "device_type": "gpu", "ocltk_flush_mib": flush_mib}


def cublas(m, n, k, ms, flush_mib):
    return {"m": m, "n": n, "k": k, "dtype": "f32", "accumulate": False, "ms": ms, "flush_mib": flush_mib}


def copies(flush_mib, sizes):
    return {"device": "NVIDIA H200", "results": {"bytes": 2 << 30, "ms": 0.5, "GB/s": COPY_GBPS, "sizes": [
        {"bytes": b, "ms": b / (g * 1e6), "GB/s": g, "flush_mib": flush_mib} for b, g in sizes]}}


def warm_folder(folder):
    """The files of reproduce.sh's warm runs: the gemm_nt bench (gemv and the shrink), the NF4
    bench whose context carries the copy bandwidth, cuBLAS and the copies at the shrink's bytes."""
    folder.mkdir()
    write(folder, "bench-gemm_nt.json", {"context": context(), "benchmarks": bench_rows(
        GEMV, "ours_tuned", 0.020, GEMV_BYTES) + bench_rows(SHRINK, "ours_tuned", WARM_MS, SHRINK_BYTES)})
    write(folder, "bench-nf4_forward_mixtral.json", {"context": {**context(), "copy_gbps": str(COPY_GBPS)},
                                                     "benchmarks": []})
    write(folder, "cublas-gemm.json", {"device": "NVIDIA H200", "results": [cublas(4096, 16, 4096, CUBLAS_WARM_MS, 0)]})
    write(folder, "copy.json", copies(0, [(SHRINK_BYTES, 3500.0)]))
    return folder


@pytest.fixture
def dram_folder(tmp_path):
    """A warm folder plus the DRAM runs: gemm_nt_dram (named so), cuBLAS and copies with --flush 256."""
    folder = warm_folder(tmp_path / "h200")
    write(folder, "bench-gemm_nt_dram.json",
          {"context": context(), "benchmarks": bench_rows(SHRINK, "ours_tuned", DRAM_MS, SHRINK_BYTES)})
    # cuBLAS from DRAM at the shrink, and at gemv, which has no warm cuBLAS figure.
    write(folder, "cublas-gemm-f32-dram.json", {"device": "NVIDIA H200", "results": [
        cublas(4096, 16, 4096, CUBLAS_DRAM_MS, 256), cublas(1, 4096, 4096, 0.03, 256)]})
    # Another size first: the copy of the row's own bytes is the one that counts.
    write(folder, "copy-dram.json", copies(256, [(2 * SHRINK_BYTES, 3300.0), (SHRINK_BYTES, 2800.0)]))
    return folder


def test_dram_rows_stand_beside_the_warm_ones(dram_folder):
    dev = tables.Device(str(dram_folder))
    assert dev.copy_gbps == COPY_GBPS
    row = dev.gemm_row(SHRINK)
    assert row["ms"] == pytest.approx(WARM_MS)
    assert row["floor"] == pytest.approx(gbps(SHRINK_BYTES, WARM_MS) / COPY_GBPS)
    assert row["ms_dram"] == pytest.approx(DRAM_MS)
    assert row["floor_dram"] == pytest.approx(gbps(SHRINK_BYTES, DRAM_MS) / COPY_GBPS)
    assert row["choice"] == "xgemm {KWG=16}"
    # cuBLAS: the warm run over ours warm, the flushed one over ours from DRAM.
    assert row["cublas"] == pytest.approx(CUBLAS_WARM_MS / WARM_MS)
    assert row["cublas_dram"] == pytest.approx(CUBLAS_DRAM_MS / DRAM_MS)
    # The DRAM copy of the row's bytes, not the warm one nor another size.
    assert row["copy_dram"] == pytest.approx(2800.0 / COPY_GBPS)
    # gemv was not timed from DRAM: no DRAM figures, and cuBLAS's DRAM time is no warm ratio.
    gemv = dev.gemm_row(GEMV)
    assert gemv["ms"] == pytest.approx(0.020)
    assert not {"ms_dram", "floor_dram", "cublas_dram", "copy_dram", "cublas"} & set(gemv)
    assert list(dev.gemm_dram) == [SHRINK]


def test_a_run_whose_context_records_the_flush_is_from_dram(tmp_path):
    folder = warm_folder(tmp_path / "h200")
    write(folder, "bench-lora_rows.json",
          {"context": context("256"), "benchmarks": bench_rows(SHRINK, "ours_tuned", COLD_MS, SHRINK_BYTES)})
    row = tables.Device(str(folder)).gemm_row(SHRINK)
    assert row["ms"] == pytest.approx(WARM_MS)
    assert row["ms_dram"] == pytest.approx(COLD_MS)
    assert "cublas_dram" not in row and "copy_dram" not in row  # no flushed cuBLAS or copy in this folder


def test_floor_targets_are_judged_from_dram_where_measured(dram_folder):
    dev = tables.Device(str(dram_folder))
    shrink = dev.gemm_row(SHRINK)
    assert shrink["floor"] >= 0.75 > shrink["floor_dram"]  # met warm, open from DRAM
    assert tables.target_cell(shrink, ("floor", 0.75)) == "≥ 75 % of floor: open (56 % from DRAM)"
    # Targets of another kind stay on the warm figures.
    assert tables.target_cell(shrink, ("cublas", 2.0)) == "≥ 2× cuBLAS: met"
    gemv = dev.gemm_row(GEMV)
    assert tables.target_cell(gemv, ("floor", 0.75)) == "≥ 75 % of floor: met"
    warm_only = tables.Device(str(warm_folder(dram_folder.parent / "warm"))).gemm_row(SHRINK)
    assert tables.target_cell(warm_only, ("floor", 0.75)) == "≥ 75 % of floor: met"


def test_the_dram_table_only_where_dram_rows_exist(dram_folder):
    text = tables.device_tables(tables.Device(str(dram_folder)), 3)
    assert "#### gemm_nt from DRAM (`ocltk_bench --ocltk_flush=256`)" in text
    dram_table = text.split("from DRAM", 1)[1]
    rows = [l for l in dram_table.splitlines() if l.startswith("| gemm_nt |")]
    cublas, copy = tables.times(CUBLAS_DRAM_MS / DRAM_MS), tables.pct(2800.0 / COPY_GBPS)
    assert rows == [f"| gemm_nt | lora_shrink | 4096×16×4096 | 0.03 | 56 % | {cublas} | 0.018 | {copy} |"]
    warm = tables.device_tables(tables.Device(str(warm_folder(dram_folder.parent / "warm"))), 3)
    assert "#### gemm_nt (`ocltk_bench`)" in warm and "from DRAM" not in warm


def test_the_launch_floor_is_named_beside_the_copy_bandwidth(tmp_path):
    """ocltk_bench's empty-kernel row (a time of its own, no gemm_nt row) is read from its
    median and named in the device's source line; without it the line names none."""
    folder = warm_folder(tmp_path / "h200")
    assert "empty kernel" not in tables.sources(tables.Device(str(folder)))
    data = json.loads((folder / "bench-gemm_nt.json").read_text())
    data["benchmarks"] += bench_rows(("launch", "empty_kernel", "1x1x1"), "floor", 0.0047, 0)
    write(folder, "bench-gemm_nt.json", data)
    dev = tables.Device(str(folder))
    assert dev.launch_ms == pytest.approx(0.0047)
    assert "an empty kernel 4.7 µs a call" in tables.sources(dev)
    assert ("launch", "empty_kernel", "1x1x1") not in {k[:3] for k in dev.gemm}


POCL_PLATFORM = "Portable Computing Language (OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6)"


@pytest.mark.parametrize("device, target, shown", [
    ("pthread-skylake-avx512-Intel(R) Xeon(R) Processor", "skylake-avx512", "PoCL, Intel Xeon Processor (skylake-avx512)"),
    ("pthread-haswell-AMD EPYC", "haswell", "PoCL, AMD EPYC (haswell)"),
    ("pthread-znver2-AMD Ryzen 7 3700X 8-Core Processor", "znver2", "PoCL, AMD Ryzen 7 3700X 8-Core Processor (znver2)"),
])
def test_pocl_devices_are_named_by_their_cpu_and_target(device, target, shown):
    context = {"device": device, "device_platform": POCL_PLATFORM,
               "device_version": f"OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-{target}"}
    assert tables.display_name(context) == shown


def test_other_devices_keep_their_names():
    assert tables.display_name({"device": "NVIDIA H200", "device_platform": "NVIDIA CUDA"}) == "NVIDIA H200"
    # A PoCL device whose version names no target: the two parts after pthread- are taken as it.
    old = {"device": "pthread-skylake-avx512-AMD EPYC", "device_platform": POCL_PLATFORM, "device_version": "OpenCL 3.0"}
    assert tables.display_name(old) == "PoCL, AMD EPYC (skylake-avx512)"

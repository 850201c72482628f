"""GEMM fidelity check: the library matmul on kernbench's H100 topology against a real H100.

Simulates `kernbench.kernels.library.matmul` (64x64x32 tiles, group of 8
block-rows, fp16 in, fp32 accumulation) for square fp16 shapes on
`topology/h100.yaml` in a timing-only run, and prints the simulated time
and TFLOP/s. Placement follows the GPU: A and C split by rows over the
four memory partitions (cubes), every SM (PE) of a partition an owner of
its rows (`pe="replicate"`), so the launch deals its programs in blocks
over all 132 PEs (ADR 0008's placement rule) the way the GPU's scheduler
spreads CTAs over all 132 SMs; B has a copy on each cube (on the GPU one
copy is interleaved over every stack, which the per-cube copy stands for:
each PE reads at its own partition's share of the bandwidth).

Where torch with a CUDA device is present, the same kernel file runs with
real Triton on the GPU with the same launch grid and block sizes: inputs
from `torch.randn`, the result checked against cuBLAS once (C poisoned
with NaN first), then timed by `triton.testing.do_bench` (CUDA events,
warm-up, L2 flushed before each run, median of the runs). It prints the
measured time, the simulated time and the error, defined as
(simulated - measured) / measured, a signed fraction. Without a GPU the
measured side is skipped and says so; when a size of 4096 or more is then
to be simulated, the first line (on stderr) says that the run is minutes of
simulation alone, before it starts.

The simulation keeps no op log (nothing reads it during a run, and at
8192^3 it would hold ~60 million records); even so 8192^3 needs ~9 GB of
host memory and 4096^3 ~4 GB, for the addresses the bridge's replay works
out ahead for every program in flight (adr/0008, "A GEMM fidelity check
against a real H100"). 4096^3 takes minutes of host CPU.

Run as `python benchmarks/gemm_h100.py` from the repository root (one
BLAS thread, as benchmarks/gemm_wall.py). Options: `--sizes 2048,4096`
(default 4096, the headline), `--simulated FILE` takes the simulated
figures from an earlier run's `--json FILE` instead of simulating again
(the simulation of 4096^3 takes minutes of host CPU, the GPU side
seconds), `--no-simulation` measures only, `--diagnose` adds what
explains the GPU's time (the compiled kernel's registers, shared memory,
occupancy and instructions, the SM clock under load, the HBM and L2 copy
ceilings, load latencies, cuBLAS on the same shape), `--once` launches
each size once untimed (for a profiler). The last line is
`gemm_4096_f16_h100_error: X` (X the signed fraction above, or
`skipped`), for the largest size given.
"""

from __future__ import annotations

import os

# Pinned before numpy loads: the simulator's many small dots run on one BLAS thread.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernbench.kernels.library.matmul import matmul, matmul_kernel  # noqa: E402
from kernbench.session import Session  # noqa: E402

TOPOLOGY = ROOT / "topology" / "h100.yaml"
SLOW_SIZE = 4096  # from this size up a simulation takes minutes (module docstring)
# The library's defaults, named so that both sides are visibly launched alike.
BLOCKS = {"block_m": 64, "block_n": 64, "block_k": 32, "group_m": 8}
TOLERANCE = 0.15  # the agreement bound on |error|


def launch_shape(size: int) -> dict:
    """The grid and block sizes `matmul` uses for size^3 (the same function on both sides)."""
    programs = -(-size // BLOCKS["block_m"]) * -(-size // BLOCKS["block_n"])
    return {"grid": (programs,), **BLOCKS}


def flops(size: int) -> int:
    return 2 * size**3


# ---- the simulated side --------------------------------------------------------------------------------------


class _NoOpLog:
    """An op log that keeps nothing. The simulation only appends to its log, and only reports read it, so
    timing is unchanged; a record per op is ~60 million at 8192^3, more than a small host's memory."""

    def append(self, *args, **kwargs) -> None:
        pass

    def append_pairs(self, *args) -> None:
        pass

    def __len__(self) -> int:
        return 0

    def __iter__(self):
        return iter(())


FLUSH_BYTES = 256 * 1024 * 1024  # triton.testing.do_bench's L2 flush


def simulate(size: int, topology=TOPOLOGY) -> dict:
    """One timing-only size^3 fp16 GEMM on `topology`: simulated ps, host wall and CPU seconds, HBM bytes. Timed
    as do_bench times the GPU: behind an L2 flush (a 256 MB fill), between events recorded around the launch, so
    the host's launch, made while the flush runs, is hidden and the device's start of the kernel is not."""
    session = Session(topology, timing_only=True)
    session.ctx.machine.oplog = _NoOpLog()
    result: dict = {}

    def bench(torch):
        rows = torch.DPPolicy(cube="row_wise", pe="replicate")
        per_cube = torch.DPPolicy(cube="replicate", pe="replicate")
        a = torch.empty(size, size, dtype="f16", dp=rows, name="A")
        b = torch.empty(size, size, dtype="f16", dp=per_cube, name="B")
        c = torch.empty(size, size, dtype="f16", dp=rows, name="C")
        flush = torch.empty(FLUSH_BYTES // 2, dtype="f16", name="flush")
        torch.ahbm.synchronize()
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        began, began_cpu = time.perf_counter(), time.process_time()
        flush.zero_()
        start.record()
        matmul(a, b, c, **BLOCKS)
        end.record()
        end.synchronize()
        result["wall_s"] = time.perf_counter() - began
        result["cpu_s"] = time.process_time() - began_cpu
        result["ps"] = round(start.elapsed_time(end) * 1e9)

    session.run(bench, session.torch)
    result["hbm_bytes"] = session.ctx.machine.bytes_by_link_kind().get("hbm", 0) - FLUSH_BYTES  # the GEMM's own
    return result


# ---- the measured side ---------------------------------------------------------------------------------------


def gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _inputs(size: int, seed: int):
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=generator)
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    return a, b, c


def measure(size: int, *, seed: int = 0) -> dict:
    """The library kernel on the GPU: checked once against cuBLAS, then the median of do_bench's runs (ms)."""
    import torch
    import triton.testing

    a, b, c = _inputs(size, seed)
    c.fill_(float("nan"))
    matmul(a, b, c, **BLOCKS)  # compiles, and is checked
    torch.cuda.synchronize()
    reference = (a.float() @ b.float())
    relative = float((c.float() - reference).norm() / reference.norm())
    if not relative < 1e-2:  # NaN fails too: an element left unwritten
        raise AssertionError(f"{size}^3: the GPU result is off cuBLAS by {relative:.3g} (relative norm)")
    median, low, high = triton.testing.do_bench(lambda: matmul(a, b, c, **BLOCKS), warmup=100, rep=500,
                                                quantiles=[0.5, 0.2, 0.8])
    return {"ms": median, "ms_p20": low, "ms_p80": high, "check_relative_error": relative,
            "device": torch.cuda.get_device_name()}


def launch_once(size: int) -> None:
    """One launch, untimed: what a profiler run (`ncu ... --once`) looks at."""
    import torch

    a, b, c = _inputs(size, 0)
    matmul(a, b, c, **BLOCKS)
    torch.cuda.synchronize()


# ---- what explains the GPU's time (--diagnose) -------------------------------------------------------------


def _compiled_kernels() -> list:
    """The CompiledKernel objects Triton cached for `matmul_kernel` (its cache layout varies by version)."""
    found = []
    caches = getattr(matmul_kernel, "device_caches", None) or {}
    for entry in caches.values():
        table = entry[0] if isinstance(entry, tuple) else entry
        if isinstance(table, dict):
            found += list(table.values())
    return found


def compiled_report() -> list[dict]:
    import torch

    properties = torch.cuda.get_device_properties(0)
    reports = []
    for kernel in _compiled_kernels():
        try:
            kernel._init_handles()  # registers and spills are read when the binary is loaded
        except Exception:  # noqa: BLE001 - already loaded, or a version without it
            pass
        metadata = kernel.metadata
        report = {
            "num_warps": getattr(metadata, "num_warps", None),
            "num_stages": getattr(metadata, "num_stages", None),
            "shared_bytes": getattr(metadata, "shared", None),
            "n_regs": getattr(kernel, "n_regs", None),
            "n_spills": getattr(kernel, "n_spills", None),
        }
        ptx = kernel.asm.get("ptx", "") if hasattr(kernel, "asm") else ""
        report["ptx_wgmma"] = "wgmma.mma_async" in ptx
        report["ptx_mma_sync"] = "mma.sync" in ptx
        report["ptx_cp_async"] = "cp.async" in ptx
        report["ptx_tma"] = "cp.async.bulk.tensor" in ptx
        try:
            from cuda.bindings import driver as cu

            error, blocks = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                cu.CUfunction(kernel.function), 32 * report["num_warps"], report["shared_bytes"])
            report["occupancy_ctas_per_sm"] = int(blocks) if int(error) == 0 else f"error {error}"
        except Exception as problem:  # noqa: BLE001 - a diagnostic; say why it is missing
            report["occupancy_ctas_per_sm"] = f"unavailable: {problem!r}"
        if isinstance(report["n_regs"], int) and report["num_warps"]:
            per_warp = -(-report["n_regs"] * 32 // 256) * 256  # registers are allocated per warp in 256s
            report["occupancy_by_registers"] = 65536 // (per_warp * report["num_warps"])
        smem = getattr(properties, "shared_memory_per_multiprocessor", None)
        if smem and isinstance(report["shared_bytes"], int) and report["shared_bytes"]:
            report["occupancy_by_shared_memory"] = smem // (report["shared_bytes"] + 1024)
        reports.append(report)
    return reports


class ClockSampler:
    """nvidia-smi's SM clock and power every 50 ms while a block runs (it only reads)."""

    QUERY = "clocks.sm,clocks.max.sm,power.draw,temperature.gpu"

    def __enter__(self):
        self.process = None
        if shutil.which("nvidia-smi"):
            self.process = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={self.QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        self.samples = []
        if self.process is not None:
            self.process.terminate()
            out, _ = self.process.communicate(timeout=10)
            for line in out.splitlines():
                fields = [field.strip() for field in line.split(",")]
                if len(fields) == 4 and fields[0].isdigit():
                    self.samples.append(fields)
        return False

    def summary(self) -> dict:
        if not self.samples:
            return {"samples": 0}
        clocks = [int(s[0]) for s in self.samples]
        busy = [c for c in clocks if c > 1000] or clocks
        powers = [float(s[2]) for s in self.samples if s[2].replace(".", "", 1).isdigit()]
        return {"samples": len(clocks), "sm_mhz_median": statistics.median(busy), "sm_mhz_min": min(busy),
                "sm_mhz_max": max(busy), "sm_mhz_max_allowed": self.samples[0][1],
                "power_w_max": max(powers) if powers else None}


def under_load_clock(size: int, seconds: float = 3.0) -> dict:
    """The SM clock while the library kernel runs back to back for `seconds`, and why it is held back."""
    import torch

    a, b, c = _inputs(size, 1)
    matmul(a, b, c, **BLOCKS)
    torch.cuda.synchronize()
    with ClockSampler() as sampler:
        began = time.perf_counter()
        launches = 0
        while time.perf_counter() - began < seconds:
            for _ in range(20):
                matmul(a, b, c, **BLOCKS)
            launches += 20
            torch.cuda.synchronize()
        reasons = ""
        if shutil.which("nvidia-smi"):
            for _ in range(20):
                matmul(a, b, c, **BLOCKS)
            reasons = subprocess.run(["nvidia-smi", "-q", "-d", "PERFORMANCE"], capture_output=True, text=True,
                                     timeout=30).stdout
            torch.cuda.synchronize()
    active = [line.strip() for line in reasons.splitlines() if line.strip().endswith(": Active")]
    return {**sampler.summary(), "launches": launches, "clock_event_reasons_active": active}


def _graph_ms(work, repeats: int = 50) -> float:
    """Milliseconds per call of `work`, replayed back to back from a CUDA graph (no launch gaps, no flush)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            work()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            work()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / repeats)
    return statistics.median(times)


def copy_ceilings() -> dict:
    """Device-to-device copy rates (bytes read + written per second): from HBM, and from L2 (8 MB buffers)."""
    import torch

    ceilings = {}
    for name, nbytes in (("hbm_copy_tb_per_s", 2 << 30), ("l2_copy_tb_per_s", 8 << 20)):
        src = torch.empty(nbytes // 2, dtype=torch.float16, device="cuda").normal_()
        dst = torch.empty_like(src)
        ms = _graph_ms(lambda: dst.copy_(src), repeats=10 if nbytes > 1 << 30 else 200)
        ceilings[name] = 2 * nbytes / (ms * 1e-3) / 1e12
    return ceilings


def load_latencies() -> dict:
    """One thread chasing pointers through a random cycle: ns per dependent load, L2-resident and not."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def chase(next_ptr, out_ptr, steps):
        index = tl.load(next_ptr)
        for _ in range(steps):
            index = tl.load(next_ptr + index, cache_modifier=".cg")
        tl.store(out_ptr, index)

    latencies = {}
    for name, nbytes in (("l2_hit_ns", 4 << 20), ("hbm_ns", 1 << 30)):
        slots = nbytes // 128  # one slot per 128-byte line, so no two hops share a line
        order = torch.randperm(slots, device="cuda")
        cycle = torch.empty(slots, dtype=torch.int64, device="cuda")
        cycle[order] = torch.roll(order, -1)
        table = torch.zeros(slots * 16, dtype=torch.int64, device="cuda")
        table[::16] = cycle * 16
        out = torch.empty(1, dtype=torch.int64, device="cuda")
        steps = 20000
        chase[(1,)](table, out, steps)  # the same arguments as the timed call: compiled and specialized here
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        chase[(1,)](table, out, steps)
        end.record()
        end.synchronize()
        latencies[name] = start.elapsed_time(end) * 1e6 / steps
    return latencies


def cublas_ms(size: int) -> float:
    import torch
    import triton.testing

    a, b, c = _inputs(size, 2)
    return triton.testing.do_bench(lambda: torch.matmul(a, b, out=c), warmup=100, rep=500, return_mode="median")


def diagnose(sizes: list[int]) -> dict:
    found: dict = {}
    for name, step in (("compiled", compiled_report), ("clock_under_load", lambda: under_load_clock(max(sizes))),
                       ("copy_ceilings", copy_ceilings), ("load_latencies", load_latencies),
                       ("cublas_ms", lambda: {size: cublas_ms(size) for size in sizes})):
        try:
            found[name] = step()
        except Exception as problem:  # noqa: BLE001 - one failed diagnostic must not lose the others
            found[name] = f"failed: {problem!r}"
        print(f"  {name}: {found[name]}", flush=True)
    return found


# ---- the comparison ------------------------------------------------------------------------------------------


def error(simulated_s: float, measured_s: float) -> float:
    """(simulated - measured) / measured: a signed fraction, positive when the model is slow."""
    return (simulated_s - measured_s) / measured_s


def slow_run_note(to_simulate: list[int], gpu: bool) -> str | None:
    """The line said first when the run will be long and measure nothing: no GPU, and a size of minutes to simulate."""
    if gpu or not any(size >= SLOW_SIZE for size in to_simulate):
        return None
    return (f"gemm_h100: no CUDA device here, so only the simulation runs, and {max(to_simulate)}^3 takes minutes "
            "of host CPU and gigabytes of memory (every program's addresses are worked out ahead); --sizes 1024 is "
            "quick, --simulated FILE reuses an earlier --json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096", help="comma-separated M=N=K values (default 4096)")
    parser.add_argument("--topology", default=str(TOPOLOGY), help="topology file (default topology/h100.yaml)")
    parser.add_argument("--simulated", metavar="FILE", help="take simulated figures from an earlier --json FILE")
    parser.add_argument("--no-simulation", action="store_true", help="measure only")
    parser.add_argument("--diagnose", action="store_true", help="add what explains the GPU's time")
    parser.add_argument("--once", action="store_true", help="launch each size once on the GPU, untimed")
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    options = parser.parse_args()
    sizes = [int(text) for text in options.sizes.split(",")]

    if options.once:
        for size in sizes:
            launch_once(size)
        return

    figures: dict = {"sizes": {}}
    earlier = json.loads(Path(options.simulated).read_text())["sizes"] if options.simulated else {}
    gpu = gpu_available()
    to_simulate = [] if options.no_simulation else [
        size for size in sizes if "simulated" not in earlier.get(str(size), {})]
    note = slow_run_note(to_simulate, gpu)
    if note:
        print(note, file=sys.stderr, flush=True)
    print(f"library matmul, fp16 in / fp32 accumulate; topology {options.topology}")
    for size in sizes:
        shape = launch_shape(size)
        row = figures["sizes"][str(size)] = {"launch": shape}
        if str(size) in earlier and "simulated" in earlier[str(size)]:
            row["simulated"] = earlier[str(size)]["simulated"]
        elif not options.no_simulation:
            row["simulated"] = simulate(size, options.topology)
        if "simulated" in row:
            sim = row["simulated"]
            seconds = sim["ps"] / 1e12
            print(f"{size}^3 simulated: {seconds * 1e6:10.1f} us {flops(size) / seconds / 1e12:7.1f} TFLOP/s  "
                  f"(grid {shape['grid']}, blocks {BLOCKS}; HBM bytes {sim['hbm_bytes'] / 1e9:.2f} GB; "
                  f"host {sim['wall_s']:.1f} s wall, {sim['cpu_s']:.1f} s CPU)", flush=True)

    if not gpu:
        print("measured side skipped: no torch with a CUDA device here")
        print(f"gemm_{max(sizes)}_f16_h100_error: skipped")
        if options.json:
            Path(options.json).write_text(json.dumps(figures, indent=1))
        return

    for size in sizes:
        row = figures["sizes"][str(size)]
        row["measured"] = measure(size)
        ms = row["measured"]["ms"]
        line = (f"{size}^3 measured:  {ms * 1e3:10.1f} us {flops(size) / (ms * 1e-3) / 1e12:7.1f} TFLOP/s  "
                f"(median; p20-p80 {row['measured']['ms_p20'] * 1e3:.1f}-{row['measured']['ms_p80'] * 1e3:.1f} us, "
                f"{row['measured']['device']})")
        if "simulated" in row:
            row["error"] = error(row["simulated"]["ps"] / 1e12, ms * 1e-3)
            line += f"; simulated {row['simulated']['ps'] / 1e6:.1f} us, error {row['error']:+.3f}"
        print(line, flush=True)
    if options.diagnose:
        print("diagnostics:")
        figures["diagnostics"] = diagnose(sizes)
    if options.json:
        Path(options.json).write_text(json.dumps(figures, indent=1))
    headline = figures["sizes"][str(max(sizes))]
    print("error = (simulated - measured) / measured, a signed fraction; agreement means |error| <= "
          f"{TOLERANCE}")
    value = f"{headline['error']:+.4f}" if "error" in headline else "skipped (no simulated figure)"
    print(f"gemm_{max(sizes)}_f16_h100_error: {value}")


if __name__ == "__main__":
    main()

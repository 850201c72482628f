"""What the kernels' memcheck (ADR 0014) costs: wall time of real kernels with it on and off, side by side.

Runs the library GEMM (`kernbench.kernels.library.matmul`, 512^3 fp16, laid
out as `benches/gemm.py` lays it out) and the library vector add
(`kernbench.kernels.library.vector_add.add`, 2^20 f32 spread over every cube
and PE, 4096-element blocks) on one SIP of the default topology, with values,
in `Session(memcheck=True)` and `Session(memcheck=False)`, alternating the two
in one process so a busy host slows both alike. A case's time covers the
launch and the simulation up to the kernel's end, not the tensor set-up; the
best of `--repeats` rounds is kept for each. Both settings must give the
same simulated time and the same values (the memcheck decides nothing a
correct kernel does). CPU seconds are the steadier figure on a shared host
and are what the ratios use; wall seconds are printed beside them.

Run as `python benchmarks/memcheck_overhead.py` from the repository root.
The last line is `memcheck_overhead_ratio: X`, the CPU time of both kernels
with the memcheck over the CPU time without it.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.kernels.library.matmul import matmul  # noqa: E402
from kernbench.kernels.library.vector_add import add  # noqa: E402
from kernbench.session import Session  # noqa: E402

GEMM_SIZE = 512
VECTOR_SIZE = 1 << 20
VECTOR_BLOCK = 4096


def _gemm(torch):
    props = torch.ahbm.get_device_properties()
    rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
    per_cube = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
    torch.manual_seed(GEMM_SIZE)
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, dtype="f16", dp=rows, name="A")
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, dtype="f16", dp=per_cube, name="B")
    c = torch.empty(GEMM_SIZE, GEMM_SIZE, dtype="f16", dp=rows, name="C")
    return (lambda: matmul(a, b, c)), c


def _vector_add(torch):
    spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
    torch.manual_seed(1)
    x = torch.randn(VECTOR_SIZE, dp=spread, name="x")
    y = torch.randn(VECTOR_SIZE, dp=spread, name="y")
    out = torch.empty(VECTOR_SIZE, dp=spread, name="out")
    return (lambda: add(x, y, out, block_size=VECTOR_BLOCK)), out


CASES = {"matmul 512^3 f16": _gemm, "vector add 2^20 f32": _vector_add}


def simulate(make, memcheck: bool) -> tuple[float, float, int, np.ndarray]:
    """(wall s, CPU s, simulated ps, result) of one launch, from the launch to the kernel's end."""
    session = Session("default", memcheck=memcheck)
    measured = {}

    def bench(torch):
        launch, result = make(torch)
        torch.ahbm.synchronize()
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        began, began_cpu = time.perf_counter(), time.process_time()
        start.record()
        launch()
        end.record()
        end.synchronize()
        measured["wall"] = time.perf_counter() - began
        measured["cpu"] = time.process_time() - began_cpu
        measured["ps"] = round(start.elapsed_time(end) * 1e9)
        measured["values"] = result.numpy()

    session.run(bench, session.torch)
    return measured["wall"], measured["cpu"], measured["ps"], measured["values"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="rounds per case and setting; the best is kept")
    args = parser.parse_args()
    print(f"{'case':<22} {'memcheck on':>22} {'memcheck off':>22} {'ratio (CPU)':>12}")
    print(f"{'':<22} {'CPU s':>10} {'wall s':>11} {'CPU s':>10} {'wall s':>11}")
    total_on = total_off = 0.0
    for name, make in CASES.items():
        best = {True: (float("inf"), float("inf")), False: (float("inf"), float("inf"))}
        reference = None
        simulate(make, True)  # warm-up: first-use costs (kernel rewriting, imports, caches) count for neither
        for _ in range(args.repeats):
            for memcheck in (True, False):
                wall, cpu, ps, values = simulate(make, memcheck)
                if reference is None:
                    reference = (ps, values)
                elif ps != reference[0] or not np.array_equal(values, reference[1]):
                    raise SystemExit(f"{name}: memcheck={memcheck} changed the simulated time or the values")
                best[memcheck] = (min(best[memcheck][0], cpu), min(best[memcheck][1], wall))
        (cpu_on, wall_on), (cpu_off, wall_off) = best[True], best[False]
        total_on += cpu_on
        total_off += cpu_off
        print(f"{name:<22} {cpu_on:>10.3f} {wall_on:>11.3f} {cpu_off:>10.3f} {wall_off:>11.3f} "
              f"{cpu_on / cpu_off:>12.3f}")
    print(f"memcheck_overhead_ratio: {total_on / total_off:.3f}")


if __name__ == "__main__":
    main()

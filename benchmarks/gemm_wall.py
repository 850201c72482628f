"""Wall time of the library GEMM in the simulator, with values and timing only, beside numpy's matmul.

Runs `kernbench.kernels.library.matmul` (64x64x32 tiles, fp16 in, fp32
accumulation) on one SIP of the default topology the way `benches/gemm.py`
does — A split by rows over every cube and PE, B replicated per cube, C
split like A — for square fp16 shapes, once computing values and once
`timing_only`. A case's wall time covers the launch and the simulation up
to the kernel's end, not the tensor set-up. Both runs of a shape must give
the same simulated time; runs with values are checked against numpy. Each
row also shows numpy's own `a @ b` (fp32, one BLAS thread) on the same
shape in this process, the floor a simulator computing the values cannot
beat. CPU seconds are printed beside wall seconds: on a shared host they
are the steadier figure.

Run as `python benchmarks/gemm_wall.py` from the repository root;
`--large` adds 2048^3 and 4096^3 timing-only, `--profile` prints the
cProfile top functions of the 1024^3 runs, `--interpret` runs every
program through Triton's language layer instead of replaying a trace of
its shape (ADR 0007, "Replayed programs"; the simulated times are the
same), `--plans` runs 1024^3 timing-only again with no access plans kept
(ADR 0007, "Kept access plans"), alternating three times with the default,
and prints the ratio of the best wall times. The last line is
`gemm_1024_timing_only_wall_s: X`.
"""

from __future__ import annotations

import os

# Pinned before numpy loads: the simulator's many small dots and the numpy
# reference are both timed on one BLAS thread (kernbench sets the same
# defaults on import; here the figures are defined single-threaded).
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.kernels import PreparedLaunch  # noqa: E402
from kernbench.kernels.library.matmul import matmul  # noqa: E402
from kernbench.numerics import assert_close  # noqa: E402
from kernbench.runtime_api.launch import access_plans  # noqa: E402
from kernbench.session import Session  # noqa: E402

SIZES = (512, 1024)
LARGE_SIZES = (2048, 4096)
NUMPY_REPEATS = 3


def simulate(size: int, timing_only: bool, profiler: cProfile.Profile | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of launch + simulation, simulated ps) of one size^3 fp16 GEMM."""
    session = Session("default", timing_only=timing_only)
    measured = {}

    def bench(torch):
        props = torch.ahbm.get_device_properties()
        rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
        per_cube = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
        torch.manual_seed(size)
        a = torch.randn(size, size, dtype="f16", dp=rows, name="A")
        b = torch.randn(size, size, dtype="f16", dp=per_cube, name="B")
        c = torch.empty(size, size, dtype="f16", dp=rows, name="C")
        torch.ahbm.synchronize()
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        began, began_cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        start.record()
        matmul(a, b, c)
        end.record()
        end.synchronize()
        if profiler is not None:
            profiler.disable()
        measured["wall"] = time.perf_counter() - began
        measured["cpu"] = time.process_time() - began_cpu
        measured["ps"] = round(start.elapsed_time(end) * 1e9)
        if not timing_only:
            assert_close(c.numpy(), a.numpy().astype(np.float32) @ b.numpy().astype(np.float32), "f16")

    session.run(bench, session.torch)
    return measured["wall"], measured["cpu"], measured["ps"]


def numpy_matmul_wall(size: int) -> float:
    """Best wall seconds of numpy's fp32 `a @ b` (the simulator accumulates fp16 tiles in fp32)."""
    rng = np.random.default_rng(size)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    walls = []
    for _ in range(NUMPY_REPEATS):
        began = time.perf_counter()
        a @ b
        walls.append(time.perf_counter() - began)
    return min(walls)


def compare_plans(size: int = 1024, rounds: int = 3) -> None:
    """Best wall seconds of `size`^3 timing-only with access plans kept and with none, alternated in this process."""
    kept_bytes = access_plans.PLAN_BYTES
    walls = {kept_bytes: [], 0: []}
    simulated = set()
    try:
        for _ in range(rounds):
            for budget in walls:
                access_plans.PLAN_BYTES = budget
                wall, _, ps = simulate(size, True)
                walls[budget].append(wall)
                simulated.add(ps)
    finally:
        access_plans.PLAN_BYTES = kept_bytes
    if len(simulated) != 1:
        raise AssertionError(f"{size}^3: simulated times differ with and without kept plans: {sorted(simulated)}")
    kept, none = min(walls[kept_bytes]), min(walls[0])
    print(f"{size}^3 timing only: {kept:.3f} s with access plans kept, {none:.3f} s with none: "
          f"ratio {kept / none:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="add 2048^3 and 4096^3, timing only")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of the 1024^3 runs")
    parser.add_argument("--interpret", action="store_true", help="interpret every program (no replayed traces)")
    parser.add_argument("--plans", action="store_true",
                        help="compare 1024^3 timing-only with and without kept access plans")
    options = parser.parse_args()
    PreparedLaunch.replays = not options.interpret
    if options.plans:
        compare_plans()

    cases = [(size, timing_only) for size in SIZES for timing_only in (False, True)]
    if options.large:
        cases += [(size, True) for size in LARGE_SIZES]
    print(f"{'M=N=K':>6} {'mode':>12} {'simulated':>14} {'wall':>10} {'cpu':>10} {'numpy @':>10} {'ratio':>8}")
    walls = {}
    simulated = {}
    for size, timing_only in cases:
        profiler = cProfile.Profile() if options.profile and size == 1024 else None
        wall, cpu, ps = simulate(size, timing_only, profiler)
        if simulated.setdefault(size, ps) != ps:
            raise AssertionError(f"{size}^3: simulated {ps} ps timing only, {simulated[size]} ps with values")
        reference = numpy_matmul_wall(size)
        mode = "timing only" if timing_only else "values"
        walls[size, timing_only] = wall
        print(f"{size:>6} {mode:>12} {ps / 1e6:>11.3f} us {wall:>8.3f} s {cpu:>8.3f} s {reference * 1e3:>7.2f} ms "
              f"{wall / reference:>7.0f}x", flush=True)
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    print(f"gemm_1024_timing_only_wall_s: {walls[1024, True]:.3f}")


if __name__ == "__main__":
    main()

"""Wall time of torch tensor ops on the simulated device, against numpy doing the same work in this process.

Cases, each run through `Session` as a bench would (values computed, then
timing-only): a 1 MiB f32 elementwise add (`x + y`, 256 Ki elements) and a
1024³ f16 matmul (`a @ b`). Per case: wall seconds per op with values and
timing-only, numpy's wall for the same op (the matmul in f32: numpy has no
fast f16 product), and their ratio. Each figure is
the best of a few repetitions.

The last line is `matmul_1024_wall_s: X` (values computed).
Run as `python benchmarks/tensor_ops.py` from the repository root;
`--tiles` runs the matmul again in the smallest library tile, 64 x 64,
instead of the one `library_gemm.library_plan` picks (ADR 0016, "Matmul"),
alternating the two, and prints both wall times and simulated times, then
`matmul_tile_wall_ratio: X` (picked over smallest, timing-only) last.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from kernbench.runtime_api.ops import library_gemm  # noqa: E402
from kernbench.session import Session  # noqa: E402

REPEATS = 3


def simulated(make, op, timing_only: bool, repeats: int = REPEATS) -> tuple[float, int]:
    """Best wall seconds of `op(*operands)` plus a synchronize, operands made (and synchronized) beforehand, and
    the simulated picoseconds it took."""
    best, simulated_ps = float("inf"), 0
    for _ in range(repeats):
        session = Session("default", timing_only=timing_only)
        times = []

        def bench(torch):
            operands = make(torch)
            torch.ahbm.synchronize()
            began, start = time.perf_counter(), session.ctx.engine.now
            op(*operands)
            torch.ahbm.synchronize()
            times.append((time.perf_counter() - began, session.ctx.engine.now - start))

        session.run(bench, session.torch)
        best, simulated_ps = min(best, times[0][0]), times[0][1]
    return best, simulated_ps


def host(op, operands) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        began = time.perf_counter()
        op(*operands)
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    n = (1 << 20) // 4
    a32 = rng.standard_normal((1024, 1024)).astype(np.float32)
    cases = [
        ("add 1 MiB f32", lambda torch: (torch.randn(n), torch.randn(n)), lambda x, y: x + y,
         (rng.standard_normal(n).astype(np.float32),) * 2),
        ("matmul 1024^3 f16", lambda torch: (torch.randn(1024, 1024, dtype=torch.float16),) * 2,
         lambda a, b: a @ b, (a32, a32)),
    ]
    print(f"{'op':<20} {'values (s)':>11} {'timing-only (s)':>16} {'numpy (s)':>10} {'values/numpy':>13}")
    walls = {}
    for name, make, op, arrays in cases:
        (values, _), (timing, _) = simulated(make, op, False), simulated(make, op, True)
        reference = host(op, arrays)
        walls[name] = values
        print(f"{name:<20} {values:>11.3f} {timing:>16.3f} {reference:>10.4f} {values / reference:>12.2f}x")
    print(f"add_1MiB_wall_s: {walls['add 1 MiB f32']:.3f}")
    print(f"matmul_1024_wall_s: {walls['matmul 1024^3 f16']:.3f}")
    if "--tiles" in sys.argv[1:]:
        compare_tiles(*cases[1][1:3])


def compare_tiles(make, op, rounds: int = 3) -> None:
    """The matmul timing-only in the tile `library_plan` picks and in the smallest, alternated in this process."""
    picked = library_gemm.library_plan
    smallest = library_gemm.GemmPlan(*library_gemm.LIBRARY_TILES[-1])
    runs = {"picked": [], "smallest": []}
    try:
        for _ in range(rounds):
            for tile in runs:
                library_gemm.library_plan = picked if tile == "picked" else lambda *args: smallest
                runs[tile].append(simulated(make, op, True, repeats=1))
    finally:
        library_gemm.library_plan = picked
    for tile, measured in runs.items():
        print(f"matmul 1024^3 f16 timing-only, {tile} tile: wall {min(wall for wall, _ in measured):.3f} s, "
              f"simulated {measured[0][1] / 1e6:.3f} us")
    print(f"matmul_tile_wall_ratio: {min(w for w, _ in runs['picked']) / min(w for w, _ in runs['smallest']):.2f}")


if __name__ == "__main__":
    main()

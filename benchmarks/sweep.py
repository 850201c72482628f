"""Wall time of `kernbench sweep`: `--jobs 2` against `--jobs 1` on this machine, and Ray's cost per point.

The sweep is the shipped `ccl_allreduce` bench, timing only, with 64 Mi f16
elements per rank (128 MiB), over 4 algorithms x 2 inter-SIP bandwidths: 8
points of a few seconds each, so that a point's process start-up (an
interpreter importing the simulator) does not dominate. Every measurement runs all 8
points afresh into a folder of its own, through `run_sweep` with the
executor the command line would build.

- *local*: `--jobs 1` and `--jobs 2`, best of `--repeats` each; the speed-up
  is the first over the second (the goal on 2 cores: at least 1.7).
- *ray* (when Ray is installed): a Ray started here with 2 CPUs, its
  start-up timed on its own, then the same sweep as Ray tasks; the overhead
  per point is (Ray's wall - local `--jobs 2`'s wall) / points, Ray's
  start-up excluded, since a cluster is started once for many sweeps.

The last line is `sweep_jobs2_speedup: X.XX` (higher is better).

Run as `python benchmarks/sweep.py` from the repository root.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

from kernbench.sweep.derive import derive_tasks
from kernbench.sweep.local_executor import LocalExecutor, usable_cores
from kernbench.sweep.points import expand_points
from kernbench.sweep.runner import run_sweep
from kernbench.sweep.sweep_file import load_sweep

SWEEP = """
bench: ccl_allreduce
args: [--timing-only]
axes:
  topology.system.inter_sip.bandwidth_gb_per_s: [100, 200]
  ccl.defaults.algorithm: [ring, tree, direct, halving_doubling]
  ccl.defaults.n_elem: 67108864
"""


def timed_sweep(tasks, folder: Path, executor) -> tuple[float, list[dict]]:
    began = time.perf_counter()
    progress = run_sweep(tasks, folder, executor, fresh=True, log=io.StringIO())
    wall = time.perf_counter() - began
    bad = [row for row in progress.rows if row["status"] != "ok"]
    if bad:
        raise SystemExit(f"point {bad[0]['point']} failed: {bad[0]['error']}")
    return wall, progress.rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs of each local measurement (best is kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kernbench-sweep-bench-") as name:
        folder = Path(name)
        (folder / "sweep.yaml").write_text(SWEEP)
        spec = load_sweep(folder / "sweep.yaml")
        tasks = derive_tasks(spec, expand_points(spec))
        print(f"{len(tasks)} points of ccl_allreduce (timing only, 128 MiB per rank) on {usable_cores()} cores")
        walls = {}
        for jobs in (1, 2):
            runs = [timed_sweep(tasks, folder / f"jobs{jobs}-{i}", LocalExecutor(jobs)) for i in range(args.repeats)]
            walls[jobs], rows = min(runs, key=lambda run: run[0])
            per_point = sum(row["wall_s"] for row in rows) / len(rows)
            print(f"local --jobs {jobs}: {walls[jobs]:6.2f} s  (a point's own wall: {per_point:.2f} s on average)")
        speedup = walls[1] / walls[2]
        print(f"speed-up of --jobs 2 over --jobs 1: {speedup:.2f}x (goal >= 1.7x)")
        try:
            import ray
        except ImportError:
            print("ray: not installed; no Ray figures")
        else:
            from kernbench.sweep.ray_executor import RayExecutor

            began = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            started = time.perf_counter() - began
            try:
                wall, _ = timed_sweep(tasks, folder / "ray", RayExecutor())
            finally:
                ray.shutdown()
            print(f"ray (2 CPUs, started here in {started:.2f} s): {wall:6.2f} s; overhead per point against "
                  f"local --jobs 2: {(wall - walls[2]) / len(tasks) * 1000:+.0f} ms")
    print(f"sweep_jobs2_speedup: {speedup:.2f}")


if __name__ == "__main__":
    main()

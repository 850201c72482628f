"""Machines larger than the host: peak host memory and wall time of runs the host could not hold in values.

Each case runs in a fresh interpreter, so its peak RSS (`ru_maxrss`) is its own:

- *fill the large machine*: every byte of `large.yaml`'s HBM (32 SIPs x 16
  cubes x 24 GiB = 12 TiB) allocated and zero-filled, one tensor per SIP
  spread over its cubes; timing-only, then with data (constant fills are kept
  as values, adr/0013-storage.md). Goal: < 1 GB RSS.
- *ring all-reduce on 256 SIPs*, timing-only, one rank per SIP of a copy of
  `large.yaml` with `system.sips.count: 256`: 1 MiB per rank, and 1 GiB per
  rank (goal: < 10 s wall, < 2 GB RSS). Its ranks are rotations of each
  other, so rank 0 is simulated and the others logged as its copies
  (adr/0010, "Symmetric collectives"). A case still running after
  `--budget-s` seconds is stopped and reported as such.
- *load a 4096-SIP topology*: a copy of `large.yaml` with 4096 SIPs, loaded
  and asked for a route between far SIPs. Goal: < 2 s.

The last line is `allreduce_256_sips_1GiB_wall_s: X` (or `over budget`).
Run as `python benchmarks/scale.py` from the repository root
(`--quick`: 1 MiB all-reduce only, no 1 GiB row).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from kernbench.topology.loader import resolve_topology_path  # noqa: E402

MIB, GIB = 1 << 20, 1 << 30

# Each case is a script run in a fresh interpreter; it prints {"wall_s": ...} as its last line.
PROLOGUE = """
import json, resource, sys, time
from kernbench.session import Session
from kernbench.policy import DPPolicy
from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config, with_overrides
def finish(began, **extra):
    print(json.dumps({"wall_s": time.perf_counter() - began,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}))
"""

FILL_MACHINE = """
began = time.perf_counter()
session = Session("large", timing_only={timing_only})
def bench(torch):
    topology = session.ctx.topology
    per_cube = topology.cube.hbm.capacity_bytes // 2
    spread = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=topology.cubes_per_sip,
                     num_pes=topology.cubes_per_sip)
    kept = [torch.zeros((topology.cubes_per_sip, per_cube), dtype=torch.float16, device=f"ahbm:{{sip}}", dp=spread)
            for sip in range(topology.n_sips)]
    torch.ahbm.synchronize()
    return sum(t.nbytes for t in kept)
filled = session.run(bench, session.torch)
finish(began, filled_bytes=filled, simulated_ps=session.ctx.engine.now)
"""

ALL_REDUCE = """
began = time.perf_counter()
session = Session({topology!r}, timing_only=True,
                  ccl=with_overrides(load_ccl_config(SHIPPED_CCL_PATH), {{"algorithm": "ring"}}, "scale"))
def worker(rank, torch, elements):
    torch.ahbm.set_device(rank)
    x = torch.empty(elements, dtype=torch.float16)
    torch.distributed.all_reduce(x)
    torch.ahbm.synchronize()
def bench(torch):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(worker, args=(torch, {elements}), nprocs=torch.distributed.get_world_size())
session.run(bench, session.torch)
finish(began, simulated_ps=session.ctx.collectives[0]["time_ps"])
"""

LOAD_TOPOLOGY = """
from kernbench.topology import load_topology
began = time.perf_counter()
topology = load_topology({topology!r})
route = topology.sip_route(0, topology.n_sips // 2)
finish(began, sips=topology.n_sips, route_links=len(route))
"""


def run_case(script: str, budget_s: float) -> dict | None:
    """The case's measurements, or None when it ran past `budget_s` (it is stopped)."""
    try:
        result = subprocess.run([sys.executable, "-c", PROLOGUE + textwrap.dedent(script)], capture_output=True,
                                text=True, timeout=budget_s, env={**os.environ, "PYTHONPATH": _package_root()})
    except subprocess.TimeoutExpired:
        return None
    if result.returncode != 0:
        raise SystemExit(f"case failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _package_root() -> str:
    return os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")]))


def with_sips(folder: Path, sips: int) -> str:
    """A copy of large.yaml with `sips` SIPs, written in `folder`; returns its path."""
    document = yaml.safe_load(resolve_topology_path("large").read_text())
    document["system"]["sips"]["count"] = sips
    path = folder / f"large_{sips}_sips.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def row(name: str, measured: dict | None, budget_s: float) -> str:
    if measured is None:
        return f"{name:<44} {'over budget':>12} (stopped after {budget_s:.0f} s)"
    return f"{name:<44} {measured['wall_s']:>10.2f} s {measured['peak_rss_mb']:>10.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1 GiB all-reduce")
    parser.add_argument("--budget-s", type=float, default=300.0, help="stop a case after this many seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        sips_256, sips_4096 = with_sips(folder, 256), with_sips(folder, 4096)
        print(f"{'case':<44} {'wall':>12} {'peak RSS':>13}")
        for timing_only in (True, False):
            mode = "timing-only" if timing_only else "with data"
            print(row(f"fill all 12 TiB of large.yaml, {mode}",
                      run_case(FILL_MACHINE.format(timing_only=timing_only), args.budget_s), args.budget_s))
        print(row("load a 4096-SIP topology", run_case(LOAD_TOPOLOGY.format(topology=sips_4096), args.budget_s),
                  args.budget_s))
        sizes = [MIB] if args.quick else [MIB, GIB]
        headline = None
        for size in sizes:
            measured = run_case(ALL_REDUCE.format(topology=sips_256, elements=size // 2), args.budget_s)
            amount = f"{size // GIB} GiB" if size >= GIB else f"{size // MIB} MiB"
            print(row(f"ring all-reduce, 256 SIPs x {amount}, timing-only", measured, args.budget_s))
            headline = measured
    label = "allreduce_256_sips_1MiB_wall_s" if args.quick else "allreduce_256_sips_1GiB_wall_s"
    print(f"{label}: " + ("over budget" if headline is None else f"{headline['wall_s']:.2f}"))


if __name__ == "__main__":
    main()

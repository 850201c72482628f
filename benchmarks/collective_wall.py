"""Wall time of a simulated all-reduce: values computed against timing only, and per IPCQ message.

Two parts, every run a ring all-reduce of f16 with the shipped ccl.yaml
(8 slots of 64 KiB), one rank per SIP, through `Session` the way a bench
does (spawn one worker per rank, `all_reduce`, `synchronize`):

- *values against timing only*: 4 ranks x 16 MiB on default.yaml, run with
  values and `timing_only`, best of a few repetitions of each; both must
  report the same simulated time.
- *timing-only scale*: 4 ranks x 64 MiB on default.yaml, and 64 ranks x
  1 MiB on large.yaml with `system.sips.count` set to 64 (a temporary copy);
  `--with-256` adds 256 ranks x 1 MiB, run once (a minute or two).
  Each row runs in a fresh interpreter, so its peak RSS
  (`resource.getrusage`) is its own, best of a few such runs. Per row: IPCQ
  messages, simulated time, wall time, wall and CPU time per message (on a
  shared machine CPU time moves less), wall against issue 18's goal of
  20 us per message, and peak RSS. A message counts whether it was
  simulated or logged as a copy of rank 0's: these timing-only rings are
  symmetric (adr/0010, "Symmetric collectives"), so a rank count of p
  simulates a p-th of the messages, which is why the cost per message falls
  with the ranks. `benchmarks/scale.py` runs the 256-SIP x 1 GiB ring itself.

The last line is `timing_only_us_per_message: X.X`, the geometric mean of
the two standard scale rows' wall per message (lower is better).

Run as `python benchmarks/collective_wall.py` from the repository root
(`--quick`: skip the values-against-timing part).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"  # a multithreaded BLAS fights the simulator on a small machine

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config, with_overrides  # noqa: E402
from kernbench.session import Session  # noqa: E402
from kernbench.topology.loader import resolve_topology_path  # noqa: E402

# The shipped ccl.yaml with its algorithm named: what this benchmark times is ring on one channel.
RING = with_overrides(load_ccl_config(SHIPPED_CCL_PATH), {"algorithm": "ring"}, "collective_wall")

MIB = 1 << 20
RANKS = 4
ELEMENTS = 8 << 20  # 16 MiB of f16 per rank
REPEATS = 3
SCALE_REPEATS = 3  # fresh interpreters per scale row
SCALE_ROWS = [("default", 4, 64 * MIB), ("large", 64, 1 * MIB)]  # (topology, ranks, bytes per rank)
LARGE_ROW = ("large", 256, 1 * MIB)  # --with-256, run once
TARGET_US_PER_MESSAGE = 20.0


def bench(torch, ranks: int, elements: int):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(_worker, args=(torch, elements), nprocs=ranks)


def _worker(rank, torch, elements):
    torch.ahbm.set_device(rank)
    x = torch.full((1, elements), rank + 1, dtype=torch.float16)
    torch.distributed.all_reduce(x)
    torch.ahbm.synchronize()


def one_run(topology, timing_only: bool, ranks: int = RANKS, elements: int = ELEMENTS) -> tuple[float, int, int, float]:
    """(wall seconds of the run, simulated ps of the collective, IPCQ messages sent, CPU seconds of the run)."""
    session = Session(topology, ccl=RING, timing_only=timing_only)
    began, cpu_began = time.perf_counter(), time.process_time()
    session.run(bench, session.torch, ranks, elements)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    (record,) = session.ctx.collectives
    messages = len(session.ctx.machine.oplog.select(kind="ipcq_send"))
    return wall, record["time_ps"], messages, cpu


def topology_with_sips(name: str, sips: int, directory: Path) -> Path:
    """A copy of the shipped topology `name` with `system.sips.count` set to `sips`."""
    spec = yaml.safe_load(resolve_topology_path(name).read_text())
    if spec["system"]["sips"]["count"] == sips:
        return resolve_topology_path(name)
    spec["system"]["sips"]["count"] = sips
    path = directory / f"{name}_{sips}_sips.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def scale_row(topology: str, ranks: int, nbytes: int) -> dict:
    """One timing-only row in this interpreter (called in a fresh one, see `main`)."""
    with tempfile.TemporaryDirectory() as directory:
        wall, ps, messages, cpu = one_run(topology_with_sips(topology, ranks, Path(directory)), True,
                                          ranks=ranks, elements=nbytes // 2)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"wall": wall, "cpu": cpu, "ps": ps, "messages": messages, "rss_mib": peak_kib / 1024}


def _fresh_row(index: int) -> dict:
    done = subprocess.run([sys.executable, __file__, "--row", str(index)], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def _rows(with_256: bool) -> list[tuple[str, int, int]]:
    return [*SCALE_ROWS, LARGE_ROW] if with_256 else SCALE_ROWS


def values_against_timing() -> None:
    best = {}
    for timing_only in (False, True):
        runs = [one_run("default", timing_only) for _ in range(REPEATS)]
        best[timing_only] = min(runs)
    (data_wall, data_ps, messages, _), (timing_wall, timing_ps, _, _) = best[False], best[True]
    assert data_ps == timing_ps, f"simulated times differ: {data_ps} ps with values, {timing_ps} ps without"
    print(f"ring all_reduce, {RANKS} ranks x {ELEMENTS * 2 >> 20} MiB f16, simulated {data_ps / 1e6:.3f} us")
    print(f"IPCQ messages          : {messages}")
    print(f"wall, values computed  : {data_wall * 1e3:8.1f} ms  ({data_wall / messages * 1e6:6.1f} us per message)")
    print(f"wall, timing only      : {timing_wall * 1e3:8.1f} ms  ({timing_wall / messages * 1e6:6.1f} us per message)")
    print(f"timing_only_speedup    : {data_wall / timing_wall:.2f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the timing-only scale rows")
    parser.add_argument("--with-256", action="store_true", help="add 256 ranks x 1 MiB, run once")
    parser.add_argument("--row", type=int, help=argparse.SUPPRESS)  # internal: run one scale row, print JSON
    args = parser.parse_args()
    scale_rows = _rows(args.with_256)
    if args.row is not None:
        print(json.dumps(scale_row(*_rows(True)[args.row])))
        return
    # Scale rows first: a child's getrusage peak starts from its parent's size at the fork, so the parent
    # must not have grown (the values runs below) before they are measured.
    rows = []
    for index, row in enumerate(scale_rows):
        runs = [_fresh_row(index) for _ in range(1 if row == LARGE_ROW else SCALE_REPEATS)]
        assert len({run["ps"] for run in runs}) == 1, f"row {index}: simulated times differ between runs"
        rows.append(runs)
    if not args.quick:
        values_against_timing()
    print(f"{'ranks':>6} {'bytes/rank':>11} {'messages':>9} {'sim time':>12} {'wall':>8} {'wall/msg':>9} "
          f"{'cpu/msg':>8} {'vs target':>10} {'peak RSS':>9}")
    print(f"{'':>6} {'':>11} {'':>9} {'(us)':>12} {'(s)':>8} {'(us)':>9} {'(us)':>8} {'(20 us)':>10} {'(MiB)':>9}")
    per_message = []
    for (_, ranks, nbytes), runs in zip(scale_rows, rows):
        row = min(runs, key=lambda run: run["wall"])
        us = row["wall"] / row["messages"] * 1e6
        cpu_us = min(run["cpu"] for run in runs) / row["messages"] * 1e6
        per_message.append(us)
        print(f"{ranks:>6} {nbytes // MIB:>7} MiB {row['messages']:>9} {row['ps'] / 1e6:>12.3f} {row['wall']:>8.2f} "
              f"{us:>9.1f} {cpu_us:>8.1f} {us / TARGET_US_PER_MESSAGE:>9.1f}x "
              f"{max(run['rss_mib'] for run in runs):>9.0f}")
    standard = per_message[:len(SCALE_ROWS)]  # the headline stays comparable with and without --with-256
    geomean = math.exp(sum(math.log(us) for us in standard) / len(standard))
    print(f"timing_only_us_per_message: {geomean:.1f}")


if __name__ == "__main__":
    main()

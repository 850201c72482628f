"""kernbench's 4 x H200 against NCCL's all-reduce measured on that machine: time per size, error, summary.

`benchmarks/anchors/nccl_allreduce_h200x4_nv18.json` holds the measurement
(its README says how it was taken: torch.distributed.all_reduce of fp16 on
4 x H200 joined by NVSwitch, NCCL 2.28.9, each time a loop of calls back to
back, so it includes the per-call launch cost). This script runs the same
sizes on `topology/h200x4.yaml` with the shipped `ccl.yaml` (so `algorithm:
auto`: the tuner picks algorithm and channels per size), one timing-only
all-reduce per size, each rank's tensor made as ordinary code makes it (no
DPPolicy), so laid out by the topology's default rule: h200x4 interleaves it
over every cube and PE, as the GPU interleaves memory over its stacks. It
prints per size the measured and simulated time, the error and what the
tuner ran.

Sizes below 1 MiB are printed but not scored: there the measured times are
the host's launch cost, which scatters with no trend in size.
The last two lines are `geomean_abs_error_ge_1MiB: X` and
`max_abs_error_ge_1MiB: Y`, as percentages.

`--held-out` first holds the same machine description against collectives
no parameter was set from: all_gather, reduce_scatter and broadcast measured
on 4 x H100 with the same NVLink 4 / NVSwitch fabric
(`anchors/nccl_collectives_h100x4_nv18.json`, taken by
`anchors/measure_nccl.py`), printing per collective
`held_out_<collective>_geomean_abs_error_ge_1MiB: X`. That is a few minutes
more, which a first line on stderr says before it starts.

Run as `python benchmarks/fidelity_nccl.py` from the repository root
(about a minute: the 512 MiB case is ~200,000 simulated messages).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from kernbench.session import Session  # noqa: E402

ANCHOR = Path(__file__).resolve().parent / "anchors" / "nccl_allreduce_h200x4_nv18.json"
HELD_OUT = Path(__file__).resolve().parent / "anchors" / "nccl_collectives_h100x4_nv18.json"
SCORED_FROM_BYTES = 1 << 20
HELD_OUT_COLLECTIVES = ("all_gather", "reduce_scatter", "broadcast")


# One call of each collective on `n` fp16 elements in nccl-tests' sense (the whole buffer: all_gather's
# output, reduce_scatter's input), tensors made by `empty(count)`, over 4 ranks.
CALLS = {
    "all_reduce": lambda dist, empty, n: dist.all_reduce(empty(n)),
    "all_gather": lambda dist, empty, n: dist.all_gather_into_tensor(empty(n), empty(n // 4)),
    "reduce_scatter": lambda dist, empty, n: dist.reduce_scatter_tensor(empty(n // 4), empty(n)),
    "broadcast": lambda dist, empty, n: dist.broadcast(empty(n), 0),
}


def simulate(nbytes: int, collective: str = "all_reduce") -> tuple[int, str]:
    """One `collective` of `nbytes` of fp16 on h200x4's 4 ranks; (its simulated time in ps, what ran)."""
    session = Session("h200x4", timing_only=True)
    torch = session.torch
    n = nbytes // 2

    def bench(torch):
        dist = torch.distributed
        dist.init_process_group(backend="ahbm")

        def worker(rank):
            torch.ahbm.set_device(rank)
            CALLS[collective](dist, lambda count: torch.empty(count, dtype=torch.float16), n)
            torch.ahbm.synchronize()

        torch.multiprocessing.spawn(worker, nprocs=4)
        dist.destroy_process_group()

    session.run(bench, torch)
    (record,) = session.ctx.collectives
    ran = record["algorithm"] + (f" x{record['channels']}" if record["channels"] > 1 else "")
    return record["time_ps"], ran


def held_out() -> None:
    """The other collectives, measured on 4 x H100 (the same NVLink/NVSwitch fabric; its all-reduce is within
    3% of the anchor's from 8 MiB up) and never used to set a parameter: per size >= 1 MiB and per collective
    the error, then its geomean."""
    rows = json.loads(HELD_OUT.read_text())["rows"]
    print(f"{'collective':>14} {'bytes':>11} {'NCCL us':>10} {'kernbench us':>13} {'error':>8}  ran")
    for collective in HELD_OUT_COLLECTIVES:
        errors = []
        for point in rows:
            if point["collective"] != collective or point["bytes"] < SCORED_FROM_BYTES:
                continue
            simulated_ps, ran = simulate(point["bytes"], collective)
            error = (simulated_ps / 1e6 - point["time_us"]) / point["time_us"]
            errors.append(abs(error))
            print(f"{collective:>14} {point['bytes']:>11,} {point['time_us']:>10.1f} {simulated_ps / 1e6:>13.1f} "
                  f"{error:>+8.1%}  {ran}", flush=True)
        print(f"held_out_{collective}_geomean_abs_error_ge_1MiB: {geomean(errors):.1%}")


def held_out_note() -> str:
    """The line said before `--held-out`, which runs a few minutes before the all-reduce table starts."""
    rows = json.loads(HELD_OUT.read_text())["rows"]
    calls = sum(row["collective"] in HELD_OUT_COLLECTIVES and row["bytes"] >= SCORED_FROM_BYTES for row in rows)
    return (f"fidelity_nccl: --held-out first simulates {calls} collectives ({', '.join(HELD_OUT_COLLECTIVES)} from "
            "1 MiB up) before the all-reduce table: a few minutes of host CPU, the 512 MiB ones each many thousands "
            "of simulated messages")


def geomean(errors: list[float]) -> float:
    return math.exp(sum(math.log(max(e, 1e-6)) for e in errors) / len(errors))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", action="store_true",
                        help="first the other collectives of the held-out measurement (a few minutes more)")
    if parser.parse_args().held_out:
        print(held_out_note(), file=sys.stderr, flush=True)
        held_out()
    anchor = json.loads(ANCHOR.read_text())
    print(f"{'bytes':>11} {'NCCL us':>10} {'kernbench us':>13} {'error':>8}  ran")
    errors = []
    for point in anchor:
        nbytes, measured_us = point["bytes"], point["time_us"]
        simulated_ps, ran = simulate(nbytes)
        simulated_us = simulated_ps / 1e6
        error = (simulated_us - measured_us) / measured_us
        scored = nbytes >= SCORED_FROM_BYTES
        if scored:
            errors.append(abs(error))
        print(f"{nbytes:>11,} {measured_us:>10.1f} {simulated_us:>13.1f} {error:>+8.1%}  {ran}"
              + ("" if scored else "   (not scored: launch-bound)"), flush=True)
    print(f"geomean_abs_error_ge_1MiB: {geomean(errors):.1%}")
    print(f"max_abs_error_ge_1MiB: {max(errors):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

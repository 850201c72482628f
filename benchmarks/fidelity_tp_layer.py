"""kernbench's tensor-parallel layer step against the same layer timed on real GPUs: error per configuration, and
the geometric mean last.

`benchmarks/anchors/tp_layer_h200.json` holds the measurements (taken by
`anchors/measure_tp_layer.py`; `anchors/README.md` says how): one training
step of the transformer layer of `kernbench run tp_layer` written in plain
PyTorch, on two H200s, tensor-parallel over 1 and 2 GPUs. This script runs
each configuration with the bench itself (`kernbench.benches.tp_layer`:
`--tp N --dp 1 --sp off --overlap off`) timing-only on `topology/h200x4.yaml`
and prints per configuration the measured step (the median of its two runs'
medians where the file has a repeat), the simulated step, the error, and the
CPU and wall seconds the simulation took; then `geomean_abs_error: X` in
percent (exp(mean |ln(sim/real)|) − 1), and `max_abs_error: X`.

The smallest steps on the GPUs are bound by the host's launches, not by the
device (the anchor README says how much they scatter); `--min-hidden H` skips
configurations narrower than H.

Run as `python benchmarks/fidelity_tp_layer.py` from the repository root.
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernbench.benches import tp_layer  # noqa: E402
from kernbench.session import Session  # noqa: E402

ANCHOR = Path(__file__).resolve().parent / "anchors" / "tp_layer_h200.json"
TOPOLOGY = "h200x4"


def simulated_us(point) -> float:
    """The simulated step of `point`'s configuration, rank 0's, in µs."""
    session = Session(TOPOLOGY, timing_only=True)
    argv = ["--hidden", str(point["hidden"]), "--heads", str(point["heads"]), "--seq", str(point["seq"]),
            "--batch", str(point["batch"]), "--tp", str(point["tp"]), "--dp", "1", "--sp", "off", "--overlap", "off"]
    got = {}

    def bench(torch):
        (_, _, _, _, measured), = tp_layer.steps(torch, tp_layer.options_of(torch, argv))
        got["ps"] = measured["compute"] + measured["communication"]

    session.run(bench, session.torch)
    return got["ps"] / 1e6


def measured_us(point) -> float:
    runs = sorted([point["time_us"]] + ([point["repeat_us"]] if "repeat_us" in point else []))
    return runs[0] if len(runs) == 1 else sum(runs) / len(runs)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-hidden", type=int, default=0)
    args = parser.parse_args(argv)
    points = [p for p in json.loads(ANCHOR.read_text())["points"] if p["hidden"] >= args.min_hidden]
    print(f"{'tp':>3} {'hidden':>7} {'seq':>5} {'real us':>10} {'sim us':>10} {'error':>8} {'cpu s':>7} {'wall s':>7}")
    ratios = []
    for point in points:
        wall, cpu = time.perf_counter(), cpu_seconds()
        simulated = simulated_us(point)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        real = measured_us(point)
        ratios.append(simulated / real)
        print(f"{point['tp']:>3} {point['hidden']:>7} {point['seq']:>5} {real:>10.1f} {simulated:>10.1f} "
              f"{100 * (simulated / real - 1):>+7.1f}% {cpu:>7.2f} {wall:>7.2f}", flush=True)
    errors = [abs(math.log(r)) for r in ratios]
    print(f"max_abs_error: {100 * (math.exp(max(errors)) - 1):.1f}")
    print(f"geomean_abs_error: {100 * (math.exp(sum(errors) / len(errors)) - 1):.1f}")


if __name__ == "__main__":
    main()

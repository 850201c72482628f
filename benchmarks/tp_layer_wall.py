"""Wall time of a timing-only transformer-layer step on the `large` machine, as a user runs it.

A GPT-class layer is what a simulator must run that the host cannot: one
step at GPT-3 width (`kernbench run tp_layer --topology large --timing-only
-- --hidden 12288 --heads 96 --seq 2048 --tp 8 --dp 1`) takes many
minutes. This runs the same bench, tp 8 with sequence parallelism and
overlap, at two smaller widths that exercise the same paths (Triton linear
kernels, device-op attention, the collectives between them, busy HBM
stacks whose channels keep gaps) in far less time: each case is
the command a user types, in a fresh interpreter. Per case: the simulated
step (which must be the same in every round: checked), the simulated ops
the report counts, the best wall and CPU seconds of `--rounds`, the cases
taking turns, and the wall time per simulated op (a layer of another size
costs about its op count times that, somewhat more per op when wider).

Run as `python benchmarks/tp_layer_wall.py` from the repository root. The
last line is `tp_layer_wall_s: X`, the wider case's best wall time.
"""

from __future__ import annotations

import argparse
import re

from tp_mlp_wall import timed_run

CASES = {  # name -> tp_layer's own options
    "hidden 1024, seq 256": ["--hidden", "1024", "--heads", "8", "--seq", "256"],
    "hidden 3072, seq 128": ["--hidden", "3072", "--heads", "24", "--seq", "128"],
}
LAYOUT = ["--tp", "8", "--dp", "1", "--sp", "on", "--overlap", "on"]
STEP = re.compile(r"^\s*8\s+1\s+on\s+on\s+([0-9.]+) us", re.MULTILINE)
OPS = re.compile(r"^simulated time: .*\(([0-9]+) ops, timing only\)$", re.MULTILINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="runs of each case, taking turns (best kept)")
    options = parser.parse_args()
    best: dict[str, tuple[float, float]] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    for _ in range(options.rounds):
        for name, shape in CASES.items():
            wall, cpu, stdout = timed_run(["run", "tp_layer", "--topology", "large", "--timing-only", "--",
                                           *shape, *LAYOUT])
            if name not in best or wall < best[name][0]:
                best[name] = (wall, cpu)
            seen.setdefault(name, set()).add((STEP.search(stdout).group(1), OPS.search(stdout).group(1)))
    for name, results in seen.items():
        if len(results) > 1:
            raise SystemExit(f"{name}: the runs printed different steps or op counts: {sorted(results)}")
    print(f"{'case':<22} {'step':>12} {'ops':>9} {'wall':>9} {'cpu':>9} {'wall per op':>12}")
    for name, (wall, cpu) in best.items():
        ((step, ops),) = seen[name]
        print(f"{name:<22} {step + ' us':>12} {int(ops):>9} {wall:>7.1f} s {cpu:>7.1f} s "
              f"{wall / int(ops) * 1e6:>9.1f} us")
    print(f"tp_layer_wall_s: {best[list(CASES)[-1]][0]:.1f}")


if __name__ == "__main__":
    main()

"""Wall and CPU time of a timing-only transformer-layer step, as a user runs it, on `large` and on `h200x8`.

A GPT-class layer is what a simulator must run that the host cannot: one
step at GPT-3 width (`kernbench run tp_layer --topology h200x8 --timing-only
-- --hidden 12288 --heads 96 --seq 2048 --tp 8 --dp 1 --sp on --overlap
on`), on the eight-GPU machine its users have and on the `large`
accelerator. Its eight ranks do the same work, so `kernbench run` simulates
it once and passes it on (adr/0022); `--no-spmd` simulates every rank. Each
case is the command a user types, in a fresh interpreter, replicated and
then in full: the simulated step (which must be the same both ways:
checked), the simulated ops the report counts, the wall and CPU seconds of
each and the ratio of their CPU, and the largest peak RSS of any run. The
GPT-3-width cases run replicated only (in full each takes minutes) unless
`--full-gpt3`.

Run as `python benchmarks/tp_layer_wall.py` from the repository root. The
last line is `gpt3_step_cpu_s: X`, the larger CPU seconds of the two
GPT-3-width steps, replicated.
"""

from __future__ import annotations

import argparse
import re
import resource

from tp_mlp_wall import timed_run

GPT3 = ["--hidden", "12288", "--heads", "96", "--seq", "2048"]
CASES = {  # name -> (topology, tp_layer's own options)
    "hidden 1024, seq 256, large": ("large", ["--hidden", "1024", "--heads", "8", "--seq", "256"]),
    "hidden 3072, seq 128, large": ("large", ["--hidden", "3072", "--heads", "24", "--seq", "128"]),
    "GPT-3 width, large": ("large", GPT3),
    "GPT-3 width, h200x8": ("h200x8", GPT3),
}
LAYOUT = ["--tp", "8", "--dp", "1", "--sp", "on", "--overlap", "on"]
STEP = re.compile(r"^\s*8\s+1\s+on\s+on\s+([0-9.]+) us", re.MULTILINE)
OPS = re.compile(r"^simulated time: .*\(([0-9]+) ops, timing only\)$", re.MULTILINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-gpt3", action="store_true", help="also run the GPT-3-width cases with --no-spmd")
    options = parser.parse_args()
    print(f"{'case':<31} {'step':>13} {'ops':>9} {'replicated wall':>16} {'cpu':>8} {'full wall':>10} "
          f"{'cpu':>8} {'cpu ratio':>10}")
    gpt3 = []
    for name, (topology, shape) in CASES.items():
        command = ["run", "tp_layer", "--topology", topology, "--timing-only", "--", *shape, *LAYOUT]
        wall, cpu, stdout = timed_run(command)
        step, ops = STEP.search(stdout).group(1), OPS.search(stdout).group(1)
        full = "" if shape is GPT3 and not options.full_gpt3 else None
        if full is None:
            full_wall, full_cpu, full_stdout = timed_run(command[:4] + ["--no-spmd"] + command[4:])
            if (STEP.search(full_stdout).group(1), OPS.search(full_stdout).group(1)) != (step, ops):
                raise SystemExit(f"{name}: the full run printed another step or op count than the replicated one")
            full = f"{full_wall:>8.1f} s {full_cpu:>6.1f} s {full_cpu / cpu:>9.1f}x"
        print(f"{name:<31} {step + ' us':>13} {int(ops):>9} {wall:>14.1f} s {cpu:>6.1f} s {full}")
        if shape is GPT3:
            gpt3.append(cpu)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux
    print(f"peak RSS of any run: {peak:.2f} GiB")
    print(f"gpt3_step_cpu_s: {max(gpt3):.1f}")


if __name__ == "__main__":
    main()

"""Wall time of `kernbench run tp_mlp` at every tensor-parallel size of the default machine, as a user runs it.

Each run is the command a user types, `python -m kernbench run tp_mlp --
--tp N`, in a fresh interpreter (so imports, the report and the bench's own
check against numpy are counted), with values unless `--timing-only` is
given. Beside them, in the same rounds, runs `kernbench run` of a bench that
does nothing: the cost of starting the command, which no bench can go
below. Runs take turns, round after round, and the best of `--rounds` is
kept; CPU seconds (the child's user + system time) are printed beside wall
seconds, the steadier figure on a shared host. Every run of one size must
print the same simulated total (checked).

Run as `python benchmarks/tp_mlp_wall.py` from the repository root. The
last line is `tp_mlp_slowest_wall_s: X`, the slowest size's best wall time
(issue goal: under 3 s at every size).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EMPTY_BENCH = "def run(torch):\n    pass\n"
TOTAL = re.compile(r"^total\s+([0-9.]+) us$", re.MULTILINE)


def timed_run(args: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of `python -m kernbench ARGS` in a fresh interpreter; a failure stops the script."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "kernbench", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"kernbench {' '.join(args)} failed:\n{result.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each case, taking turns (best kept)")
    parser.add_argument("--timing-only", action="store_true", help="run the bench with --timing-only")
    options = parser.parse_args()
    mode = ["--timing-only"] if options.timing_only else []
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty_bench.py"
        empty.write_text(EMPTY_BENCH)
        cases = {"startup (empty bench)": ["run", str(empty)]}
        cases.update({f"tp_mlp --tp {tp}": ["run", "tp_mlp", *mode, "--", "--tp", str(tp)] for tp in (1, 2, 4)})
        best: dict[str, tuple[float, float]] = {}
        totals: dict[str, set[str]] = {}
        for _ in range(options.rounds):
            for name, args in cases.items():
                wall, cpu, stdout = timed_run(args)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, cpu)
                totals.setdefault(name, set()).update(TOTAL.findall(stdout))
    for name, seen in totals.items():
        if len(seen) > 1:
            raise SystemExit(f"{name}: the runs printed different simulated totals: {sorted(seen)} us")
    print(f"{'case':<24} {'simulated':>12} {'wall':>9} {'cpu':>9}")
    for name, (wall, cpu) in best.items():
        simulated = f"{next(iter(totals[name]))} us" if totals[name] else "-"
        print(f"{name:<24} {simulated:>12} {wall:>7.2f} s {cpu:>7.2f} s")
    slowest = max(wall for name, (wall, _) in best.items() if name.startswith("tp_mlp"))
    print(f"tp_mlp_slowest_wall_s: {slowest:.2f}")


if __name__ == "__main__":
    main()

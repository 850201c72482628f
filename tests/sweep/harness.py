"""Sweeps as a user runs them: a probe bench, sweep files in a temporary folder, the command in-process or not.

The probe bench all-reduces `--n` f32 elements over every SIP (rank r
contributes r + 1) and prints its metrics line; `--fail-on N` makes the
point with `--n N` raise, `--crash-on N` kills its own process, and
`--sleep S` holds the host for S seconds before the run (for Ctrl-C tests).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from kernbench.sweep.command import main
from tests.cli import run_kernbench_in_process, sigint_at_default

REPO_ROOT = Path(__file__).resolve().parents[2]

SHIPPED_CCL = REPO_ROOT / "kernbench" / "configs" / "ccl" / "ccl.yaml"
SHIPPED_TOPOLOGY = REPO_ROOT / "kernbench" / "configs" / "topology" / "default.yaml"

PROBE_BENCH = '''
import argparse
import json
import os
import signal
import time


def run(torch, argv):
    parser = argparse.ArgumentParser(prog="probe")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--fail-on", type=int, default=None)
    parser.add_argument("--crash-on", type=int, default=None)
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.n == args.fail_on:
        raise ValueError(f"the probe fails at n={args.n}")
    if args.n == args.crash_on:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(args.sleep)
    dist = torch.distributed
    dist.init_process_group(backend="ahbm")
    world = dist.get_world_size()
    sums = {}
    torch.multiprocessing.spawn(_rank, args=(torch, args.n, sums), nprocs=world)
    dist.destroy_process_group()
    print("metrics: " + json.dumps({"elements": args.n, "world": world, "sum": sums[0]}))


def _rank(rank, torch, n, sums):
    torch.ahbm.set_device(rank)
    x = torch.full((1, n), rank + 1.0, dtype=torch.float32)
    torch.distributed.all_reduce(x)
    sums[rank] = float(x.numpy()[0, 0])
'''

# Eight points: a topology key, a ccl key and a bench argument, two values each.
EIGHT_POINTS = '''
bench: probe.py
axes:
  topology.system.inter_sip.bandwidth_gb_per_s: [50, 200]
  ccl.defaults.algorithm: [ring, tree]
  --n: [64, 4096]
'''


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


def sweep_folder(folder: Path, sweep_text: str) -> Path:
    """`folder` with the probe bench and `sweep.yaml`; returns the sweep file."""
    write(folder, "probe.py", PROBE_BENCH)
    return write(folder, "sweep.yaml", sweep_text)


def run_sweep_command(*args: str, capsys) -> tuple[int, str, str]:
    """`kernbench sweep ARGS` in this process: (exit status, stdout, stderr)."""
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def sweep_process(*args: str, cwd: Path) -> subprocess.Popen:
    """`python -m kernbench.sweep ARGS` as its own process, with Ctrl-C at its default whatever pytest inherited."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-m", "kernbench.sweep", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": path},
                            preexec_fn=sigint_at_default)


def read_table(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((folder / "results.csv").read_text())))


def journal_lines(folder: Path) -> list[str]:
    return (folder / "results.jsonl").read_text().splitlines()


def single_runs(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """`kernbench ARGS` for each command, run in this process one after another; results in the order of the list."""
    return [run_kernbench_in_process(*command, cwd=cwd) for command in commands]


def metrics_of(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("metrics: ")]
    return json.loads(lines[-1][len("metrics: "):])


@contextlib.contextmanager
def ray_instance():
    """A Ray started in this process for the test, shut down after it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()

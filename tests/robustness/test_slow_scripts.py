"""ADR 0014: an optional script whose run is long says so in its first line, before the long part starts."""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys

import pytest

from tests.cli import REPO_ROOT

FIRST_LINE_TIMEOUT_S = 30


def first_stderr_line(*args: str) -> str:
    """The script's first line on stderr; the script is stopped once it is read (the rest would take minutes)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    child = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path})
    try:
        ready, _, _ = select.select([child.stderr], [], [], FIRST_LINE_TIMEOUT_S)
        return child.stderr.readline() if ready else ""
    finally:
        child.kill()
        child.wait()


def test_adr0014_t34_gemm_h100_without_a_gpu_says_first_that_only_a_long_simulation_runs():
    if importlib.util.find_spec("torch") is not None:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is here: the script measures it, as asked")
    line = first_stderr_line("benchmarks/gemm_h100.py", "--sizes", "4096")
    assert line.startswith("gemm_h100: no CUDA device here, so only the simulation runs, and 4096^3 takes minutes "
                           "of host CPU"), line
    assert "--simulated FILE" in line and line.endswith("\n") and line.count("\n") == 1


def test_adr0014_t35_fidelity_nccl_held_out_says_first_what_it_simulates_and_for_how_long():
    from benchmarks.fidelity_nccl import HELD_OUT, HELD_OUT_COLLECTIVES, SCORED_FROM_BYTES

    rows = json.loads(HELD_OUT.read_text())["rows"]
    calls = sum(row["collective"] in HELD_OUT_COLLECTIVES and row["bytes"] >= SCORED_FROM_BYTES for row in rows)
    line = first_stderr_line("benchmarks/fidelity_nccl.py", "--held-out")
    assert line.startswith(f"fidelity_nccl: --held-out first simulates {calls} collectives (all_gather, "
                           "reduce_scatter, broadcast from 1 MiB up) before the all-reduce table: a few minutes"), line

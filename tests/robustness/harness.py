"""Probing kernbench as a careless or hostile user would: a real child process, real signals, real files.

`kernbench(...)` runs `python -m kernbench` (as `tests/cli.py` does) with
SIGINT and SIGHUP at their defaults, whatever the test runner inherited — a
background job starts with SIGINT ignored, one under `nohup` with SIGHUP
ignored, and kernbench, like any Unix program, keeps an inherited "ignore".
`started(...)` starts one and returns once the bench has printed its first
line, so a signal sent then lands in the simulation, not in Python's
start-up.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.cli import REPO_ROOT

SHIPPED_CCL = (REPO_ROOT / "kernbench" / "configs" / "ccl" / "ccl.yaml").read_text()
SHIPPED_TOPOLOGY = (REPO_ROOT / "kernbench" / "configs" / "topology" / "default.yaml").read_text()
ONE_ERROR_LINE = re.compile(r"kernbench: error: [^\n]+\n")
PROBE_TIMEOUT_S = 60

# A bench that touches the collective configuration: every rank initializes the group and all-reduces.
CCL_PROBE = '''
def _rank(rank, torch):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    x = torch.ones(8)
    torch.distributed.all_reduce(x)
    torch.distributed.destroy_process_group()


def run(torch):
    torch.multiprocessing.spawn(_rank, args=(torch,), nprocs=torch.ahbm.device_count())
'''


def _environment(extra_path: Path | None = None) -> dict:
    paths = [str(REPO_ROOT), *([str(extra_path)] if extra_path else []), os.environ.get("PYTHONPATH")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def _child_setup(file_size_limit: int | None = None, memory_limit: int | None = None):
    def setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    return setup


def kernbench(*args: str, cwd: Path, env: dict | None = None, file_size_limit: int | None = None,
              memory_limit: int | None = None, python_path: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m kernbench ARGS` in `cwd`; the limits apply to the child alone (`setrlimit` in its preexec)."""
    return subprocess.run([sys.executable, "-m", "kernbench", *args], cwd=cwd, capture_output=True, text=True,
                          env={**_environment(python_path), **(env or {})}, timeout=PROBE_TIMEOUT_S,
                          preexec_fn=_child_setup(file_size_limit, memory_limit))


def started(*args: str, cwd: Path, python_path: Path | None = None) -> subprocess.Popen:
    """`python -m kernbench ARGS`, returned once the bench (or server) has printed its first line, which the
    process keeps as `first_line`."""
    child = subprocess.Popen([sys.executable, "-m", "kernbench", *args], cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_environment(python_path),
                             preexec_fn=_child_setup())
    child.first_line = child.stdout.readline()
    assert child.first_line, f"the bench ended before printing: {child.communicate(timeout=PROBE_TIMEOUT_S)}"
    return child


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def assert_one_error_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 2 and exactly one line on stderr, `kernbench: error: ...`, holding each needle."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert ONE_ERROR_LINE.fullmatch(result.stderr), result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    return result.stderr


def line_of(text: str, fragment: str) -> int:
    """1-based line of the only line of `text` holding `fragment`."""
    lines = [number for number, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(lines) == 1, (fragment, lines)
    return lines[0]


def leftovers(folder: Path) -> list[str]:
    """Temporary output files left in `folder` (none may survive a failure or an interrupt)."""
    return sorted(path.name for path in folder.iterdir() if path.name.startswith(".") and ".tmp" in path.name)

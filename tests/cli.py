"""Running the `kernbench` command as a user would: a fresh interpreter, any working directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_kernbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m kernbench ARGS` in `cwd`, finding this checkout's package first (installed or not)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "kernbench", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path})


def sigint_at_default() -> None:
    """A child's `preexec_fn`: SIGINT at its default, as in a terminal, even when the tests run as a background
    job (whose shell starts them with SIGINT ignored, which a server would inherit and never stop on Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

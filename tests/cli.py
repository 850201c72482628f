"""Running the `kernbench` command as a user would: in a fresh interpreter, or in this one as if it were fresh.

A fresh interpreter costs a few tenths of a second of CPU before the
command starts (Python, numpy and kernbench imported again), which about a
hundred tests paid to check no more than what a command prints and its exit
status. `run_kernbench_in_process` gives those the same `CompletedProcess`
from `kernbench.cli.main` called here, with what a run may change in the
process put back after it: working directory, `os.environ`, `sys.path`,
`sys.argv`, the modules the run imported from outside the installed
packages (a bench's sibling or a collective algorithm in the test's
folder, which the next test may name alike), the signal handlers, and the
interval timer with any collective watch a failed run left open.
`run_kernbench` still starts `python -m kernbench`, for what only a
process shows: signals, the entry points, resource limits, what a fresh
interpreter imports.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_SIGNALS_A_RUN_TAKES = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)
# Modules imported from these stay imported after an in-process run: the package itself and what is installed.
_KEPT_MODULE_ROOTS = tuple(str(Path(p).resolve()) for p in {REPO_ROOT / "kernbench", sys.prefix, sys.base_prefix,
                                                             sysconfig.get_paths()["stdlib"]})


def run_kernbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m kernbench ARGS` in `cwd`, finding this checkout's package first (installed or not)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "kernbench", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path})


def run_kernbench_in_process(*args: str, cwd: Path, env: dict | None = None,
                             python_path: Path | None = None) -> subprocess.CompletedProcess:
    """`kernbench ARGS` run by `kernbench.cli.main` in this process, as `python -m kernbench ARGS` would run in
    `cwd` (its folder first on `sys.path`, then `python_path`) with `env` added to the environment: the exit
    status and what it printed, as `subprocess.run(..., capture_output=True, text=True)` gives them."""
    from kernbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _process_state_restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(cwd)
        os.environ.update(env or {})
        sys.path[:0] = [str(cwd), *([str(python_path)] if python_path else [])]
        sys.argv = ["kernbench", *args]
        sys.dont_write_bytecode = True  # as the child interpreters run (tests/conftest.py)
        importlib.invalidate_caches()  # files the test just wrote, in folders imported from before
        try:
            status = main(list(args))
        except SystemExit as exit_:  # argparse's errors, or a bench's own sys.exit outside its ranks
            status = _exit_status(exit_.code, err)
    return subprocess.CompletedProcess(["kernbench", *args], status, out.getvalue(), err.getvalue())


def _exit_status(code, stderr: io.StringIO) -> int:
    """The status the interpreter exits with for `sys.exit(code)`, printing a message as it does."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=stderr)
    return 1


@contextlib.contextmanager
def _process_state_restored():
    saved_cwd, saved_environ = os.getcwd(), dict(os.environ)
    saved_path, saved_argv, saved_bytecode = list(sys.path), sys.argv, sys.dont_write_bytecode
    saved_modules = set(sys.modules)
    saved_handlers = {signum: signal.getsignal(signum) for signum in _SIGNALS_A_RUN_TAKES}
    saved_timer = signal.getitimer(signal.ITIMER_REAL)
    try:
        with warnings.catch_warnings():
            yield
    finally:
        _close_stale_collective_watches()
        signal.setitimer(signal.ITIMER_REAL, *saved_timer)
        for signum, handler in saved_handlers.items():
            signal.signal(signum, handler)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        sys.path[:], sys.argv, sys.dont_write_bytecode = saved_path, saved_argv, saved_bytecode
        for name in set(sys.modules) - saved_modules:
            if not _is_kept(sys.modules[name]):
                del sys.modules[name]


def _close_stale_collective_watches() -> None:
    """A run that failed inside a collective leaves its watch open, for the watchdog's next tick to close
    (`kernbench.ccl.watchdog`); the runner closes it now, before it puts SIGALRM back, so the watchdog never
    believes its handler is installed when it is not."""
    from kernbench.ccl.watchdog import _WATCHDOG

    _WATCHDOG._close([watch for watch in _WATCHDOG.open if not watch.engine._running])


def _is_kept(module) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is None or str(Path(origin).resolve()).startswith(_KEPT_MODULE_ROOTS)


def sigint_at_default() -> None:
    """A child's `preexec_fn`: SIGINT at its default, as in a terminal, even when the tests run as a background
    job (whose shell starts them with SIGINT ignored, which a server would inherit and never stop on Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

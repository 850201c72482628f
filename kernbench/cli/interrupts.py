"""Ctrl-C, SIGTERM and SIGHUP: the command stops where it is, says so in one line, and exits 130.

While a command runs, SIGINT, SIGTERM and SIGHUP (its terminal closed)
raise `KeyboardInterrupt` where the engine loops
(`kernbench.sim_engine.interrupts.raise_in_driver`), never in the simulated
process or task that happens to be running, so no kernel or collective is
blamed for it. The exception unwinds through `finally` blocks (a temporary
output file is removed, the progress line stops) and the command line
prints `interrupted at simulated t=… (N events, wall …)`. Outputs are
written only after a run completes and renamed into place whole, so an
interrupted run leaves every earlier file as it was.

A second signal while the first unwinds ends the process at once, with the
same status. A signal that was ignored when kernbench started (a job
started with `nohup`, or in the background of a script) stays ignored, as
Unix programs conventionally leave it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from kernbench.report.run_report import format_ps
from kernbench.sim_engine.interrupts import raise_in_driver

INTERRUPTED_STATUS = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """A context manager: while open, SIGINT, SIGTERM and SIGHUP interrupt the command (see the module docstring)."""

    def __init__(self):
        self.began = time.monotonic()
        self.engine = None  # the engine whose progress the line reports, once a run has one
        self._previous: dict[int, object] = {}
        self._fired = False

    def __enter__(self) -> "Interrupts":
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                previous = signal.getsignal(signum)
                if previous is not signal.SIG_IGN:
                    self._previous[signum] = previous
                    signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            # After an interrupt the process is on its way out: a late signal must not
            # print a traceback from the interpreter's shutdown.
            signal.signal(signum, signal.SIG_IGN if self._fired else previous)

    def _handle(self, signum, _frame) -> None:
        if self._fired:
            os.write(2, f"kernbench: {signal.Signals(signum).name} again; exiting now\n".encode())
            os._exit(INTERRUPTED_STATUS)
        self._fired = True
        raise_in_driver(KeyboardInterrupt(), self.engine)

    def line(self) -> str:
        """`interrupted at simulated t=… (N events, wall …)`, or, before a run began, the wall time alone."""
        wall = f"wall {time.monotonic() - self.began:.1f} s"
        if self.engine is None:
            return f"interrupted before the simulation started ({wall})"
        return (f"interrupted at simulated t={format_ps(self.engine.now)} "
                f"({self.engine.events_scheduled:,} events, {wall})")

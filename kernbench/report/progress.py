"""A progress line for long runs: simulated time, engine events and kernel programs done, on stderr.

A daemon thread writes it a few times a second from counters the engine and
the runtime keep anyway, so the simulation loop pays nothing for it and no
result can depend on it. `kernbench run` shows it on a terminal, or on
request (`--progress`); on a terminal the line is redrawn in place and
cleared at the end, elsewhere it is one line per interval.
"""

from __future__ import annotations

import threading
import time

from kernbench.report.run_report import format_ps


class ProgressLine:
    """A context manager that reports `ctx`'s progress on `stream` every `interval_s` while it is open."""

    def __init__(self, ctx, stream, *, interval_s: float):
        self._ctx = ctx
        self._stream = stream
        self._in_place = stream.isatty()
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name="kernbench progress", daemon=True)
        self._began = 0.0

    def __enter__(self) -> "ProgressLine":
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self._in_place:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def line(self) -> str:
        """The current line: simulated time, events scheduled, programs finished, wall time."""
        ctx = self._ctx
        return (f"[kernbench] simulated {format_ps(ctx.engine.now)}, {ctx.engine.events_scheduled:,} events, "
                f"{ctx.programs_done:,} kernel programs done, wall {time.monotonic() - self._began:.1f} s")

    def _report(self) -> None:
        while not self._stop.wait(self._interval):
            if self._in_place:
                self._stream.write("\r\x1b[K" + self.line())
            else:
                self._stream.write(self.line() + "\n")
            self._stream.flush()

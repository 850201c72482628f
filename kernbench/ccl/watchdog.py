"""NCCL's watchdog on the host clock: a collective that does not end is stopped, in one line.

A collective's algorithm is code of the user's own (ADR 0010), and a loop
in it that never ends would run until Ctrl-C. While `run_collective` runs a
request it is `watching` it; a timer (SIGALRM, every `CHECK_S`, or twice
within a member's limit where that is shorter) then stops it with
`CollectiveTimeout`:

- when the collective has run for longer than its process group's
  `timeout` of host time (`init_process_group(timeout=...)`, PyTorch's own
  knob; `DEFAULT_TIMEOUT_S`, NCCL's ten minutes, otherwise): a loop of PE
  ops, which simulated time cannot tell from work;
- sooner, when one of its members has held the host for a twentieth of
  that timeout (30 s by default) without giving the engine a single op (no
  event scheduled since): a loop in the algorithm's own Python code. That
  share is counted in the process's CPU time, not the wall clock's: a host
  so loaded that the process waits for a core has not been held by it.

The error is raised where the engine loops (`raise_in_driver`), as Ctrl-C
is, so the run stops at once, whatever runs at that moment, even a member's
step that never returns. A member written as a generator runs inside the
engine's loop, so a stall of its own is raised in the member, which fails
its collective; the timer then looks again at once (`RECHECK_S`), since the
collective's other members may loop too.

The timer runs only in the main thread, and only where SIGALRM is nobody
else's (a handler of a test runner's or a bench's own is left alone).
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import time
from dataclasses import dataclass, field

from kernbench.ccl.errors import CollectiveError
from kernbench.sim_engine.interrupts import raise_in_driver

DEFAULT_TIMEOUT_S = 600.0  # NCCL's (PyTorch's default `timeout` of a process group on GPUs)
STALL_FRACTION = 20  # a member holding the host timeout / 20 without an op is looping: no piece takes that long
CHECK_S = 1.0
RECHECK_S = 0.01
ADVICE = "a longer timeout is init_process_group(timeout=datetime.timedelta(seconds=N))"


class CollectiveTimeout(CollectiveError):
    """A collective the watchdog stopped: it ran past its process group's timeout, or a member looped without
    an op for a twentieth of it."""


@dataclass(eq=False)
class _Watch:
    engine: object
    label: str
    algorithm: str
    module: str
    timeout_s: float
    began: float = field(default_factory=time.monotonic)
    tripped: bool = False  # a member was stopped for looping: the others are stopped as soon as they loop too

    def describe(self) -> str:
        return f"{self.label}: algorithm {self.algorithm!r} ({self.module})"


class _Watchdog:
    """The process's one timer over the collectives being run (SIGALRM is the process's, so one owner)."""

    def __init__(self):
        self.open: list[_Watch] = []
        self._previous = None  # SIGALRM's handler before ours, while ours is installed
        self._seen: tuple | None = None  # (engine, events scheduled, running process or task) at the last tick
        self._quiet_since = 0.0  # the process's CPU time when the engine last moved
        self._period: float | None = None  # the timer's interval while installed

    @contextlib.contextmanager
    def watching(self, engine, label: str, algorithm: str, module: str, timeout_s: float):
        if not self.open and not self._install():
            yield
            return
        watch = _Watch(engine, label, algorithm, module, timeout_s)
        self.open.append(watch)
        self._arm()
        try:
            yield
        finally:
            self._close([watch])

    def _install(self) -> bool:
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL:
            return False
        self._previous = signal.signal(signal.SIGALRM, self._tick)
        self._seen = None
        self._period = None
        return True

    def _arm(self) -> None:
        # Two ticks within a member's limit, so a short timeout's stall is seen in about that limit.
        period = max(RECHECK_S, min([CHECK_S] + [watch.timeout_s / STALL_FRACTION / 2 for watch in self.open]))
        if period != self._period:
            self._period = period
            signal.setitimer(signal.ITIMER_REAL, period, period)

    def _close(self, watches) -> None:
        self.open = [watch for watch in self.open if watch not in watches]
        if not self.open and self._previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._previous = None

    def _tick(self, _signum, _frame) -> None:
        # A run stopped by another error or Ctrl-C never closes its watches: they end with their engine's run.
        self._close([watch for watch in self.open if not watch.engine._running])
        now, cpu = time.monotonic(), time.process_time()
        for watch in self.open:
            if now - watch.began > watch.timeout_s:
                self._close([w for w in self.open if w.engine is watch.engine])
                raise_in_driver(CollectiveTimeout(
                    f"{watch.describe()} has not finished after {watch.timeout_s:g} s of host time, its process "
                    f"group's timeout; is it looping? ({ADVICE})"), watch.engine)
                return
        for watch in self.open:
            engine = watch.engine
            runner = engine._current or engine._task
            seen = (engine, engine.events_scheduled, runner)
            if seen != self._seen:
                self._seen, self._quiet_since = seen, cpu
                continue
            if runner is None or not runner.name.startswith(f"{watch.label} rank ") \
                    or cpu - self._quiet_since <= (0 if watch.tripped else watch.timeout_s / STALL_FRACTION):
                continue
            member, limit = runner.name[len(watch.label) + 1:], watch.timeout_s / STALL_FRACTION
            error = CollectiveTimeout(
                f"{watch.describe()}: {member} has run {limit:g} s of host time without an op, a twentieth of its "
                f"process group's timeout; is it looping? ({ADVICE})")
            if runner is engine._current:
                self._close([w for w in self.open if w.engine is engine])
                raise_in_driver(error, engine)
                return
            watch.tripped = True
            signal.setitimer(signal.ITIMER_REAL, RECHECK_S, self._period)
            raise error


_WATCHDOG = _Watchdog()
# A run stopped by Ctrl-C leaves its watches open until the next tick; one due while the interpreter shuts down would
# meet SIGALRM's default action and kill the process with another status than the command's.
atexit.register(lambda: _WATCHDOG._close(list(_WATCHDOG.open)))


def watching(engine, label: str, algorithm: str, module: str, timeout_s: float):
    """A context manager: while open, the collective `label` is stopped if it runs past `timeout_s` of host time
    or a member of it loops without an op (see the module docstring)."""
    return _WATCHDOG.watching(engine, label, algorithm, module, timeout_s)

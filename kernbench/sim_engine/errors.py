"""The engine's error types, all `KernbenchError`s.

`EngineUsageError` means a layer above called the engine wrongly (a blocking
call from the main greenlet, a float time, an event triggered twice);
`Deadlock` and `ProcessFailed` describe what happened inside a simulation and
are raised by `Engine.run`.
"""

from __future__ import annotations

from kernbench.errors import KernbenchError


class EngineUsageError(KernbenchError):
    """The engine was called in a way its contract forbids; the message says which rule."""


class Deadlock(KernbenchError):
    """Nothing is scheduled, yet some process (or `run(until=event)`) still waits.

    `waiting` holds one `(process name, what it waits on, since ps)` tuple per
    waiter, sorted by (since, name), so the report is the same on every run.
    `now` is the simulated time at which the engine ran dry.
    """

    def __init__(self, now: int, waiting: list[tuple[str, str, int]]):
        self.now = now
        self.waiting = waiting
        lines = [f"deadlock at t={now} ps: nothing is scheduled but {len(waiting)} waiter(s) remain"]
        lines += [f"  {name} waits on {what} since t={since} ps" for name, what, since in waiting]
        super().__init__("\n".join(lines))


class ProcessFailed(KernbenchError):
    """A process raised while nothing was waiting for it; `run()` stops and raises this.

    `process` is the failed `Process` or `Task` (its event holds the original exception,
    which is also this error's `__cause__`, with the process's traceback), and
    `now` the simulated time of the failure.
    """

    def __init__(self, process, now: int, exc: BaseException):
        self.process = process
        self.now = now
        super().__init__(
            f"process {process.name!r} failed at t={now} ps with {type(exc).__name__}: {exc} "
            "(nothing was waiting for it)"
        )

"""Signals reach the engine's driver between two steps, never the simulated work that happens to be running.

Python runs a signal handler wherever the main thread is. During a run that
is either a process's greenlet (a kernel program, a rank) or the driver, the
root greenlet, running one scheduled entry — which may be a task's step or a
callback of the machine. An exception raised in either would become that
process's or task's failure and be reported as the kernel or collective
failing of it. `raise_in_driver` raises it where the engine loops instead:

- from a process, by throwing it into the root greenlet, which is waiting in
  the loop for the process to block; the process stays suspended, never
  resumed;
- from the driver inside `Engine.run`, by putting an entry before every other
  on the schedule that raises it, so it leaves the loop as soon as the
  current step returns;
- from the driver inside a task's step, at once: the step is the user's
  code (a collective member written as a generator) and may never return.
  The task lets it pass (`Engine._interrupting`) instead of failing with it;
  its generator has unwound, so it never goes on;
- anywhere else (no run under way), at once.

Either way it leaves `Engine.run` as itself.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
from heapq import heappush

from greenlet import getcurrent

# Sequence numbers of interrupt entries: below every entry's (which start at 1) and `run(until=t)`'s -1.
_FIRST = itertools.count(-(2**62))


def raise_in_driver(exc: BaseException, engine=None) -> None:
    """Raise `exc` where `engine` loops (from a signal handler, wherever it runs); see the module docstring."""
    current = getcurrent()
    root = current
    while root.parent is not None:
        root = root.parent
    if root is not current:
        root.throw(exc)
    elif engine is not None and engine._running and engine._task is not None:
        engine._interrupting = exc
        raise exc
    elif engine is not None and engine._running:
        heappush(engine._heap, (engine.now, next(_FIRST), _raise, exc))
    else:
        raise exc


@contextlib.contextmanager
def ctrl_c_in_driver(engine):
    """While open, Ctrl-C is a `KeyboardInterrupt` raised where `engine` loops (see the module docstring).

    Only where Python's own SIGINT handler is in place (a script, a test):
    a caller that installed its own (the command line) or ignores SIGINT
    keeps it.
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, lambda _signum, _frame: raise_in_driver(KeyboardInterrupt(), engine))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise(exc: BaseException) -> None:
    raise exc

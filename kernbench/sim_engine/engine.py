"""The discrete-event engine: one heap, one loop, integer picoseconds.

Everything that will happen is an entry `(time, seq, fn, arg)` on one heap;
`run()` pops the smallest entry, sets `now` to its time and calls `fn(arg)`
from the main greenlet. `seq` grows by one per entry, so entries at equal
times run in the order they were scheduled and every run is bit-for-bit
repeatable. Resuming a process is such an entry whose `fn` is the process
greenlet's `switch`: a process runs until its next blocking call, which
switches back to the main greenlet and so to the loop.

The one exception to "time advances only in the loop" is the sleep fast path:
a process that sleeps to a time strictly before every scheduled entry would be
the next one popped anyway, so the engine advances `now` in place and returns
without switching. Nothing else can run in between, so the order of execution
is exactly the one the heap would produce.
"""

from __future__ import annotations

import gc
import itertools
from heapq import heapify, heappop, heappush

from greenlet import getcurrent

from kernbench.sim_engine.errors import Deadlock, EngineUsageError
from kernbench.sim_engine.events import AllOf, AnyOf, Event, Timeout
from kernbench.sim_engine.process import Process, Task
from kernbench.sim_engine.simtime import as_ps


# Allocations between young collections, and young collections per middle one, during run() (Python's
# defaults: 700 and 10). Measured on ring all-reduces of 64-256 ranks: full collections went from a third
# of a 256-rank run to a few percent.
_GC_YOUNG = 50_000
# Sequence numbers of `at_end_of_now` entries: above every other entry's (which count up from 1), so each pops after
# whatever is due at its picosecond.
_AT_END_OF_NOW = itertools.count(2**62)
_GC_MIDDLE = 20


class _StopRun(Exception):
    """Raised by the entry that ends `run(until=...)`; never leaves `run`."""


class Engine:
    """A discrete-event simulation over greenlet processes, with time in integer picoseconds.

    The greenlet that creates the engine (normally the thread's main greenlet)
    is its driver: only it calls `run()`, and every process greenlet has it as
    parent. Blocking calls (`sleep`, `sleep_until`, `wait`, `wait_all`,
    `wait_any`) are made from processes only; from the driver they raise
    `EngineUsageError`.
    """

    def __init__(self):
        self._now = 0
        self._heap: list[tuple] = []
        self._seq = 0
        self._pid = 0
        self._main = getcurrent()
        self._to_main = self._main.switch
        self._current: Process | None = None
        self._task: Task | None = None  # the task whose step is running, if any
        self._live: dict[Process, None] = {}
        self._waiting_tasks: dict[Task, None] = {}  # tasks waiting on an event, for Deadlock reports
        self._running = False
        self._interrupting: BaseException | None = None  # raised through a task's step by `raise_in_driver`
        # One bound object, so the stop entry can be found by identity.
        self._stop = self._stop_run

    @property
    def now(self) -> int:
        """The current simulated time, in picoseconds."""
        return self._now

    @property
    def events_scheduled(self) -> int:
        """How many entries have been put on the schedule so far (a measure of work done, for progress lines)."""
        return self._seq

    @property
    def idle(self) -> bool:
        """Nothing is scheduled: no process, task or callback can act until someone running now makes it.

        What lets a collective know nothing else can touch the machine while it runs (adr/0010, "Symmetric
        collectives")."""
        return not self._heap

    @property
    def current_process(self) -> Process | None:
        """The process running now, or None in the main greenlet."""
        return self._current

    @property
    def current_task(self) -> Task | None:
        """The task whose step is running now, or None (in a process or between steps)."""
        return self._task

    @property
    def live_processes(self) -> list[Process]:
        """Processes spawned and not finished yet, in spawn order."""
        return list(self._live)

    # -- creating things ---------------------------------------------------

    def spawn(self, fn, *args, name: str | None = None, **kwargs) -> Process:
        """Start `fn(*args, **kwargs)` as a process at the current time and return it.

        Callable from the main greenlet or a process; the new process first
        runs after everything already scheduled for now. `name` (default
        `"<fn name>#<pid>"`) identifies it in deadlock and failure reports.
        """
        self._pid += 1
        pid = self._pid
        if name is None:
            name = f"{getattr(fn, '__name__', 'process')}#{pid}"
        process = Process(self, fn, args, kwargs, name, pid)
        self._live[process] = None
        self._schedule_now(process._resume, None)
        return process

    def task(self, fn, *args, name: str | None = None) -> Task:
        """Start the generator `fn(task, *args)` as a `Task` at the current time and return the task.

        A task is a process without a greenlet, whose only blocking calls are
        `yield t` (= `sleep_until(t)`) and `yield event` (= `wait(event)`);
        see `Task`. `name` identifies it in failure and deadlock reports, as a
        process's does.
        """
        self._pid += 1
        pid = self._pid
        return Task(self, fn, args, f"{getattr(fn, '__name__', 'task')}#{pid}" if name is None else name, pid)

    def event(self, name: str | None = None) -> Event:
        """A new pending event; `name` says what it stands for in deadlock reports."""
        return Event(self, name)

    def all_of(self, events) -> Event:
        """An event that succeeds with the list of the events' values once all succeed, or fails with the
        first failure as soon as it happens: what `wait_all` waits on, for a task to `yield`."""
        return AllOf(self, list(events))

    def timeout(self, delay_ps: int, value=None) -> Timeout:
        """An event that succeeds with `value` `delay_ps` after now."""
        delay_ps = as_ps(delay_ps, "timeout delay")
        due = self._now + delay_ps
        event = Timeout(self, due)
        self._seq += 1
        heappush(self._heap, (due, self._seq, event._expire, value))
        return event

    def call_at(self, time_ps: int, fn, arg=None) -> None:
        """Call `fn(arg)` from the main greenlet at `time_ps` (not before now), exactly where a callback
        added to `timeout(time_ps - now)` would run: after every entry already due at `time_ps` when
        that timeout fires.

        Two heap entries and no `Event`: the first stands for the timeout, the second for its one
        callback (which triggering schedules at now), so the order of execution and `seq` are a
        timeout's, at a fraction of its cost.
        """
        if time_ps.__class__ is not int:
            time_ps = as_ps(time_ps, "call_at time")
        if time_ps < self._now:
            raise EngineUsageError(f"call_at({time_ps}) is in the past: now is t={self._now} ps")
        self._seq = seq = self._seq + 1
        heappush(self._heap, (time_ps, seq, self._call_now, (fn, arg)))

    def wake_at(self, time_ps: int, fn, arg=None) -> None:
        """Call `fn(arg)` from the main greenlet at `time_ps` (not before now), exactly where a process
        that called `sleep_until(time_ps)` now would wake: one heap entry."""
        if time_ps.__class__ is not int:
            time_ps = as_ps(time_ps, "wake_at time")
        if time_ps < self._now:
            raise EngineUsageError(f"wake_at({time_ps}) is in the past: now is t={self._now} ps")
        self._seq = seq = self._seq + 1
        heappush(self._heap, (time_ps, seq, fn, arg))

    def at_end_of_now(self, fn, arg=None) -> None:
        """Call `fn(arg)` from the main greenlet at the current picosecond, after every entry due at it, those
        scheduled at it from here on included: when whatever happens at this picosecond has happened (what a
        replicated rank waits for to know that rank 0 does not start its operation now, runtime_api/spmd.py)."""
        heappush(self._heap, (self._now, next(_AT_END_OF_NOW), fn, arg))

    def _call_now(self, call) -> None:
        self._seq = seq = self._seq + 1
        heappush(self._heap, (self._now, seq, call[0], call[1]))

    # -- blocking calls, from processes only --------------------------------

    def sleep(self, duration_ps: int) -> None:
        """Suspend the calling process for `duration_ps` (0 allowed: yield to others due now).

        Returns without a greenlet switch when nothing is scheduled at or
        before the wake-up time (see the module docstring).
        """
        process = self._current
        if process is None:
            self._not_in_process("sleep")
        if duration_ps.__class__ is not int or duration_ps < 0:
            duration_ps = as_ps(duration_ps, "sleep duration")
        wake = self._now + duration_ps
        heap = self._heap
        if not heap or wake < heap[0][0]:
            self._now = wake
            return
        self._seq = seq = self._seq + 1
        heappush(heap, (wake, seq, process._resume, None))
        self._current = None
        self._to_main()
        self._current = process

    def sleep_until(self, time_ps: int) -> None:
        """Suspend the calling process until `time_ps`; `time_ps` before now is an error.

        Same fast path as `sleep`.
        """
        process = self._current
        if process is None:
            self._not_in_process("sleep_until")
        if time_ps.__class__ is not int:
            time_ps = as_ps(time_ps, "sleep_until time")
        if time_ps < self._now:
            raise EngineUsageError(f"sleep_until({time_ps}) is in the past: now is t={self._now} ps")
        heap = self._heap
        if not heap or time_ps < heap[0][0]:
            self._now = time_ps
            return
        self._seq = seq = self._seq + 1
        heappush(heap, (time_ps, seq, process._resume, None))
        self._current = None
        self._to_main()
        self._current = process

    def wait(self, event: Event):
        """Block the calling process until `event` triggers; return its value.

        An event already triggered returns (or raises) at once, without a
        greenlet switch. A failed event raises its original exception object,
        whose traceback is this waiter's frames followed by the frames where
        it was raised (in the failing process, for a `Process`).
        """
        process = self._current
        if process is None:
            self._not_in_process("wait")
        if event._ok is None:
            event._callbacks.append(process._resume)
            process._waiting_on = event
            process._waiting_since = self._now
            self._current = None
            self._to_main()
            self._current = process
            process._waiting_on = None
        if event._ok:
            return event._value
        raise event._value.with_traceback(event._tb)

    def drive(self, steps):
        """Run the generator `steps` — a task's body (see `Task`) — in the calling process; return its value.

        Each time it yields is a `sleep_until`, each event a `wait` (its value
        sent back, its failure raised at the yield, as is a kill): so one body
        of code serves a process and a task, blocking at the same points.
        Called from a process only.
        """
        send = steps.send
        try:
            wake = send(None)
            while True:
                if wake.__class__ is int and wake >= self._now:
                    self.sleep_until(wake)
                    wake = send(None)
                    continue
                try:
                    value = self.wait(wake) if isinstance(wake, Event) else self.sleep_until(wake)
                except BaseException as error:  # a failure, a kill: raised where it yielded, as in a process
                    wake = steps.throw(error)
                else:
                    wake = send(value)
        except StopIteration as done:
            return done.value

    def wait_all(self, events) -> list:
        """Wait until every event succeeded; return their values in order.

        Raises the first failure as soon as it happens (see `AllOf`), without
        waiting for the rest. An empty list returns `[]` at once.
        """
        if self._current is None:
            self._not_in_process("wait_all")
        return self.wait(AllOf(self, list(events)))

    def wait_any(self, events) -> tuple[int, object]:
        """Wait until one event triggers; return `(index, value)` of the first to do so.

        If that first event failed, raise its exception. Ties between events
        triggered at the same time go to the one triggered first.
        """
        if self._current is None:
            self._not_in_process("wait_any")
        return self.wait(AnyOf(self, list(events)))

    # -- the loop ------------------------------------------------------------

    def run(self, until=None):
        """Run the simulation from the main greenlet; return per `until`.

        - `until=None`: until nothing is scheduled. If processes still wait
          then, raise `Deadlock` listing them.
        - `until=t` (int ps, not before now): process everything scheduled
          strictly before `t`, then set `now = t` and return None (never a
          `Deadlock`: the caller may trigger events and run again).
        - `until=event`: until the event triggers; return its value or raise
          its failure like `wait`. If the schedule runs dry first, raise
          `Deadlock` (the report includes this `run` as a waiter).

        A process failure nothing waits for stops the run with
        `ProcessFailed` (see `Process`). After any exception the engine is
        consistent: the remaining processes can be killed or the run resumed.
        """
        if getcurrent() is not self._main or self._current is not None:
            raise EngineUsageError("run() is called from the engine's main greenlet only, never from a process")
        if self._running:
            raise EngineUsageError("run() is already running; a callback cannot start another run")
        heap = self._heap
        if isinstance(until, Event):
            if until._ok is not None:
                return until._outcome()
            until._callbacks.append(self._stop)
        elif until is not None:
            until = as_ps(until, "run(until=...)")
            if until < self._now:
                raise EngineUsageError(f"run(until={until}) is in the past: now is t={self._now} ps")
            # seq -1 sorts before every entry due at `until`, so those stay unrun.
            heappush(heap, (until, -1, self._stop, None))
        self._running = True
        started = self._now
        pop = heappop
        # Garbage collection tuned for the run, restored after it (adr/0003, "Garbage collection"):
        # objects that existed before it are set aside (unless someone else froze objects already), and
        # the young generation is sized to outlive an in-flight message, so the run's transient objects
        # die young instead of being promoted into costly full collections.
        frozen = not gc.get_freeze_count()
        if frozen:
            gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], _GC_YOUNG), max(thresholds[1], _GC_MIDDLE), thresholds[2])
        try:
            while heap:
                time, _, fn, arg = pop(heap)
                self._now = time
                fn(arg)
        except _StopRun:
            return until._outcome() if isinstance(until, Event) else None
        finally:
            gc.set_threshold(*thresholds)
            if frozen:
                gc.unfreeze()
            self._running = False
            self._interrupting = None
            self._unschedule(self._stop)
            if isinstance(until, Event) and until._callbacks and self._stop in until._callbacks:
                until._callbacks.remove(self._stop)
        self._raise_deadlock(until, started)

    # -- internals used by events and processes ------------------------------

    def _stop_run(self, _):
        raise _StopRun

    def _schedule_now(self, fn, arg) -> None:
        self._seq += 1
        heappush(self._heap, (self._now, self._seq, fn, arg))

    def _fire(self, event: Event) -> None:
        """Schedule the callbacks of an event that just triggered, at now, in order."""
        callbacks = event._callbacks
        event._callbacks = None
        if callbacks:
            now = self._now
            heap = self._heap
            seq = self._seq
            for callback in callbacks:
                seq += 1
                heappush(heap, (now, seq, callback, event))
            self._seq = seq

    def _unschedule(self, fn) -> None:
        """Drop every entry whose callable is `fn` (rare: kills and run() cleanup)."""
        heap = self._heap
        kept = [entry for entry in heap if entry[2] is not fn]
        if len(kept) != len(heap):
            heap[:] = kept
            heapify(heap)

    def _finish(self, process: Process) -> None:
        del self._live[process]

    def _not_in_process(self, call: str):
        raise EngineUsageError(
            f"{call}() blocks the calling process, but it was called from the main greenlet; "
            "call it from a process started with Engine.spawn()"
        )

    def _raise_deadlock(self, until, started: int) -> None:
        waiting = sorted(
            (p._waiting_since, p.name, p.pid, p._waiting_on.describe() if p._waiting_on else "nothing")
            for p in (*self._live, *self._waiting_tasks)
        )
        report = [(f"process {name!r}", what, since) for since, name, _, what in waiting]
        if isinstance(until, Event):
            report.append(("run(until=...)", until.describe(), started))
        if report:
            raise Deadlock(self._now, report)

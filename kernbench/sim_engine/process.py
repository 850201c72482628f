"""Processes: greenlets scheduled by the engine, each also an event of its own outcome."""

from __future__ import annotations

from heapq import heappush

from greenlet import GreenletExit, greenlet

from kernbench.sim_engine.errors import EngineUsageError, ProcessFailed
from kernbench.sim_engine.events import Event, _Condition
from kernbench.sim_engine.simtime import as_ps


class _Runner(Event):
    """What a process and a task share: liveness, how a report names them, being killed, leaving the event they
    wait on, and a failure nothing waits for stopping the run.

    A kind says how it stops waiting (`_stop_waiting`: its heap entries and
    its event registration) and how a kill reaches its code (`_throw`).
    """

    __slots__ = ("pid", "_resume", "_killed", "_waiting_on", "_waiting_since")
    _KIND = "process"

    @property
    def is_alive(self) -> bool:
        """True until the work returns or raises, or is killed."""
        return self._ok is None

    def describe(self) -> str:
        return f"process {self.name!r}"

    def kill(self, exc: BaseException | None = None) -> None:
        """Throw `exc` (default `GreenletExit`) into the process where it waits.

        From the main greenlet (e.g. after `run()` raised) the process runs its
        cleanup at once; from another process the kill is scheduled at the
        current time. A process that was not started yet never runs. The
        process's event then fails with `exc` (unless the process catches it
        and returns), and that failure is never reported as unobserved. A
        finished process is left as it is; a process cannot kill itself.
        """
        if self._ok is not None:
            return
        if exc is None:
            exc = GreenletExit(f"{self.name} killed")
        engine = self._engine
        if self is engine._current or self is engine._task:
            raise EngineUsageError(f"{self._KIND} {self.name!r} cannot kill itself; return or raise instead")
        if engine._current is None:
            self._kill_now(exc)
        else:
            engine._schedule_now(self._kill_now, exc)

    def _kill_now(self, exc: BaseException) -> None:
        if self._ok is not None:
            return
        self._stop_waiting()
        self._killed = True
        self._throw(exc)

    def _failed(self, exc: BaseException) -> None:
        """Fail with `exc`; raise `ProcessFailed` from the engine's loop when nothing waits for it (and it was not
        killed)."""
        observed = bool(self._callbacks) or self._killed
        self.fail(exc)
        if not observed:
            raise ProcessFailed(self, self._engine._now, exc) from exc

    def _cancel_wait(self) -> None:
        """Stop waiting on an event (killed while waiting): `_resume` off its callbacks, an empty condition detached."""
        event = self._waiting_on
        if event is None:
            return
        callbacks = event._callbacks
        if callbacks and self._resume in callbacks:
            callbacks.remove(self._resume)
        if isinstance(event, _Condition) and not event._callbacks:
            event._detach()
        self._waiting_on = None


class Process(_Runner):
    """`fn(*args, **kwargs)` running in a greenlet whose parent is the engine's main greenlet.

    Created by `Engine.spawn`; it starts at the simulated time of the spawn,
    after everything already scheduled for that time. As an event it succeeds
    with `fn`'s return value or fails with the exception `fn` raised (the
    exception keeps the process's traceback). A failure that nothing waits
    for when it happens makes `Engine.run` raise `ProcessFailed`.
    """

    __slots__ = ("_greenlet", "_fn", "_args", "_kwargs", "_started")

    def __init__(self, engine, fn, args, kwargs, name: str, pid: int):
        super().__init__(engine, name)
        self.pid = pid
        self._greenlet = greenlet(self._run, engine._main)
        # The engine's heap holds this bound method; one object per process lets
        # kill() find this process's entries by identity.
        self._resume = self._greenlet.switch
        self._fn = fn
        self._args = args
        self._kwargs = kwargs
        self._started = False
        self._killed = False
        self._waiting_on = None
        self._waiting_since = 0

    def _stop_waiting(self) -> None:
        self._engine._unschedule(self._resume)
        self._cancel_wait()

    def _throw(self, exc: BaseException) -> None:
        engine = self._engine
        if not self._started:
            engine._finish(self)
            self._release()
            self.fail(exc)
            return
        engine._current = self
        self._greenlet.throw(exc)

    def _run(self, _):
        engine = self._engine
        self._started = True
        engine._current = self
        try:
            value = self._fn(*self._args, **self._kwargs)
        except BaseException as exc:
            engine._current = None
            engine._finish(self)
            self._release()
            self._failed(exc)
        else:
            engine._current = None
            engine._finish(self)
            self._release()
            self.succeed(value)

    def _release(self) -> None:
        """Drop references to the function and its arguments once they cannot run."""
        self._fn = self._args = self._kwargs = None


class Task(_Runner):
    """A process without a greenlet: a generator the engine advances from its loop.

    Created by `Engine.task(fn, *args)`, which calls `fn(task, *args)` for the
    generator. The generator blocks only by yielding: `yield t` stands for
    `sleep_until(t)` and `value = yield event` for `wait(event)` (the
    event's value, or its failure raised at the yield). It runs exactly where
    a `Process` running the same code would: its first step where a process
    spawned now first runs, each later one where that process would resume
    — a sleep to a time before everything scheduled continues at once, as the
    engine's fast path does, and a wait on an event already triggered
    continues without an entry. So replacing such a process by a task
    changes no simulated time and no order of execution. It cannot make
    blocking engine calls (it is not a process; `current_process` is None
    while it runs, `current_task` is the task). As an event it succeeds with the generator's return
    value or fails with what it raised; a failure nothing waits for stops
    `run()` with `ProcessFailed`, and `kill` behaves as `Process.kill`. A
    task waiting on an event is listed by a `Deadlock` report as a process
    is. A task costs a generator frame and at most one heap entry per block,
    where a process costs a greenlet and two switches per block: what work
    started by the thousand (a collective's members, prefetches and posted
    stores) needs.
    """

    __slots__ = ("_generator", "_step")
    _KIND = "task"

    def __init__(self, engine, fn, args, name: str, pid: int = 0):
        # Event's fields set here rather than through its __init__: tasks are made by the thousand.
        self._engine = engine
        self.name = name
        self._callbacks = []
        self._ok = self._value = self._tb = None
        self.pid = pid
        self._generator = fn(self, *args)
        # Bound once, so kill() can find this task's heap entries and event registrations by identity.
        self._step = self._advance
        self._resume = None  # bound on its first wait for an event
        self._killed = False
        self._waiting_on = None
        self._waiting_since = 0
        engine._seq = seq = engine._seq + 1
        heappush(engine._heap, (engine._now, seq, self._step, None))

    def _stop_waiting(self) -> None:
        self._engine._unschedule(self._step)
        if self._waiting_on is not None:
            self._engine._unschedule(self._resume)
            self._cancel_wait()
            self._engine._waiting_tasks.pop(self, None)

    def _throw(self, exc: BaseException) -> None:
        self._advance(exc)

    def _woken(self, event: Event) -> None:
        """The event this task waits on triggered: go on with its value, or raise its failure at the yield."""
        self._waiting_on = None
        del self._engine._waiting_tasks[self]
        if event._ok:
            self._advance(None, event._value)
        else:
            self._advance(event._value.with_traceback(event._tb))

    def _advance(self, exc: BaseException | None, value=None) -> None:
        """Send `value` (or throw `exc`) into the generator and go on until it blocks, returns or raises."""
        engine = self._engine
        generator = self._generator
        outer, engine._task = engine._task, self  # outer: a task whose step kills this one, else None
        try:
            while True:
                wake = generator.send(value) if exc is None else generator.throw(exc)
                exc = value = None
                if wake.__class__ is not int and not isinstance(wake, Event):
                    try:  # an integer-like time (a numpy int); a float or a bool is refused where it was yielded
                        wake = as_ps(wake, f"task {self.name!r}: the time it yielded")
                    except EngineUsageError as error:
                        exc = error
                        continue
                if wake.__class__ is int:
                    if wake < engine._now:  # raised where the task yielded it, as sleep_until raises
                        exc = EngineUsageError(f"sleep_until({wake}) is in the past: now is t={engine._now} ps")
                        continue
                    heap = engine._heap
                    if heap and wake >= heap[0][0]:  # wake_at(wake, self._step)
                        engine._seq = seq = engine._seq + 1
                        heappush(heap, (wake, seq, self._step, None))
                        return
                    engine._now = wake  # nothing is due before it: this task would be popped next anyway
                elif wake._ok is None:
                    if self._resume is None:
                        self._resume = self._woken
                    wake._callbacks.append(self._resume)
                    self._waiting_on = wake
                    self._waiting_since = engine._now
                    engine._waiting_tasks[self] = None
                    return
                elif wake._ok:
                    value = wake._value
                else:
                    exc = wake._value.with_traceback(wake._tb)
        except StopIteration as stop:
            self._generator = self._step = self._resume = None  # no cycle left: freed by reference counting
            self.succeed(stop.value)
        except BaseException as failure:
            self._generator = self._step = self._resume = None
            if failure is engine._interrupting:  # a signal's, for the driver: not this task's failure
                raise
            self._failed(failure)
        finally:
            engine._task = outer

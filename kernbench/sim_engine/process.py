"""Processes: greenlets scheduled by the engine, each also an event of its own outcome."""

from __future__ import annotations

from greenlet import GreenletExit, greenlet

from kernbench.sim_engine.errors import EngineUsageError, ProcessFailed
from kernbench.sim_engine.events import Event, _Condition


class Process(Event):
    """`fn(*args, **kwargs)` running in a greenlet whose parent is the engine's main greenlet.

    Created by `Engine.spawn`; it starts at the simulated time of the spawn,
    after everything already scheduled for that time. As an event it succeeds
    with `fn`'s return value or fails with the exception `fn` raised (the
    exception keeps the process's traceback). A failure that nothing waits
    for when it happens makes `Engine.run` raise `ProcessFailed`.
    """

    __slots__ = (
        "pid", "_greenlet", "_resume", "_fn", "_args", "_kwargs",
        "_started", "_killed", "_waiting_on", "_waiting_since",
    )

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

    @property
    def is_alive(self) -> bool:
        """True from spawn until the process returns, raises or is killed."""
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
        current = engine._current
        if current is self:
            raise EngineUsageError(f"process {self.name!r} cannot kill itself; return or raise instead")
        if current is None:
            self._kill_now(exc)
        else:
            engine._schedule_now(self._kill_now, exc)

    def _kill_now(self, exc: BaseException) -> None:
        if self._ok is not None:
            return
        engine = self._engine
        engine._unschedule(self._resume)
        self._cancel_wait()
        self._killed = True
        if not self._started:
            engine._finish(self)
            self._release()
            self.fail(exc)
            return
        engine._current = self
        self._greenlet.throw(exc)

    def _cancel_wait(self) -> None:
        event = self._waiting_on
        if event is None:
            return
        callbacks = event._callbacks
        if callbacks and self._resume in callbacks:
            callbacks.remove(self._resume)
        if isinstance(event, _Condition) and not event._callbacks:
            event._detach()
        self._waiting_on = None

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
            observed = bool(self._callbacks) or self._killed
            self.fail(exc)
            if not observed:
                raise ProcessFailed(self, engine._now, exc) from exc
        else:
            engine._current = None
            engine._finish(self)
            self._release()
            self.succeed(value)

    def _release(self) -> None:
        """Drop references to the function and its arguments once they cannot run."""
        self._fn = self._args = self._kwargs = None


class Task(Event):
    """A process without a greenlet: a generator the engine advances from its loop.

    Created by `Engine.task(fn, *args)`, which calls `fn(task, *args)` for the
    generator. The generator blocks only by `yield t`, which stands for
    `sleep_until(t)`; it runs exactly where a `Process` running the same code
    would (its first step where a process spawned now first runs, each later
    one where that process would wake), so replacing such a process by a task
    changes no simulated time and no order of execution. It cannot make
    blocking engine calls (it is not a process; `current_process` is None
    while it runs). As an event it succeeds with the generator's return value
    or fails with what it raised; a failure nothing waits for stops `run()`
    with `ProcessFailed`, and `kill` behaves as `Process.kill`. A task costs a
    generator frame and one heap entry per step, where a process costs a
    greenlet and two switches per block: what work started by the thousand
    (a collective's prefetches and posted stores) needs.
    """

    __slots__ = ("_generator", "_step", "_killed")

    def __init__(self, engine, fn, args, name: str):
        super().__init__(engine, name)
        self._generator = fn(self, *args)
        # One bound object, so kill() can find this task's heap entries by identity.
        self._step = self._advance
        self._killed = False
        engine._schedule_now(self._step, None)

    @property
    def is_alive(self) -> bool:
        """True until the generator returns or raises, or the task is killed."""
        return self._ok is None

    def describe(self) -> str:
        return f"process {self.name!r}"

    def kill(self, exc: BaseException | None = None) -> None:
        """Throw `exc` (default `GreenletExit`) into the generator where it waits, as `Process.kill` does."""
        if self._ok is not None:
            return
        if exc is None:
            exc = GreenletExit(f"{self.name} killed")
        if self._generator.gi_running:
            raise EngineUsageError(f"task {self.name!r} cannot kill itself; return or raise instead")
        engine = self._engine
        if engine._current is None:
            self._kill_now(exc)
        else:
            engine._schedule_now(self._kill_now, exc)

    def _kill_now(self, exc: BaseException) -> None:
        if self._ok is not None:
            return
        self._engine._unschedule(self._step)
        self._killed = True
        self._advance(exc)

    def _advance(self, exc: BaseException | None) -> None:
        engine = self._engine
        try:
            wake = self._generator.send(None) if exc is None else self._generator.throw(exc)
        except StopIteration as stop:
            self._generator = self._step = None  # no cycle left: the task is freed by reference counting
            self.succeed(stop.value)
        except BaseException as failure:
            self._generator = self._step = None
            observed = bool(self._callbacks) or self._killed
            self.fail(failure)
            if not observed:
                raise ProcessFailed(self, engine._now, failure) from failure
        else:
            try:
                engine.wake_at(wake, self._step)
            except EngineUsageError as error:  # a time in the past: raised where the task yielded it,
                self._advance(error)  # as sleep_until raises in the process that calls it

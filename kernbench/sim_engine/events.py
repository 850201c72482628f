"""Events: one-shot occurrences in simulated time, and the conditions over them.

An event is pending until it is triggered once, by `succeed(value)` or
`fail(exc)`. Triggering never runs anything at once: each registered callback
is scheduled on the engine at the current time, in registration order, and
runs from the main greenlet when the engine reaches it. A process waiting on
the event is one such callback (its greenlet's `switch`), so one engine step
resumes at most one process.
"""

from __future__ import annotations

from kernbench.sim_engine.errors import EngineUsageError


class Event:
    """A one-shot occurrence; `Engine.wait` blocks a process until it is triggered.

    `name` describes the event in deadlock reports ("recv from rank 3").
    Reading `ok` or `value` before the event is triggered raises
    `EngineUsageError`; `value` of a failed event is its exception.
    """

    __slots__ = ("_engine", "name", "_callbacks", "_ok", "_value", "_tb")

    def __init__(self, engine, name: str | None = None):
        self._engine = engine
        self.name = name
        self._callbacks = []
        self._ok = None
        self._value = None
        self._tb = None

    @property
    def triggered(self) -> bool:
        """True once `succeed` or `fail` was called (its callbacks may still be scheduled)."""
        return self._ok is not None

    @property
    def ok(self) -> bool:
        """True if the event succeeded, False if it failed."""
        self._require_triggered("ok")
        return self._ok

    @property
    def value(self):
        """The success value, or the exception of a failed event."""
        self._require_triggered("value")
        return self._value

    def succeed(self, value=None) -> Event:
        """Trigger the event with `value`; raise `EngineUsageError` if it was already triggered."""
        self._require_pending()
        self._ok = True
        self._value = value
        self._engine._fire(self)
        return self

    def fail(self, exc: BaseException) -> Event:
        """Trigger the event as failed: every waiter raises `exc` (see `Engine.wait`)."""
        if not isinstance(exc, BaseException):
            raise EngineUsageError(f"{self.describe()}: fail() takes an exception, got {exc!r}")
        self._require_pending()
        self._ok = False
        self._value = exc
        self._tb = exc.__traceback__
        self._engine._fire(self)
        return self

    def add_callback(self, callback) -> None:
        """Call `callback(event)` from the main greenlet when the event triggers.

        On an already triggered event the callback is scheduled at the current
        time. An exception a callback raises propagates out of `Engine.run`.
        """
        if self._ok is None:
            self._callbacks.append(callback)
        else:
            self._engine._schedule_now(callback, self)

    def describe(self) -> str:
        """What the event is, for reports: its name, else its type."""
        return repr(self.name) if self.name is not None else f"an unnamed {type(self).__name__}"

    def __repr__(self) -> str:
        state = "pending" if self._ok is None else ("ok" if self._ok else "failed")
        return f"<{type(self).__name__} {self.describe()} {state}>"

    def _outcome(self):
        """The value of a triggered event, or raise its failure with the original traceback."""
        if self._ok:
            return self._value
        raise self._value.with_traceback(self._tb)

    def _require_triggered(self, what: str) -> None:
        if self._ok is None:
            raise EngineUsageError(f"{self.describe()} is still pending: its {what} is not known yet")

    def _require_pending(self) -> None:
        if self._ok is not None:
            raise EngineUsageError(f"{self.describe()} was already triggered; an event triggers once")


class Timeout(Event):
    """An event the engine triggers itself at time `due` (`Engine.timeout`)."""

    __slots__ = ("due",)

    def __init__(self, engine, due: int):
        super().__init__(engine)
        self.due = due

    def describe(self) -> str:
        return f"timeout at t={self.due} ps"

    def succeed(self, value=None):
        raise EngineUsageError(f"{self.describe()} is triggered by the engine, not by succeed()")

    def fail(self, exc):
        raise EngineUsageError(f"{self.describe()} is triggered by the engine, not by fail()")

    def _expire(self, value) -> None:
        self._ok = True
        self._value = value
        self._engine._fire(self)


class _Condition(Event):
    """An event over other events; it stops listening to them once it triggers."""

    __slots__ = ("_events", "_listener")
    _kind = ""

    def __init__(self, engine, events: list[Event]):
        super().__init__(engine)
        self._events = events
        self._listener = self._on_trigger

    def describe(self) -> str:
        pending = [e.describe() for e in self._events if e._ok is None]
        return f"{self._kind} [{', '.join(pending)}]"

    def _listen(self) -> int:
        """Register on every pending event; return how many there are."""
        pending = 0
        for event in self._events:
            if event._ok is None:
                event._callbacks.append(self._listener)
                pending += 1
        return pending

    def _detach(self) -> None:
        """Stop observing the events still pending, so their failures stay visible to others."""
        for event in self._events:
            callbacks = event._callbacks
            if callbacks and self._listener in callbacks:
                callbacks.remove(self._listener)

    def _fail_like(self, event: Event) -> None:
        self._ok = False
        self._value = event._value
        self._tb = event._tb
        self._engine._fire(self)

    def _on_trigger(self, event: Event) -> None:
        raise NotImplementedError


class AllOf(_Condition):
    """Succeeds with the list of values once all events succeed; fails with the first failure.

    Among events already failed at creation, the first in list order wins;
    after that, the first to fail in simulated-time order.
    """

    __slots__ = ("_pending",)
    _kind = "all of"

    def __init__(self, engine, events: list[Event]):
        super().__init__(engine, events)
        failed = next((e for e in events if e._ok is False), None)
        if failed is not None:
            self._fail_like(failed)
            return
        self._pending = self._listen()
        if self._pending == 0:
            Event.succeed(self, [e._value for e in events])

    def _on_trigger(self, event: Event) -> None:
        if self._ok is not None:
            return
        if not event._ok:
            self._detach()
            self._fail_like(event)
            return
        self._pending -= 1
        if self._pending == 0:
            Event.succeed(self, [e._value for e in self._events])


class AnyOf(_Condition):
    """Triggers like the first of its events to trigger, with value `(index, value)`.

    Among events already triggered at creation, the first in list order wins.
    """

    __slots__ = ()
    _kind = "any of"

    def __init__(self, engine, events: list[Event]):
        if not events:
            raise EngineUsageError("wait_any() needs at least one event")
        super().__init__(engine, events)
        fired = next((e for e in events if e._ok is not None), None)
        if fired is not None:
            self._trigger_like(fired)
        else:
            self._listen()

    def _on_trigger(self, event: Event) -> None:
        if self._ok is None:
            self._detach()
            self._trigger_like(event)

    def _trigger_like(self, event: Event) -> None:
        if event._ok:
            index = next(i for i, e in enumerate(self._events) if e is event)
            Event.succeed(self, (index, event._value))
        else:
            self._fail_like(event)

"""Streams and events: the order device work runs in, and how the host waits for it.

A stream is a FIFO of device operations. `enqueue` starts an engine process
that first waits for the stream's previous operation, then runs the new one;
the returned process is the operation's completion handle. The host never
runs device work itself: it enqueues and, at a host-read barrier or an
explicit synchronize, waits on handles through `RuntimeContext.block_on`.

An operation that fails fails every later one on its stream (each waits
for the previous one first), with the same exception. The exception is
marked with the operation it arose in (`failed_operation`), the first time
only, so whoever reports it blames the kernel or collective that was
actually running, never a later one that merely shared its stream (or a
stream that waited on it).

Streams and events belong to a run: `ctx` is its `RuntimeContext`, which
makes them (context.py imports this module, not the other way round).
"""

from __future__ import annotations

from typing import Callable

from kernbench.runtime_api.errors import RuntimeUsageError

PS_PER_MS = 10**9

# How a stream operation takes part in a replicated spawn (`Stream.enqueue(..., spmd=)`, adr/0022), besides a value
# describing its work: every SIP runs its own.
MARKER = "marker"  # a zero-time operation that books nothing (an event's record)
EVERYWHERE = "everywhere"  # (EVERYWHERE, the collective's end): a collective's arrival, which every rank makes


class Stream:
    """An in-order queue of operations on one device (`torch.ahbm.Stream`)."""

    def __init__(self, ctx, device_index: int, name: str | None = None):
        self._ctx = ctx
        self.device_index = device_index
        self._tail = None
        self.ordinal = sum(s.device_index == device_index for s in ctx.streams)  # its place among its device's
        number = ctx.register_stream(self)
        self.name = name or f"ahbm:{device_index}.stream{number}"

    def __repr__(self) -> str:
        return f"<Stream {self.name}>"

    def enqueue(self, label: str, operation: Callable[[], None], spmd=None):
        """Run `operation` on the device after everything already on this stream; return its handle.

        `spmd` says what the operation does for a replicated spawn (adr/0022): a value describing its work
        (`spmd.Fingerprint` reads it), `MARKER` or (`EVERYWHERE`, the collective's end event); None: it cannot be
        replicated. The spawn's
        episode, while one is open (`ctx.spmd_spawn`), decides what runs."""
        previous = self._tail
        engine = self._ctx.engine
        episode = self._ctx.spmd_spawn
        noted = None
        if episode is not None:
            operation, noted = episode.operation(self, label, operation, spmd)

        def in_order() -> None:
            if previous is not None:
                engine.wait(previous)  # its failure is this operation's too, already blamed on it
            try:
                operation()
            except BaseException as error:
                _blame(error, engine.current_process, engine.now)
                raise

        self._tail = engine.spawn(in_order, name=f"{self.name}: {label}")
        if noted is not None:
            noted(self._tail)
        return self._tail

    def wait_event(self, event: "Event") -> None:
        """Later operations on this stream wait until `event` has been reached on its stream."""
        handle = event.handle
        if handle is not None:
            self.enqueue(f"wait {event!r}", lambda: self._ctx.engine.wait(handle), spmd=("wait", handle))

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event or Event(self._ctx)
        event.record(self)
        return event

    def synchronize(self) -> None:
        if self._tail is not None:
            self._ctx.block_on([self._tail])

    def query(self) -> bool:
        return self._tail is None or self._tail.triggered


_BLAME = "__kernbench_failed_operation__"


def _blame(error: BaseException, process, now: int) -> None:
    """Mark `error` as arising in stream operation `process` at `now`, unless an earlier operation has."""
    if getattr(error, _BLAME, None) is None:
        try:
            setattr(error, _BLAME, (process, now))
        except AttributeError:  # an exception type that takes no attributes keeps the engine's report
            pass


def failed_operation(error: BaseException):
    """(process, simulated time) of the stream operation `error` arose in, or None."""
    return getattr(error, _BLAME, None)


class Event:
    """A marker in a stream (`torch.ahbm.Event`): when it is reached, in simulated time."""

    def __init__(self, ctx, enable_timing: bool = True, blocking: bool = False,
                 interprocess: bool = False):
        self._ctx = ctx
        self.enable_timing = enable_timing
        self.handle = None
        self.time_ps: int | None = None

    def __repr__(self) -> str:
        return f"<Event at {self.time_ps} ps>" if self.time_ps is not None else "<Event not reached>"

    def record(self, stream: Stream | None = None) -> None:
        stream = stream or self._ctx.current_stream()
        self.time_ps = None

        def reach() -> None:
            self.time_ps = self._ctx.engine.now

        self.handle = stream.enqueue("record event", reach, spmd=MARKER)

    def wait(self, stream: Stream | None = None) -> None:
        (stream or self._ctx.current_stream()).wait_event(self)

    def query(self) -> bool:
        return self.handle is None or self.handle.triggered

    def synchronize(self) -> None:
        if self.handle is not None:
            self._ctx.block_on([self.handle])

    def elapsed_time(self, end_event: "Event") -> float:
        """Simulated milliseconds from this event to `end_event` (both must have been reached)."""
        self.synchronize()
        end_event.synchronize()
        if self.time_ps is None or end_event.time_ps is None:
            raise RuntimeUsageError("elapsed_time needs both events to have been recorded on a stream")
        return (end_event.time_ps - self.time_ps) / PS_PER_MS

"""Where a rank's simulated time went: stream events between phases, and around every collective.

Benches mark the end of each phase with an event recorded on the rank's
current stream (`mark`). Work on a stream runs in order, so the time between
two events is exactly the time of the work enqueued between them, in integer
picoseconds (the events' own times, not `elapsed_time`'s milliseconds).
`instrumented()` is the run's `torch` with its collectives bracketed the
same way, so code that calls `torch.distributed` — Megatron's mappings, the
layers — splits its time into computation and communication without knowing
it is timed. A collective started with `async_op=True` runs on its group's
stream beside the current one (Megatron's overlap), so it is communication
only where the current stream waits for it: its `Work.wait()` is bracketed
instead, from the point the stream reaches the wait to the collective's end
(the exposed part; zero when the work in between covered it). A disabled
timeline (ranks other than the one reporting) records nothing and hands back
the namespace unchanged.
"""

from __future__ import annotations

COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")


class StreamTimeline:
    """Events closing named phases on the calling rank's stream; `totals()` adds up each phase's picoseconds."""

    def __init__(self, torch, *, enabled: bool, before_collective: str, collective: str):
        self._torch = torch
        self._enabled = enabled
        self._marks = []
        self._before, self._collective = before_collective, collective

    def mark(self, phase_that_ended: str) -> None:
        """Close the phase `phase_that_ended` now, in stream order."""
        if self._enabled:
            event = self._torch.ahbm.Event(enable_timing=True)
            event.record()
            self._marks.append((phase_that_ended, event))

    def instrumented(self):
        """The run's `torch` with every collective closing a `before_collective` phase and a `collective` phase."""
        if not self._enabled:
            return self._torch
        torch, distributed, timeline = self._torch, self._torch.distributed, self

        class TimedDistributed:
            def __getattr__(self, name):
                attribute = getattr(distributed, name)
                if name not in COLLECTIVES:
                    return attribute

                def timed(*args, **kwargs):
                    if kwargs.get("async_op"):
                        return _TimedWork(attribute(*args, **kwargs), timeline)
                    timeline.mark(timeline._before)
                    work = attribute(*args, **kwargs)
                    timeline.mark(timeline._collective)
                    return work

                return timed

        class Timed:
            def __getattr__(self, name):
                return TimedDistributed() if name == "distributed" else getattr(torch, name)

        return Timed()

    def totals(self, phases) -> dict:
        """Simulated picoseconds per phase (every phase in `phases` present, zero when it never ran)."""
        totals = dict.fromkeys(phases, 0)
        for (_, start), (phase, end) in zip(self._marks, self._marks[1:]):
            end.synchronize()
            totals[phase] += end.time_ps - start.time_ps
        return totals


class _TimedWork:
    """An async collective's `Work` whose `wait()` closes a `before_collective` phase and then a `collective` one."""

    def __init__(self, work, timeline: StreamTimeline):
        self._work, self._timeline = work, timeline

    def wait(self, timeout=None):
        self._timeline.mark(self._timeline._before)
        done = self._work.wait(timeout)
        self._timeline.mark(self._timeline._collective)
        return done

    def __getattr__(self, name):
        return getattr(self._work, name)

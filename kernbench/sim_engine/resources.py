"""Shared resources under first-come reservation: exclusive units and bandwidth channels.

Processes run in simulated-time order, so reservations arrive in time order
(ties by the engine's sequence number). Each resource therefore keeps one
number, `free_at`: a reservation made at `now` starts at `max(now, free_at)`
and pushes `free_at` forward. That is O(1) per op and gives exact closed
forms; the price is FIFO service (a long transfer delays a short one behind
it; callers that want interleaving split their transfers into chunks). A
channel also keeps the gaps a multi-hop transfer held back by another hop
left before its `free_at`, and a later transfer that fits one takes it
(never moving an earlier booking). See adr/0003-engine.md for both, and for
the comparison with fair sharing.

These functions reserve and compute; they do not block. The caller then
sleeps until the returned end (`Engine.sleep_until`), or uses the
`*_and_wait` conveniences that do both.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import itemgetter

from kernbench.sim_engine.errors import EngineUsageError
from kernbench.sim_engine.simtime import PS_PER_S, as_ps, ceil_div

_gap_end = itemgetter(1)  # a gap is [start, end)
_GAPS_SCANNED = 8  # up to this many gaps, scanning them all costs less than bisecting


class _Resource:
    """Bookkeeping shared by resources: name, device, reservation horizon, busy time."""

    __slots__ = ("engine", "name", "device", "free_at", "busy_ps", "ops")

    def __init__(self, engine, name: str, device: str):
        self.engine = engine
        self.name = name
        self.device = device
        self.free_at = 0
        self.busy_ps = 0
        self.ops = 0

    def utilization(self, horizon_ps: int | None = None) -> float:
        """Busy time over `[0, horizon_ps]`; the default horizon is max(now, free_at).

        Reservations never overlap, so busy time is exact; a horizon that cuts
        through reservations still counts them whole.
        """
        horizon = max(self.engine.now, self.free_at) if horizon_ps is None else as_ps(horizon_ps, "horizon")
        return self.busy_ps / horizon if horizon else 0.0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.device}:{self.name} free_at={self.free_at} busy={self.busy_ps}>"


class ExclusiveUnit(_Resource):
    """A unit that does one op at a time (a DMA engine, a matrix unit)."""

    __slots__ = ()

    def __init__(self, engine, name: str, device: str = "sip0"):
        super().__init__(engine, name, device)

    def reserve(self, duration_ps: int) -> tuple[int, int]:
        """Reserve the unit for `duration_ps` from `max(now, free_at)`; return `(start, end)`."""
        if duration_ps.__class__ is not int or duration_ps < 0:
            duration_ps = as_ps(duration_ps, f"{self.name}: op duration")
        now = self.engine._now
        start = self.free_at if self.free_at > now else now
        end = start + duration_ps
        self.free_at = end
        self.busy_ps += duration_ps
        self.ops += 1
        return start, end

    def reserve_and_wait(self, duration_ps: int) -> tuple[int, int]:
        """`reserve`, then sleep the calling process until the op ends; return `(start, end)`."""
        start, end = self.reserve(duration_ps)
        self.engine.sleep_until(end)
        return start, end


class Channel(_Resource):
    """A bandwidth resource (an HBM stack, a mesh link, an inter-SIP link).

    Moving B bytes occupies the channel for `ceil(B * 10**12 / bandwidth)` ps
    (its serialization time); `latency_ps` is the delay from a byte entering
    to it leaving, during which the channel already accepts the next bytes.
    `bytes_moved` counts the bytes of every reservation.
    """

    __slots__ = ("bandwidth_bytes_per_s", "latency_ps", "bytes_moved", "gaps", "_longest", "_longest_of")

    def __init__(self, engine, name: str, bandwidth_bytes_per_s: int, latency_ps: int, device: str = "sip0"):
        super().__init__(engine, name, device)
        bandwidth = as_ps(bandwidth_bytes_per_s, f"channel {name}: bandwidth_bytes_per_s")
        if bandwidth == 0:
            raise EngineUsageError(f"channel {name}: bandwidth_bytes_per_s must be > 0")
        self.bandwidth_bytes_per_s = bandwidth
        self.latency_ps = as_ps(latency_ps, f"channel {name}: latency_ps")
        self.bytes_moved = 0
        # Idle stretches before `free_at`, [start, end) in time order: left when a transfer whose start waits on
        # another hop of its route was booked here later than `free_at`. A later transfer that fits uses one.
        self.gaps: list[list[int]] = []
        # No gap of the list `_longest_of` is longer than `_longest`: a bound that stays true as gaps end or are
        # cut by bookings, so it is raised only when a gap is added and worked out again when it lets a scan
        # through that finds no fit (or when `gaps` is a list it was not worked out for).
        self._longest, self._longest_of = 0, None

    def earliest(self, at: int, occupancy: int) -> int:
        """The earliest time >= `at` from which this channel is free for `occupancy` ps.

        The gaps are disjoint and in time order, so their ends ascend: the
        gaps over by now are a prefix, and a gap ending before
        `at + occupancy` cannot hold the transfer: when even the last one
        does (most calls on a busy machine, the transfer coming after every
        gap) none can, nor can any when the transfer is longer than every
        gap (most of the rest: the gaps a busy stack keeps are slivers).
        Otherwise the first one that can is found from the first gap ending
        at or after it (a busy HBM stack of a large machine keeps dozens); a
        short list is scanned whole.
        """
        gaps = self.gaps
        if gaps:
            now = self.engine._now
            if gaps[0][1] <= now:
                _drop_over(gaps, now)
            if self.may_hold(at, occupancy):
                tail = gaps[bisect_left(gaps, at + occupancy, key=_gap_end):] if len(gaps) > _GAPS_SCANNED else gaps
                for gap_start, gap_end in tail:
                    begin = gap_start if gap_start > at else at
                    if begin + occupancy <= gap_end:
                        return begin
                self._bound(gaps)  # the bound let through a transfer no gap holds: make it exact again
        return self.free_at if self.free_at > at else at

    def may_hold(self, at: int, occupancy: int) -> bool:
        """Whether a gap might hold `occupancy` ps from `at` or later: one that ends late enough, and no
        transfer longer than the gaps' length bound. False is certain; True asks `earliest` to look."""
        gaps = self.gaps
        return bool(gaps) and gaps[-1][1] >= at + occupancy and occupancy <= (
            self._longest if self._longest_of is gaps else self._bound(gaps))

    def _bound(self, gaps: list) -> int:
        """`_longest` worked out exactly for `gaps`."""
        self._longest = max(gap_end - gap_start for gap_start, gap_end in gaps)
        self._longest_of = gaps
        return self._longest

    def hold(self, begin: int, occupancy: int) -> None:
        """Book [begin, begin + occupancy) inside the gap `earliest` found it in; what is left of the gap either
        side stays one."""
        end = begin + occupancy
        for index, (gap_start, gap_end) in enumerate(self.gaps):
            if gap_start <= begin and end <= gap_end:
                self.gaps[index:index + 1] = [gap for gap in ([gap_start, begin], [end, gap_end]) if gap[1] > gap[0]]
                break
        self.busy_ps += occupancy
        self.ops += 1

    def serialization_ps(self, nbytes: int) -> int:
        """ceil(nbytes / bandwidth) in ps, in exact integer arithmetic."""
        return ceil_div(nbytes * PS_PER_S, self.bandwidth_bytes_per_s)


def transfer(engine, route: Sequence[Channel], nbytes: int) -> tuple[int, int]:
    """Reserve a cut-through transfer of `nbytes` over `route` at `engine.now`; return `(start, end)`.

    Bytes reach the far end at the slowest hop's rate, but each hop is
    charged only its own serialization time, so a fast shared hop (an HBM
    stack) behind a slow private one (a PE's DMA engine) keeps the rest of
    its bandwidth for other transfers. With `occ_i = ceil(nbytes * 10**12 /
    bandwidth_i)`, `occ = max_i occ_i` and `off_i` the latencies of the hops
    before hop i:

    - hop i is held over `[start + off_i, start + off_i + occ_i]`;
    - `start` is the earliest time >= now at which every hop is free for
      `occ_i` when the data reaches it: `max(now, max_i(free_at_i - off_i))`
      where no hop has a gap, else the least start that fits each hop's
      gaps or follows its last booking;
    - `end = start + sum of latencies + occ` (the last byte's arrival).

    On one idle channel this is `now + latency + ceil(B * 10**12 / bandwidth)`;
    k equal transfers issued together end in a staircase, `occ` apart.
    """
    if not route:
        raise EngineUsageError("transfer() needs a route of at least one channel")
    if nbytes.__class__ is not int or nbytes < 0:
        nbytes = as_ps(nbytes, "transfer size in bytes")
    holds, latency, slowest = _holds(route, nbytes)
    return _book(holds, latency, slowest, nbytes, engine._now)


def _holds(route: Sequence[Channel], nbytes: int) -> tuple[tuple, int, int]:
    """Per hop (channel, latencies before it, its serialization time), the route's latency, and the slowest
    hop's time."""
    scaled = nbytes * PS_PER_S
    holds, offset, slowest = [], 0, 0
    for channel in route:
        occupancy = -(-scaled // channel.bandwidth_bytes_per_s)
        slowest = max(slowest, occupancy)
        holds.append((channel, offset, occupancy))
        offset += channel.latency_ps
    return tuple(holds), offset, slowest


def _book(holds, latency: int, slowest: int, nbytes: int, now: int) -> tuple[int, int]:
    """Reserve a transfer's hops at their earliest common start; `(start, end)`."""
    start = _earliest_start(holds, now)
    _hold_all(holds, start, nbytes, now)
    return start, start + latency + slowest


def _earliest_start(holds, now: int) -> int:
    """The earliest start >= now at which every hop (channel, offset, occupancy) is free for its occupancy
    when the data reaches it: each hop pushes the start to its own earliest fit until none does. Where no
    hop has a gap, that is one pass: max(now, free_at - offset) over the hops; so it is where the hop that
    sets that maximum has no gap that could hold the transfer (an earlier start finds that hop still busy),
    the usual case on a busy machine."""
    start, latest = now, None
    for hop in holds:
        channel, offset, _ = hop
        if channel.free_at - offset > start:
            start, latest = channel.free_at - offset, hop
    if latest is None or not latest[0].may_hold(now + latest[1], latest[2]):
        return start
    start, moved = now, True
    while moved:
        moved = False
        for channel, offset, occupancy in holds:
            at = start + offset
            if channel.gaps:
                begin = channel.earliest(at, occupancy)
            else:  # `earliest` without gaps, inline: most hops of a route have none
                begin = channel.free_at if channel.free_at > at else at
            if begin - offset > start:
                start, moved = begin - offset, True
    return start


def _hold_all(holds, start: int, nbytes: int, now: int) -> None:
    """Book every hop from `start` at its offset; a booking at or after the hop's `free_at` (the usual case)
    inline, a gap's use by `Channel.hold`."""
    for channel, offset, occupancy in holds:
        begin = start + offset
        free_at = channel.free_at
        if begin < free_at:
            channel.hold(begin, occupancy)
        else:
            if begin > free_at and begin > now:
                gaps, gap_start = channel.gaps, free_at if free_at > now else now
                if gaps and gaps[0][1] <= now:  # as `earliest` does: a hop `_earliest_start` may never ask
                    _drop_over(gaps, now)
                gaps.append([gap_start, begin])
                if begin - gap_start > channel._longest:
                    channel._longest = begin - gap_start
            channel.free_at = begin + occupancy
            channel.busy_ps += occupancy
            channel.ops += 1
        channel.bytes_moved += nbytes


def _drop_over(gaps: list, now: int) -> None:
    """Forget the gaps over by `now`, a prefix of `gaps` (their ends ascend): usually one, so counted rather
    than bisected."""
    over = 1
    while over < len(gaps) and gaps[over][1] <= now:
        over += 1
    del gaps[:over]


class Route:
    """A fixed sequence of channels that many transfers cross (a DMA engine's path to a memory, an IPCQ's
    network): `route.transfer(engine, nbytes)` reserves exactly what `transfer(engine, channels, nbytes)`
    would and returns the same `(start, end)`.

    What does not change between its transfers is worked out once: each hop's latency offset, and per
    transfer size (they come in a few: a collective's pieces, a kernel's tiles) each hop's serialization
    time, so a transfer costs no bigint division and no pass to sum latencies. Sizes are remembered up
    to a bound, then forgotten all at once.
    """

    __slots__ = ("channels", "latency_ps", "_sizes")

    _SIZES_KEPT = 64

    def __init__(self, channels: Sequence[Channel]):
        if not channels:
            raise EngineUsageError("a Route needs at least one channel")
        self.channels = tuple(channels)
        self.latency_ps = sum(channel.latency_ps for channel in self.channels)
        self._sizes: dict[int, tuple] = {}

    def ready(self, now: int, nbytes: int) -> int:
        """The earliest time >= now at which every hop is free for `nbytes` when the data reaches it (a
        transfer's start)."""
        return _earliest_start(self._costs_of(nbytes)[0], now)

    def transfer(self, engine, nbytes: int) -> tuple[int, int]:
        """Reserve a cut-through transfer of `nbytes` at `engine.now`, as `transfer` does; return `(start, end)`."""
        holds, slowest = self._costs_of(nbytes)
        return _book(holds, self.latency_ps, slowest, nbytes, engine._now)

    def _costs_of(self, nbytes: int) -> tuple:
        """Per hop (channel, latencies before it, its serialization time), and the slowest time: remembered
        for a size seen before."""
        if nbytes.__class__ is not int:
            nbytes = as_ps(nbytes, "transfer size in bytes")
        costs = self._sizes.get(nbytes)
        if costs is not None:
            return costs
        if nbytes < 0:
            nbytes = as_ps(nbytes, "transfer size in bytes")  # raises, naming the value
        holds, _, slowest = _holds(self.channels, nbytes)
        if len(self._sizes) >= self._SIZES_KEPT:
            self._sizes.clear()
        costs = self._sizes[nbytes] = (holds, slowest)
        return costs


def transfer_and_wait(engine, route: Sequence[Channel], nbytes: int) -> tuple[int, int]:
    """`transfer`, then sleep the calling process until the last byte arrives; return `(start, end)`."""
    start, end = transfer(engine, route, nbytes)
    engine.sleep_until(end)
    return start, end

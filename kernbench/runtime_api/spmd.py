"""SPMD replication: a spawn whose ranks do the same device work on rotations of one machine is simulated as the
first SIP's work alone (adr/0022).

Tensor-parallel ranks launch the same kernels on the same shapes at the same
times, each on its own SIP. While such a spawn runs (an *episode*), SIP 0's
stream operations run as always, and every other SIP's operation, as it
starts, is matched to SIP 0's at the same place of the same stream: the same
work (`Fingerprint`, with SIPs, addresses and names taken relative to the
SIP) starting at the same picosecond. A matched operation does not run: it
ends when SIP 0's does. Collectives still meet on every rank; SIP 0's
group's runs as its rank 0's symmetric loop (`ccl/symmetry.py`), whatever
else the machine is doing, as everything else is alike too, and every other
group's twin follows it. When replication stops, everything SIP 0's
work booked — channels, compute units, L2, op-log records, flow ids — is
passed on to every other SIP, renamed, so reports and later work read the
machine as after the full simulation.

The invariant: while replication is under way, each SIP's state is SIP 0's
rotated. It holds while every operation matches. At one that does not (a
rank late, work on one SIP only, a kernel of another shape, a collective
that does not rotate), replication stops exactly if nothing of SIP 0's is
under way, every SIP running its own operations from there, and starts
again once a collective has ended on a quiet machine; if SIP 0's work is
under way, the run stops with `SpmdDiverged`, and whoever runs it runs it
again without replicating that spawn (`kernbench run` does, its first
attempt's output not repeated): the full simulation, from the start.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import types
from dataclasses import dataclass

import numpy as np

from kernbench.dtypes import DType
from kernbench.kernels.kept_values import KeptValues, MemoBudget
from kernbench.machine import Machine
from kernbench.machine.data_executor import Region
from kernbench.machine.endpoints import SIP_TOKEN, Endpoint, named_sips
from kernbench.machine.ipcq import next_flow_id, skip_flow_ids
from kernbench.machine.machine import Transfer
from kernbench.machine.memory import Allocation, window_base
from kernbench.machine.pe import PeUnits
from kernbench.machine.rotation import Rotation, pass_on
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.launch.access_plans import AccessPlans
from kernbench.runtime_api.streams import EVERYWHERE, MARKER, Stream
from kernbench.runtime_api.tensor.core import Tensor
from kernbench.sim_engine import Engine
from kernbench.sim_engine.interrupts import raise_in_driver
from kernbench.sim_engine.op_log import Image, Relabel
from kernbench.topology import Topology

_UNITS = ("vector", "matrix")


class SpmdDiverged(BaseException):
    """An episode's SIPs stopped doing the same work: the run must be simulated again without replicating episode
    `episode` (a BaseException, so user code catching `Exception` does not swallow it)."""

    def __init__(self, episode: int, reason: str):
        super().__init__(f"SPMD episode {episode}: {reason}")
        self.episode = episode
        self.reason = reason


@dataclass
class _Led:
    """A collective of SIP 0's group run as rank 0's loop: what it does, its group's SIPs in rank order, when it
    started, its end (succeeding with what ran), and the groups that followed it (their SIPs -> their label)."""

    key: tuple
    label: str
    members: tuple[int, ...]
    layouts: tuple
    links: frozenset  # the channels its loop may book that name several SIPs (links between two)
    start: int
    done: object
    followers: dict = dataclasses.field(default_factory=dict)


@dataclass
class _Item:
    """An operation of work: what it does (its fingerprint; None: not to be matched), its handle, and when it
    started as SIP 0's."""

    key: tuple | None
    handle: object = None
    start: int | None = None


def begin(ctx, nprocs: int) -> "Episode | None":
    """The episode a spawn of `nprocs` ranks runs as (over SIPs 0..nprocs-1, where rank r's work is, as each
    takes the device of its rank), or None where it runs in full: replication off (for this spawn), values
    computed, one rank, more ranks than SIPs, strict hazards (the first hazard stops the run, on whichever SIP
    it is found), or a machine not idle or whose SIPs are not alike."""
    number = ctx.spawns_started
    ctx.spawns_started += 1
    machine = ctx.machine
    p = nprocs
    if (not ctx.spmd or number in ctx.spmd_skip or not ctx.timing_only or p > ctx.topology.n_sips or p < 2
            or not machine.engine.idle or ctx.spmd_spawn is not None or machine.hazards.strict):
        return None
    if not _alike(machine, p):
        return None
    ctx.spmd_spawn = Episode(ctx, number, p)
    return ctx.spmd_spawn


def _alike(machine, p: int) -> bool:
    """Whether every SIP's channels (as made so far) and L2 are SIP 0's renamed, idle and of the same numbers."""
    now = machine.engine.now
    for name, channel in machine.channels.items():
        if channel.free_at > now:
            return False
        sip = _only_sip(name)
        if sip is None:
            continue
        for other in range(p):
            twin = machine.channels.get(_renamed_sips({sip: other}, name))
            if twin is not None and (twin.bandwidth_bytes_per_s, twin.latency_ps) != (
                    channel.bandwidth_bytes_per_s, channel.latency_ps):
                return False
    tags = machine.l2_tags(0)
    if tags is None:
        return True
    held = tags.held(window_base(0))
    return all(machine.l2_tags(sip).held(window_base(sip)) == held for sip in range(1, p))


def _only_sip(name: str) -> int | None:
    named = named_sips(name)
    return named.pop() if len(named) == 1 else None


def _renamed_sips(names: dict[int, int], text: str) -> str:
    """`text` with every SIP `names` holds renamed to its image there; other SIPs unchanged."""
    return SIP_TOKEN.sub(lambda match: f"sip{names.get(int(match.group(1)), int(match.group(1)))}", text)


def _collective_key(request) -> tuple:
    """What decides a collective's work besides its group's SIPs: kind, reduction, size, dtype, group size and the
    configuration it runs under."""
    first = request.members[0]
    return (request.kind, request.reduce_op, request.root, request.premul_factor, repr(request.splits),
            len(request.members), request.communicator,
            first.input.count, first.input.dtype.str, repr(sorted(request.config.items())), request.timing_only)


class Episode:
    """One spawn over SIPs 0..p-1 that is replicated while its SIPs do the same work: SIP 0's operations, the
    others' matched against them as they start, and where the machine stood when replication (re)started.

    Replication runs in segments. One starts with the spawn and ends at an operation that does not match
    (`end_here`); another starts when a collective that every SIP ran in full has ended on a quiet machine
    whose SIPs are alike again (`_resume`). Between segments every SIP runs its own operations.
    """

    def __init__(self, ctx, number: int, p: int):
        self.ctx, self.number, self.p = ctx, number, p
        self.rotation = Rotation(tuple(range(p)), ())
        self.closing = False  # the spawn's ranks have ended
        self._counts: dict[tuple, int] = {}  # (sip, stream ordinal, kind) -> operations enqueued so far
        self._handles: dict[int, tuple] = {}  # id(handle) -> (handle, (sip, stream ordinal, kind, place))
        self._running = 0  # operations of work (not markers or meetings) under way on the spawn's SIPs
        self._meetings: list = []  # the ends of the collectives whose arrivals have started
        self._quiet_soon = False  # a collective has ended since replication stopped or last failed to start
        self.loops = 0  # collectives running as rank 0's loop (`ccl/symmetry.py`)
        self._segment()

    def _segment(self) -> None:
        """Start replicating from here: where the machine stands now, and no operation matched yet."""
        machine = self.ctx.machine
        machine.spmd_episode = self
        self.active = True
        self._leader: dict[tuple[int, int], _Item] = {}  # (stream ordinal, work index) -> SIP 0's operation
        self._leading = 0  # SIP 0's operations of this segment under way
        self._followed: dict[tuple[int, int], int] = {}  # (sip, stream ordinal) -> operations matched here
        self._awaited: dict[tuple[int, int], object] = {}  # (stream ordinal, work index) -> an event followers wait on
        self._led: list[_Led] = []  # collectives of SIP 0's groups run as its loops, in order
        self._first_block = machine.oplog.seal()
        self._first_flow = next_flow_id(machine)
        self._hazards = len(machine.hazards.hazards)
        self._channels_before = {id(c): (c.busy_ps, c.ops, c.bytes_moved) for c in machine.channels.values()}
        self._units_before = {id(unit): (unit.busy_ps, unit.ops, 0) for units in machine.pes() if units.sip == 0
                              for unit in (units.vector, units.matrix)}
        tags = machine.l2_tags(0)
        self._l2_before = None if tags is None else (tags.hits, tags.misses)

    # ---- stream operations ---------------------------------------------------------------------
    def operation(self, stream, label: str, operation, spmd):
        """What `stream` runs in place of `operation` while the spawn is open, and a callback taking its handle
        (None: none). Whether an operation of work is SIP 0's, matched or its own is decided when it starts."""
        sip, ordinal = stream.device_index, stream.ordinal
        if sip >= self.p:  # other work, which may read or write the spawn's SIPs
            if self.active:
                self.end_here(f"{label!r} on SIP {sip}, outside the spawn's SIPs 0..{self.p - 1}")
            return operation, None
        meeting = spmd[1] if spmd.__class__ is tuple and spmd and spmd[0] is EVERYWHERE else None
        kind = MARKER if spmd is MARKER else EVERYWHERE if meeting is not None else "work"
        index = self._counts.get((sip, ordinal, kind), 0)
        self._counts[sip, ordinal, kind] = index + 1
        if kind is MARKER:
            # Known by where it stands among the stream's operations: it ends when the one before it does. Some
            # SIPs may have more markers than others (a rank timing itself), so markers are not counted.
            place = (sip, ordinal, MARKER, self._counts.get((sip, ordinal, "work"), 0),
                     self._counts.get((sip, ordinal, EVERYWHERE), 0))
            return operation, functools.partial(self._note, place)
        place = (sip, ordinal, kind, index)
        if kind is EVERYWHERE:
            return functools.partial(self._meeting, meeting, operation), functools.partial(self._note, place)
        key = None if spmd is None or self.closing else Fingerprint(self, sip).of(spmd)
        item = _Item(key)

        def note(handle) -> None:
            item.handle = handle
            self._note(place, handle)
        return functools.partial(self._work, sip, ordinal, index, label, item, operation), note

    def _note(self, place: tuple, handle) -> None:
        self._handles[id(handle)] = (handle, place)  # held, so that no other object takes its id meanwhile

    def _meeting(self, done, operation) -> None:
        """A collective's arrival, which every SIP runs (`done`: the collective's end). Once it has ended,
        replication may start again (`_resume`). Those that have ended are dropped here: a long replicated run
        would otherwise hold every collective's end."""
        self._meetings = [earlier for earlier in self._meetings if not earlier.triggered]
        self._meetings.append(done)
        try:
            operation()
        finally:
            self._quiet_soon = True

    def _work(self, sip: int, ordinal: int, index: int, label: str, item: _Item, operation) -> None:
        engine = self.ctx.engine
        if not self.active and self._quiet_soon:
            self._resume()
        if self.active and sip == 0:
            if item.key is None:
                self.end_here(f"{label!r} on SIP 0 is an operation replication cannot match")
            else:
                item.start = engine.now
                self._leader[ordinal, index] = item
                self._started(ordinal, index, item)
                self._leading += 1
                try:
                    operation()
                finally:
                    self._leading -= 1
                return
        elif self.active:
            leader = self._leader_item(ordinal, index)
            if leader is not None and leader.key == item.key and item.key is not None:
                self._followed[sip, ordinal] = self._followed.get((sip, ordinal), 0) + 1
                engine.wait(leader.handle)
                return
            why = ("SIP 0 has no such operation at this time" if leader is None
                   else "SIP 0's operation there is other work")
            self.end_here(f"{label!r} on SIP {sip} (stream {ordinal}, operation {index}): {why}")
        self._running += 1
        try:
            operation()
        finally:
            self._running -= 1

    def _leader_item(self, ordinal: int, index: int) -> _Item | None:
        """SIP 0's operation `index` of stream `ordinal` if it starts now, in this segment; None if it does not.
        One that has not started yet may still start at this picosecond: wait for it until everything due now has
        happened (`Engine.at_end_of_now`)."""
        engine = self.ctx.engine
        item = self._leader.get((ordinal, index))
        if item is not None:
            return item if item.start == engine.now else None
        awaited = self._awaited.get((ordinal, index))
        if awaited is None:
            awaited = self._awaited[ordinal, index] = engine.event(f"SIP 0's operation {index} on stream {ordinal}")
            engine.at_end_of_now(self._not_started, awaited)
        return engine.wait(awaited)

    def _started(self, ordinal: int, index: int, item: _Item) -> None:
        awaited = self._awaited.pop((ordinal, index), None)
        if awaited is not None and not awaited.triggered:
            awaited.succeed(item)

    @staticmethod
    def _not_started(awaited) -> None:
        if not awaited.triggered:
            awaited.succeed(None)

    def handle_key(self, handle, sip: int):
        """A handle of this spawn's operations, relative to SIP `sip`; None for another."""
        known = self._handles.get(id(handle))
        if known is None or known[0] is not handle:
            return None
        owner, *rest = known[1]
        return ("operation", (owner - sip) % self.p, *rest)

    # ---- collectives over groups -------------------------------------------------------------------
    def lead_collective(self, request, layouts: tuple, booked: list[str]) -> _Led:
        """SIP 0's group's collective starts as rank 0's loop: the other groups' twins follow it. `layouts`: each
        member's regions as its window's (`ccl.symmetry.window_layout`); `booked`: the channels the loop may
        book."""
        engine = self.ctx.engine
        links = frozenset(name for name in booked if len(named_sips(name)) > 1)
        led = _Led(_collective_key(request), request.label, request.sips, layouts, links, engine.now,
                   engine.event(f"{request.label} (rank 0's loop)"))
        self._led.append(led)
        self.loops += 1
        awaited = self._awaited.pop(led.key, None)
        if awaited is not None and not awaited.triggered:
            awaited.succeed(led)
        return led

    def follow_collective(self, request, layouts: tuple):
        """What ran for a group without SIP 0 whose collective is the twin of SIP 0's group's, started at this
        picosecond with the same work and layouts, once that has ended; None where there is no such twin
        (replication then stops here)."""
        key, engine = _collective_key(request), self.ctx.engine
        led = next((led for led in self._led if led.key == key and led.start == engine.now
                    and request.sips not in led.followers), None)
        if led is None:
            awaited = self._awaited.get(key)
            if awaited is None:
                awaited = self._awaited[key] = engine.event(f"SIP 0's group's {request.label}")
                engine.at_end_of_now(self._not_started, awaited)
            led = engine.wait(awaited)
        if led is None or request.sips in led.followers or layouts != led.layouts:
            self.end_here(f"{request.label} over SIPs {list(request.sips)} has no twin in SIP 0's group")
            return None
        led.followers[request.sips] = request.label
        return engine.wait(led.done)

    # ---- ends and starts ---------------------------------------------------------------------------
    def end_here(self, reason: str) -> None:
        """Stop replicating, for `reason`: where nothing of SIP 0's is under way (no operation, no collective's
        loop), pass SIP 0's bookings on now and let every SIP run its own operations from here; else replication
        cannot end exactly, and the episode diverges. Nothing where it has stopped already."""
        if not self.active:
            return
        if self._leading or self.loops:
            self.diverge(f"{reason}, while SIP 0's work was under way")
        self._hand_over()

    def _resume(self) -> None:
        """Replicate again from the operation starting now, where the spawn's ranks run on, nothing is under way on
        its SIPs (no other operation of work, no collective) and they are alike."""
        if self.active or self.closing or self._running or self.loops:
            return
        self._meetings = [done for done in self._meetings if not done.triggered]
        if self._meetings:
            return
        self._quiet_soon = False
        if _alike(self.ctx.machine, self.p):
            self._segment()

    def diverge(self, reason: str):
        raise_in_driver(SpmdDiverged(self.number, reason), self.ctx.engine)
        raise SpmdDiverged(self.number, reason)  # reached only where no run is under way

    def close(self) -> None:
        """The spawn's ranks have ended: end replication once every operation on the spawn's SIPs has ended (now,
        or when the last one does)."""
        self.closing = True
        tails = [stream._tail for stream in self.ctx.streams
                 if stream.device_index < self.p and stream._tail is not None and not stream._tail.triggered]
        if not tails:
            self._closed()
            return
        self.ctx.engine.all_of(tails).add_callback(lambda _event: self._closed())

    def _closed(self) -> None:
        if self.ctx.spmd_spawn is self:
            self.ctx.spmd_spawn = None  # what is enqueued from here is nobody's to match
        self._handles.clear()
        if not self.active:
            return
        led: dict[int, int] = {}
        for ordinal, _ in self._leader:
            led[ordinal] = led.get(ordinal, 0) + 1
        for ordinal in set(led) | {o for _, o in self._followed}:
            for sip in range(1, self.p):
                if self._followed.get((sip, ordinal), 0) != led.get(ordinal, 0):
                    self.diverge(f"SIP {sip} followed {self._followed.get((sip, ordinal), 0)} of SIP 0's "
                                 f"{led.get(ordinal, 0)} operation(s) on stream {ordinal}")
        self._hand_over()

    def _relabel(self, led: _Led, sip: int) -> Relabel:
        """How SIP 0's records of collective `led` read as SIP `sip`'s: as those of its place in its group (SIP 0's
        group, or the group that followed it), its ranks and label that group's."""
        members, label = led.members, led.label
        if sip not in members:
            members, label = next(((group, name) for group, name in led.followers.items() if sip in group),
                                  (None, None))
            if members is None:
                self.diverge(f"{led.label}: SIP {sip} took part in no group's twin of it")
        n, place = len(members), members.index(sip)
        names = {led.members[k]: members[(k + place) % n] for k in range(n)}
        return Relabel(functools.partial(_renamed_sips, names), label, place, n)

    def _links(self) -> dict:
        """Each link (a channel naming several SIPs) a collective's loop may have booked -> that collective: its
        twins on the other SIPs are its group's, not the spawn's rotation's."""
        links: dict[str, _Led] = {}
        for led in self._led:
            for name in led.links:
                known = links.setdefault(name, led)
                if known.members != led.members or known.followers.keys() != led.followers.keys():
                    self.diverge(f"link {name} carried collectives of different groups ({known.label}, {led.label})")
        return links

    def _hand_over(self) -> None:
        """Give every other SIP what SIP 0 booked since the segment began, renamed; replication stops."""
        machine, p = self.ctx.machine, self.p
        if len(machine.hazards.hazards) != self._hazards:
            self.diverge("a data hazard was found on SIP 0: every SIP's must be found and reported")
        machine.spmd_episode = None
        self.active = False
        oplog = machine.oplog
        oplog.seal()
        flows = next_flow_id(machine) - self._first_flow
        relabels = [{led.label: self._relabel(led, sip) for led in self._led} for sip in range(p)]  # SIP 0's unused
        oplog.replicate(self._first_block, [
            Image(functools.partial(self.rotation.name, shift=sip), 0, 1, sip * flows, relabels[sip])
            for sip in range(1, p)])
        skip_flow_ids(machine, self._first_flow + p * flows)
        booked = [(name, c) for name, c in machine.channels.items()
                  if (c.busy_ps, c.ops, c.bytes_moved) != self._channels_before.get(id(c), (0, 0, 0))]
        names = {name for name, _ in booked}
        links = self._links()
        for name, channel in booked:
            for shift in range(1, p):
                led = links.get(name)
                image_name = (self.rotation.name(name, shift) if led is None
                              else relabels[shift][led.label].rename(name))
                image = machine.channels.get(image_name) or machine.twin_channel(name, image_name, shift)
                if image_name in names or (image.bandwidth_bytes_per_s, image.latency_ps) != (
                        channel.bandwidth_bytes_per_s, channel.latency_ps):
                    self.diverge(f"channel {name} has no twin {image_name} alike it on every SIP")
                pass_on(channel, image, self._channels_before.get(id(channel), (0, 0, 0)))
        for units in machine.pes():
            if units.sip != 0:
                continue
            for shift in range(1, p):
                twin = machine.pe(shift, units.cube, units.pe)
                for kind in _UNITS:
                    unit = getattr(units, kind)
                    pass_on(unit, getattr(twin, kind), self._units_before.get(id(unit), (0, 0, 0)))
        tags = machine.l2_tags(0)
        if tags is not None:
            hits, misses = tags.hits - self._l2_before[0], tags.misses - self._l2_before[1]
            for sip in range(1, p):
                machine.l2_tags(sip).take(tags, window_base(sip) - window_base(0), hits, misses)


class Fingerprint:
    """What a stream operation will do, as a value equal on two SIPs exactly when they do the same work there:
    its function's code and everything the code can reach that decides the work, with SIPs, addresses, streams,
    handles and names taken relative to SIP `sip`. Anything else is itself (its identity): two SIPs' operations
    that reach different objects of an unknown kind never match, so the episode ends rather than guesses."""

    def __init__(self, episode: Episode, sip: int):
        self._episode = episode
        self._sip = sip
        self._seen: dict[int, int] = {}

    def of(self, value):
        kind = value.__class__
        if value is None or kind in (bool, int, float, complex, bytes, range, slice):
            return value
        if kind is str:
            return self._episode.rotation.name(value, -self._sip)
        if kind in (tuple, list):
            return (kind.__name__, *map(self.of, value))
        if kind is dict:
            return ("dict", *((self.of(k), self.of(v)) for k, v in value.items()))
        if isinstance(value, (np.generic, np.dtype, DType, enum.Enum)):
            return (kind.__name__, str(value))
        if isinstance(value, np.ndarray):
            return ("array", value.dtype.str, value.shape, hashlib.blake2b(value.tobytes(), digest_size=16).digest())
        if id(value) in self._seen:
            return ("seen", self._seen[id(value)])
        self._seen[id(value)] = len(self._seen)
        rule = _rule_of(kind)
        if rule is not None:
            return rule(self, value)
        work = getattr(kind, "spmd_work", None)
        if work is not None:  # an object that says what decides its work (a Triton launch)
            return (kind.__qualname__, self.of(work(value)))
        if kind is functools.partial:
            return ("partial", self.of(value.func), self.of(value.args), self.of(value.keywords))
        if kind is types.FunctionType:
            cells = tuple(self.of(cell.cell_contents) if _filled(cell) else "empty" for cell in value.__closure__ or ())
            return ("function", value.__code__, self.of(value.__defaults__), cells)
        if kind is types.MethodType:
            return ("method", value.__func__, self.of(value.__self__))
        if dataclasses.is_dataclass(value) and kind.__dataclass_params__.frozen:
            return (kind, *(self.of(getattr(value, f.name)) for f in dataclasses.fields(value)))
        handle = self._episode.handle_key(value, self._sip)
        if handle is not None:
            return handle
        if getattr(value, "triggered", False) and getattr(value, "ok", False):
            return "done"  # an ended operation: waiting for it waits for nothing
        if isinstance(value, (type, types.ModuleType, types.BuiltinFunctionType)):
            return ("shared", id(value))
        return ("itself", kind.__qualname__, id(value))

    def sip_relative(self, sip: int) -> int:
        return (sip - self._sip) % self._episode.p

    def address(self, address: int, sip: int) -> tuple[int, int]:
        return self.sip_relative(sip), address - window_base(sip)


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


@functools.cache
def _rule_of(kind: type):
    """The rule for `kind` or the nearest of its bases that has one (a `Parameter` is described as a tensor)."""
    return next((_RULES[base] for base in kind.__mro__ if base in _RULES), None)


def _shared(f: Fingerprint, value):
    return ("shared", id(value))


def _fresh(f: Fingerprint, value):
    return ("fresh", value.__class__.__name__)  # made for the one launch, empty when it is enqueued


def _fields(f: Fingerprint, value):
    return (value.__class__.__name__, *(f.of(getattr(value, x.name)) for x in dataclasses.fields(value)))


def _tensor(f: Fingerprint, t):
    where = "host" if t.device.is_host else f.of(t.allocation)
    return ("tensor", tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype.name, where)


def _allocation(f: Fingerprint, a):
    return ("allocation", *f.address(a.base, a.sip), a.nbytes, a.itemsize, f.of(a.placement))


# Kind -> how a fingerprint describes one: the runtime's objects that a stream operation's work depends on, each
# by what decides that work. A kind defined above the runtime says it itself, with a `spmd_work()` method.
_RULES = {Tensor: _tensor, Allocation: _allocation,
          PeUnits: lambda f, pe: ("pe", f.sip_relative(pe.sip), pe.cube, pe.pe),
          Stream: lambda f, s: ("stream", f.sip_relative(s.device_index), s.ordinal),
          Endpoint: lambda f, e: ("endpoint", e.kind, f.sip_relative(e.sip) if e.sip >= 0 else e.sip, e.cube, e.pe),
          Transfer: _fields, Region: _fields,
          RuntimeContext: _shared, Machine: _shared, Engine: _shared, Topology: _shared,
          KeptValues: _fresh, MemoBudget: _fresh, AccessPlans: _fresh}

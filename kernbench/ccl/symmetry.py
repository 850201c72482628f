"""Symmetric collectives: simulate rank 0 of a timing-only collective whose ranks are rotations of each other,
and log every other rank as a renamed copy of it (adr/0010, "Symmetric collectives").

A ring all-reduce (all-gather, reduce-scatter) over one PE on each of p
SIPs, on an idle machine whose routes rotate with the SIPs (a switch, a full
mesh, a ring of exactly those SIPs), is the same computation p times over: rank r runs rank 0's program
with every SIP and rank index shifted by r, at the same picoseconds. So the
call simulates rank 0 alone, each of its queues closed into a loop: the
queue 0 → d also serves as rank 0's queue from rank p − d (its rotation),
its receiver-side channels — those naming SIP d alone — booked on SIP 0's,
where rank p − d's messages land in the full run. Afterwards the op log gets
p − 1 renamed copies of rank 0's records (`OpLog.replicate`), and every
channel and unit the loop run booked passes its bookings on to its p − 1
rotations, so reports read as after the full run.

`symmetric_plan` decides, before anything runs, whether a call qualifies:
timing-only; a schedule declared `@rotates` whose condition holds; one PE
per SIP, at the same cube and PE, with the same data layout and the same
order of readiness of its DMA engines; a wiring that rotates; an idle
engine and idle resources; every rank's channels rank 0's rotated; and
rotations of every channel the loop run books that are p distinct channels
alike (so no two ranks share a channel the loop run books for one). Any
other call runs every rank.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

from kernbench.ccl.blocks import Blocks
from kernbench.ccl.errors import CollectiveError
from kernbench.machine import Machine, tcm
from kernbench.machine.endpoints import hbm
from kernbench.machine.memory import window_base
from kernbench.machine.ipcq import IpcQueue, IpcqSettings, next_flow_id, queue_channels, skip_flow_ids
from kernbench.machine.placed_dma import home_cube
from kernbench.machine.rotation import Rotation, pass_on
from kernbench.sim_engine import Channel
from kernbench.sim_engine.op_log import Image

_UNITS = ("vector", "matrix")  # a PE's compute units, which are not channels


@dataclass
class Plan:
    """A call that runs as rank 0 alone: its rotation, rank 0's loop queues per channel request, every channel the
    loop run can book, and each channel's name in `machine.channels` (by identity)."""

    rotation: Rotation
    queues: list["LoopQueues"]
    booked: list[Channel]
    names: dict[int, str]


def symmetric_plan(machine: Machine, request, function, channels, edges, settings: IpcqSettings) -> Plan | None:
    """How `request` runs as rank 0 alone, or None where every rank must run.

    `function` is the schedule's, `channels` the request's channel requests (`channel_requests`), `edges` the
    wiring's directed (sender, receiver) rank pairs.
    """
    members = request.members
    p = len(members)
    condition = getattr(function, "ccl_rotates", None)
    if not request.timing_only or not request.config.get("symmetric", True) or condition is None or p < 2:
        return None
    replicated = machine.spmd_episode is not None
    if replicated:
        if request.sips[0] != 0:
            return None  # SIP 0 is rank 0 of the loop; another group follows SIP 0's
    elif not machine.engine.idle:
        return None  # something scheduled could act during the call
    if len(set(request.sips)) != p:
        return None
    offsets = tuple(sorted(d for s, d in edges if s == 0))
    if set(edges) != {(r, (r + d) % p) for r in range(p) for d in offsets}:
        return None
    rotation = Rotation(request.sips, offsets)
    if not all(_same_layout(machine, channel, condition, replicated) for channel in channels):
        return None
    return _rotating_plan(machine, rotation, channels, settings, replicated)


def _names(machine: Machine) -> dict[int, str]:
    """Each channel's name in `machine.channels` (a PE's channels are named there with their SIP), by identity."""
    return {id(channel): name for name, channel in machine.channels.items()}


def _same_layout(machine: Machine, request, condition, replicated: bool) -> bool:
    """Every member on rank 0's cube and PE, with rank 0's layout (`_layout`), and the schedule's condition met.
    In a replicated spawn every member's PE is rank 0's (the other SIPs stand as they were before the spawn)."""
    members = request.members
    first = members[0]
    if not condition(first.input.count, len(members)):
        return False
    shape = _layout(machine, first)
    pe = machine.pe(first.sip, first.cube, first.pe) if replicated else None
    return shape is not None and all((m.cube, m.pe) == (first.cube, first.pe) and _layout(machine, m, pe) == shape
                                     for m in members[1:])


def window_layout(member):
    """What a member's part of a collective depends on besides its SIP: its regions as offsets in its SIP's window,
    their placements, elements and dtypes, and its in-placeness; None where a region is on another SIP."""
    regions = []
    for region in (member.input, member.output):
        allocation = region.allocation
        if allocation.sip != member.sip:
            return None
        runs = _runs(region)
        elements = runs if runs is not None else hashlib.blake2b(np.asarray(region.indices).tobytes()).digest()
        regions.append((allocation.base - window_base(member.sip), allocation.placement, elements, region.dtype.str))
    return tuple(regions), member.output is member.input, member.cube, member.pe


def _layout(machine: Machine, member, pe=None):
    """What a member's program depends on besides its rank: its regions' positions, dtype and cubes, its
    in-placeness, and its PE's DMA engines in order of readiness (which one each DMA takes); None where a region
    is not contiguous runs on the member's SIP, from one cube or spread over an address interleave."""
    pe = pe or machine.pe(member.sip, member.cube, member.pe)
    homes = []
    for region in (member.input, member.output):
        cubes = _homes(machine, member, region)
        if cubes is None:
            return None
        homes.append((_runs(region), region.dtype.str, cubes))
    engines = pe.dma_engines
    readiness = tuple(sorted(range(len(engines)), key=lambda k: (engines[k].free_at, k)))
    return tuple(homes), member.output is member.input, readiness


def _runs(region) -> tuple[tuple[int, int], ...] | None:
    """A region's elements as contiguous runs (start, stop): one for a `range`, one per run of `Blocks` (a
    channel's share of an all-gather's output); None where some are an index array."""
    indices = region.indices
    runs = indices.runs if isinstance(indices, Blocks) else (indices,)
    if not all(run.__class__ is range and run.step == 1 for run in runs):
        return None
    return tuple((run.start, run.stop) for run in runs)


def _homes(machine: Machine, member, region) -> tuple[int, ...] | None:
    """The cubes of the member's SIP serving the region's runs wherever a rank's piece of them lies: every cube
    of an address-interleaved placement (`placed_dma.RunDmas.spread`), or the one cube holding every element;
    None where neither (a rank-dependent chunk would then cost what its position costs)."""
    runs = _runs(region)
    allocation = region.allocation
    if not runs or allocation.sip != member.sip:
        return None
    if allocation.placement.address_interleaved:
        return allocation.placement.cubes()
    cube = home_cube(machine, machine.pe(member.sip, member.cube, member.pe), allocation,
                     min(start for start, _ in runs), max(stop for _, stop in runs))
    return None if cube is None else (cube,)


def _own_channels(machine: Machine, member) -> list[Channel]:
    """The channels a member's own loads and stores book: its PE's DMA engines and TCM, and the paths between
    its TCM and the cubes serving its regions."""
    pe = machine.pe(member.sip, member.cube, member.pe)
    here = tcm(member.sip, member.cube, member.pe)
    channels = [*pe.dma_engines, pe.tcm]
    for region in (member.input, member.output):
        for cube in _homes(machine, member, region):
            memory = hbm(member.sip, cube)
            channels += [*machine.dma_path(memory, here).route, *machine.dma_path(here, memory).route]
    return channels


def _loop_queue(machine: Machine, request, offset: int, rotation: Rotation, settings: IpcqSettings,
                names: dict[int, str]) -> IpcQueue:
    """Rank 0's queue to rank `offset`, its channels naming that rank's SIP alone booked on rank 0's."""
    def booked_on(channel: Channel) -> Channel:
        name = names[id(channel)]
        return channel if rotation.owner(name) != offset else machine.channels[rotation.name(name, -offset)]

    first, peer = request.members[0], request.members[offset]
    return IpcQueue(machine, tcm(first.sip, first.cube, first.pe), tcm(peer.sip, peer.cube, peer.pe), settings,
                    label=request.label, programs=(0, offset), data=False, booked_on=booked_on)


def _rotating_plan(machine: Machine, rotation: Rotation, channels, settings: IpcqSettings,
                   replicated: bool) -> Plan | None:
    """The plan where every rank's channels in the full run are rank 0's rotated, every channel the loop run books
    has p distinct rotations alike it, all idle, and the members' compute units are idle; else None. In a
    replicated spawn they need not be idle: every rank's are rank 0's, whatever they are doing."""
    p, now = len(rotation.sips), machine.engine.now
    footprints = [[_footprint(machine, request, rank, rotation, settings) for rank in range(p)]
                  for request in channels]
    names = _names(machine)  # after the footprints, which made every rank's channels
    for request, ranks in zip(channels, footprints):
        zero = [names[id(channel)] for channel in ranks[0]]
        if any([rotation.name(name, rank) for name in zero] != [names[id(channel)] for channel in ranks[rank]]
               for rank in range(1, p)):
            return None
        if not replicated and any(not _units_idle(machine, member, now) for member in request.members):
            return None
    queues = [LoopQueues(machine, request, rotation, settings, names) for request in channels]
    booked = list({id(channel): channel for request, loop in zip(channels, queues)
                   for channel in (*_own_channels(machine, request.members[0]), *loop.booked_channels())}.values())
    images = set()
    for channel in booked:
        for shift in range(p):
            name = rotation.name(names[id(channel)], shift)
            image = machine.channels.get(name)
            if replicated and image is None:
                image = machine.twin_channel(names[id(channel)], name, shift)
            if image is None or (image.free_at > now and not replicated) or (
                    image.bandwidth_bytes_per_s, image.latency_ps) != (channel.bandwidth_bytes_per_s,
                                                                        channel.latency_ps):
                return None
            images.add(name)
    if len(images) != p * len(booked):
        return None  # two ranks would share a channel the loop run books for one
    return Plan(rotation, queues, booked, names)


def _units_idle(machine: Machine, member, now: int) -> bool:
    units = machine.pe(member.sip, member.cube, member.pe)
    return units.vector.free_at <= now and units.matrix.free_at <= now


def _footprint(machine: Machine, request, rank: int, rotation: Rotation, settings: IpcqSettings) -> list[Channel]:
    """The channels rank `rank` books in the full run, in a fixed order: its own (`_own_channels`) and its
    queues' to rank + d for each offset d."""
    members = request.members
    member = members[rank]
    channels = _own_channels(machine, member)
    for offset in rotation.offsets:
        peer = members[(rank + offset) % len(members)]
        network, buffer, copy = queue_channels(machine, tcm(member.sip, member.cube, member.pe),
                                               tcm(peer.sip, peer.cube, peer.pe), settings.buffer_kind)
        channels += [*network, buffer, *copy]
    return channels


class LoopQueues:
    """Rank 0's queues in the loop run: the queue to rank d serves as the queue from rank p − d too."""

    def __init__(self, machine: Machine, request, rotation: Rotation, settings: IpcqSettings,
                 names: dict[int, str]):
        self.settings = settings
        self._label = request.label
        self._p = len(request.members)
        self._queues = {d: _loop_queue(machine, request, d, rotation, settings, names) for d in rotation.offsets}

    def booked_channels(self) -> list[Channel]:
        return [channel for queue in self._queues.values() for channel in queue.booked_channels()]

    def between(self, sender: int, receiver: int) -> IpcQueue:
        offset = receiver if sender == 0 else (-sender) % self._p if receiver == 0 else None
        queue = self._queues.get(offset)
        if queue is None:
            raise CollectiveError(f"{self._label}: rank 0 of a symmetric run has no IPCQ {sender} -> {receiver}")
        return queue

    def check_drained(self) -> None:
        left = [f"loop queue 0 -> {d}: {q.undelivered} chunk(s)" for d, q in self._queues.items() if q.undelivered]
        if left:
            raise CollectiveError(f"{self._label}: messages were sent but never received ({'; '.join(left)})")


class Replication:
    """What the loop run changes, passed on to the other ranks: made before the run (it notes where the op log,
    the flow ids and every booked channel and unit stand), `finish`ed after it."""

    def __init__(self, machine: Machine, channels, plan: Plan):
        self._machine = machine
        self._rotation = plan.rotation
        self._names = plan.names
        self.queues = plan.queues
        self._first_block = machine.oplog.seal()
        self._first_flow = next_flow_id(machine)
        self._channels = plan.booked
        places = {(m.sip, m.cube, m.pe) for m in (request.members[0] for request in channels)}
        self._units = [(place, kind) for place in sorted(places) for kind in _UNITS]
        units = [getattr(machine.pe(*place), kind) for place, kind in self._units]
        self._before = {id(r): (r.busy_ps, r.ops, getattr(r, "bytes_moved", 0))
                        for r in (*self._channels, *units)}
        self._ops_before = _total_ops(machine)

    def finish(self) -> None:
        """Log the other ranks' records and pass each booked resource's bookings on to its rotations; in a
        replicated spawn, leave that to the spawn's end (which passes on everything rank 0 did)."""
        machine, rotation = self._machine, self._rotation
        episode = machine.spmd_episode
        if episode is not None:
            return
        p = len(rotation.sips)
        booked_ops = sum(r.ops - self._before[id(r)][1] for r in self._channels)
        if _total_ops(machine) - self._ops_before != booked_ops:
            raise CollectiveError("symmetric collective: the loop run booked a channel its check did not foresee; "
                                  "set `symmetric: false` in ccl.yaml and report this")
        oplog = machine.oplog
        oplog.seal()
        flows = next_flow_id(machine) - self._first_flow
        oplog.replicate(self._first_block, [Image(functools.partial(rotation.name, shift=shift), shift, p,
                                                  shift * flows) for shift in range(1, p)])
        skip_flow_ids(machine, self._first_flow + p * flows)
        for channel in self._channels:
            for shift in range(1, p):
                image = machine.channels[rotation.name(self._names[id(channel)], shift)]
                pass_on(channel, image, self._before[id(channel)])
        for (sip, cube, pe), kind in self._units:
            unit = getattr(machine.pe(sip, cube, pe), kind)
            for shift in range(1, p):
                twin = machine.pe(rotation.sips[(rotation.sips.index(sip) + shift) % p], cube, pe)
                pass_on(unit, getattr(twin, kind), self._before[id(unit)])


def _total_ops(machine: Machine) -> int:
    return sum(channel.ops for channel in machine.channels.values())

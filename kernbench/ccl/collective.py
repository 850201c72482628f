"""A collective request, and `run_collective`: one PE program per member, talking over IPCQ.

The caller (`torch.distributed`) describes where each member's data lives
(`Region`s) and which PE runs its part (`Member`), and passes the resolved
`ccl.yaml` entry as `config`. `run_collective` imports `config["module"]`,
takes the function named by the request's kind, installs the IPCQ queues of
the wiring and runs `function(program, request)` on every member's PE as its
own engine process, `program` being that member's `PeProgram`. A user's own
algorithm module plugs in the same way, with no change here.

Every kind runs under every algorithm, as in NCCL: where the configured
module has no function for the kind, or its function does not run at this
group size (`@runs_for`), the kind's shipped fallback (`FALLBACK`) runs
with its own wiring, and `run_collective` returns the name of the algorithm
whose schedule ran, so a report can say "ring (fallback for tree)".
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Callable

import numpy as np

from kernbench.ccl.algorithms.chunking import pieces, split
from kernbench.ccl.algorithms.support import runnable
from kernbench.ccl.algorithms.wiring import known_wirings, lookup_wiring
from kernbench.ccl.blocks import Blocks
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.pe_program import REDUCERS, PeProgram, wait_for_programs
from kernbench.ccl.queues import CollectiveQueues
from kernbench.ccl.symmetry import Replication, symmetric_plan, window_layout
from kernbench.ccl.tuner import (AUTO, bytes_per_rank, channel_count, plan, protocol_for, slots_within,
                                 steps_for)
from kernbench.ccl.watchdog import DEFAULT_TIMEOUT_S, watching
from kernbench.dtypes import resolve_dtype
from kernbench.machine import Allocation, Machine
from kernbench.machine.ipcq import IpcqSettings

__all__ = ["CollectiveError", "CollectiveRequest", "Member", "Ran", "Region", "Schedule", "channel_requests",
           "run_collective", "schedule_for"]

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send", "scatter", "gather",
         "all_to_all")
REDUCTIONS = ("all_reduce", "reduce_scatter", "reduce")
ROOTED = ("broadcast", "reduce", "scatter", "gather")
# NCCL's collective kernels where every rank both sends and receives, which pay a protocol's
# `exchange_latency_ns` (adr/0010, "Protocols"); in the others data flows one way (broadcast, reduce) or they
# are NCCL's grouped sends and receives (send, scatter, gather, all_to_all: `tuner.P2P_KINDS`).
EXCHANGES = ("all_reduce", "all_gather", "reduce_scatter")
REDUCE_OPS = tuple(REDUCERS)
BITWISE_OPS = ("band", "bor", "bxor")
# Ops with no meaning on complex numbers, which PyTorch refuses before viewing complex data as reals for NCCL.
_NOT_ON_COMPLEX = ("max", "min", "product", *BITWISE_OPS)
SHIPPED_ALGORITHMS = {
    "ring": "kernbench.ccl.algorithms.ring",
    "tree": "kernbench.ccl.algorithms.tree",
    "direct": "kernbench.ccl.algorithms.direct",
    "halving_doubling": "kernbench.ccl.algorithms.halving_doubling",
    "hierarchical": "kernbench.ccl.algorithms.hierarchical",
}
# The wiring each shipped algorithm's functions run with when it serves as a fallback: the configured `wiring`
# key belongs to the configured algorithm, and a fallback needs the queues of its own shape.
SHIPPED_WIRINGS = {"ring": "ring_1d", "tree": "binary_tree", "direct": "full", "halving_doubling": "hypercube"}
# What runs a kind the configured algorithm lacks (NCCL's rule: tree is all-reduce only, everything else rings).
FALLBACK = {
    "all_reduce": "ring", "all_gather": "ring", "reduce_scatter": "ring", "broadcast": "ring", "reduce": "ring",
    "send": "direct", "scatter": "direct", "gather": "direct", "all_to_all": "direct",
}


@dataclass(frozen=True, eq=False)
class Region:
    """Where one member's data lives: elements `indices` (flat, logical order) of `allocation` viewed as `dtype`.

    `indices` is an array, a `range` for a contiguous run (a whole tensor:
    no index array as large as the tensor is ever built), or `Blocks` of
    such runs (a channel's share of an all-gather's output). Compared by
    identity: an in-place collective passes the same object as input and output.
    """

    allocation: Allocation
    dtype: np.dtype
    indices: np.ndarray | range | Blocks

    @property
    def count(self) -> int:
        return len(self.indices)

    def elements(self, start: int, stop: int) -> np.ndarray:
        """The flat element indices of positions [start, stop) of the region, as an array."""
        piece = self.indices[start:stop]
        return np.arange(piece.start, piece.stop, dtype=np.int64) if isinstance(piece, range) else piece

    def selector(self, start: int, stop: int) -> np.ndarray | slice:
        """The flat elements of positions [start, stop): a slice for a contiguous region, else their indices.

        What a DMA of a piece takes: a slice costs no array, however large the piece.
        """
        piece = self.indices[start:stop]
        return slice(piece.start, max(piece.start, piece.stop)) if isinstance(piece, range) else piece


@dataclass(frozen=True)
class Member:
    """Group rank `rank`, whose program runs on PE `pe` of cube `cube` of SIP `sip`."""

    rank: int
    sip: int
    cube: int
    pe: int
    input: Region
    output: Region


@dataclass(frozen=True)
class CollectiveRequest:
    """One collective call: what, over which members, with which algorithm configuration."""

    kind: str
    reduce_op: str | None
    members: tuple[Member, ...]
    root: int | None
    config: dict
    label: str
    timing_only: bool
    # all_to_all only: splits[r][k] elements go from rank r to rank k (None: n equal pieces of every input).
    splits: tuple[tuple[int, ...], ...] | None = None
    # premul_sum only: the factor the sum is multiplied by.
    premul_factor: float | None = None
    # Host seconds the call may run before the watchdog stops it: the process group's timeout.
    timeout_s: float = DEFAULT_TIMEOUT_S
    # The ranks of the process group the call is on, where they are more than its members (a send's two of a
    # larger group): NCCL spreads a send over channels by its communicator's size (`tuner.p2p_channels`).
    communicator_size: int | None = None

    @property
    def sips(self) -> tuple[int, ...]:
        """The SIP of each member, in group-rank order: the layout `@runs_on` rules and `by_layout` wirings read."""
        return tuple(m.sip for m in self.members)

    @property
    def communicator(self) -> int:
        """The size of the communicator the call runs on: its process group's ranks, else its members."""
        return self.communicator_size or len(self.members)


@dataclass(frozen=True)
class Schedule:
    """What runs a request: the algorithm whose function it is, the function, its module and its wiring."""

    algorithm: str
    function: Callable
    module: ModuleType
    wiring: str | None


@dataclass(frozen=True)
class Ran:
    """What ran a request: the algorithm whose schedule ran (the configured one, the tuner's pick or the kind's
    fallback), on how many channels."""

    algorithm: str
    channels: int = 1
    symmetric: bool = False  # rank 0 was simulated and the others logged as its rotations (`symmetry`)
    protocol: str | None = None  # NCCL's protocol it ran under, where the topology gives protocols


def run_collective(machine: Machine, request: CollectiveRequest) -> Ran:
    """Run `request` from inside an engine process; when every member's program has finished, say what ran.

    With `algorithm: auto` the tuner (`kernbench.ccl.tuner`) first picks the
    algorithm, channels and slots. The call then pays the topology's
    collective launch latency, and each of its channels (element ranges of
    every member's data, each on a PE of its own with its own queues: NCCL's
    channels) runs the schedule. A program's failure stops the others and is
    re-raised here. A group of one is a fast path: no queues, only the copy
    an out-of-place kind needs (scaled, for premul_sum). A call that runs past
    the request's timeout, or a member looping without an op, is stopped by
    the watchdog (`watchdog.py`).
    """
    _check_request(machine, request)
    if request.config.get("algorithm") == AUTO:
        request = _tuned(machine, request)
    else:
        request = _with_protocol(machine, request)
    schedule = schedule_for(request)
    settings = IpcqSettings.checked(
        machine.topology, buffer_kind=request.config.get("buffer_kind"),
        backpressure=request.config.get("backpressure"), n_slots=request.config.get("n_slots"),
        slot_size=request.config.get("slot_size"), poll_interval_ps=request.config.get("poll_interval_ps"),
        source=f"{request.label}: ccl config", protocol=_protocol(machine, request))
    with watching(machine.engine, request.label, schedule.algorithm, schedule.module.__name__, request.timeout_s):
        return _run_schedule(machine, request, schedule, settings)


def _run_schedule(machine: Machine, request: CollectiveRequest, schedule: Schedule, settings: IpcqSettings) -> Ran:
    """`run_collective`'s work once the schedule is known: the launch, then every channel's programs. In a
    replicated spawn (runtime_api/spmd.py), a group without SIP 0 follows its twin, SIP 0's group's collective,
    where there is one, and that one runs as rank 0's loop."""
    episode = machine.spmd_episode
    if episode is not None and 0 not in request.sips:
        ran = episode.follow_collective(request, _window_layouts(request))
        if ran is not None:
            return ran
    launched = _launch(machine, request)
    channels = channel_requests(machine, request)
    size = len(request.members)
    edges = frozenset() if size == 1 else _wiring_edges(request, schedule.wiring, schedule.module, size)
    plan = symmetric_plan(machine, request, schedule.function, channels, edges, settings)
    if plan is None and machine.spmd_episode is not None:
        machine.spmd_episode.end_here(f"{request.label} over SIPs {list(request.sips)} is not symmetric: every "
                                      "rank's part must be simulated")
    episode = machine.spmd_episode
    led = None
    if plan is not None:
        replication = Replication(machine, channels, plan)
        started = [([_start(machine, channel, schedule, channel.members[0], queues)], queues)
                   for channel, queues in zip(channels, replication.queues)]
        if episode is not None:
            led = episode.lead_collective(request, _window_layouts(request),  # rank 0's loop books for every rank
                                          [plan.names[id(channel)] for channel in plan.booked])
    else:
        started = []
        for channel in channels:
            queues = CollectiveQueues(machine, channel, settings, schedule.wiring, edges)
            started.append(([_start(machine, channel, schedule, member, queues) for member in channel.members],
                             queues))
    if launched is not None:
        _log_launch(machine, request, launched, every_sip=led is None)
    try:
        wait_for_programs(machine.engine, [program for programs, _ in started for program in programs])
    finally:
        if led is not None:
            episode.loops -= 1
    for _, queues in started:
        queues.check_drained()
    if plan is not None:
        replication.finish()
    ran = Ran(schedule.algorithm, len(channels), symmetric=plan is not None, protocol=request.config.get("protocol"))
    if led is not None:
        led.done.succeed(ran)
    return ran


def _window_layouts(request: CollectiveRequest) -> tuple:
    return tuple(window_layout(member) for member in request.members)


def _tuned(machine: Machine, request: CollectiveRequest) -> CollectiveRequest:
    """`request` with the tuner's choice in its config: where no candidate runs the kind, its shipped fallback
    under the protocol `_with_protocol` gives, on as many channels as that protocol opens for its bytes where
    the call can split (a send: NCCL spreads one over channels as it does a collective)."""
    config = request.config
    choice = plan(machine, request, SHIPPED_ALGORITHMS, splits_into_channels(request))
    if choice is None:
        name = FALLBACK[request.kind]
        entry = {"module": SHIPPED_ALGORITHMS[name], "wiring": SHIPPED_WIRINGS[name]}
        n_slots, slot_size = slots_within(machine.topology, config)
        fixed = {"channels": 1, "slot_size": slot_size, "n_slots": n_slots}
    else:
        name, entry = choice.algorithm, config["candidates"][choice.algorithm]
        fixed = {"channels": choice.channels, "slot_size": choice.slot_size, "n_slots": choice.n_slots,
                 "protocol": choice.protocol}
    chosen = {key: value for key, value in config.items() if key != "candidates"}
    chosen.update(entry.get("params", {}), **{k: v for k, v in entry.items() if k != "params"}, **fixed,
                  algorithm=name)
    tuned = replace(request, config=chosen)
    if choice is not None:
        return tuned
    tuned = _with_protocol(machine, tuned)
    if not splits_into_channels(tuned):
        return tuned
    channels = channel_count(machine, tuned, bytes_per_rank(tuned), tuned.config, _protocol(machine, tuned))
    return replace(tuned, config={**tuned.config, "channels": channels})


def _with_protocol(machine: Machine, request: CollectiveRequest) -> CollectiveRequest:
    """`request` with the protocol it runs under in its config (`tuner.protocol_for`; None where the topology
    gives no protocols)."""
    chosen = protocol_for(machine, request, SHIPPED_ALGORITHMS)
    return replace(request, config={**request.config, "protocol": chosen})


def _protocol(machine: Machine, request: CollectiveRequest):
    """The `ProtocolSpec` the call runs under, or None (the topology's single-protocol terms)."""
    name = request.config.get("protocol")
    return None if name is None else machine.topology.ipcq.protocol(name)


def _launch(machine: Machine, request: CollectiveRequest) -> tuple[int, int] | None:
    """The topology's fixed cost of starting a collective (its programs' launch, its queues' first handshake),
    paid once per call before any member moves data, and logged on every member's SIP. Under a protocol, its
    launch latency, its exchange latency where every rank sends and receives (`EXCHANGES`), and its step
    latency once per step of the algorithm (adr/0010, "Protocols"). In a replicated spawn the records wait for
    `_log_launch`, which knows whether the others' are SIP 0's renamed; (its start, its length) then."""
    protocol = _protocol(machine, request)
    latency = (machine.topology.ipcq.launch_latency_ps if protocol is None
               else protocol.launch_latency_ps + (request.kind in EXCHANGES) * protocol.exchange_latency_ps
               + steps_for(request, SHIPPED_ALGORITHMS) * protocol.step_latency_ps)
    if not latency or len(request.members) == 1:
        return None
    engine = machine.engine
    start = engine.now
    replicated = machine.spmd_episode is not None
    if not replicated:
        _log_launch(machine, request, (start, latency), every_sip=True)
    engine.sleep(latency)
    return (start, latency) if replicated else None


def _log_launch(machine: Machine, request: CollectiveRequest, launched: tuple[int, int], every_sip: bool) -> None:
    """A launch's records: on every member's SIP, or on SIP 0 alone where the others' are SIP 0's renamed."""
    start, latency = launched
    sips = sorted({m.sip for m in request.members})
    for sip in sips if every_sip else sips[:1]:
        machine.oplog.append_pairs("ccl_launch", f"sip{sip}", "ccl", request.label, None, 0, 0, start,
                                   start + latency, ())


def channel_requests(machine: Machine, request: CollectiveRequest) -> list[CollectiveRequest]:
    """The request cut into its `channels` (config key, default 1): channel k takes elements split(0, n, c)[k]
    of every member's n-element piece (`CHANNEL_CUTS`) and runs on a PE of its own near its data
    (`_channel_pes`), so each channel has engines and queues of its own and shares memories and links with the
    rest.

    Only kinds that split elementwise over members on SIPs of their own are cut (`splits_into_channels`).
    """
    wanted = request.config.get("channels", 1)
    if wanted <= 1 or not splits_into_channels(request):
        return [request]
    cut = CHANNEL_CUTS[request.kind]
    count = cut.count(request.members[0])
    if count < 2:
        return [request]
    topology, p = machine.topology, len(request.members)
    ranges = split(0, count, min(wanted, topology.pes_per_sip, count))
    per_member = [_channel_pes(topology, m, ranges) for m in request.members]
    channels = []
    for k, (a, b) in enumerate(ranges):
        members = [Member(m.rank, m.sip, *places[k], *cut.parts(m, a, b, count, p))
                   for m, places in zip(request.members, per_member)]
        channels.append(replace(request, members=tuple(members)))
    return channels


@dataclass(frozen=True)
class ChannelCut:
    """How a kind's call splits over channels: `count(member)`, the n elements of a member's piece that the
    channels share out, and `parts(member, a, b, n, p)`, the member's (input, output) in channel [a, b)."""

    count: Callable[[Member], int]
    parts: Callable[[Member, int, int, int, int], tuple[Region, Region]]


def _elementwise_parts(m: Member, a: int, b: int, count: int, p: int) -> tuple[Region, Region]:
    """Positions [a, b) of input and output; a region the kind does not write (a non-root's reduce output of
    another size) is passed whole."""
    source = _part(m.input, a, b)
    target = source if m.output is m.input else _part(m.output, a, b) if m.output.count == count else m.output
    return source, target


def _strided(region: Region, a: int, b: int, count: int, p: int) -> Region:
    """Positions [a, b) of each of the p pieces of `count` elements that `region` holds in rank order."""
    return Region(region.allocation, region.dtype, Blocks(region.indices[r * count + a:r * count + b]
                                                          for r in range(p)))


CHANNEL_CUTS = {
    **dict.fromkeys(("all_reduce", "broadcast", "reduce", "send"),
                    ChannelCut(lambda m: m.input.count, _elementwise_parts)),
    # Rank r's piece lands at piece r of every output: a channel gathers the same slice of each.
    "all_gather": ChannelCut(lambda m: m.input.count,
                             lambda m, a, b, n, p: (_part(m.input, a, b), _strided(m.output, a, b, n, p))),
    # Piece r of every input is reduced into rank r's output: a channel reduces the same slice of each.
    "reduce_scatter": ChannelCut(lambda m: m.output.count,
                                 lambda m, a, b, n, p: (_strided(m.input, a, b, n, p), _part(m.output, a, b))),
}


def splits_into_channels(request: CollectiveRequest) -> bool:
    """Whether the call can run on several channels: a kind `CHANNEL_CUTS` cuts, each member on a SIP of its
    own."""
    return request.kind in CHANNEL_CUTS and len({m.sip for m in request.members}) == len(request.members)


def _channel_pes(topology, member: Member, ranges) -> list[tuple[int, int]]:
    """(cube, pe) of each channel of `member`: channel 0 on the member's own PE, channel k on the PE holding
    its first input element, or the next PE of the SIP (cube by cube) not already running one of its channels."""
    per_cube, total = topology.pes_per_cube, topology.pes_per_sip
    placement = member.input.allocation.placement
    owners = placement.owners(np.concatenate([member.input.elements(a, a + 1) for a, _ in ranges[1:]]))
    taken = {member.cube * per_cube + member.pe}
    places = [(member.cube, member.pe)]
    for owner in owners:
        shard = placement.shards[int(owner)]
        order = shard.cube * per_cube + shard.pe
        while order in taken:
            order = (order + 1) % total
        taken.add(order)
        places.append(divmod(order, per_cube))
    return places


def _part(region: Region, a: int, b: int) -> Region:
    """Positions [a, b) of `region`."""
    return Region(region.allocation, region.dtype, region.indices[a:b])


def _start(machine: Machine, request: CollectiveRequest, schedule: "Schedule", member: Member, queues):
    """Start `member`'s program of `request` (one channel) over `queues`; return its process or task."""
    body = _single_member if len(request.members) == 1 else schedule.function
    program = PeProgram(machine, request, member, queues)
    steps = getattr(body, "ccl_steps", None) or (body if inspect.isgeneratorfunction(body) else None)
    if steps is not None:
        return machine.engine.task(_member_steps, steps, program, request, name=program.name)
    return machine.engine.spawn(_run_member, body, program, request, name=program.name)


def _run_member(body, program: PeProgram, request: CollectiveRequest) -> None:
    try:
        body(program, request)
    except BaseException:
        program.stop_started()
        raise
    program.join_started()


def _member_steps(task, body, program: PeProgram, request: CollectiveRequest):
    """`_run_member` for an algorithm written as a generator: the member runs as an engine task."""
    try:
        yield from body(program, request)
    except BaseException:
        program.stop_started()
        raise
    yield from program.join_steps()


def _single_member(program: PeProgram, request: CollectiveRequest) -> None:
    """A group of one: the result is the input (times the factor, for premul_sum); copy it only when the output
    is another region or the values change."""
    member = program.member
    scaled = request.kind in REDUCTIONS and request.reduce_op == "premul_sum"
    if not scaled and (request.kind == "send" or member.output is member.input):
        return
    step = program.slot_elements(member.input.dtype)
    for a, b in pieces(0, member.input.count, step):
        values = program.load(member.input, a, b)
        program.store(member.output, a, b, program.finalize(request.reduce_op, values) if scaled else values)


def schedule_for(request: CollectiveRequest) -> Schedule:
    """The schedule `run_collective` runs for `request`: the configured module's function for the kind when it
    has one that runs for the group (its size, its members' SIPs), else the kind's shipped fallback with that
    algorithm's own wiring.

    Neither: a `CollectiveError` naming the algorithm, the kind and the shipped algorithms that have it.
    """
    config, kind, size, sips = request.config, request.kind, len(request.members), request.sips
    name = config.get("algorithm", "?")
    module = _configured_module(request, name)
    function = runnable(module, kind, sips)
    if function is not None:
        return Schedule(name, function, module, getattr(function, "ccl_wiring", None) or config.get("wiring"))
    fallback = FALLBACK[kind]
    module = importlib.import_module(SHIPPED_ALGORITHMS[fallback])
    function = runnable(module, kind, sips)
    if function is not None:
        return Schedule(fallback, function, module, getattr(function, "ccl_wiring", None) or SHIPPED_WIRINGS[fallback])
    having = [shipped for shipped, path in sorted(SHIPPED_ALGORITHMS.items())
              if runnable(importlib.import_module(path), kind, sips) is not None]
    raise CollectiveError(
        f"{request.label}: neither algorithm {name!r} ({config.get('module')}) nor its fallback {fallback!r} runs "
        f"{kind} for a group of {size}; shipped algorithms that do: {', '.join(having) or 'none'}")


def _configured_module(request: CollectiveRequest, name: str) -> ModuleType:
    module_name = request.config.get("module")
    if not module_name:
        raise CollectiveError(f"{request.label}: ccl config of algorithm {name!r} names no module")
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise CollectiveError(f"{request.label}: algorithm {name!r}: cannot import module {module_name!r} "
                              f"({error})") from error


def _wiring_edges(request: CollectiveRequest, name: str | None, module, size: int) -> frozenset:
    build = lookup_wiring(name, module) if name else None
    if build is None:
        raise CollectiveError(f"{request.label}: unknown wiring {name!r}; known: {', '.join(known_wirings(module))}")
    return frozenset(build(request.sips) if getattr(build, "ccl_by_layout", False) else build(size))


def _check_request(machine: Machine, request: CollectiveRequest) -> None:
    label, kind, members = request.label, request.kind, request.members
    if kind not in KINDS:
        raise CollectiveError(f"{label}: unknown collective kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not members or [m.rank for m in members] != list(range(len(members))):
        raise CollectiveError(f"{label}: members must be given in group-rank order 0..n-1")
    if kind in ROOTED and not (isinstance(request.root, int) and 0 <= request.root < len(members)):
        raise CollectiveError(f"{label}: root {request.root!r} is not a group rank (0..{len(members) - 1})")
    if kind == "send" and len(members) != 2:
        raise CollectiveError(f"{label}: send joins exactly two members (sender, receiver), got {len(members)}")
    dtypes = {np.dtype(region.dtype) for m in members for region in (m.input, m.output)}
    if len(dtypes) != 1:
        raise CollectiveError(f"{label}: members' regions mix dtypes {sorted(map(str, dtypes))}")
    if kind in REDUCTIONS:
        _check_reduce_op(request, dtypes.pop())
    if request.splits is not None and kind != "all_to_all":
        raise CollectiveError(f"{label}: splits are for all_to_all, not {kind}")
    if request.premul_factor is not None and not (kind in REDUCTIONS and request.reduce_op == "premul_sum"):
        raise CollectiveError(f"{label}: premul_factor is for the premul_sum reduce op, not {kind} "
                              f"({request.reduce_op})")
    for member in members:
        for region in (member.input, member.output):
            if region.allocation.sip != member.sip:
                raise CollectiveError(f"{label}: rank {member.rank} runs on sip{member.sip} but its tensor "
                                      f"{region.allocation.name!r} lives on sip{region.allocation.sip}")
    _COUNT_RULES[kind](request)


def _check_reduce_op(request: CollectiveRequest, dtype: np.dtype) -> None:
    """The op exists, and fits the data: complex data sums (max, min, product and bitwise ops have no meaning on
    it); bitwise ops take integers or bools; premul_sum has a factor the dtype holds (NCCL converts it to the
    data's type)."""
    label, op = request.label, request.reduce_op
    if op not in REDUCE_OPS:
        raise CollectiveError(f"{label}: reduce op {op!r} is not one of {', '.join(REDUCE_OPS)}")
    name = resolve_dtype(dtype).name
    if dtype.kind == "c" and op in _NOT_ON_COMPLEX:  # PyTorch's check: complex data reduces as pairs of reals
        raise CollectiveError(f"{label}: {request.kind} does not support ReduceOp.{op.upper()} on complex tensors")
    if op in BITWISE_OPS and dtype.kind not in "iub":
        raise CollectiveError(f"{label}: reduce op {op!r} is bitwise and takes integer or bool data, not {name}")
    if op != "premul_sum":
        return
    factor = request.premul_factor
    if not isinstance(factor, (int, float, np.number)) or isinstance(factor, bool):
        raise CollectiveError(f"{label}: premul_sum needs a numeric premul_factor, got {factor!r}")
    if dtype.kind in "iub" and not float(factor).is_integer():
        raise CollectiveError(f"{label}: premul_sum factor {factor!r} is not a whole number, which {name} data "
                              f"cannot be multiplied by")


# ---- region conventions, one rule per kind (c: elements per rank's piece, n: group size) ----------------------

def _common_input(request: CollectiveRequest) -> int:
    """The input count every member shares."""
    inputs = {m.input.count for m in request.members}
    if len(inputs) != 1:
        raise CollectiveError(f"{request.label}: members' inputs differ in size ({sorted(inputs)} elements)")
    return inputs.pop()


def _split_over_group(request: CollectiveRequest, count: int, whose: str) -> int:
    n = len(request.members)
    if count % n:
        raise CollectiveError(f"{request.label}: {request.kind} {whose} of {count} elements does not split over {n}")
    return count // n


def _expect_outputs(request: CollectiveRequest, members, want: int, count: int) -> None:
    for member in members:
        if member.output.count != want:
            raise CollectiveError(f"{request.label}: {request.kind} of {count} input elements needs an output of "
                                  f"{want} on rank {member.rank}, got {member.output.count}")


def _counts_elementwise(request: CollectiveRequest) -> None:
    """all_reduce, broadcast: every output as large as the inputs."""
    count = _common_input(request)
    _expect_outputs(request, request.members, count, count)


def _counts_reduce(request: CollectiveRequest) -> None:
    """reduce: the root's output as large as the inputs; the others' outputs are not written."""
    count = _common_input(request)
    _expect_outputs(request, [request.members[request.root]], count, count)


def _counts_all_gather(request: CollectiveRequest) -> None:
    count = _common_input(request)
    _expect_outputs(request, request.members, count * len(request.members), count)


def _counts_reduce_scatter(request: CollectiveRequest) -> None:
    count = _common_input(request)
    _expect_outputs(request, request.members, _split_over_group(request, count, "input"), count)


def _counts_send(request: CollectiveRequest) -> None:
    sender, receiver = request.members
    if sender.input.count != receiver.output.count:
        raise CollectiveError(f"{request.label}: send of {sender.input.count} elements into "
                              f"{receiver.output.count}")


def _counts_scatter(request: CollectiveRequest) -> None:
    """scatter: the root's input holds n chunks of c, chunk k for rank k; every output c (other inputs unread)."""
    count = request.members[request.root].input.count
    _expect_outputs(request, request.members, _split_over_group(request, count, "root input"), count)


def _counts_gather(request: CollectiveRequest) -> None:
    """gather: every input c; the root's output n·c, chunk k from rank k (other outputs not written)."""
    count = _common_input(request)
    _expect_outputs(request, [request.members[request.root]], count * len(request.members), count)


def _counts_all_to_all(request: CollectiveRequest) -> None:
    """all_to_all: rank r's input is splits[r][0..n) in k order; rank k's output the splits[0..n)[k] in r order.
    Without splits every input and output is n pieces of c."""
    label, members, n, splits = request.label, request.members, len(request.members), request.splits
    if splits is None:
        count = _common_input(request)
        _split_over_group(request, count, "input")
        _expect_outputs(request, members, count, count)
        return
    if len(splits) != n or any(len(row) != n or any(not _is_count(x) for x in row) for row in splits):
        raise CollectiveError(f"{label}: all_to_all splits must be {n} rows of {n} non-negative element counts")
    for member, row in zip(members, splits):
        if sum(row) != member.input.count:
            raise CollectiveError(f"{label}: all_to_all splits[{member.rank}] sends {sum(row)} elements but rank "
                                  f"{member.rank}'s input has {member.input.count}")
    for member in members:
        arriving = sum(row[member.rank] for row in splits)
        if arriving != member.output.count:
            raise CollectiveError(f"{label}: all_to_all splits bring {arriving} elements to rank {member.rank} but "
                                  f"its output has {member.output.count}")


def _is_count(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0


_COUNT_RULES = {
    "all_reduce": _counts_elementwise, "broadcast": _counts_elementwise, "reduce": _counts_reduce,
    "all_gather": _counts_all_gather, "reduce_scatter": _counts_reduce_scatter, "send": _counts_send,
    "scatter": _counts_scatter, "gather": _counts_gather, "all_to_all": _counts_all_to_all,
}

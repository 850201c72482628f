"""`algorithm: auto`: pick the algorithm, the channel count and the IPCQ slots of each collective call from a
cost model of the machine, as NCCL's tuner does.

The model is written from the topology alone (no table of measured times;
adr/0010, "The tuner"). For a collective of S bytes per rank over p ranks
run by algorithm a on c channels:

    T(a, c) = steps_a(p) · (α + s / r_pe) + wire_a(p) · S / min(c · r_pe, r_link)

- `steps_a(p)` and `wire_a(p)`: the algorithm's message rounds on its
  critical path and the bytes each rank puts on its own link, as a multiple
  of S (`SHAPES`; ring all-reduce 2(p−1) and 2(p−1)/p, halving-doubling
  2⌈log2 p⌉ and 2(p−1)/p, one-shot direct 1 and p−1, tree 2⌈log2 p⌉ and
  the heap's port load, 2 up to 4 ranks and 3 from 5, ...).
- α: one message's fixed latency between neighbouring ranks: the route's
  latencies, the slot's memory latency and the IPCQ message overhead.
- s: the slot (the piece a message carries), r_pe: what one PE can move (its
  IPCQ engine's rate where the topology gives one, else its TCM port),
  r_link: the slowest shared channel on the route (an inter-SIP link's
  payload bandwidth, a NoC link).

Channels follow a rule rather than the model, as NCCL's do: a collective
opens as many channels as give each channel's chunk (S / (p·c)) at least
`channel_min_kib`, at most `max_channels` and the PEs of a SIP, since a
channel is a PE taken from compute. Only calls of a kind that cuts into
element ranges (`collective.CHANNEL_CUTS`), with members on SIPs of their
own, run on several channels; the caller says whether a call does
(`splits`). The slots are the largest the topology and ccl.yaml allow:
fewer messages for the same bytes.

**Protocols.** Where the topology gives NCCL's protocols
(`ipcq.protocols`: LL, LL128, Simple), each candidate is priced under each
protocol π the config allows (`protocol: auto`: all; a name: that one), as
NCCL's tuner prices every (algorithm, protocol) pair:

    T(a, π) = L_π + n_a(p) · h_π + wire_a(p) · S / (e_π · r_link)

with L_π NCCL's base latency, h_π its per-step latency of the link and e_π
the share of the link's rate NCCL credits the protocol
(`ipcq.protocols.<π>.tuner_latency_ns`, `tuner_step_latency_ns`,
`tuner_efficiency`), and n_a(p) the steps NCCL charges h_π (`nccl_steps`:
`SHAPES`' steps, but one for a chain broadcast or reduce, which streams, and
2(p−1) for the tree all-reduce, which inside one node NCCL runs as a chain).
This is NCCL's belief, which is what decides NCCL's choice; what the call
then costs is simulated under the protocol's own terms (its launch, its
exchange latency where every rank sends and receives, n_a(p) times its
`step_latency_ns`, its message overhead, efficiency and slot), which the
measurements set. The cheapest pair wins, with the protocol's own channel
count (its `channel_min_kib` of the call per channel) and slot
(`slot_kib`). Small calls go to LL (least fixed cost, under half the
rate), large ones to Simple, LL128 between where its latency and rate beat
both, as NCCL picks on NVLink.

The candidates are the shipped algorithms listed in ccl.yaml's
`algorithms` (a user's module has no model here) that run the kind natively
at the group's size; the cheapest wins, ties going to the earlier entry.

**Several ranks on each of several SIPs** (PE ranks of spawned workers, k on
each of P SIPs, n = kP) make two kinds of hop: local (α_l, r_l: rank 0 to the
next rank of its SIP, over the NoC or inside a cube) and inter-SIP (α_i,
r_i: rank 0 to the first rank of the next SIP). The one-level model above
would price every step as rank 0's first hop, a local one, and so rank the
tree — whose edges pile onto the SIPs' links — far too cheap. There the
tuner models all_reduce only, for the two schedules whose traffic it can
say: the ring over SIP-ordered ranks and `hierarchical`. Each term is the
bytes a resource carries over its rate, the slowest one bounding the wire
time, plus latency per step and a load and a store per phase:

    ring:  F + 2(n−1)/n · [(n−P)(α_l + s/r_pe) + P(α_i + s/r_pe)]
             + max(2(n−1)/n · S / min(r_pe, r_i), h · 2S / r_hbm)
    hier:  3F + 2(k−1)(α_l + s_l/r_pe) + 2(P−1)(α_i + s/r_pe)
             + max(2(k−1)/k · S / min(r_pe, r_l), h · 2S / r_hbm) + 2(P−1)/P · S / min(k · r_pe, r_i)

with s = min(slot, S/n), s_l = min(slot, S/k), F = T_load(s) + T_store(s)
(HBM latency and the DMA engine's rate), h the group's ranks on rank 0's
cube (they share its HBM stack, rate r_hbm: each loads and stores S). The
hierarchy's link and NoC phases are summed: it pipelines them across slabs,
but only calls of several slabs overlap, so the model errs towards the ring
at large sizes (adr/0010 gives measured against predicted). Other kinds on
such groups run their fallback.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Callable

from kernbench.ccl.algorithms.support import nested, runnable
from kernbench.ccl.errors import CollectiveError
from kernbench.machine.endpoints import tcm
from kernbench.sim_engine.simtime import PS_PER_S

AUTO = "auto"
# Where the group's ranks share SIPs (two-level model) or the algorithm has no shape, an `auto` protocol is the
# bulk one: NCCL's Simple, the protocol every collective supports.
BULK_PROTOCOL = "Simple"
# A file that sets no `max_channels` gets one channel; no `channel_min_kib`, the shipped file's.
DEFAULT_CHANNEL_MIN_KIB = 128


def _log2(p: int) -> int:
    return max(1, math.ceil(math.log2(p)))


def _heap_port_load(p: int) -> int:
    """The tree all-reduce's wire factor: what the busiest rank of the heap-ordered binary tree sends, S up to
    its parent and S down to each child — 3S once a rank has a parent and two children (p >= 5), not the root's
    2S (adr/0010, "The tuner")."""
    return max((r > 0) + sum(child < p for child in (2 * r + 1, 2 * r + 2)) for r in range(p))


# (steps on the critical path, bytes a rank sends as a multiple of S) per kind and shipped algorithm.
SHAPES: dict[str, dict[str, Callable[[int], tuple[float, float]]]] = {
    "all_reduce": {
        "ring": lambda p: (2 * (p - 1), 2 * (p - 1) / p),
        "halving_doubling": lambda p: (2 * _log2(p), 2 * (p - 1) / p),
        "direct": lambda p: (1, p - 1),
        "tree": lambda p: (2 * _log2(p), _heap_port_load(p)),
    },
    "all_gather": {
        "ring": lambda p: (p - 1, (p - 1) / p),
        "halving_doubling": lambda p: (_log2(p), (p - 1) / p),
        "direct": lambda p: (1, (p - 1) / p),
    },
    "broadcast": {
        "ring": lambda p: (p - 1, 1),
        "tree": lambda p: (_log2(p), 2),
        "direct": lambda p: (1, p - 1),
    },
    "scatter": {"direct": lambda p: (1, (p - 1) / p)},
    "send": {"direct": lambda p: (1, 1)},
}
SHAPES["reduce_scatter"] = SHAPES["all_gather"]
SHAPES["reduce"] = SHAPES["broadcast"]
SHAPES["gather"] = SHAPES["all_to_all"] = SHAPES["scatter"]


@dataclass(frozen=True)
class Plan:
    """What the tuner picked for one call, and the time its model predicts (ps)."""

    algorithm: str
    channels: int
    slot_size: int
    n_slots: int
    predicted_ps: int
    protocol: str | None = None


@dataclass(frozen=True)
class _Hop:
    """A message hop's model terms: α (ps) and the slowest shared channel's rate (bytes/s)."""

    alpha: int
    rate: float


def plan(machine, request, shipped: dict[str, str], splits: bool) -> Plan | None:
    """The cheapest candidate for `request` (whose config says `algorithm: auto`) under the model above (the
    two-level one where ranks share SIPs); None where no candidate runs the kind at the group's size, or the
    model has no shape for it (the caller runs the kind's fallback).

    `shipped` maps shipped algorithm names to their modules; a candidate is
    an entry of the config's `candidates` whose module is one of them.
    `splits`: whether the call can run on several channels.
    """
    config, kind, p = request.config, request.kind, len(request.members)
    n_slots, slot = slots_within(machine.topology, config)
    nbytes = bytes_per_rank(request)
    if nested(request.sips):
        return _plan_nested(machine, request, shipped, slot, n_slots, nbytes)
    alpha, pe_rate, link_rate = _route_terms(machine, request)
    protocols = protocol_options(machine.topology, config, request.label)
    best = None
    for name, entry in config["candidates"].items():
        shape = SHAPES.get(kind, {}).get(_shipped_name(entry.get("module"), shipped))
        if shape is None or runnable(importlib.import_module(entry["module"]), kind, request.sips) is None:
            continue
        steps, wire = shape(p)
        algorithm = _shipped_name(entry.get("module"), shipped)
        for protocol in protocols:
            channels = channel_count(machine, request, nbytes, config, protocol) if splits else 1
            piece = min(slot, max(1, nbytes // (p * channels)))
            if protocol is None:
                seconds = steps * (alpha / PS_PER_S + piece / pe_rate) + wire * nbytes / min(channels * pe_rate,
                                                                                            link_rate)
            else:
                seconds = _nccl_seconds(protocol, nccl_steps(kind, algorithm, p), wire, link_rate, nbytes)
            predicted = round(seconds * PS_PER_S)
            if best is None or predicted < best.predicted_ps:
                best = Plan(name, channels, slot if protocol is None else min(slot, protocol.slot_bytes), n_slots,
                            predicted, protocol and protocol.name)
    return best


# Steps whose latency a call pays under a protocol, where they differ from `SHAPES`' critical path: a chain
# broadcast or reduce streams its pieces down the chain, so NCCL's tuner charges its per-hop latency once.
LATENCY_STEPS = {("broadcast", "ring"): lambda p: 1, ("reduce", "ring"): lambda p: 1}


def latency_steps(kind: str, algorithm: str, p: int) -> int:
    """How many per-step latencies a call of `kind` by the shipped `algorithm` over p ranks pays under a
    protocol (`LATENCY_STEPS`, else the critical path's steps of `SHAPES`)."""
    steps = LATENCY_STEPS.get((kind, algorithm))
    return steps(p) if steps is not None else round(SHAPES[kind][algorithm](p)[0])


# Steps NCCL's tuner prices where they differ from what the simulated algorithm takes: the SIPs of a topology that
# gives NCCL's protocols are one NVLink domain, one node to NCCL, and NCCL's tree inside a node is a chain through
# its ranks, up and down (src/graph/tuning.cc: 2·((nRanks/nNodes − 1)·intraLat + log2(nNodes)·interLat)), where
# the simulated tree is a binary heap of 2⌈log2 p⌉ steps.
NCCL_STEPS = {("all_reduce", "tree"): lambda p: 2 * (p - 1)}


def nccl_steps(kind: str, algorithm: str, p: int) -> int:
    """How many per-step latencies NCCL's tuner charges a call of `kind` by `algorithm` over p ranks of one node
    (`NCCL_STEPS`, else `latency_steps`): what decides NCCL's choice, not what the call is charged."""
    steps = NCCL_STEPS.get((kind, algorithm))
    return steps(p) if steps is not None else latency_steps(kind, algorithm, p)


def steps_for(request, shipped: dict[str, str]) -> int:
    """`latency_steps` of the algorithm `request`'s config names (its module), 0 where the model has no shape
    for it (a user's module): how many per-step latencies a call's launch pays under a protocol."""
    name = _shipped_name(request.config.get("module"), shipped)
    return latency_steps(request.kind, name, len(request.members)) if name in SHAPES.get(request.kind, {}) else 0


def _nccl_seconds(protocol, steps: float, wire: float, link_rate: float, nbytes: int) -> float:
    """T(a, π) of the module docstring: NCCL's tuner's time for a call under `protocol`."""
    return ((protocol.tuner_latency_ps + steps * protocol.tuner_step_latency_ps) / PS_PER_S
            + wire * nbytes / (link_rate * float(protocol.tuner_efficiency)))


def protocol_options(topology, config: dict, label: str) -> list:
    """The protocols a call may run under: [None] where the topology gives none (the original single-protocol
    model), else the config's `protocol` (default `auto`: every one the topology gives). A protocol the
    topology lacks is a `CollectiveError` naming the key."""
    given = topology.ipcq.protocols
    if not given:
        return [None]
    wanted = config.get("protocol", AUTO)
    if wanted == AUTO:
        return list(given)
    try:
        return [topology.ipcq.protocol(wanted)]
    except KeyError:
        names = ", ".join(protocol.name for protocol in given)
        raise CollectiveError(f"{label}: ccl config protocol {wanted!r}: the topology gives no "
                              f"ipcq.protocols.{wanted} (it gives {names})") from None


def protocol_for(machine, request, shipped: dict[str, str]) -> str | None:
    """The protocol a call of the algorithm its config names runs under: None without protocols in the
    topology; the config's name; for `auto`, grouped sends' by NCCL's point-to-point rule (`P2P_LL_BYTES`), else
    the cheapest under the model above where the algorithm is a shipped one with a shape for the kind on one
    rank per SIP, else `BULK_PROTOCOL` (or the last the topology gives)."""
    protocols = protocol_options(machine.topology, request.config, request.label)
    if len(protocols) == 1:
        return protocols[0] and protocols[0].name
    if request.kind in P2P_KINDS and {"LL", BULK_PROTOCOL} <= {protocol.name for protocol in protocols}:
        return _p2p_protocol(machine, request)
    shape = SHAPES.get(request.kind, {}).get(_shipped_name(request.config.get("module"), shipped))
    if shape is None or nested(request.sips):
        return _bulk(machine.topology, request)
    _, _, link_rate = _route_terms(machine, request)
    _, wire = shape(len(request.members))
    name = _shipped_name(request.config.get("module"), shipped)
    steps = nccl_steps(request.kind, name, len(request.members))
    nbytes = bytes_per_rank(request)
    return min(protocols, key=lambda protocol: _nccl_seconds(protocol, steps, wire, link_rate, nbytes)).name


# NCCL never prices a send or receive with its collective tuner: it runs one under LL up to
# NCCL_P2P_LL_THRESHOLD (16 KiB by default) per channel and under Simple above (src/enqueue.cc, addP2pToPlan).
# PyTorch runs scatter, gather and all_to_all on NCCL as grouped sends and receives, one message per peer.
P2P_LL_BYTES = 16 << 10
P2P_KINDS = ("send", "scatter", "gather", "all_to_all")


def _p2p_protocol(machine, request) -> str:
    """NCCL's protocol for a call of grouped sends: LL where each peer's message (a send's `bytes_per_rank`,
    else its p-th part) is at most `P2P_LL_BYTES` for each channel LL would open for it, else `BULK_PROTOCOL`."""
    nbytes = bytes_per_rank(request) // (1 if request.kind == "send" else len(request.members))
    channels = channel_count(machine, request, nbytes, request.config, machine.topology.ipcq.protocol("LL"))
    return "LL" if nbytes <= channels * P2P_LL_BYTES else BULK_PROTOCOL


def _plan_nested(machine, request, shipped: dict[str, str], slot: int, n_slots: int, nbytes: int) -> Plan | None:
    """The module docstring's two-level model: ring or hierarchical for all_reduce; None for other kinds."""
    if request.kind != "all_reduce":
        return None
    best, terms = None, _NestedTerms.of(machine, request, slot, nbytes)
    for name, entry in request.config["candidates"].items():
        model = NESTED_MODELS.get(_shipped_name(entry.get("module"), shipped))
        if model is None:
            continue
        predicted = round(model(terms) * PS_PER_S)
        if best is None or predicted < best.predicted_ps:
            best = Plan(name, 1, slot, n_slots, predicted, _bulk(machine.topology, request))
    return best


def _bulk(topology, request) -> str | None:
    """The protocol of a call the two-level model planned: the config's, or for `auto` `BULK_PROTOCOL`."""
    protocols = protocol_options(topology, request.config, request.label)
    names = [protocol.name for protocol in protocols if protocol is not None]
    if not names:
        return None
    return names[0] if len(names) == 1 else BULK_PROTOCOL if BULK_PROTOCOL in names else names[-1]


@dataclass(frozen=True)
class _NestedTerms:
    """What the two-level model reads (seconds, bytes, bytes/s): k ranks on each of P SIPs, n = kP."""

    k: int
    sips: int
    nbytes: int
    piece: int  # s: a ring step's message over all n ranks
    local_piece: int  # s_l: a message of a SIP's own ring
    local: _Hop
    inter: _Hop
    pe_rate: float
    fence_s: float  # T_load + T_store of one piece
    hbm_s: float  # the ranks on rank 0's cube loading and storing S through its HBM stack

    @classmethod
    def of(cls, machine, request, slot: int, nbytes: int) -> "_NestedTerms":
        members, topology = request.members, machine.topology
        first = members[0]
        mate = next(m for m in members[1:] if m.sip == first.sip)
        other = next(m for m in members if m.sip != first.sip)
        local, pe_rate = _hop(machine, first, mate)
        inter, _ = _hop(machine, first, other)
        k = sum(m.sip == first.sip for m in members)
        n = len(members)
        piece = min(slot, max(1, nbytes // n))
        hbm, dma = topology.cube.hbm, topology.pe.dma
        fence = 2 * (hbm.latency_ps / PS_PER_S + piece / min(dma.bandwidth_bytes_per_s, hbm.bandwidth_bytes_per_s))
        sharing = sum((m.sip, m.cube) == (first.sip, first.cube) for m in members)
        return cls(k, n // k, nbytes, piece, min(slot, max(1, nbytes // k)), local, inter, pe_rate, fence,
                   sharing * 2 * nbytes / hbm.bandwidth_bytes_per_s)

    def step(self, hop: _Hop, piece: int) -> float:
        return hop.alpha / PS_PER_S + piece / self.pe_rate


def _nested_ring(t: _NestedTerms) -> float:
    n = t.k * t.sips
    share = 2 * (n - 1) / n
    latency = share * ((n - t.sips) * t.step(t.local, t.piece) + t.sips * t.step(t.inter, t.piece))
    return t.fence_s + latency + max(share * t.nbytes / min(t.pe_rate, t.inter.rate), t.hbm_s)


def _nested_hierarchical(t: _NestedTerms) -> float:
    k, sips = t.k, t.sips
    latency = 2 * (k - 1) * t.step(t.local, t.local_piece) + 2 * (sips - 1) * t.step(t.inter, t.piece)
    inside = max(2 * (k - 1) / k * t.nbytes / min(t.pe_rate, t.local.rate), t.hbm_s)
    across = 2 * (sips - 1) / sips * t.nbytes / min(k * t.pe_rate, t.inter.rate)
    return 3 * t.fence_s + latency + inside + across


NESTED_MODELS: dict[str, Callable[[_NestedTerms], float]] = {"ring": _nested_ring,
                                                             "hierarchical": _nested_hierarchical}


def _hop(machine, source, target) -> tuple[_Hop, float]:
    """(the hop's model terms, one PE's rate) from `source`'s PE to `target`'s."""
    route = machine.route(tcm(source.sip, source.cube, source.pe), tcm(target.sip, target.cube, target.pe))
    alpha = sum(channel.latency_ps for channel in route) + machine.topology.ipcq.message_overhead_ps
    engine = machine.topology.ipcq.engine_bandwidth_bytes_per_s
    shared = route[1:-1] or route
    return (_Hop(alpha, float(min(channel.bandwidth_bytes_per_s for channel in shared))),
            float(min(route[0].bandwidth_bytes_per_s, engine or math.inf)))


def slots_within(topology, config: dict) -> tuple[int, int]:
    """(n_slots, slot_size): ccl.yaml's, taken as upper bounds and kept within the topology's queues (what
    `auto` runs with, so one shipped file serves every machine)."""
    return min(config["n_slots"], topology.ipcq.depth), min(config["slot_size"], topology.ipcq.max_slot_bytes)


def channel_count(machine, request, nbytes: int, config: dict, protocol=None) -> int:
    """Channels for a call that can split: enough that each channel's chunk holds `channel_min_kib`, at most
    `max_channels` (1 when the file sets none), the PEs of a SIP and the elements. Under a protocol, its own
    `channel_min_kib` of the call's bytes per channel (NCCL's thread thresholds) instead; grouped sends there
    follow NCCL's point-to-point rule (`p2p_channels`)."""
    p = len(request.members)
    if protocol is not None and request.kind in P2P_KINDS:
        return p2p_channels(machine, request, nbytes, config)
    if protocol is not None:
        wanted = nbytes // protocol.channel_min_bytes
    else:
        wanted = nbytes // (p * config.get("channel_min_kib", DEFAULT_CHANNEL_MIN_KIB) * 1024)
    return max(1, min(wanted, _channel_limit(machine, request, config)))


def _channel_limit(machine, request, config: dict) -> int:
    """The most channels a call opens: `max_channels` (1 when the file sets none), the PEs of a SIP, the elements."""
    return min(config.get("max_channels", 1), machine.topology.pes_per_sip, request.members[0].input.count)


# NCCL's point-to-point channels (NCCL 2.28). At init it opens p2pnChannels, its collective channel count rounded
# up to a power of two (src/graph/paths.cc, ncclTopoComputeP2pChannels: 32 on an NVSwitch node of H100s or H200s),
# and gives each peer p2pnChannelsPerPeer, two per NVLink of the path rounded up to a power of two
# (ncclTopoGetNchannels: 64 over 18 NVLinks). A grouped send then takes nChannelsMin, the per-peer count halved
# until nChannelsMin times the communicator's ranks fits in p2pnChannels (src/enqueue.cc, scheduleP2pTasksToPlan):
# 16 in a 2-GPU job, 8 in a 3- or 4-GPU one; fewer for a message under nChannelsMin parts of P2P_NVL_CHUNKSIZE/8
# (64 KiB), and twice as many (up to the per-peer count) while a part would exceed 32 chunks (16 MiB) inside one
# node (addP2pToPlan). So LL (`P2P_LL_BYTES` a channel) carries a send of at most 16 KiB: one channel up to 64 KiB.
# `p2p_channels` in ccl.yaml is p2pnChannels; the per-peer count, at least as large on NVSwitch, is taken as it.
DEFAULT_P2P_CHANNELS = 32
P2P_MIN_PART_BYTES = 64 << 10
P2P_MAX_PART_BYTES = 16 << 20


def p2p_channels(machine, request, nbytes: int, config: dict) -> int:
    """NCCL's channels for one peer's message of `nbytes` in a call of grouped sends on a communicator of
    `request.communicator` ranks (the rule above), within `_channel_limit`."""
    total = config.get("p2p_channels", DEFAULT_P2P_CHANNELS)
    least = total
    while least * request.communicator > total and least > 1:
        least //= 2
    channels = min(least, max(1, -(-nbytes // P2P_MIN_PART_BYTES)))
    while -(-nbytes // channels) > P2P_MAX_PART_BYTES and channels <= total // 2:
        channels *= 2
    return max(1, min(channels, _channel_limit(machine, request, config)))


def bytes_per_rank(request) -> int:
    """The bytes the tuner prices a call by: the larger of its root's (or rank 0's) input and output."""
    member = request.members[request.root or 0]
    return max(member.input.count, member.output.count) * member.input.dtype.itemsize


def _route_terms(machine, request) -> tuple[int, float, float]:
    """(α in ps, one PE's rate, the route's shared bottleneck) from rank 0's PE to rank 1's."""
    members = request.members
    hop, pe_rate = _hop(machine, members[0], members[1 % len(members)])
    return hop.alpha, pe_rate, hop.rate


def _shipped_name(module: str | None, shipped: dict[str, str]) -> str | None:
    return next((name for name, path in shipped.items() if path == module), None)

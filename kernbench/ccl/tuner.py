"""`algorithm: auto`: pick the algorithm, the channel count and the IPCQ slots of each collective call from a
cost model of the machine, as NCCL's tuner does.

The model is written from the topology alone (no table of measured times;
adr/0010, "The tuner"). For a collective of S bytes per rank over p ranks
run by algorithm a on c channels:

    T(a, c) = steps_a(p) · (α + s / r_pe) + wire_a(p) · S / min(c · r_pe, r_link)

- `steps_a(p)` and `wire_a(p)`: the algorithm's message rounds on its
  critical path and the bytes each rank puts on its own link, as a multiple
  of S (`SHAPES`; ring all-reduce 2(p−1) and 2(p−1)/p, halving-doubling
  2⌈log2 p⌉ and 2(p−1)/p, one-shot direct 1 and p−1, ...).
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

The candidates are the shipped algorithms listed in ccl.yaml's
`algorithms` (a user's module has no model here) that run the kind natively
at the group's size; the cheapest wins, ties going to the earlier entry.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Callable

from kernbench.ccl.algorithms.support import runnable
from kernbench.machine.endpoints import tcm
from kernbench.sim_engine.simtime import PS_PER_S

AUTO = "auto"
# A file that sets no `max_channels` gets one channel; no `channel_min_kib`, the shipped file's.
DEFAULT_CHANNEL_MIN_KIB = 128


def _log2(p: int) -> int:
    return max(1, math.ceil(math.log2(p)))


# (steps on the critical path, bytes a rank sends as a multiple of S) per kind and shipped algorithm.
SHAPES: dict[str, dict[str, Callable[[int], tuple[float, float]]]] = {
    "all_reduce": {
        "ring": lambda p: (2 * (p - 1), 2 * (p - 1) / p),
        "halving_doubling": lambda p: (2 * _log2(p), 2 * (p - 1) / p),
        "direct": lambda p: (1, p - 1),
        "tree": lambda p: (2 * _log2(p), 2),
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


def plan(machine, request, shipped: dict[str, str], splits: bool) -> Plan | None:
    """The cheapest candidate for `request` (whose config says `algorithm: auto`) under the model above; None
    where no candidate runs the kind at the group's size (the caller runs the kind's fallback).

    `shipped` maps shipped algorithm names to their modules; a candidate is
    an entry of the config's `candidates` whose module is one of them.
    `splits`: whether the call can run on several channels.
    """
    config, kind, p = request.config, request.kind, len(request.members)
    n_slots, slot = slots_within(machine.topology, config)
    nbytes = _bytes_per_rank(request)
    channels = channel_count(machine, request, nbytes, config) if splits else 1
    alpha, pe_rate, link_rate = _route_terms(machine, request)
    piece = min(slot, max(1, nbytes // (p * channels)))
    best = None
    for name, entry in config["candidates"].items():
        shape = SHAPES.get(kind, {}).get(_shipped_name(entry.get("module"), shipped))
        if shape is None or runnable(importlib.import_module(entry["module"]), kind, request.sips) is None:
            continue
        steps, wire = shape(p)
        seconds = (steps * (alpha / PS_PER_S + piece / pe_rate)
                   + wire * nbytes / min(channels * pe_rate, link_rate))
        predicted = round(seconds * PS_PER_S)
        if best is None or predicted < best.predicted_ps:
            best = Plan(name, channels, slot, n_slots, predicted)
    return best


def slots_within(topology, config: dict) -> tuple[int, int]:
    """(n_slots, slot_size): ccl.yaml's, taken as upper bounds and kept within the topology's queues (what
    `auto` runs with, so one shipped file serves every machine)."""
    return min(config["n_slots"], topology.ipcq.depth), min(config["slot_size"], topology.ipcq.max_slot_bytes)


def channel_count(machine, request, nbytes: int, config: dict) -> int:
    """Channels for a call that can split: enough that each channel's chunk holds `channel_min_kib`, at most
    `max_channels` (1 when the file sets none), the PEs of a SIP and the elements."""
    p = len(request.members)
    wanted = nbytes // (p * config.get("channel_min_kib", DEFAULT_CHANNEL_MIN_KIB) * 1024)
    limit = min(config.get("max_channels", 1), machine.topology.pes_per_sip, request.members[0].input.count)
    return max(1, min(wanted, limit))


def _bytes_per_rank(request) -> int:
    member = request.members[request.root or 0]
    return max(member.input.count, member.output.count) * member.input.dtype.itemsize


def _route_terms(machine, request) -> tuple[int, float, float]:
    """(α in ps, one PE's rate, the route's shared bottleneck) from rank 0's PE to rank 1's."""
    members = request.members
    first, second = members[0], members[1 % len(members)]
    route = machine.route(tcm(first.sip, first.cube, first.pe), tcm(second.sip, second.cube, second.pe))
    alpha = sum(channel.latency_ps for channel in route) + machine.topology.ipcq.message_overhead_ps
    engine = machine.topology.ipcq.engine_bandwidth_bytes_per_s
    pe_rate = min(route[0].bandwidth_bytes_per_s, engine or math.inf)
    shared = route[1:-1] or route
    link_rate = min(channel.bandwidth_bytes_per_s for channel in shared)
    return alpha, float(pe_rate), float(link_rate)


def _shipped_name(module: str | None, shipped: dict[str, str]) -> str | None:
    return next((name for name, path in shipped.items() if path == module), None)

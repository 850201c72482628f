"""ADR 0010, "Streaming direct and halving-doubling": their pieces stream, and nothing they compute changes.

The bandwidth checks run timing-only on default.yaml (4 SIPs in a ring of
100 GB/s links) with the shipped IPCQ settings (TCM slots, 8 × 64 KiB). Each
bound is read off the topology, never off a run: every message crosses the
links `Topology.sip_route` gives, so a collective takes at least the bytes
its busiest directed link must carry over that link's bandwidth. The value
checks use random f16 data, whose sums round, so the order in which each
member adds is visible in the bits.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from kernbench.ccl.algorithms.chunking import split
from kernbench.ccl.algorithms.wiring import largest_power_of_two
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.harness import config, device_tensor, member, region, run, values_of

SHIPPED = {"buffer_kind": "tcm", "slot_size": 64 * 1024, "n_slots": 8}
BUS_FACTOR = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p,
              "reduce_scatter": lambda p: (p - 1) / p}


def flows(algorithm: str, kind: str, p: int, size: int) -> list[tuple[int, int, int]]:
    """(sender, receiver, bytes) of every message of a collective whose per-rank buffer is `size` bytes (the
    sweep's size: the all-reduced tensor, the gathered output, the scattered input), rank r on SIP r."""
    chunk = size // p
    if algorithm == "direct":  # every member sends its buffer (all_reduce) or each owed chunk straight to the owner
        each = size if kind == "all_reduce" else chunk
        return [(r, q, each) for r in range(p) for q in range(p) if q != r]
    moved, distance = [], p // 2  # halving-doubling, p a power of two: step i trades with r XOR distance
    while distance:
        half = size * distance // p  # all_reduce halves its segment; reduce_scatter gives `distance` chunks
        moved += [(r, r ^ distance, half) for r in range(p)]
        distance //= 2
    if kind == "all_reduce":
        moved *= 2  # the doubling retraces the halving
    return moved


def link_bound_ps(topology, moved) -> int:
    """The busiest directed inter-SIP link's bytes over its bandwidth: no schedule of these messages is faster."""
    load, bandwidth = Counter(), {}
    for src, dst, nbytes in moved:
        for link in topology.sip_route(src, dst):
            load[link.name] += nbytes
            bandwidth[link.name] = link.bandwidth_bytes_per_s
    return max(-(-nbytes * 10**12 // bandwidth[name]) for name, nbytes in load.items())


def timed(algorithm: str, kind: str, size: int, topology) -> int:
    """A timing-only `kind` of `size` bytes of f16 per rank, rank r on SIP r (PE 0 of cube 0)."""
    p, count = topology.n_sips, size // 2
    session = Session(topology, timing_only=True)
    inputs = [session.torch.empty(count // p if kind == "all_gather" else count, dtype="f16", device=f"ahbm:{r}")
              for r in range(p)]
    outputs = {"all_gather": count, "reduce_scatter": count // p}.get(kind)
    targets = inputs if outputs is None else [session.torch.empty(outputs, dtype="f16", device=f"ahbm:{r}")
                                              for r in range(p)]
    return run(session, kind, [member(r, r, region(i), region(t)) for r, (i, t) in enumerate(zip(inputs, targets))],
               config(algorithm, **SHIPPED), op=None if kind == "all_gather" else "sum", timing_only=True)


@pytest.mark.parametrize("algorithm", ["direct", "halving_doubling"])
@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_adr0010_t44_streamed_direct_and_halving_doubling_approach_the_busiest_links_bound(algorithm, kind):
    """At 16 MiB the bus bandwidth is at least 65% of the bound the busiest link sets, and the time never beats it.

    On the 4-SIP ring a message to the SIP opposite crosses two links, so the
    bound is not 2(p−1)/p·S per rank over B: direct's all_reduce puts 3·S on
    each clockwise link (its own two messages and its left neighbour's
    passing through), halving-doubling's 2.5·S (its first and last steps trade
    S/2 with the opposite SIP, both directions of a pair clockwise), its
    gathers 1.25·S: bus bandwidths of at most 50, 60 and 60 GB/s, where
    one-message-at-a-time schedules reached 40–46% of their bound (59–62% for
    halving-doubling's gathers). What stays below the bound is the ring's
    two-hop messages: a message books both its links, cut through, and under
    FIFO reservation the links' gaps between such bookings go unused.
    """
    topology = load_topology("default")
    p, size = topology.n_sips, 16 << 20
    bound = link_bound_ps(topology, flows(algorithm, kind, p, size))
    elapsed = timed(algorithm, kind, size, topology)
    assert elapsed >= bound
    busbw, ceiling = (BUS_FACTOR[kind](p) * size / (t / 10**12) for t in (elapsed, bound))
    assert busbw >= 0.65 * ceiling, f"{busbw / 1e9:.1f} GB/s of at most {ceiling / 1e9:.1f}"


def test_adr0010_t44_the_bounds_are_the_documented_multiples_of_the_buffer():
    """The bounds T44 derives from the routes, as ADR 0010 states them: 3·S, 2.5·S and 1.25·S over B."""
    topology = load_topology("default")
    p, size, link = topology.n_sips, 64 << 20, topology.system.inter_sip.bandwidth_bytes_per_s
    over_link = lambda nbytes: -(-nbytes * 10**12 // link)  # noqa: E731
    assert link_bound_ps(topology, flows("direct", "all_reduce", p, size)) == over_link(3 * size)
    assert link_bound_ps(topology, flows("halving_doubling", "all_reduce", p, size)) == over_link(5 * size // 2)
    for kind in ("all_gather", "reduce_scatter"):
        assert link_bound_ps(topology, flows("halving_doubling", kind, p, size)) == over_link(5 * size // 4)
        assert link_bound_ps(topology, flows("direct", kind, p, size)) == over_link(3 * size // 4)


def direct_order(inputs: list[np.ndarray]) -> np.ndarray:
    """What every member of direct's all_reduce holds: the inputs added in group-rank order, in their dtype."""
    total = inputs[0]
    for x in inputs[1:]:
        total = np.add(total, x)
    return total


def halving_doubling_order(inputs: list[np.ndarray]) -> np.ndarray:
    """What halving-doubling's all_reduce computes, element by element in the order its module documents: each
    extra rank's input added into rank r − 2^k (own first), then per halving step the partner's partial added
    to the kept half (received first), the segment owner's sum gathered back."""
    p, n = len(inputs), inputs[0].size
    core = largest_power_of_two(p)
    partial = [x.copy() for x in inputs[:core]]
    for extra in range(core, p):
        partial[extra - core] = np.add(partial[extra - core], inputs[extra])
    segment = {r: (0, n) for r in range(core)}
    distance = core // 2
    while distance:
        kept = {}
        for r in range(core):
            partner = r ^ distance
            lower, upper = split(*segment[r], 2)
            a, b = lower if r < partner else upper
            values = partial[r].copy()
            values[a:b] = np.add(partial[partner][a:b], partial[r][a:b])
            kept[r] = values, (a, b)
        for r in range(core):
            partial[r], segment[r] = kept[r]
        distance //= 2
    result = np.empty_like(inputs[0])
    for r in range(core):
        a, b = segment[r]
        result[a:b] = partial[r][a:b]
    return result


def all_reduced(algorithm: str, p: int, inputs: list[np.ndarray], **cfg) -> tuple[list[np.ndarray], list]:
    """Each member's all-reduced (sum) f16 values, in place, rank r on SIP r; and the hazards the run found."""
    session = Session("default" if p <= 4 else "large")
    tensors = [device_tensor(session, r, x, "f16") for r, x in enumerate(inputs)]
    run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)], config(algorithm, **cfg))
    return [values_of(t) for t in tensors], session.ctx.machine.hazards.hazards


@pytest.mark.parametrize("algorithm, p", [("direct", 3), ("direct", 4), ("halving_doubling", 3),
                                          ("halving_doubling", 4), ("halving_doubling", 6), ("halving_doubling", 8)])
def test_adr0010_t45_members_add_in_the_documented_order_whatever_the_queue_depth(algorithm, p):
    """Random f16 data (sums round), 4 KiB slots, segments that do not fall on slot boundaries: every member holds
    exactly the documented order's bits with 1, 2 or 8 slots per queue — the depth changes how far the sends
    run ahead, never what is added to what — and one slot per queue does not deadlock."""
    count = 7 * 2048 + 301  # 7.1 slots of f16 per rank: halves, quarters and the fold all end mid-slot
    rng = np.random.default_rng(p)
    inputs = [rng.standard_normal(count).astype(np.float16) for _ in range(p)]
    expected = (direct_order if algorithm == "direct" else halving_doubling_order)(inputs)
    for n_slots, buffer_kind in [(1, "sram"), (2, "tcm"), (8, "hbm")]:
        outputs, hazards = all_reduced(algorithm, p, inputs, n_slots=n_slots, buffer_kind=buffer_kind)
        assert not hazards
        for rank, output in enumerate(outputs):
            assert output.tobytes() == expected.tobytes(), f"rank {rank}, n_slots {n_slots}"


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("p, n_slots", [(4, 1), (4, 8), (8, 2)])
def test_adr0010_t45_gathers_stream_to_the_same_bits_with_one_slot_or_eight(kind, p, n_slots):
    """Halving-doubling's reduce_scatter pipelines its columns and its all_gather streams its doubling steps; direct
    streams both: with one slot per queue or more, the bits are the documented order's (reduce_scatter's chunk r
    is halving-doubling's all_reduce segment r) and nothing is read while a posted store is in flight."""
    chunk = 3 * 2048 + 77
    rng = np.random.default_rng(n_slots)
    for algorithm in ("direct", "halving_doubling"):
        session = Session("default" if p <= 4 else "large")
        size = chunk if kind == "all_gather" else p * chunk
        inputs = [rng.standard_normal(size).astype(np.float16) for _ in range(p)]
        sources = [device_tensor(session, r, x, "f16") for r, x in enumerate(inputs)]
        outputs = [session.torch.empty(p * chunk if kind == "all_gather" else chunk, dtype="f16", device=f"ahbm:{r}")
                   for r in range(p)]
        run(session, kind, [member(r, r, region(s), region(o)) for r, (s, o) in enumerate(zip(sources, outputs))],
            config(algorithm, n_slots=n_slots), op=None if kind == "all_gather" else "sum")
        assert not session.ctx.machine.hazards.hazards
        if kind == "all_gather":
            expected = [np.concatenate(inputs)] * p
        else:
            reduced = (direct_order if algorithm == "direct" else halving_doubling_order)(inputs)
            expected = [reduced[r * chunk:(r + 1) * chunk] for r in range(p)]
        for rank, (output, want) in enumerate(zip(outputs, expected)):
            assert values_of(output).tobytes() == want.tobytes(), f"{algorithm} rank {rank}"

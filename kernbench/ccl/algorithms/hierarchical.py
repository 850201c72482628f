"""Hierarchical all-reduce: the ranks of each SIP reduce-scatter over the NoC, the ranks holding the same shard
all-reduce it across SIPs, and each SIP all-gathers back — the shape of NCCL's multi-node collectives
(NVLink inside a node, the network between nodes).

Runs where the members are several ranks on each of several SIPs, every SIP
holding as many (`@runs_on`): k ranks on each of P SIPs. Elsewhere (one SIP,
one rank per SIP, uneven SIPs) the kind's fallback, ring, runs and the report
says so. Every other kind falls back to ring as well.

With local index j the position of a rank among its SIP's ranks (rank order):
1. **inside each SIP**, ring reduce-scatter over the k local ranks: local
   rank j ends with the SIP's sum of shard j (chunk j of each slab, ring
   all-reduce's cut), stored in its output;
2. **across SIPs**, ring all-reduce of shard j among the P ranks of local
   index j (SIP order), in place: each moves S/k bytes over the inter-SIP
   links where a flat ring would move S/(kP)·(kP−1)·2 per rank through
   them — the slow links carry 1/k of what a flat ring of the same ranks
   puts on them;
3. **inside each SIP**, ring all-gather of the shards.
Each phase reads what the one before stored, so a rank waits for its stores
between phases (a fence). Phase 1 sums without finalizing; phase 2's ring finalizes (`avg` divides by
the whole group's size, `premul_sum` scales once). Each phase is a ring
with slabs, so its credits cannot deadlock, and a rank enters a phase only
after its previous one: whatever a phase waits for is a phase no later.

The wiring `sip_rings` connects exactly those rings: each SIP's ranks in a
ring, and each local index's ranks across SIPs in a ring.

Closed form (idle machine, each phase one message per step, so its pieces
do not overlap the next phase's): t = t_rs(k, S) + t_ar(P, S/k) + t_ag(k, S/k),
each ADR 0010's ring form over its own hops (the NoC between a SIP's ranks,
the inter-SIP link between SIPs), plus one collective launch.
"""

from __future__ import annotations

from collections import Counter

from kernbench.ccl.algorithms import ring
from kernbench.ccl.algorithms.chunking import split
from kernbench.ccl.algorithms.subgroup import Subgroup
from kernbench.ccl.algorithms.support import runs_on
from kernbench.ccl.algorithms.wiring import Edges, by_layout, ring_1d
from kernbench.ccl.blocks import Blocks
from kernbench.ccl.collective import Member, Region
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_reduce", "levels", "nested"]

# Reduce ops whose last step changes the sum (`PeProgram.finalize`): phase 1 only sums for them.
_FINALIZED = ("avg", "premul_sum")


def nested(sips: tuple[int, ...]) -> bool:
    """Whether members on `sips` are k ≥ 2 ranks on each of P ≥ 2 SIPs."""
    counts = set(Counter(sips).values())
    return len(set(sips)) >= 2 and len(counts) == 1 and counts.pop() >= 2


def levels(sips: tuple[int, ...]) -> tuple[list[list[int]], list[list[int]]]:
    """(the group ranks of each SIP, ascending; the ranks of each local index, one per SIP in order of first
    rank): the rings of phases 1 and 3, and of phase 2."""
    by_sip: dict[int, list[int]] = {}
    for rank, sip in enumerate(sips):
        by_sip.setdefault(sip, []).append(rank)
    local = list(by_sip.values())
    return local, [list(ranks) for ranks in zip(*local)]


@by_layout
def sip_rings(sips: tuple[int, ...]) -> Edges:
    """A ring over each SIP's ranks and one over each local index's ranks across SIPs (a ring of the group
    where the layout is not nested)."""
    if not nested(sips):
        return ring_1d(len(sips))
    local, across = levels(sips)
    return frozenset((ranks[a], ranks[b]) for ranks in (*local, *across) for a, b in ring_1d(len(ranks)))


WIRINGS = {"sip_rings": sip_rings}


@runs_on(nested)
@algorithm_steps
def all_reduce(ctx, request):
    me = ctx.member
    local, across = levels(request.sips)
    mates = next(ranks for ranks in local if ctx.rank in ranks)
    peers = next(ranks for ranks in across if ctx.rank in ranks)
    inside = Subgroup(ctx, mates, me)
    per_piece = ctx.slot_elements(me.input.dtype)
    summing = "sum" if request.reduce_op in _FINALIZED else request.reduce_op
    cuts = [split(*slab, inside.size) for slab in ring.slabs(inside, me.input.count, per_piece)]
    for ranges in cuts:
        chunks = ring.pieces_of(ranges, per_piece)
        yield from ring.reduce_scatter_steps(inside, summing, me.input, chunks, me.output, chunks(inside.rank),
                                             forward=False)
    yield from ctx.join_steps()  # phase 2 reads the shard phase 1 stored: a fence
    shard = _positions(me.output, [ranges[inside.rank] for ranges in cuts])
    yield from ring.all_reduce.ccl_steps(Subgroup(ctx, peers, Member(me.rank, me.sip, me.cube, me.pe, shard, shard)),
                                         request)
    yield from ctx.join_steps()
    for ranges in cuts:
        chunks = ring.pieces_of(ranges, per_piece)
        for a, b in chunks(inside.rank):
            values = yield from ctx.load_steps(me.output, a, b)
            yield from inside.send_steps((inside.rank + 1) % inside.size, values)
        yield from ring.all_gather_steps(inside, me.output, chunks, first_step=1)


def _positions(region: Region, ranges) -> Region:
    """The elements at positions `ranges` of `region`, as one region (its runs, no index array)."""
    return Region(region.allocation, region.dtype, Blocks(region.indices[a:b] for a, b in ranges))

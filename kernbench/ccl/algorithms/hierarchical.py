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
   index j (SIP order), in place: each rank puts 2(P−1)/P·S/k on the
   inter-SIP links and the k rings share them, so a link carries
   2(P−1)/P·S, as a flat ring of SIP-ordered ranks does — the gain is in
   steps, 2(k−1) + 2(P−1) against 2(kP−1), and in the NoC phases running
   beside the link's;
3. **inside each SIP**, ring all-gather of the shards.
Phase 1 sums without finalizing; phase 2's ring finalizes (`avg` divides by
the whole group's size, `premul_sum` scales once).

The phases are pipelined by the ring's slabs: the main flow runs phase 1 of
slab s, starts phase 2 of slab s as a task of its own, then runs phase 3 of
slab s−1, so the inter-SIP links carry one slab while the NoC reduces the
next and gathers the last. A phase reads what the one before stored and
waits for exactly those stores (a fence); phase 2 of slab s also follows
phase 2 of slab s−1 on its queues. The main flow takes phases 1 and 3 in
the same order on every rank of a SIP, so its queues match message for
message, and whatever a phase waits for is reached first by every rank
(adr/0010, "Hierarchical all-reduce").

The wiring `sip_rings` connects exactly those rings: each SIP's ranks in a
ring, and each local index's ranks across SIPs in a ring.

Closed form (idle machine, one slab, each phase one message per step):
t = t_rs(k, S) + t_ar(P, S/k) + t_ag(k, S/k), each the ring's form over its
own hops (the NoC between a SIP's ranks, the inter-SIP link between SIPs),
plus one collective launch.
"""

from __future__ import annotations

from kernbench.ccl.algorithms import ring
from kernbench.ccl.algorithms.chunking import split
from kernbench.ccl.algorithms.subgroup import Subgroup
from kernbench.ccl.algorithms.support import nested, runs_on
from kernbench.ccl.algorithms.wiring import Edges, by_layout, ring_1d
from kernbench.ccl.blocks import Blocks
from kernbench.ccl.collective import Member, Region
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_reduce", "levels", "sip_rings"]

# Reduce ops whose last step changes the sum (`PeProgram.finalize`): phase 1 only sums for them.
_FINALIZED = ("avg", "premul_sum")


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
    """Slab by slab, the phases pipelined: phase 2 of slab s runs as a task of its own beside phase 1 of slab
    s+1 and phase 3 of slab s−1, which the member's main flow takes in that order."""
    me = ctx.member
    local, across = levels(request.sips)
    inside = Subgroup(ctx, next(ranks for ranks in local if ctx.rank in ranks), me)
    peers = next(ranks for ranks in across if ctx.rank in ranks)
    per_piece = ctx.slot_elements(me.input.dtype)
    summing = "sum" if request.reduce_op in _FINALIZED else request.reduce_op
    cuts = [split(*slab, inside.size) for slab in ring.slabs(inside, me.input.count, per_piece)]
    crossings = []
    for ranges in cuts:
        chunks = ring.pieces_of(ranges, per_piece)
        stored = []
        yield from ring.reduce_scatter_steps(Subgroup(ctx, inside.ranks, me, stored), summing, me.input, chunks,
                                             me.output, chunks(inside.rank), forward=False)
        crossings.append(ctx.start(_across, ctx, peers, me, ranges[inside.rank], stored,
                                   crossings[-1] if crossings else None, request))
        if len(crossings) > 1:
            yield from _gather(ctx, inside, cuts[len(crossings) - 2], crossings[-2], per_piece)
    yield from _gather(ctx, inside, cuts[-1], crossings[-1], per_piece)


def _across(ctx, peers: list[int], me: Member, shard: tuple[int, int], stored: list, previous, request):
    """Phase 2 of one slab, as a task: once the shard's phase-1 stores have landed (a fence: it reads them) and
    the previous slab's phase 2 is done (it used the same queues), ring all-reduce the shard with the ranks of
    the same local index on the other SIPs; done when its own stores have landed."""
    for pending in (*stored, *((previous,) if previous else ())):
        yield from pending.wait_steps()
    region = _positions(me.output, [shard])
    own = []
    yield from ring.all_reduce.ccl_steps(Subgroup(ctx, peers, Member(me.rank, me.sip, me.cube, me.pe, region, region),
                                                  own), request)
    for pending in own:
        yield from pending.wait_steps()


def _gather(ctx, inside: Subgroup, ranges, crossing, per_piece: int):
    """Phase 3 of one slab, once its phase 2 is done: the ring all-gather of the SIP's shards (a rank's own shard
    is in place already, so it is only loaded and sent)."""
    yield from crossing.wait_steps()
    me = inside.member
    chunks = ring.pieces_of(ranges, per_piece)
    for a, b in chunks(inside.rank):
        values = yield from ctx.load_steps(me.output, a, b)
        yield from inside.send_steps((inside.rank + 1) % inside.size, values)
    yield from ring.all_gather_steps(inside, me.output, chunks, first_step=1)


def _positions(region: Region, ranges) -> Region:
    """The elements at positions `ranges` of `region`, as one region (its runs, no index array)."""
    return Region(region.allocation, region.dtype, Blocks(region.indices[a:b] for a, b in ranges))

"""Direct (one-shot): every member sends its whole buffer to every other member and reduces locally.

Native: every kind — all_reduce, all_gather, reduce_scatter, the one-shot
broadcast, reduce and send of `rooted.py`, and scatter, gather and
all_to_all, which only ever move each piece once from its owner to its
destination, so direct is every algorithm's fallback for them.

Wiring `full`. Per slot-sized piece each member posts its piece to the p−1
others, then takes the p pieces in group-rank order (its own in its place)
and reduces them in that order, so every member computes bitwise the same
result without a second pass. One step of latency instead of 2(p−1), at the
price of (p−1)·S bytes out of every member instead of 2(p−1)/p·S: the choice
for small messages. all_gather and reduce_scatter are the same pattern
with each member's own chunk. Closed form on an idle machine with dedicated
links: about T_load + α + (p−1)·S/B_out + p·T_reduce(S) + T_store, B_out
the member's outgoing bandwidth, which all p−1 destinations share.

**scatter, gather, all_to_all** post each slot-sized piece straight to its
destination, and receivers take pieces in group-rank order, so the result
never depends on arrival order. They run in rounds: in round j each member
sends piece j of what it owes each other member (those owing it nothing
skip), starting with the next rank, then takes piece j from each in rank
order. A member is then never more than one round of messages ahead of any
receiver, so with one slot per queue or more the credits cannot deadlock,
however unequal all_to_all's splits. Closed form (idle, dedicated links):
about T_load + α + (the largest piece count any sender owes)·s/B_out +
T_store, the root's link carrying all of scatter and gather.
"""

from __future__ import annotations

import numpy as np

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.rooted import broadcast, reduce, send
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "all_to_all", "broadcast", "gather", "reduce", "reduce_scatter", "scatter",
           "send"]


@algorithm_steps
def all_reduce(ctx, request):
    me = ctx.member
    for a, b in pieces(0, me.input.count, ctx.slot_elements(me.input.dtype)):
        own = yield from ctx.load_steps(me.input, a, b)
        yield from _post(ctx, lambda peer: own)
        total = yield from _gather_reduced(ctx, request.reduce_op, own)
        final = yield from ctx.finalize_steps(request.reduce_op, total)
        yield from ctx.store_steps(me.output, a, b, final)


@algorithm_steps
def all_gather(ctx, request):
    me, chunk = ctx.member, ctx.member.input.count
    for a, b in pieces(0, chunk, ctx.slot_elements(me.input.dtype)):
        own = yield from ctx.load_steps(me.input, a, b)
        yield from _post(ctx, lambda peer: own)
        for peer in range(ctx.size):
            values = own if peer == ctx.rank else (yield from ctx.recv_steps(peer))
            yield from ctx.store_steps(me.output, peer * chunk + a, peer * chunk + b, values)


@algorithm_steps
def reduce_scatter(ctx, request):
    me, chunk = ctx.member, ctx.member.output.count
    for a, b in pieces(0, chunk, ctx.slot_elements(me.input.dtype)):
        yield from _post(ctx, lambda peer: ctx.load_steps(me.input, peer * chunk + a, peer * chunk + b))
        own = yield from ctx.load_steps(me.input, ctx.rank * chunk + a, ctx.rank * chunk + b)
        total = yield from _gather_reduced(ctx, request.reduce_op, own)
        final = yield from ctx.finalize_steps(request.reduce_op, total)
        yield from ctx.store_steps(me.output, a, b, final)


@algorithm_steps
def scatter(ctx, request):
    """Chunk k of the root's input → rank k's output."""
    me, root, chunk = ctx.member, request.root, ctx.member.output.count
    for a, b in pieces(0, chunk, ctx.slot_elements(me.output.dtype)):
        if ctx.rank != root:
            values = yield from ctx.recv_steps(root)
            yield from ctx.store_steps(me.output, a, b, values)
            continue
        yield from _post(ctx, lambda peer: ctx.load_steps(me.input, peer * chunk + a, peer * chunk + b))
        own = yield from ctx.load_steps(me.input, root * chunk + a, root * chunk + b)
        yield from ctx.store_steps(me.output, a, b, own)


@algorithm_steps
def gather(ctx, request):
    """Rank k's input → chunk k of the root's output; other outputs untouched."""
    me, root, chunk = ctx.member, request.root, ctx.member.input.count
    for a, b in pieces(0, chunk, ctx.slot_elements(me.input.dtype)):
        if ctx.rank != root:
            values = yield from ctx.load_steps(me.input, a, b)
            yield from ctx.send_steps(root, values)
            continue
        for peer in range(ctx.size):
            if peer == root:
                values = yield from ctx.load_steps(me.input, a, b)
            else:
                values = yield from ctx.recv_steps(peer)
            yield from ctx.store_steps(me.output, peer * chunk + a, peer * chunk + b, values)


@algorithm_steps
def all_to_all(ctx, request):
    """splits[r][k] elements of rank r's input (in k order) → rank k's output (in r order); equal without splits."""
    me, r, p = ctx.member, ctx.rank, ctx.size
    splits = request.splits or [[me.input.count // p] * p] * p
    per_piece = ctx.slot_elements(me.input.dtype)
    outgoing = _cut(splits[r], per_piece)
    incoming = _cut([row[r] for row in splits], per_piece)
    for round_ in range(max(map(len, outgoing + incoming))):
        for step in range(1, p):
            peer = (r + step) % p
            if round_ < len(outgoing[peer]):
                values = yield from ctx.load_steps(me.input, *outgoing[peer][round_])
                yield from ctx.send_steps(peer, values)
        for peer in range(p):
            if round_ >= len(incoming[peer]):
                continue
            if peer == r:
                values = yield from ctx.load_steps(me.input, *outgoing[r][round_])
            else:
                values = yield from ctx.recv_steps(peer)
            yield from ctx.store_steps(me.output, *incoming[peer][round_], values)


def _cut(counts, per_piece: int) -> list[list]:
    """Consecutive parts of `counts` elements (offsets the prefix sums), each in slot-sized pieces."""
    parts, first = [], 0
    for count in counts:
        parts.append(pieces(first, first + count, per_piece))
        first += count
    return parts


def _post(ctx, values_for):
    """Send `values_for(peer)` to every other member, starting with the next rank (spreads the first hops).

    `values_for(peer)` is the values, or the steps that load them."""
    for step in range(1, ctx.size):
        peer = (ctx.rank + step) % ctx.size
        values = values_for(peer)
        if not isinstance(values, np.ndarray):
            values = yield from values
        yield from ctx.send_steps(peer, values)


def _gather_reduced(ctx, op, own):
    """Every member's piece, own included, reduced in group-rank order."""
    total = None
    for peer in range(ctx.size):
        values = own if peer == ctx.rank else (yield from ctx.recv_steps(peer))
        total = values if total is None else (yield from ctx.reduce_steps(op, total, values))
    return total

"""Direct (one-shot): every member sends its whole buffer to every other member and reduces locally.

Wiring `full`. Per slot-sized piece each member posts its piece to the p−1
others, then takes the p pieces in group-rank order (its own in its place)
and reduces them in that order, so every member computes bitwise the same
result without a second pass. One step of latency instead of 2(p−1), at the
price of (p−1)·S bytes out of every member instead of 2(p−1)/p·S: the choice
for small messages. all_gather and reduce_scatter are the same pattern
with each member's own chunk. Closed form on an idle machine with dedicated
links: about T_load + α + (p−1)·S/B_out + p·T_reduce(S) + T_store, B_out
the member's outgoing bandwidth, which all p−1 destinations share.
"""

from __future__ import annotations

import numpy as np

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.rooted import broadcast, reduce, send
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "broadcast", "reduce", "reduce_scatter", "send"]


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

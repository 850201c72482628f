"""Halving-doubling (Rabenseifner): reduce-scatter by recursive halving, all-gather by recursive doubling.

Among 2^k ranks (wiring `hypercube`), step i pairs r with r XOR 2^(k−1−i):
the pair splits the segment both hold in two, each sends the half the other
keeps and reduces the half it keeps, so after k steps each rank holds 1/2^k
of the result; the all-gather retraces the steps, doubling the segment.
Partial sums go back to the output region between steps (they do not fit in
TCM for large buffers); sends and receives of a step alternate piece by
piece, so neither partner runs ahead by more than a piece.

**Non-power-of-two p** (2^k < p < 2^(k+1)): fold first. Each extra rank
r ≥ 2^k sends its whole input to r − 2^k, which reduces it into its own
before the 2^k ranks run the algorithm, and gets the whole result back at the
end: two extra message rounds of S bytes for those pairs, as in MPICH.

Closed form (idle machine, dedicated links, every half one message, p = 2^k):
t = Σ_{i<k} [T_load(c_i) + T_x(c_i) + T_copy(c_i) + T_reduce(c_i) + T_store(c_i)]
  + Σ_{i<k} [T_load(c_i) + T_x(c_i) + T_copy(c_i) + T_store(c_i)], c_i = S/2^(i+1),
i.e. 2k message latencies and 2(p−1)/p·S/B on the wire; the sender's load of
the next half overlaps nothing because it reads what the last step stored.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces, split
from kernbench.ccl.algorithms.rooted import broadcast, reduce, send
from kernbench.ccl.algorithms.wiring import largest_power_of_two
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_reduce", "broadcast", "reduce", "send"]


@algorithm_steps
def all_reduce(ctx, request):
    me, op, r = ctx.member, request.reduce_op, ctx.rank
    count, per_piece = me.input.count, ctx.slot_elements(me.input.dtype)
    core = largest_power_of_two(ctx.size)
    if r >= core:
        for a, b in pieces(0, count, per_piece):
            values = yield from ctx.load_steps(me.input, a, b)
            yield from ctx.send_steps(r - core, values)
        for a, b in pieces(0, count, per_piece):
            values = yield from ctx.recv_steps(r - core)
            yield from ctx.store_steps(me.output, a, b, values)
        return
    extra = r + core if r + core < ctx.size else None
    source = me.input
    if extra is not None:
        for a, b in pieces(0, count, per_piece):
            own = yield from ctx.load_steps(me.input, a, b)
            received = yield from ctx.recv_steps(extra)
            reduced = yield from ctx.reduce_steps(op, own, received)
            yield from ctx.store_steps(me.output, a, b, reduced)
        source = me.output
    steps, segment, distance = [], (0, count), core // 2
    while distance:
        partner = r ^ distance
        lower, upper = split(*segment, 2)
        keep, give = (lower, upper) if r < partner else (upper, lower)
        yield from _exchange_and_reduce(ctx, op, partner, source, give, keep, last=distance == 1)
        source, segment = me.output, keep
        steps.append((partner, keep, give))
        distance //= 2
    for partner, keep, give in reversed(steps):
        yield from _exchange(ctx, partner, sent=keep, received=give)
    if extra is not None:
        for a, b in pieces(0, count, per_piece):
            values = yield from ctx.load_steps(me.output, a, b)
            yield from ctx.send_steps(extra, values)


def _exchange_and_reduce(ctx, op, partner, source, give, keep, *, last: bool):
    """Send `give` to the partner; reduce the partner's `keep` into ours, in the output region."""
    per_piece = ctx.slot_elements(source.dtype)
    given, kept = pieces(*give, per_piece), pieces(*keep, per_piece)
    for index in range(max(len(given), len(kept))):
        if index < len(given):
            values = yield from ctx.load_steps(source, *given[index])
            yield from ctx.send_steps(partner, values)
        if index < len(kept):
            a, b = kept[index]
            own = yield from ctx.load_steps(source, a, b)
            received = yield from ctx.recv_steps(partner)
            reduced = yield from ctx.reduce_steps(op, received, own)
            if last:
                reduced = yield from ctx.finalize_steps(op, reduced)
            yield from ctx.store_steps(ctx.member.output, a, b, reduced)


def _exchange(ctx, partner, *, sent, received):
    """Swap finished segments with the partner: ours out of the output region, theirs into it."""
    output = ctx.member.output
    per_piece = ctx.slot_elements(output.dtype)
    outgoing, incoming = pieces(*sent, per_piece), pieces(*received, per_piece)
    for index in range(max(len(outgoing), len(incoming))):
        if index < len(outgoing):
            values = yield from ctx.load_steps(output, *outgoing[index])
            yield from ctx.send_steps(partner, values)
        if index < len(incoming):
            a, b = incoming[index]
            values = yield from ctx.recv_steps(partner)
            yield from ctx.store_steps(output, a, b, values)

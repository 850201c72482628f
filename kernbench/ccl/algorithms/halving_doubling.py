"""Halving-doubling (Rabenseifner): reduce-scatter by recursive halving, all-gather by recursive doubling.

Native: all_reduce (any p), reduce_scatter and all_gather (power-of-two p,
`@runs_for(power_of_two)`), send (`rooted.send`). Everything else — and
reduce_scatter, all_gather at other p — falls back to `ring` (broadcast,
reduce: its chains) or `direct` (scatter, gather, all_to_all).

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

**reduce_scatter** (output c = S/p) halves per *column*: for each
slot-sized piece j of the chunk, step i trades with r XOR 2^(k−1−i) the
p/2^(i+1) pieces j of the chunks the partner keeps, and adds the partner's
to the ones it keeps, so after k steps rank r holds piece j of chunk r
reduced once. A column's partials stay in TCM (p/2 pieces at most: the
output holds only c, and the input is not the algorithm's to overwrite).
**all_gather** doubles: step i trades the 2^i chunks gathered so far with
r XOR 2^i, into the output, which the next step reads back. A step's
pieces go out up to n_slots ahead of those received from the partner
(`_trade`), so a step streams instead of paying a round trip per piece,
and two partners cannot both wait on full queues (each sends past what it
has received by less than the other's queue depth). Both pay k message
latencies (per column, for reduce_scatter) where the ring pays p−1, and
move (p−1)/p·S per rank as the ring does; closed forms are not pinned (the
pieces of a step queue on the sender's TCM port behind its own loads and
posted stores).
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces, split
from kernbench.ccl.algorithms.rooted import send
from kernbench.ccl.algorithms.support import power_of_two, runs_for
from kernbench.ccl.algorithms.wiring import largest_power_of_two
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "reduce_scatter", "send"]


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


@runs_for(power_of_two)
@algorithm_steps
def reduce_scatter(ctx, request):
    me, op, r = ctx.member, request.reduce_op, ctx.rank
    chunk = me.output.count
    for column in pieces(0, chunk, ctx.slot_elements(me.input.dtype)):
        partials, segment, distance = None, (0, ctx.size), ctx.size // 2
        while distance:
            partner = r ^ distance
            lower, upper = split(*segment, 2)
            keep, give = (lower, upper) if r < partner else (upper, lower)
            partials = yield from _halve(ctx, op, partner, give, keep, partials, column, chunk)
            segment, distance = keep, distance // 2
        final = yield from ctx.finalize_steps(op, partials[r])
        ctx.start(ctx.store, me.output, *column, final)


@runs_for(power_of_two)
@algorithm_steps
def all_gather(ctx, request):
    me, r = ctx.member, ctx.rank
    chunk, per_piece = me.input.count, ctx.slot_elements(me.input.dtype)
    distance = 1
    while distance < ctx.size:
        partner = r ^ distance
        mine, theirs = (pieces(q // distance * distance * chunk, (q // distance + 1) * distance * chunk, per_piece)
                        for q in (r, partner))
        yield from _double(ctx, partner, mine, theirs, first=distance == 1)
        yield from ctx.join_steps()  # the next step reads back what this one stored
        distance *= 2


def _halve(ctx, op, partner, give, keep, partials, column, chunk: int):
    """One halving step of one column: send piece `column` of the chunks in `give` (chunk indices), reduce the
    partner's into those of `keep`; return the kept partials by chunk. With `partials` None (the first step)
    pieces come from the input, each kept one loaded while the given one before it is on the wire."""
    source, (a, b) = ctx.member.input, column
    loads, reduced = {}, {}

    def given(index):
        k = give[0] + index
        if partials is not None:
            return partials.pop(k)
        values = yield from ctx.load_steps(source, k * chunk + a, k * chunk + b)
        kept = keep[0] + index
        loads[kept] = ctx.start(ctx.load, source, kept * chunk + a, kept * chunk + b)
        return values

    def take(index, received):
        k = keep[0] + index
        own = partials.pop(k) if partials is not None else (yield from loads.pop(k).wait_steps())
        reduced[k] = yield from ctx.reduce_steps(op, received, own)

    yield from _trade(ctx, partner, give[1] - give[0], given, take)
    return reduced


def _double(ctx, partner, mine, theirs, *, first: bool):
    """One doubling step: send the pieces `mine` of the output (the first step: this rank's input, also stored
    into place once sent) and store the partner's at `theirs`; stores are posted."""
    me = ctx.member
    sent = {}

    def given(index):
        if not first:
            return (yield from ctx.load_steps(me.output, *mine[index]))
        (a, b), base = mine[index], mine[0][0]  # the own chunk's place in the output; its input starts at 0
        sent[index] = values = yield from ctx.load_steps(me.input, a - base, b - base)
        return values

    def take(index, received):
        if first:  # its send is on its way (sends run ahead of receives): the own piece's store waits no longer
            ctx.start(ctx.store, me.output, *mine[index], sent.pop(index))
        ctx.start(ctx.store, me.output, *theirs[index], received)
        yield from ()  # posting takes no steps of the member's own

    yield from _trade(ctx, partner, len(mine), given, take)


def _trade(ctx, partner, count, give, take):
    """Send the partner `count` pieces (`give(index)`: steps returning them) and take as many from it
    (`take(index, values)`), sending up to n_slots pieces ahead of those received.

    Both partners trade the same count, so neither can wait on a full queue
    while the other waits too: a rank sends piece s only after receiving
    s − n_slots + 1 of the other's, and a full queue means the receiver is
    n_slots behind the sender.
    """
    window, sent = ctx.settings.n_slots, 0
    for index in range(count):
        while sent < min(count, index + window):
            values = yield from give(sent)
            yield from ctx.send_steps(partner, values)
            sent += 1
        received = yield from ctx.recv_steps(partner)
        yield from take(index, received)

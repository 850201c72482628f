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
with each member's own chunk.

**Streaming.** The pieces run in rounds (`streaming.rounds`): round s's
sends are posted once round s − n_slots is taken and go out in round order
from a program of their own, so the member copies out and reduces round i
while rounds up to i + n_slots − 1 are on the wire, and its links are asked
for the next message instead of idling through every member's reduction.
all_reduce and all_gather load a round's piece when the round is posted
(one load, well ahead of its use); reduce_scatter, scatter and all_to_all,
which send a different piece to each peer, load each just before it goes
out (a round's p − 1 loads started at once hold the PE's TCM port ahead of
its own sends under FIFO reservation: measured, that cost reduce_scatter a
quarter of its bandwidth). Stores are posted. What each member computes is
unchanged: it still reduces its p pieces in group-rank order.

Closed forms. all_reduce, idle, one piece: member r takes the pieces in
rank order, a peer q's arriving at T_load + place·s/B_TCM + T_x (place:
r's position in q's sends, next rank first: a member's sends leave one TCM
read apart), each copied out and, from the second on, added; then T_store;
the call ends with the last member (ADR 0010 T59). gather and scatter are
pinned at any size and root (T62: the reservation law on the root's
channels, a posted store made after the program's next transfer at the
same instant); all_gather, reduce_scatter and all_to_all for two ranks
(T61: a member's two loads, or two stores, issued at one instant start
max(TCM read, HBM occupancy) apart) and for three and four (T63–T65: the
same law on every member's channels, where its posted stores contend with
its copies, sends and landing messages).
Many pieces: no schedule beats the busiest directed link's
bytes over its bandwidth — on a full mesh S per link for all_reduce; on
default.yaml's ring of four SIPs 3·S on each clockwise link (the member's
messages to its right neighbour and to the SIP opposite, and the left
neighbour's to the SIP opposite it, passing through), 3·S/4 for all_gather
and reduce_scatter. T44 checks the streamed schedules against those bounds.

**scatter, gather, all_to_all** post each slot-sized piece straight to its
destination, and receivers take pieces in group-rank order, so the result
never depends on arrival order. scatter and all_to_all run in rounds as
above: in round j each member sends piece j of what it owes each other
member (those owing it nothing skip), starting with the next rank, and
takes piece j from each in rank order. A member's message to a peer in
round s is at most its s-th to it, so `rounds`' argument holds however
unequal all_to_all's splits. gather's senders only send and its root only
receives (no cycle of queues): each sender streams its pieces, the next
loaded while one is sent, and the root posts its stores. With many pieces
the root's link carries all of scatter and gather: about T_load + α + (the
largest piece count any sender owes)·s/B_out + T_store.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.prefetch import prefetch
from kernbench.ccl.algorithms.rooted import broadcast, reduce, send
from kernbench.ccl.algorithms.streaming import rounds
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "all_to_all", "broadcast", "gather", "reduce", "reduce_scatter", "scatter",
           "send"]


@algorithm_steps
def all_reduce(ctx, request):
    me, op = ctx.member, request.reduce_op
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    loads = {}

    def send(s):
        loads[s] = load = ctx.start(ctx.load, me.input, *ranges[s])
        return _send_to_all(ctx, load)

    yield from rounds(ctx, len(ranges), send, _reduced_into(ctx, op, loads, me.output, ranges))


@algorithm_steps
def all_gather(ctx, request):
    me, chunk = ctx.member, ctx.member.input.count
    ranges = pieces(0, chunk, ctx.slot_elements(me.input.dtype))
    loads = {}

    def send(s):
        loads[s] = load = ctx.start(ctx.load, me.input, *ranges[s])
        return _send_to_all(ctx, load)

    def take(index, sent):
        a, b = ranges[index]
        for peer in range(ctx.size):
            if peer == ctx.rank:
                values = yield from loads.pop(index).wait_steps()
            else:
                values = yield from ctx.recv_steps(peer)
            ctx.start(ctx.store, me.output, peer * chunk + a, peer * chunk + b, values)

    yield from rounds(ctx, len(ranges), send, take)


@algorithm_steps
def reduce_scatter(ctx, request):
    me, op, r = ctx.member, request.reduce_op, ctx.rank
    chunk = me.output.count
    ranges = pieces(0, chunk, ctx.slot_elements(me.input.dtype))
    loads = {}

    def send(s):
        a, b = ranges[s]
        loads[s] = ctx.start(ctx.load, me.input, r * chunk + a, r * chunk + b)
        return _load_and_send(ctx, me.input, [(peer, (peer * chunk + a, peer * chunk + b)) for peer in _others(ctx)])

    yield from rounds(ctx, len(ranges), send, _reduced_into(ctx, op, loads, me.output, ranges))


@algorithm_steps
def scatter(ctx, request):
    """Chunk k of the root's input → rank k's output."""
    me, root, chunk = ctx.member, request.root, ctx.member.output.count
    ranges = pieces(0, chunk, ctx.slot_elements(me.output.dtype))
    if ctx.rank != root:
        for a, b in ranges:
            values = yield from ctx.recv_steps(root)
            ctx.start(ctx.store, me.output, a, b, values)
        return

    def send(s):
        a, b = ranges[s]
        return _load_and_send(ctx, me.input, [(peer, (peer * chunk + a, peer * chunk + b)) for peer in _others(ctx)])

    def take(index, sent):
        a, b = ranges[index]
        own = yield from ctx.load_steps(me.input, root * chunk + a, root * chunk + b)
        ctx.start(ctx.store, me.output, a, b, own)

    yield from rounds(ctx, len(ranges), send, take)


@algorithm_steps
def gather(ctx, request):
    """Rank k's input → chunk k of the root's output; other outputs untouched."""
    me, root, chunk = ctx.member, request.root, ctx.member.input.count
    ranges = pieces(0, chunk, ctx.slot_elements(me.input.dtype))
    own = prefetch(ctx, me.input, ranges, 0)
    for index, (a, b) in enumerate(ranges):
        mine = yield from own.wait_steps()
        own = prefetch(ctx, me.input, ranges, index + 1)
        if ctx.rank != root:
            yield from ctx.send_steps(root, mine)
            continue
        for peer in range(ctx.size):
            values = mine if peer == root else (yield from ctx.recv_steps(peer))
            ctx.start(ctx.store, me.output, peer * chunk + a, peer * chunk + b, values)


@algorithm_steps
def all_to_all(ctx, request):
    """splits[r][k] elements of rank r's input (in k order) → rank k's output (in r order); equal without splits."""
    me, r, p = ctx.member, ctx.rank, ctx.size
    splits = request.splits or [[me.input.count // p] * p] * p
    per_piece = ctx.slot_elements(me.input.dtype)
    outgoing = _cut(splits[r], per_piece)
    incoming = _cut([row[r] for row in splits], per_piece)

    def send(s):
        return _load_and_send(ctx, me.input, [(peer, outgoing[peer][s]) for peer in _others(ctx)
                                              if s < len(outgoing[peer])])

    def take(index, sent):
        for peer in range(p):
            if index >= len(incoming[peer]):
                continue
            if peer == r:
                values = yield from ctx.load_steps(me.input, *outgoing[r][index])
            else:
                values = yield from ctx.recv_steps(peer)
            ctx.start(ctx.store, me.output, *incoming[peer][index], values)

    yield from rounds(ctx, max(map(len, outgoing + incoming)), send, take)


def _cut(counts, per_piece: int) -> list[list]:
    """Consecutive parts of `counts` elements (offsets the prefix sums), each in slot-sized pieces."""
    parts, first = [], 0
    for count in counts:
        parts.append(pieces(first, first + count, per_piece))
        first += count
    return parts


def _others(ctx) -> list[int]:
    """The other members, next rank first (spreads the first hops)."""
    return [(ctx.rank + step) % ctx.size for step in range(1, ctx.size)]


def _send_to_all(ctx, load):
    """Send what `load` (a started load) brings to every other member, next rank first."""
    values = yield from load.wait_steps()
    for peer in _others(ctx):
        yield from ctx.send_steps(peer, values)


def _load_and_send(ctx, region, sends):
    """For each (peer, (a, b)) in turn: load elements [a, b) of `region`, send them to the peer."""
    for peer, (a, b) in sends:
        values = yield from ctx.load_steps(region, a, b)
        yield from ctx.send_steps(peer, values)


def _gather_reduced(ctx, op, own):
    """Every member's piece, own included, reduced in group-rank order."""
    total = None
    for peer in range(ctx.size):
        values = own if peer == ctx.rank else (yield from ctx.recv_steps(peer))
        total = values if total is None else (yield from ctx.reduce_steps(op, total, values))
    return total


def _reduced_into(ctx, op, loads, target, ranges):
    """A `rounds` take for the reducing kinds: wait for the member's own piece (its load in `loads`), add every
    member's piece to it in group-rank order, finalize and post the store into `target`."""
    def take(index, sent):
        own = yield from loads.pop(index).wait_steps()
        total = yield from _gather_reduced(ctx, op, own)
        final = yield from ctx.finalize_steps(op, total)
        ctx.start(ctx.store, target, *ranges[index], final)
    return take

"""Halving-doubling (Rabenseifner): reduce-scatter by recursive halving, all-gather by recursive doubling.

Native: all_reduce (any p), reduce_scatter and all_gather (power-of-two p,
`@runs_for(power_of_two)`), send (`rooted.send`). Everything else — and
reduce_scatter, all_gather at other p — falls back to `ring` (broadcast,
reduce: its chains) or `direct` (scatter, gather, all_to_all).

Among 2^k ranks (wiring `hypercube`), step i pairs r with r XOR 2^(k−1−i):
the pair splits the segment both hold in two, each sends the half the other
keeps and reduces the half it keeps (the partner's partial first, its own
second), so after k steps each rank holds 1/2^k of the result; the
all-gather retraces the steps, doubling the segment. Partial sums go back
to the output region between steps (they do not fit in TCM for large
buffers), so a step starts once the stores of the step before have landed
(`join_steps`): it reads them back.

**Streaming.** Within a step the pieces run in rounds (`streaming.rounds`):
the sends go out from a program of their own, up to n_slots ahead of the
member, which copies out, reduces and posts each store meanwhile. A sent
piece is loaded just before it leaves; a kept piece starts loading when its
round is posted (the first round's once its given piece is on its way, so
the first message leaves as early as before). So a step keeps the wire busy
instead of paying a message latency, a load and a store per piece.

**Non-power-of-two p** (2^k < p < 2^(k+1)): fold first. Each extra rank
r ≥ 2^k streams its whole input to r − 2^k, which reduces it into its own
(its own first) before the 2^k ranks run the algorithm, and streams it the
whole result at the end: two extra message rounds of S bytes for those
pairs, as in MPICH.

Closed form (idle machine, dedicated links, every half one message, p = 2^k),
unchanged by the streaming:
t = Σ_{i<k} [T_load(c_i) + T_x(c_i) + T_copy(c_i) + T_reduce(c_i) + T_store(c_i)]
  + Σ_{i<k} [T_load(c_i) + T_x(c_i) + T_copy(c_i) + T_store(c_i)], c_i = S/2^(i+1),
i.e. 2k message latencies and 2(p−1)/p·S/B on the wire; the load of the
next step's first half overlaps nothing because it reads what the last step
stored. With many pieces a step streams at its busiest link's rate: on a
ring of four SIPs the first and last steps trade S/2 with the SIP opposite,
two hops away, so each clockwise link carries 2.5·S in all (T44).

**reduce_scatter** (output c = S/p) halves per *column*: for each
slot-sized piece j of the chunk, step i trades with r XOR 2^(k−1−i) the
p/2^(i+1) pieces j of the chunks the partner keeps, and adds the partner's
to the ones it keeps, so after k steps rank r holds piece j of chunk r
reduced once. A column's partials stay in TCM (p/2 pieces at most: the
output holds only c, and the input is not the algorithm's to overwrite).
The columns are pipelined: column j's step i runs beside column j+1's step
i−1, each step's takes a chain of programs (a queue's messages stay in
column order) and all sends one chain in slot order, where slot j holds
column j's first step and column j−i's step i. Up to max(1, n_slots /
(p/2)) columns are in flight, enough for n_slots messages of the first
step. Waits only ever point to an earlier column or step (a send to data
its column's step before computes, or to credits an earlier message holds;
a take to its own column's send of the piece it pairs with), so nothing
can wait in a cycle, with one slot per queue too.

**all_gather** doubles: step i trades the 2^i chunks gathered so far with
r XOR 2^i, into the output, which the next step reads back; its pieces
stream in rounds, each loaded when its round is posted.

Both pay k message latencies (per column, for reduce_scatter) where the
ring pays p−1, and move (p−1)/p·S per rank as the ring does. all_gather with
a message per step takes Σ_{i<k} (T_load + T_x + T_copy + T_store)(c·2^i)
(ADR 0010 T58). reduce_scatter's column sends its p/2 first-step pieces in
turn, each loaded once the one before is posted (after the kept piece's
load issued with it, so one max(TCM read, HBM occupancy) later), takes each
as T_copy + T_reduce once it is in, sends later steps' partials from TCM
one TCM read apart, and ends with one store (T60).
"""
from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces, shifted, split
from kernbench.ccl.algorithms.prefetch import prefetch
from kernbench.ccl.algorithms.rooted import send
from kernbench.ccl.algorithms.streaming import rounds, send_after as _send_after
from kernbench.ccl.algorithms.support import power_of_two, runs_for
from kernbench.ccl.algorithms.wiring import largest_power_of_two
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "reduce_scatter", "send"]


@algorithm_steps
def all_reduce(ctx, request):
    me, op, r = ctx.member, request.reduce_op, ctx.rank
    whole = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    core = largest_power_of_two(ctx.size)
    if r >= core:
        yield from _stream(ctx, r - core, me.input, whole)
        for a, b in whole:
            values = yield from ctx.recv_steps(r - core)
            ctx.start(ctx.store, me.output, a, b, values)
        return
    extra = r + core if r + core < ctx.size else None
    source = me.input
    if extra is not None:
        own = prefetch(ctx, me.input, whole, 0)
        for index, (a, b) in enumerate(whole):
            values = yield from own.wait_steps()
            own = prefetch(ctx, me.input, whole, index + 1)
            received = yield from ctx.recv_steps(extra)
            reduced = yield from ctx.reduce_steps(op, values, received)
            ctx.start(ctx.store, me.output, a, b, reduced)
        yield from ctx.join_steps()  # the halving reads back what the fold stored
        source = me.output
    steps, segment, distance = [], (0, me.input.count), core // 2
    while distance:
        partner = r ^ distance
        lower, upper = split(*segment, 2)
        keep, give = (lower, upper) if r < partner else (upper, lower)
        yield from _exchange_and_reduce(ctx, op, partner, source, give, keep, last=distance == 1)
        yield from ctx.join_steps()  # the next step reads back what this one stored
        source, segment = me.output, keep
        steps.append((partner, keep, give))
        distance //= 2
    for partner, keep, give in reversed(steps):
        yield from _exchange(ctx, partner, sent=keep, received=give)
        yield from ctx.join_steps()
    if extra is not None:
        yield from _stream(ctx, extra, me.output, whole)


def _stream(ctx, peer, region, ranges):
    """Send `ranges` of `region` to `peer` (the fold: only the receiver takes, so no window is needed), each
    piece loading while the one before is sent."""
    load = prefetch(ctx, region, ranges, 0)
    for index in range(len(ranges)):
        values = yield from load.wait_steps()
        load = prefetch(ctx, region, ranges, index + 1)
        yield from ctx.send_steps(peer, values)


def _exchange_and_reduce(ctx, op, partner, source, give, keep, *, last: bool):
    """Send `give` to the partner; reduce the partner's `keep` into ours, in the output region (stores posted).

    The sends run ahead of the member (`rounds`), each loading its given piece just before it goes out; a
    kept piece starts loading when its round is posted, except the first, which starts once the first given
    piece is on its way (nothing is on the wire yet to hide it behind, and it would delay that piece's load).
    The member takes round s: the kept piece, the partner's, their reduction's posted store."""
    per_piece = ctx.slot_elements(source.dtype)
    given, kept = pieces(*give, per_piece), pieces(*keep, per_piece)

    def send(s):
        if s == 0 or s >= len(kept):
            load = kept[s] if s < len(kept) else None  # a range: started once the given piece is on its way
        else:
            load = ctx.start(ctx.load, source, *kept[s])
        return _give(ctx, partner, source, given[s] if s < len(given) else None, load)

    def take(index, sent):
        if index >= len(kept):
            return
        load = yield from sent.wait_steps()
        values = yield from load.wait_steps()
        received = yield from ctx.recv_steps(partner)
        reduced = yield from ctx.reduce_steps(op, received, values)
        if last:
            reduced = yield from ctx.finalize_steps(op, reduced)
        ctx.start(ctx.store, ctx.member.output, *kept[index], reduced)

    yield from rounds(ctx, max(len(given), len(kept)), send, take)


def _give(ctx, partner, source, given, kept):
    """Load the `given` range of `source` and send it to the partner (None: no message); return `kept`'s load:
    `kept` itself if already started (or None), or, a range, its load started now."""
    if given is not None:
        values = yield from ctx.load_steps(source, *given)
        yield from ctx.send_steps(partner, values)
    return ctx.start(ctx.load, source, *kept) if isinstance(kept, tuple) else kept


def _exchange(ctx, partner, *, sent, received):
    """Swap finished segments with the partner: ours out of the output region, theirs into it (stores posted)."""
    output = ctx.member.output
    per_piece = ctx.slot_elements(output.dtype)
    outgoing, incoming = pieces(*sent, per_piece), pieces(*received, per_piece)

    def send(s):
        return _load_and_send(ctx, partner, output, *outgoing[s]) if s < len(outgoing) else ()

    def take(index, sent):
        if index < len(incoming):
            values = yield from ctx.recv_steps(partner)
            ctx.start(ctx.store, output, *incoming[index], values)

    yield from rounds(ctx, max(len(outgoing), len(incoming)), send, take)


def _load_and_send(ctx, peer, region, a, b):
    """Load elements [a, b) of `region` and send them to `peer`."""
    values = yield from ctx.load_steps(region, a, b)
    yield from ctx.send_steps(peer, values)


@runs_for(power_of_two)
@algorithm_steps
def reduce_scatter(ctx, request):
    me, op, r, p = ctx.member, request.reduce_op, ctx.rank, ctx.size
    chunk = me.output.count
    steps, segment, distance = [], (0, p), p // 2
    while distance:
        partner = r ^ distance
        lower, upper = split(*segment, 2)
        keep, give = (lower, upper) if r < partner else (upper, lower)
        steps.append((partner, range(*give), range(*keep)))
        segment, distance = keep, distance // 2
    columns = pieces(0, chunk, ctx.slot_elements(me.input.dtype))
    window = max(1, ctx.settings.n_slots // (p // 2))  # columns whose first step keeps n_slots messages going
    last = len(steps) - 1
    sends, takes, firsts, partials = None, [None] * len(steps), {}, {}
    for slot in range(len(columns) + last):
        if len(columns) > slot >= window:
            yield from firsts.pop(slot - window).wait_steps()
        for step, (partner, give, keep) in enumerate(steps):
            column = slot - step
            if not 0 <= column < len(columns):
                continue
            a, b = columns[column]
            store = (me.output, a, b, r) if step == last else None
            if step == 0:  # one send per piece, each also starting the load of the kept piece it pairs with
                source = []
                for given, kept in zip(give, keep):
                    sends = ctx.start(_send_after, sends, _give_input(ctx, partner, me.input, chunk, a, b, given, kept))
                    source.append(sends)
            else:
                source = partials.pop(column)
                sends = ctx.start(_send_after, sends, _give_partials(ctx, partner, give, source))
            takes[step] = taken = ctx.start(_take, ctx, op, partner, keep, takes[step], source, store)
            if step < last:
                partials[column] = taken
            if step == 0:
                firsts[column] = taken


def _give_input(ctx, partner, region, chunk: int, a: int, b: int, given: int, kept: int):
    """A column's first step, one piece: load chunk `given`'s piece, start loading chunk `kept`'s, send the given
    one to the partner; return the kept one's load."""
    values = yield from ctx.load_steps(region, given * chunk + a, given * chunk + b)
    load = ctx.start(ctx.load, region, kept * chunk + a, kept * chunk + b)
    yield from ctx.send_steps(partner, values)
    return load


def _give_partials(ctx, partner, give, taken):
    """A later step: send the partner the partials of chunks `give`, once `taken` (the step before) has them."""
    partials = yield from taken.wait_steps()
    for k in give:
        yield from ctx.send_steps(partner, partials[k])


def _take(ctx, op, partner, keep, before, source, store):
    """After `before` (the column before's take of this step: a queue's messages stay in order), reduce the
    partner's pieces of chunks `keep` into ours — loads (the first step) or partials by chunk, the result of
    `source` — and return them by chunk. With `store` (output, a, b, rank), the last step: finalize the
    rank's own chunk and post its store."""
    if before is not None:
        yield from before.wait_steps()
    first = isinstance(source, list)
    own = None if first else (yield from source.wait_steps())
    reduced = {}
    for index, k in enumerate(keep):
        if first:  # the load the send of the paired given piece started (that send, not a later one)
            load = yield from source[index].wait_steps()
            values = yield from load.wait_steps()
        else:
            values = own[k]
        received = yield from ctx.recv_steps(partner)
        reduced[k] = yield from ctx.reduce_steps(op, received, values)
    if store is not None:
        output, a, b, rank = store
        final = yield from ctx.finalize_steps(op, reduced[rank])
        ctx.start(ctx.store, output, a, b, final)
    return reduced


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


def _double(ctx, partner, mine, theirs, *, first: bool):
    """One doubling step: send the pieces `mine` of the output (the first step: this rank's input, also stored
    into place) and store the partner's at `theirs`. A piece starts loading when its round is posted, ahead
    of its send (`rounds`); stores are posted."""
    me = ctx.member
    if first:  # the own chunk's place in the output; its input starts at 0
        region, ranges = me.input, shifted(mine, -mine[0][0]) if mine else []
    else:
        region, ranges = me.output, mine

    def send(s):
        return _send_loaded(ctx, partner, ctx.start(ctx.load, region, *ranges[s]))

    def take(index, sent):
        if first:
            values = yield from sent.wait_steps()
            ctx.start(ctx.store, me.output, *mine[index], values)
        received = yield from ctx.recv_steps(partner)
        ctx.start(ctx.store, me.output, *theirs[index], received)

    yield from rounds(ctx, len(mine), send, take)


def _send_loaded(ctx, peer, load):
    """Send what `load` (a started load) brings to `peer`; return it."""
    values = yield from load.wait_steps()
    yield from ctx.send_steps(peer, values)
    return values

"""Ring: all_reduce as reduce-scatter then all-gather, 2(p−1) steps around a unidirectional ring;
broadcast and reduce pipelined along a chain.

Native: all_reduce, all_gather, reduce_scatter, broadcast, reduce, send
(`rooted.send`). scatter, gather and all_to_all fall back to `direct`.

Rank r sends only to r+1 and receives only from r−1 (wiring `ring_1d`). In
reduce-scatter step s, rank r receives the partial sum of chunk r−s−1, adds
its own input of that chunk and passes it on; after p−1 steps it holds the
full reduction of chunk r. All-gather then passes the reduced chunks p−1
steps further. Every chunk moves in slot-sized pieces, each received,
reduced and forwarded on its own, so the pieces of one step stream behind
each other (and behind the previous step's) instead of a whole chunk waiting
at every rank.

The data is cut into slabs of p·n_slots pieces, one step of a slab being at
most n_slots pieces per rank (NCCL's loop over chunks of the buffer size):
a rank is then never more than n_slots messages ahead of what it received,
so every ring of queues keeps a free slot and the credits never deadlock.

Closed form (idle machine, one slab, each rank's chunk c = S/p bytes in one
message): t = T_load(c) + 2(p−1)·(α + c/B) + (p−1)·T_reduce(c) + T_store(c),
with B the slowest hop of the send route (the inter-SIP link) and α = route
latency + message overhead + T_copy(c) (slot → TCM). With many pieces the
link streams back to back: t → 2(p−1)·S/(p·B) plus one piece's latency per
step boundary of the fill, i.e. bus bandwidth → B.

**Chains.** broadcast streams the root's pieces along root → root+1 → … →
root−1: each rank receives a piece from its left, forwards it right and
posts its store, so after the fill every link on the chain carries the
stream at once and the bus bandwidth (S/t) approaches the link's, where the
one-shot broadcast divides the root's link among p−1 destinations. reduce
runs a chain that ends at the root, root+1 → … → root: root+1 sends its piece,
each next rank adds its own (loaded ahead) and forwards the partial, and the
root adds its own last, finalizes and stores — every element reduced once,
in the fixed order root+1, …, root−1, root. A chain has no cycle, so the
credits cannot deadlock whatever the number of pieces: the last rank only
receives, and each rank before it sends only what it has received (no
slabs). Closed forms (idle machine, one message of c bytes, neighbours one
link apart): broadcast T_load(c) + (p−1)·(T_x(c) + T_copy(c)) + T_store(c);
reduce T_load(c) + (p−1)·(T_x(c) + T_copy(c) + T_reduce(c)) + T_store(c)
(+ the finalize of avg, premul_sum). With m pieces the chain adds about
(m−1)·s/B once: bus bandwidth → B.

Written as generators over the PE program's step forms (`yield from
ctx.recv_steps(left)`), so each member runs as an engine task, not a
greenlet process: the same ops at the same points of the run (adr/0010,
"Simulation cost"), without two greenlet switches at every wait.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces, shifted, split
from kernbench.ccl.algorithms.prefetch import prefetch
from kernbench.ccl.algorithms.rooted import send
from kernbench.ccl.algorithms.support import rotates
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_gather", "all_reduce", "broadcast", "reduce", "reduce_scatter", "send"]


# A slab's chunks are given as `chunks(q)`, the pieces of chunk q, made when a step needs them: a rank
# touches each chunk once or twice, and holding all p lists for every rank costs O(p^2) objects.


@rotates(lambda count, p: count % p == 0)  # equal chunks: else rank r's chunk sizes are not rank 0's
@algorithm_steps
def all_reduce(ctx, request):
    me = ctx.member
    per_piece = ctx.slot_elements(me.input.dtype)
    for slab in slabs(ctx, me.input.count, per_piece):
        chunks = pieces_of(split(*slab, ctx.size), per_piece)
        yield from reduce_scatter_steps(ctx, request.reduce_op, me.input, chunks, me.output, chunks(ctx.rank),
                                        forward=True)
        yield from all_gather_steps(ctx, me.output, chunks, first_step=1)


@rotates(lambda count, p: True)  # every rank's chunk is its output's size
@algorithm_steps
def reduce_scatter(ctx, request):
    me = ctx.member
    per_piece = ctx.slot_elements(me.input.dtype)
    chunk = me.output.count
    for slab in slabs(ctx, chunk, per_piece, parts=1):
        mine = pieces(*slab, per_piece)
        yield from reduce_scatter_steps(ctx, request.reduce_op, me.input, _shifts(mine, chunk), me.output, mine,
                                        forward=False)


@rotates(lambda count, p: True)  # every rank's chunk is its input's size
@algorithm_steps
def all_gather(ctx, request):
    me, r = ctx.member, ctx.rank
    per_piece = ctx.slot_elements(me.input.dtype)
    chunk = me.input.count
    for slab in slabs(ctx, chunk, per_piece, parts=1):
        mine = pieces(*slab, per_piece)
        chunks = _shifts(mine, chunk)
        for (a, b), (oa, ob) in zip(mine, chunks(r)):
            values = yield from ctx.load_steps(me.input, a, b)
            yield from ctx.send_steps(_right(ctx), values)
            ctx.start(ctx.store, me.output, oa, ob, values)
        yield from all_gather_steps(ctx, me.output, chunks, first_step=1)


@algorithm_steps
def broadcast(ctx, request):
    """The root's input → every member's output, streamed along the chain root → root+1 → … → root−1."""
    me, p = ctx.member, ctx.size
    position = (ctx.rank - request.root) % p
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    forwards = position < p - 1
    if position == 0:
        own = prefetch(ctx, me.input, ranges, 0)
        for index, (a, b) in enumerate(ranges):
            values = yield from own.wait_steps()
            own = prefetch(ctx, me.input, ranges, index + 1)
            yield from ctx.send_steps(_right(ctx), values)
            if me.output is not me.input:
                ctx.start(ctx.store, me.output, a, b, values)
        return
    for a, b in ranges:
        values = yield from ctx.recv_steps((ctx.rank - 1) % p)
        if forwards:
            yield from ctx.send_steps(_right(ctx), values)
        ctx.start(ctx.store, me.output, a, b, values)


@algorithm_steps
def reduce(ctx, request):
    """The reduction of every input → the root's output, along the chain root+1 → … → root−1 → root, each rank
    adding its own piece to the partial it forwards; other outputs untouched."""
    me, p, op = ctx.member, ctx.size, request.reduce_op
    position = (ctx.rank - request.root - 1) % p  # 0 starts the chain, p − 1 is the root
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    own = prefetch(ctx, me.input, ranges, 0)
    for index, (a, b) in enumerate(ranges):
        values = yield from own.wait_steps()
        own = prefetch(ctx, me.input, ranges, index + 1)
        if position > 0:
            received = yield from ctx.recv_steps((ctx.rank - 1) % p)
            values = yield from ctx.reduce_steps(op, received, values)
        if position < p - 1:
            yield from ctx.send_steps(_right(ctx), values)
            continue
        final = yield from ctx.finalize_steps(op, values)
        ctx.start(ctx.store, me.output, a, b, final)


def reduce_scatter_steps(ctx, op, source, chunks, target, target_pieces, *, forward: bool):
    """Steps 0..p−1 of reduce-scatter; rank r ends with chunk r reduced, stored at `target_pieces`.

    With `forward`, the reduced chunk is also sent on: the first step of the
    all-gather. The next piece's own input is loaded while this one is
    reduced, and stores are posted, so a rank's DMAs hide behind the link.
    """
    p, r = ctx.size, ctx.rank
    right, left = _right(ctx), (r - 1) % p
    for a, b in chunks((r - 1) % p):
        values = yield from ctx.load_steps(source, a, b)
        yield from ctx.send_steps(right, values)
    schedule = [(step, index, a, b) for step in range(1, p)
                for index, (a, b) in enumerate(chunks((r - step - 1) % p))]
    loads = [(a, b) for _, _, a, b in schedule]
    own = prefetch(ctx, source, loads, 0)
    for position, (step, index, _, _) in enumerate(schedule):
        values = yield from own.wait_steps()
        own = prefetch(ctx, source, loads, position + 1)
        received = yield from ctx.recv_steps(left)
        partial = yield from ctx.reduce_steps(op, received, values)
        if step < p - 1:
            yield from ctx.send_steps(right, partial)
            continue
        final = yield from ctx.finalize_steps(op, partial)
        if forward:
            yield from ctx.send_steps(right, final)
        ctx.start(ctx.store, target, *target_pieces[index], final)


def all_gather_steps(ctx, target, chunks, *, first_step: int):
    """Steps first_step..p−1 of all-gather: receive chunk r−step, pass it on unless it is the last step."""
    p, r = ctx.size, ctx.rank
    left = (r - 1) % p
    for step in range(first_step, p):
        for a, b in chunks((r - step) % p):
            values = yield from ctx.recv_steps(left)
            if step < p - 1:
                yield from ctx.send_steps(_right(ctx), values)
            ctx.start(ctx.store, target, a, b, values)


def pieces_of(ranges, per_piece: int):
    """chunks(q): range q cut into slot-sized pieces."""
    return lambda q: pieces(*ranges[q], per_piece)


def _shifts(mine, chunk: int):
    """chunks(q): the pieces `mine` of a rank's chunk, shifted to chunk q of a p-chunk buffer."""
    return lambda q: shifted(mine, q * chunk)


def slabs(ctx, count: int, per_piece: int, parts: int | None = None):
    """Consecutive ranges of at most parts·n_slots pieces (parts defaults to the group size)."""
    return pieces(0, count, (parts or ctx.size) * max(1, ctx.settings.n_slots // 2) * per_piece)


def _right(ctx) -> int:
    return (ctx.rank + 1) % ctx.size

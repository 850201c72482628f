"""Tree: all_reduce as a reduction up a binary tree and a broadcast down it; broadcast and reduce down or up
the binary tree rooted at their root; all pipelined in pieces.

Native: all_reduce, broadcast, reduce, send (`rooted.send`). As in NCCL,
whose tree is all-reduce only, all_gather and reduce_scatter fall back to
`ring`, scatter, gather and all_to_all to `direct`.

The tree is laid out like a heap over group ranks (parent of r is (r−1)/2;
wiring `binary_tree`). Each member runs two programs on its PE at once
(`PeProgram.start`), as NCCL's tree runs one warp group per
direction: *up* takes each slot-sized piece of its input, adds its
children's partial sums in ascending rank order and passes the result to
its parent; *down* receives each reduced piece from its parent, passes it
to its children and stores it. The root turns up into down. So a piece
travels up and down the tree while the pieces behind it follow, and the
time is set by one piece's round trip plus the stream of the rest.

Closed form (idle machine, dedicated links, one piece of c bytes), by
recursion over the tree: a member's partial is ready at
ready(r) = fold over its children k, in rank order, of
t ← max(t, ready(k) + T_x(c)) + T_copy(c) + T_reduce(c), from t = T_load(c);
from the root's ready time each level down adds T_x(c) + T_copy(c), sibling
sends leaving one TCM read of c apart, and the last member ends with
T_store(c). Depth ⌊log2 p⌋: 2⌊log2 p⌋ message latencies where the ring
pays 2(p−1), for about twice the ring's bytes through the root's links.

**broadcast and reduce** use the same heap-ordered tree over ranks rotated
so that their root is the heap's root (rank r sits at (r − root) mod p) —
broadcast is the all-reduce's down flow started by the root's loads, reduce
its up flow ending in the root's store — so they pay ⌊log2 p⌋ message
latencies, not the chain's p−1, and the root's two links carry the stream.
Their queues join rotated neighbours, which `binary_tree` (rooted at rank 0)
lacks, so they declare wiring `full` and create only the tree's queues.
One-way flows on a tree have no cycle: the credits cannot deadlock.
Closed forms (idle, one piece, each tree edge its own link): reduce =
ready(root) + T_store(c); broadcast = the down recursion started at
T_load(c), without the root's store when it broadcasts in place.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.prefetch import prefetch
from kernbench.ccl.algorithms.rooted import send
from kernbench.ccl.algorithms.wiring import tree_children, tree_parent, uses_wiring
from kernbench.ccl.pe_program import algorithm_steps

__all__ = ["all_reduce", "broadcast", "reduce", "send"]


@algorithm_steps
def all_reduce(ctx, request):
    me, op = ctx.member, request.reduce_op
    parent, children = tree_parent(ctx.rank), tree_children(ctx.rank, ctx.size)
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))

    def up():
        for a, b in ranges:
            total = yield from ctx.load_steps(me.input, a, b)
            final = yield from _up_one(ctx, op, parent, children, total)
            if final is None:
                continue
            for child in children:
                yield from ctx.send_steps(child, final)
            ctx.start(ctx.store, me.output, a, b, final)

    def down():
        for a, b in ranges:
            values = yield from ctx.recv_steps(parent)
            for child in children:
                yield from ctx.send_steps(child, values)
            ctx.start(ctx.store, me.output, a, b, values)

    if parent is not None:
        ctx.start(down)
    yield from up()


@uses_wiring("full")
@algorithm_steps
def broadcast(ctx, request):
    """The root's input → every member's output, each piece down the tree rooted at the root."""
    me = ctx.member
    parent, children = _rooted_tree(ctx, request.root)
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    own = prefetch(ctx, me.input, ranges, 0) if parent is None else None
    for index, (a, b) in enumerate(ranges):
        if parent is None:
            values = yield from own.wait_steps()
            own = prefetch(ctx, me.input, ranges, index + 1)
        else:
            values = yield from ctx.recv_steps(parent)
        for child in children:
            yield from ctx.send_steps(child, values)
        if parent is not None or me.output is not me.input:
            ctx.start(ctx.store, me.output, a, b, values)


@uses_wiring("full")
@algorithm_steps
def reduce(ctx, request):
    """The reduction of every input → the root's output, each piece up the tree rooted at the root (own piece,
    then the children's partials in tree order); other outputs untouched."""
    me, op = ctx.member, request.reduce_op
    parent, children = _rooted_tree(ctx, request.root)
    ranges = pieces(0, me.input.count, ctx.slot_elements(me.input.dtype))
    own = prefetch(ctx, me.input, ranges, 0)
    for index, (a, b) in enumerate(ranges):
        total = yield from own.wait_steps()
        own = prefetch(ctx, me.input, ranges, index + 1)
        final = yield from _up_one(ctx, op, parent, children, total)
        if final is not None:
            ctx.start(ctx.store, me.output, a, b, final)


def _up_one(ctx, op, parent, children, total):
    """One piece up the tree: add each child's partial to `total` in tree order, then send it to the parent
    (and return None) or, at the root, return it finalized."""
    for child in children:
        received = yield from ctx.recv_steps(child)
        total = yield from ctx.reduce_steps(op, total, received)
    if parent is not None:
        yield from ctx.send_steps(parent, total)
        return None
    return (yield from ctx.finalize_steps(op, total))


def _rooted_tree(ctx, root: int) -> tuple[int | None, list[int]]:
    """This rank's parent (None at the root) and children in the heap-ordered tree rotated to `root`."""
    p = ctx.size
    place = (ctx.rank - root) % p
    parent = tree_parent(place)
    return (None if parent is None else (parent + root) % p), [(k + root) % p for k in tree_children(place, p)]

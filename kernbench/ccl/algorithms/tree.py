"""Tree: all_reduce as a reduction up a binary tree and a broadcast down it, pipelined in pieces.

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
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.rooted import broadcast, reduce, send
from kernbench.ccl.algorithms.wiring import tree_children, tree_parent
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
            for child in children:
                received = yield from ctx.recv_steps(child)
                total = yield from ctx.reduce_steps(op, total, received)
            if parent is not None:
                yield from ctx.send_steps(parent, total)
                continue
            final = yield from ctx.finalize_steps(op, total)
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

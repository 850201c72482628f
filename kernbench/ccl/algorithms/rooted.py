"""One-shot broadcast and reduce (`direct`'s), and send (every shipped module's): star-shaped around a root.

`send` does not depend on the algorithm a run configures, so every shipped
module re-exports it. broadcast and reduce are one-shot around their root,
the choice for small messages (`direct` ships them; `ring` and `tree`
stream them along a chain or a tree instead): the root sends every
slot-sized piece to each member in turn (broadcast), or receives each
member's piece and reduces them in group-rank order (reduce), so the result
does not depend on arrival order; `send` streams member 0's input into
member 1's output. Pieces are
pipelined: piece j+1 is under way while piece j is consumed. They declare
wiring `full` (`@uses_wiring`), so they run whichever wiring the module's
own collectives use. Closed forms, one piece on an idle machine (ADR 0010
T66, T67): broadcast's k-th peer in line has it visible T_load + k·(TCM
read) + T_x after the start, the root's sends sharing its TCM port; reduce
is the root's rank-order fold of the p−1 messages, which land together.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.wiring import uses_wiring
from kernbench.ccl.pe_program import algorithm_steps


@uses_wiring("full")
@algorithm_steps
def broadcast(ctx, request):
    """The root's input → every member's output."""
    me, root = ctx.member, request.root
    others = [(root + k) % ctx.size for k in range(1, ctx.size)]
    for a, b in pieces(0, me.input.count, ctx.slot_elements(me.input.dtype)):
        if ctx.rank == root:
            values = yield from ctx.load_steps(me.input, a, b)
            for peer in others:
                yield from ctx.send_steps(peer, values)
            if me.output is not me.input:
                yield from ctx.store_steps(me.output, a, b, values)
        else:
            values = yield from ctx.recv_steps(root)
            yield from ctx.store_steps(me.output, a, b, values)


@uses_wiring("full")
@algorithm_steps
def reduce(ctx, request):
    """The reduction of every member's input → the root's output; other outputs untouched."""
    me, root, op = ctx.member, request.root, request.reduce_op
    for a, b in pieces(0, me.input.count, ctx.slot_elements(me.input.dtype)):
        if ctx.rank != root:
            values = yield from ctx.load_steps(me.input, a, b)
            yield from ctx.send_steps(root, values)
            continue
        total = None
        for peer in range(ctx.size):
            if peer == root:
                values = yield from ctx.load_steps(me.input, a, b)
            else:
                values = yield from ctx.recv_steps(peer)
            total = values if total is None else (yield from ctx.reduce_steps(op, total, values))
        final = yield from ctx.finalize_steps(op, total)
        yield from ctx.store_steps(me.output, a, b, final)


@uses_wiring("full")
@algorithm_steps
def send(ctx, request):
    """Member 0's input → member 1's output."""
    source, target = request.members
    for a, b in pieces(0, source.input.count, ctx.slot_elements(source.input.dtype)):
        if ctx.rank == 0:
            values = yield from ctx.load_steps(source.input, a, b)
            yield from ctx.send_steps(1, values)
        else:
            values = yield from ctx.recv_steps(0)
            yield from ctx.store_steps(target.output, a, b, values)

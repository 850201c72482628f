"""The layout of a DTensor's gradient, derived from how the forward pass used the DTensor.

Autograd runs on the local tensors, so a local gradient does not say
whether it is a rank's share of a sum (Partial) or the whole (Replicate).
PyTorch knows because its gradients are DTensors; here each use of a
DTensor in the forward says what the gradient it sends back is — a fixed
layout (a column-parallel linear sends its replicated input a Partial
gradient; `to_local` the layout it is given) or "the same as my output's"
(a replicated elementwise op) — and the backward of the op that made the
DTensor (a redistribution, `from_local`) asks `resolve` before moving the
gradient. Uses that disagree (one Partial, one Replicate gradient summed
into one tensor) have no correct sum here and are refused in one line.
A leaf (a parameter) lives across steps and records no uses: its uses that
send a Partial gradient reduce it on the spot (`ReduceGradient`).
"""

from __future__ import annotations

from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import normalized


# In a use's layout: this mesh dimension's gradient lies as the output's does.
FOLLOW = "follow"


def record(dtensor, layout: tuple, output=None) -> None:
    """Note that the forward used `dtensor` so that its gradient lies as `layout` (one placement per mesh
    dimension, or FOLLOW: as `output`'s gradient). Leaves, and tensors that need no gradient, keep no record."""
    local = dtensor._local_tensor
    if local.requires_grad and not local.is_leaf and output is not dtensor:  # an in-place op's is its own
        dtensor._grad_uses.append((tuple(layout), output))


def _layout_of(use) -> tuple:
    layout, output = use
    if FOLLOW not in layout:
        return layout
    followed = resolve(output)
    return tuple(o if p == FOLLOW else p for p, o in zip(layout, followed))


def resolve(dtensor) -> tuple:
    """The layout of `dtensor`'s gradient: what its uses agree on, else its own layout with Partial as
    Replicate (a gradient nothing else describes, as from `backward()` on it)."""
    layouts = {_layout_of(use) for use in dtensor._grad_uses}
    if not layouts:
        return normalized(dtensor.placements)
    if len(layouts) > 1:
        raise DTensorError(f"backward: the uses of a DTensor {dtensor.placements} send it gradients of different "
                           f"layouts {sorted(map(str, layouts))}; kernbench cannot sum them")
    return layouts.pop()

"""Sums and means: a reduction over a sharded dimension leaves each rank a term of the result (Partial).

The other dimensions' shards stay (renumbered when the reduced dimension is
dropped); a mean over a sharded dimension is each rank's sum divided by the
global count, so the terms add up to the mean. The 2-norm of a whole sharded
tensor outside autograd leaves each rank the norm of its part (NormPartial),
reduced by one small all-reduce when the value is needed. Any other
reduction reads the tensor whole first.
"""

from __future__ import annotations

from math import prod

from kernbench.dtensor.grad_layout import FOLLOW
from kernbench.dtensor.placements import NormPartial, Partial, Replicate, Shard
from kernbench.dtensor.rules.registry import Sharding, register, wrap_dim
from kernbench.runtime_api import autograd


@register("sum", "mean", "amax", "amin", "prod", "norm", "var", "std", "argmax", "argmin", "all", "any")
def reduction(op, args, kwargs) -> Sharding:
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 and isinstance(args[2], bool) else kwargs.get("keepdim", False)
    reduced = list(range(x.ndim)) if dims is None else \
        [wrap_dim(d, x.ndim) for d in (dims if isinstance(dims, (tuple, list)) else (dims,))]
    shape = tuple(1 if i in reduced else n for i, n in enumerate(x.shape) if keepdim or i not in reduced)
    if op == "norm" and dims is None and not any(p.is_partial() for p in x.placements) and \
            not (x.requires_grad and autograd.grad_enabled(x._ctx)):
        return _norm_terms(x, shape)
    linear = op in ("sum", "mean")
    wanted, output, grads = [], [], []
    for p in x.placements:
        if p.is_shard() and p.dim not in reduced:
            kept = p.dim if keepdim else p.dim - sum(d < p.dim for d in reduced)
            wanted.append(p), output.append(Shard(kept)), grads.append(p)
        elif p.is_shard() and linear:
            wanted.append(p), output.append(Partial()), grads.append(p)
        elif p == Partial() and linear:
            wanted.append(p), output.append(p), grads.append(FOLLOW)
        else:
            wanted.append(Replicate()), output.append(Replicate()), grads.append(FOLLOW)
    call = None
    if op == "mean" and any(p.is_shard() and p.dim in reduced for p in x.placements):
        count = prod(x.shape[d] for d in reduced)
        call = lambda local, *rest, **kw: local.sum(*rest, **kw) / count  # noqa: E731 (the terms of the mean)
    return Sharding({id(x): tuple(wanted)}, tuple(output), shape, {id(x): tuple(grads)}, call=call)


def _norm_terms(x, shape: tuple) -> Sharding:
    """The 2-norm of a whole sharded tensor outside autograd (`clip_grad_norm_`'s): each rank's norm of its part,
    the terms reduced only when the value is needed — one small all-reduce, not the tensor gathered."""
    layout = tuple(NormPartial() if p.is_shard() else p for p in x.placements)
    return Sharding({id(x): x.placements}, layout, shape)

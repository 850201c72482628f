"""`cross_entropy` on DTensor logits: gathered whole, or — inside `loss_parallel()` — computed on the class
shards with three all-reduces and no gathered logits, as PyTorch's loss parallelism does.

Inside `loss_parallel` the logits (N, C) are sharded on the classes
(Shard(1), i.e. Shard(-1)) over a 1-D mesh and the targets are whole (a
plain tensor or a Replicate DTensor). Each rank takes the row maxima of its
classes, all-reduced with MAX; the sums of exponentials, all-reduced; and the
logit of each row's target where its class is the rank's, all-reduced. The
loss is whole on every rank (Replicate); its gradient, softmax minus the
one-hot target, is local to each class shard, so the backward pass
communicates nothing (Megatron's vocab-parallel cross entropy is the same).
"""

from __future__ import annotations

import greenlet

from kernbench.dtensor.comm import issue
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Replicate, chunk_bounds
from kernbench.dtensor.rules.registry import Sharding, register
from kernbench.runtime_api import autograd
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.ops.positional import iota

_ACTIVE: dict = {}  # greenlet (a rank's worker) -> how many loss_parallel blocks it is inside


def enter() -> None:
    me = greenlet.getcurrent()
    _ACTIVE[me] = _ACTIVE.get(me, 0) + 1


def leave() -> None:
    me = greenlet.getcurrent()
    _ACTIVE[me] -= 1
    if not _ACTIVE[me]:
        del _ACTIVE[me]


def _active() -> bool:
    return greenlet.getcurrent() in _ACTIVE


@register("cross_entropy")
def cross_entropy(op, args, kwargs) -> Sharding:
    logits, target = args[0], args[1] if len(args) > 1 else kwargs["target"]
    mesh = logits.device_mesh
    whole = (Replicate(),) * mesh.ndim
    target_layout = {id(target): whole} if hasattr(target, "_placements") else {}
    if not _active():
        return Sharding({id(logits): whole, **target_layout}, whole, _loss_shape(logits, kwargs))
    if mesh.ndim != 1 or logits.ndim != 2 or not logits.placements[0].is_shard(1):
        raise DTensorError(f"loss_parallel: cross_entropy expects 2-D logits sharded on the class dimension "
                           f"(Shard(1)) over a 1-D mesh, got {logits.ndim}-D logits placed {logits.placements}")
    extra = set(kwargs) - {"target", "ignore_index", "reduction"}
    if len(args) > 2 or extra or kwargs.get("reduction", "mean") not in ("mean", "sum"):
        raise DTensorError("loss_parallel: cross_entropy takes ignore_index and reduction='mean' or 'sum' only")
    start, _ = chunk_bounds(logits.shape[1], mesh.size(0), mesh.get_local_rank(0))
    group, classes = mesh.get_group(0), logits.shape[1]

    def call(local, local_target, **kw):
        return _VocabParallelCrossEntropy.apply(local, local_target, group, start, classes,
                                                kw.get("ignore_index", -100), kw.get("reduction", "mean"))
    return Sharding({id(logits): logits.placements, **target_layout}, whole, (), call=call)


cross_entropy.takes_plain_tensors = True


def _loss_shape(logits, kwargs) -> tuple:
    return (logits.shape[0],) if kwargs.get("reduction") == "none" else ()


class _VocabParallelCrossEntropy(autograd.Function):
    """Forward: the loss from class-sharded logits (three all-reduces). Backward: (softmax − one-hot) · g / n,
    on each rank's classes."""

    @staticmethod
    def forward(ctx, logits, target, group, start, classes, ignore_index, reduction):
        peak = logits.amax(1, keepdim=True).contiguous()
        issue("all_reduce", peak, op=current_torch().distributed.ReduceOp.MAX, group=group)
        shifted = logits - peak
        exps = shifted.exp()
        total = exps.sum(1, keepdim=True).contiguous()
        issue("all_reduce", total, group=group)
        onehot = (target.unsqueeze(-1) == iota(logits, logits.shape[1], target.dtype) + start).to_dtype(logits.dtype)
        picked = (shifted * onehot).sum(1, keepdim=True).contiguous()
        issue("all_reduce", picked, group=group)
        valid = (target != ignore_index).to_dtype(logits.dtype)
        losses = (total.log() - picked).squeeze(1) * valid
        ctx.count = valid.sum() if reduction == "mean" else None
        ctx.save_for_backward(exps / total - onehot, valid)
        return losses.sum() / ctx.count if reduction == "mean" else losses.sum()

    @staticmethod
    def backward(ctx, grad):
        difference, valid = ctx.saved_tensors
        scale = grad if ctx.count is None else grad / ctx.count
        return difference * valid.unsqueeze(1) * scale, None, None, None, None, None, None

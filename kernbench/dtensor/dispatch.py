"""The one path of every op on DTensors, as PyTorch's `_dispatch.py`: rule, redistribute, local op, wrap.

1. The op's rule (`rules/`) gives the layouts (`Sharding`); an op with no
   rule is one line saying so.
2. Each DTensor input is redistributed to the layout the rule asks for
   (`DTensor.redistribute`: the collectives, with their backward twins).
3. The op runs on the local tensors — the same torch function, so its
   device work, cost and autograd record are the op table's.
   An op that draws random numbers draws them inside DTensor's RNG
   tracker's region (`random.py`): replicas alike, shards apart.
4. The result is wrapped as a DTensor of the rule's layout and global shape;
   an in-place op returns its own DTensor. Each input records the layout of
   the gradient it will receive (`grad_layout.py`); a parameter whose
   gradient comes back Partial has it all-reduced on the spot.

Operands must share one mesh, and a plain tensor (other than a scalar) does
not mix with DTensors: PyTorch's errors, one line each.
"""

from __future__ import annotations

from contextlib import nullcontext

from kernbench.dtensor import random
from kernbench.dtensor.comm import backward_pass
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.grad_layout import FOLLOW, record
from kernbench.dtensor.placements import normalized
from kernbench.dtensor.redistribute import redistribute_local
from kernbench.dtensor.rules import RULES
from kernbench.dtensor.rules.registry import dtensors_of
from kernbench.runtime_api import autograd
from kernbench.runtime_api.tensor.core import Tensor


def dispatch(cls, op: str, func, args: tuple, kwargs: dict):
    """Run `func` (a torch function or an unbound Tensor method named `op`) over DTensor arguments."""
    rule = RULES.get(op)
    if rule is None:
        raise DTensorError(f"{op}: kernbench's DTensor has no sharding rule for this op (the ops with one are "
                           "listed in docs/torch-surface.md); call to_local() or full_tensor() first")
    inputs = dtensors_of(args, kwargs)
    _check_operands(cls, op, inputs, args, kwargs, getattr(rule, "takes_plain_tensors", False))
    sharding = rule(op, args, kwargs)
    in_place = _in_place(op)
    moved = {}
    for d in inputs:
        wanted = sharding.inputs.get(id(d), d.placements)
        if in_place and d is args[0] and tuple(wanted) != d.placements:
            raise DTensorError(f"{op}: an in-place op cannot change its DTensor's layout {d.placements} to "
                               f"{tuple(wanted)}")
        moved[id(d)] = d.redistribute(d.device_mesh, wanted)
    local_of = {id(d): _local_for(moved[id(d)], sharding.grads.get(id(d))) for d in inputs}
    local_args = tuple(_localized(a, cls, local_of) for a in args)
    local_kwargs = {k: _localized(v, cls, local_of) for k, v in kwargs.items()}
    first = moved[id(inputs[0])]
    with (random.distribute_region(first.device_mesh, first.placements, first.shape, kwargs.get("generator"))
          if _draws(op, args, kwargs) else nullcontext()):
        result = (sharding.call or func)(*local_args, **local_kwargs)
    out = args[0] if in_place else _wrapped(cls, result, sharding, inputs[0].device_mesh)
    for d in inputs:
        layout = sharding.grads.get(id(d))
        record(moved[id(d)], normalized(moved[id(d)].placements) if layout is None else layout,
               out if isinstance(out, cls) else None)
    return out


# Ops that draw random numbers, and when they do: their local parts are drawn through DTensor's RNG tracker.
_RANDOM = {"rand_like": lambda args, kwargs: True, "randn_like": lambda args, kwargs: True,
           "uniform_": lambda args, kwargs: True, "normal_": lambda args, kwargs: True,
           "dropout": lambda args, kwargs: (args[2] if len(args) > 2 else kwargs.get("training", True))
           and (args[1] if len(args) > 1 else kwargs.get("p", 0.5)) > 0}


def _draws(op: str, args: tuple, kwargs: dict) -> bool:
    return op in _RANDOM and bool(_RANDOM[op](args, kwargs))


def _check_operands(cls, op: str, inputs: list, args, kwargs, plain_allowed: bool) -> None:
    mesh = inputs[0].device_mesh
    for d in inputs[1:]:
        if d.device_mesh != mesh:
            raise DTensorError(f"{op}: DTensor does not support cross-mesh operation yet! Got meshes: {mesh} "
                               f"{d.device_mesh}")
    for value in (*args, *kwargs.values()):
        for item in (value if type(value) in (list, tuple) else (value,)):
            if isinstance(item, Tensor) and not isinstance(item, cls) and item.ndim > 0 and not plain_allowed:
                raise DTensorError(f"{op}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to "
                                   "DTensor before calling distributed operators!")


def _in_place(op: str) -> bool:
    return (op.endswith("_") and not op.startswith("__")) or (op.startswith("__i") and op != "__int__" and
                                                              op != "__invert__") or op == "__setitem__"


def _local_for(dtensor, layout):
    """The local tensor the op gets: a parameter's, through `_ReduceGradient` where this use sends it a Partial
    gradient its own layout does not have (a leaf has no producer to resolve the layout at, grad_layout.py)."""
    local = dtensor._local_tensor
    if layout is None or not local.is_leaf or not local.requires_grad:
        return local
    partial = tuple(p for p, own in zip(layout, dtensor.placements) if p != FOLLOW and p.is_partial()
                    and not own.is_partial())
    return _ReduceGradient.apply(local, dtensor, layout) if partial else local


class _ReduceGradient(autograd.Function):
    """Forward: the parameter's local tensor (an alias). Backward: its Partial gradient all-reduced over the
    mesh dimensions where it is Partial, so the parameter's gradient has its own layout."""

    @staticmethod
    def forward(ctx, local, dtensor, layout):
        ctx.mesh, ctx.shape = dtensor.device_mesh, dtensor.shape
        ctx.own = normalized(dtensor.placements)
        ctx.layout = tuple(own if p == FOLLOW else p for p, own in zip(layout, ctx.own))
        return local.detach()

    @staticmethod
    def backward(ctx, grad):
        with backward_pass():
            return redistribute_local(grad, ctx.mesh, ctx.layout, ctx.own, ctx.shape, backward=True), None, None


def _localized(value, cls, local_of: dict):
    if isinstance(value, cls):
        return local_of[id(value)]
    if type(value) in (list, tuple):
        return type(value)(_localized(v, cls, local_of) for v in value)
    return value


def _wrapped(cls, result, sharding, mesh):
    if sharding.output is None:
        return result
    if isinstance(result, (tuple, list)):
        return type(result)(cls(r, mesh, p, s) for r, p, s in zip(result, sharding.output, sharding.shape))
    return cls(result, mesh, sharding.output, sharding.shape)

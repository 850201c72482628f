"""Elementwise ops (every elementwise row of the op table, its in-place form and operator), casts and copies.

Per mesh dimension the output follows the first input sharded on a
dimension it does not broadcast; the others are moved to that shard (an
input broadcast along it stays whole, and its gradient comes back Partial:
each rank sums its rows). Sums and differences of Partial values, and
products of one Partial value with whole ones, stay Partial (they are
linear); any other op reads Partial inputs whole first. An in-place op keeps
its tensor's layout.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtensor.grad_layout import FOLLOW
from kernbench.dtensor.placements import Partial, Replicate, Shard
from kernbench.dtensor.rules.registry import Sharding, dtensors_of, register
from kernbench.runtime_api.ops.table import ROWS, Cost

_ADDITIVE = {"add", "sub", "neg", "clone", "contiguous", "to", "type", "to_dtype", "float", "half", "bfloat16",
             "double", "type_as"}
_SCALING = {"mul", "div", "true_divide"}
_EXTRA = ("clone", "contiguous", "to", "type", "copy_", "fill_", "zero_", "detach_", "lerp", "lerp_", "addcmul",
          "addcmul_", "addcdiv", "addcdiv_", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
          "randn_like", "clamp", "clamp_", "dropout", "uniform_", "normal_")


def _names() -> list[str]:
    names = list(_EXTRA)
    for row in ROWS.values():
        if row.cost is not Cost.ELEMENTWISE:
            continue
        for name in (row.name, *row.aliases):
            names += [name, name + "_"]
        if row.operator:
            names += [f"__{row.operator}__"] + ([] if row.operands == 1 else
                                                 [f"__r{row.operator}__", f"__i{row.operator}__"])
    return list(dict.fromkeys(names + ["__invert__"]))


def _base(op: str) -> str:
    name = op.strip("_")
    if op.startswith("__") and name[:1] in "ri" and name[1:] in _SCALING | _ADDITIVE | {"truediv"}:
        name = name[1:]
    return {"truediv": "div"}.get(name, name)


@register(*_names())
def pointwise(op, args, kwargs) -> Sharding:
    ds = dtensors_of(args, kwargs)
    shape = tuple(np.broadcast_shapes(*(d.shape for d in ds)))
    mesh = ds[0].device_mesh
    self_in_place = op.endswith("_") and not op.startswith("__") or op.startswith("__i")
    inputs = {id(d): [] for d in ds}
    grads = {id(d): [] for d in ds}
    output = []
    for m in range(mesh.ndim):
        target = ds[0].placements[m] if self_in_place else _target(op, ds, m, shape, args)
        output.append(target)
        for d in ds:
            wanted, grad = _input(d, m, target, shape)
            inputs[id(d)].append(wanted)
            grads[id(d)].append(grad)
    return Sharding({k: tuple(v) for k, v in inputs.items()}, tuple(output), shape,
                    {k: tuple(v) for k, v in grads.items()})


def _target(op: str, ds: list, m: int, shape: tuple, args: tuple):
    n = len(shape)
    for d in ds:
        p = d.placements[m]
        if p.is_shard() and d.shape[p.dim] == shape[p.dim + n - d.ndim] and d.ndim == n:
            return Shard(p.dim)
    for d in ds:
        p = d.placements[m]
        if p.is_shard() and d.shape[p.dim] == shape[p.dim + n - d.ndim]:
            return Shard(p.dim + n - d.ndim)
    if any(d.placements[m].is_partial() for d in ds) and _linear_in_partial(op, args, m):
        return Partial()
    return Replicate()


def _linear_in_partial(op: str, args: tuple, m: int) -> bool:
    """Whether the op of each rank's term sums to the op of the value: sums of Partial values only (a number
    added would be added once per rank), one Partial operand times or divided by whole ones (not divided into,
    nor multiplied by itself)."""
    base = _base(op)
    tensors = [a for a in args if hasattr(a, "_placements")]
    if any(a.placements[m].is_partial() and a.placements[m] != Partial() for a in tensors):
        return False  # terms of a norm add up as squares, not linearly
    partial = [i for i, a in enumerate(args) if hasattr(a, "_placements") and a.placements[m].is_partial()]
    numbers = any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args[1:])
    if base in _ADDITIVE:
        return len(partial) == len(tensors) and not (numbers and base in ("add", "sub"))
    if base in _SCALING and len(partial) == 1:
        return base == "mul" or (not op.startswith("__r") and partial == [0])
    return False


def _input(d, m: int, target, shape: tuple):
    """The placement `d` must have on mesh dimension `m` for an output placed `target`, and its gradient's."""
    if target.is_shard():
        dim = target.dim - (len(shape) - d.ndim)
        if dim >= 0 and d.shape[dim] == shape[target.dim]:
            return Shard(dim), Shard(dim)
        return Replicate(), Partial()
    if target.is_partial():
        return (Partial(), FOLLOW) if d.placements[m].is_partial() else (Replicate(), Partial())
    return Replicate(), FOLLOW

"""`F.linear` and matmul (`@`, `mm`, `bmm`): Megatron's column and row splits, derived per mesh dimension.

For `linear(x, W, b)`, W of shape (out, in):

| W | x | b | output | x's gradient |
|---|---|---|---|---|
| Shard(0) (column) | Replicate | Shard(0) | Shard(-1) | Partial |
| Shard(1) (row) | Shard(-1) | Partial (b / n) | Partial | Shard(-1) |
| Replicate | Shard(d), d not the last | Replicate | Shard(d) | Shard(d) |
| Replicate | Replicate or Partial | Replicate or Partial | as x | as the output's |

A Replicate weight used with a sharded input gets a Partial gradient (each
rank sums its rows). matmul `a @ b` is the same rule with a batch
dimension sharded alike on both, a's rows, b's columns, or the contracted
dimension (Partial); a batch dimension sharded on one operand shards the other's alike (a chunk, no
communication) unless it broadcasts there.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.grad_layout import FOLLOW
from kernbench.dtensor.placements import Partial, Replicate, Shard
from kernbench.dtensor.rules.registry import Sharding, register


@register("linear")
def linear(op, args, kwargs) -> Sharding:
    x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    bias = bias if hasattr(bias, "_placements") else None
    n = x.ndim
    inputs = {id(x): [], id(weight): []}
    grads = {id(x): [], id(weight): []}
    if bias is not None:
        inputs[id(bias)], grads[id(bias)] = [], []
    output = []
    for m in range(x.device_mesh.ndim):
        w, p = weight.placements[m], x.placements[m]
        if w.is_shard(0):
            plan = (Replicate(), Partial()), (w, w), (Shard(0), Shard(0)), Shard(n - 1)
        elif w.is_shard(1):
            plan = (Shard(n - 1), Shard(n - 1)), (w, w), (Partial(), Replicate()), Partial()
        elif p.is_shard() and p.dim < n - 1:
            plan = (p, p), (Replicate(), Partial()), (Replicate(), Partial()), p
        elif p.is_partial():
            plan = (p, Replicate()), (Replicate(), Partial()), (Partial(), Replicate()), p
        else:
            plan = (Replicate(), FOLLOW), (Replicate(), FOLLOW), (Replicate(), FOLLOW), Replicate()
        for d, (wanted, grad) in zip((x, weight, bias), plan[:3]):
            if d is not None:
                inputs[id(d)].append(wanted)
                grads[id(d)].append(grad)
        output.append(plan[3])
    return Sharding({k: tuple(v) for k, v in inputs.items()}, tuple(output), (*x.shape[:-1], weight.shape[0]),
                    {k: tuple(v) for k, v in grads.items()})


@register("matmul", "mm", "bmm", "__matmul__", "__rmatmul__")
def matmul(op, args, kwargs) -> Sharding:
    a, b = (args[1], args[0]) if op == "__rmatmul__" else (args[0], args[1])
    if a.ndim < 2 or b.ndim < 2:
        raise DTensorError(f"{op}: kernbench's DTensor multiplies matrices and batches of them, not 1-D tensors")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape = (*batch, a.shape[-2], b.shape[-1])
    n = len(shape)
    inputs, grads, output = {id(a): [], id(b): []}, {id(a): [], id(b): []}, []
    for m in range(a.device_mesh.ndim):
        pa, pb = a.placements[m], b.placements[m]
        lead_a, lead_b = n - a.ndim, n - b.ndim
        if pa.is_shard() and pa.dim < a.ndim - 2:
            plan = (pa, pa), _batch_partner(b, pa.dim + lead_a - lead_b, shape), Shard(pa.dim + lead_a)
        elif pb.is_shard() and pb.dim < b.ndim - 2:
            plan = _batch_partner(a, pb.dim + lead_b - lead_a, shape), (pb, pb), Shard(pb.dim + lead_b)
        elif pa.is_shard(a.ndim - 2) and not pb.is_shard():
            plan = (pa, pa), (Replicate(), Partial()), Shard(n - 2)
        elif pb.is_shard(b.ndim - 1) and not pa.is_shard():
            plan = (Replicate(), Partial()), (pb, pb), Shard(n - 1)
        elif pa.is_shard(a.ndim - 1) or pb.is_shard(b.ndim - 2):
            plan = (Shard(a.ndim - 1), Shard(a.ndim - 1)), (Shard(b.ndim - 2), Shard(b.ndim - 2)), Partial()
        else:
            plan = (Replicate(), FOLLOW), (Replicate(), FOLLOW), Replicate()
        for d, (wanted, grad) in zip((a, b), plan[:2]):
            inputs[id(d)].append(wanted)
            grads[id(d)].append(grad)
        output.append(plan[2])
    return Sharding({k: tuple(v) for k, v in inputs.items()}, tuple(output), shape,
                    {k: tuple(v) for k, v in grads.items()})


def _batch_partner(other, dim: int, shape: tuple) -> tuple:
    """(placement, gradient layout) of the other operand of a batch sharded along its aligned `dim`: its own
    chunk of that dimension, or — where it broadcasts along it — whole, its gradient then Partial."""
    if dim >= 0 and other.shape[dim] == shape[dim + len(shape) - other.ndim] and other.shape[dim] != 1:
        return Shard(dim), Shard(dim)
    return Replicate(), Partial()

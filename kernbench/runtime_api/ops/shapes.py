"""Ops that join tensors (`cat`, `stack`): one copy per input into its slice of a new tensor."""

from __future__ import annotations

import operator

from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.elementwise import result_maker
from kernbench.runtime_api.ops.promotion import result_type


def cat(tensors, dim: int = 0):
    """Tensors joined along `dim`: one copy per input into its slice of a new tensor."""
    tensors = list(tensors)
    if not tensors:
        raise TensorError("cat: expected a non-empty list of tensors")
    device_ops.check_same_device(tensors, "cat")
    first = tensors[0]
    dim = operator.index(dim) % first.ndim
    for t in tensors:
        if t.ndim != first.ndim or t.shape[:dim] + t.shape[dim + 1:] != first.shape[:dim] + first.shape[dim + 1:]:
            raise TensorError(f"cat: sizes must match except in dimension {dim}, got {first.shape} and {t.shape}")
    shape = first.shape[:dim] + (sum(t.shape[dim] for t in tensors),) + first.shape[dim + 1:]
    out = result_maker(tensors)(shape, result_type(*tensors), first.device, "cat")
    starts = []
    with autograd.GradMode(first._ctx, False):
        for t in tensors:
            starts.append(sum(s.shape[dim] for s in tensors[:len(starts)]))
            out.narrow(dim, starts[-1], t.shape[dim]).copy_(t, non_blocking=True)
    return autograd.record(out, "cat", tensors, lambda g: tuple(
        g.narrow(dim, start, t.shape[dim]) if autograd.requires_grad(t) else None for t, start in zip(tensors, starts)))


def stack(tensors, dim: int = 0):
    """Tensors joined along a new dimension `dim`."""
    tensors = list(tensors)
    if not tensors:
        raise TensorError("stack: expected a non-empty list of tensors")
    if len({t.shape for t in tensors}) != 1:
        raise TensorError(f"stack: expects each tensor to be equal size, got {[t.shape for t in tensors]}")
    dim = operator.index(dim) % (tensors[0].ndim + 1)
    return cat([t.unsqueeze(dim) for t in tensors], dim)

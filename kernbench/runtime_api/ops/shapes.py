"""Ops that join tensors (`cat`, `stack`): one copy per input into its slice of a new tensor."""

from __future__ import annotations


from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import wrap_dim
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.elementwise import result_maker
from kernbench.runtime_api.ops.promotion import result_type
from kernbench.runtime_api.ops.overrides import overridable


@overridable
def cat(tensors, dim: int = 0):
    """Tensors joined along `dim`: one copy per input into its slice of a new tensor."""
    tensors = list(tensors)
    if not tensors:
        raise TensorError("cat: expected a non-empty list of tensors")
    device_ops.check_same_device(tensors, "cat")
    first = tensors[0]
    dim = wrap_dim(dim, first.ndim, "cat")
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


@overridable
def stack(tensors, dim: int = 0):
    """Tensors joined along a new dimension `dim`."""
    tensors = list(tensors)
    if not tensors:
        raise TensorError("stack: expected a non-empty list of tensors")
    if len({t.shape for t in tensors}) != 1:
        raise TensorError(f"stack: expects each tensor to be equal size, got {[t.shape for t in tensors]}")
    dim = wrap_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(dim) for t in tensors], dim)


def vstack(tensors):
    """Tensors joined along their first dimension, 1-D ones taken as rows."""
    return cat([t.unsqueeze(0) if t.ndim == 1 else t for t in tensors], 0)


def pad(input, pad, mode: str = "constant", value=None):
    """`input` padded with `value` (0 by default): `pad` gives (before, after) counts from the last dim
    backwards, a negative count crops. A fill of the result, then one copy of the input into it."""
    if mode != "constant":
        raise TensorError(f"pad: mode={mode!r} is not supported by kernbench; it pads with a constant")
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise TensorError(f"Padding length must be divisible by 2 and at most twice the input's dims, got {len(pad)}")
    dims = [input.ndim - 1 - i for i in range(len(pad) // 2)]
    for dim, before, after in zip(dims, pad[0::2], pad[1::2]):  # crop first: a view, differentiable
        start, stop = max(0, -before), input.shape[dim] - max(0, -after)
        if start or stop != input.shape[dim]:
            input = input.narrow(dim, start, max(0, stop - start))
    shape = list(input.shape)
    for dim, before, after in zip(dims, pad[0::2], pad[1::2]):
        shape[dim] += max(0, before) + max(0, after)
    out = result_maker((input,))(tuple(shape), input.dtype, input.device, "pad")
    inner = _inner_of(out, dims, pad, input.shape)
    with autograd.GradMode(input._ctx, False):
        out.fill_(0 if value is None else value)
        inner.copy_(input, non_blocking=True)
    return autograd.record(out, "pad", (input,), lambda g: (_inner_of(g, dims, pad, input.shape),))


def _inner_of(padded, dims, pad, shape):
    """The view of `padded` where the (cropped) input sits."""
    for dim, before in zip(dims, pad[0::2]):
        padded = padded.narrow(dim, max(0, before), shape[dim])
    return padded

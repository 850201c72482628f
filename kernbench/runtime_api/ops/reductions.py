"""Reductions: the one runner every reduction row goes through, and the ops written in terms of reductions
(`max`/`min` with indices, `var`, `std`, `norm`).

A reduction row's value is a `device_ops.Reduction` (chunk, merge, finish),
run over `dim` by device_ops.reduce; half types accumulate in float32, as
torch's reductions do. `var` and `norm` are one reduction pass each, as
torch's kernels are; `std` is var and a square root.
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.dtypes import DType, bool_, int64, resolve_dtype
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import wrap_dim
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.device_ops import Reduction, float_type, wide_type
from kernbench.runtime_api.ops.elementwise import result_maker
from kernbench.runtime_api.ops.promotion import is_tensor


def argchunk(pick):
    """The chunk step of argmax/argmin: the picked value of each row and its index in the whole reduced extent."""
    def chunk(values, first):
        index = pick(values, axis=1)
        return np.take_along_axis(values, index[:, None], axis=1)[:, 0], index + first
    return chunk


def argmerge(better):
    """The merge step of argmax/argmin: the better of two (value, index) partials, the earlier on ties."""
    def merge(a, b):
        take_b = better(b[0], a[0])
        return np.where(take_b, b[0], a[0]), np.where(take_b, b[1], a[1])
    return merge


def mean_reduction() -> Reduction:
    return Reduction(lambda v, _: v.sum(axis=1), np.add, lambda partial, count: partial / count)


def arg_reduction(pick, better) -> Reduction:
    return Reduction(argchunk(pick), argmerge(better), lambda partial, _: partial[1], parts=(None, int64))


def _dtypes(name: str, x, dtype) -> tuple[DType, DType]:
    if dtype is not None:
        dtype = resolve_dtype(dtype)
        return dtype, wide_type(dtype)
    if name in ("all", "any"):
        return bool_, bool_
    if name in ("argmax", "argmin"):
        return int64, wide_type(x.dtype)
    if name == "mean" and not x.dtype.is_floating_point:
        raise TensorError(f"mean(): could not infer output dtype. Input dtype must be a floating point type, "
                          f"got {x.dtype.name}; pass dtype=")
    if name in ("sum", "prod") and not (x.dtype.is_floating_point or x.dtype.is_complex):
        return int64, int64
    return x.dtype, wide_type(x.dtype)


def reduce(row, x, dim=None, keepdim: bool = False, *, dtype=None):
    """Reduction row `row` over `x`'s `dim` (an int, a tuple, or None for every dimension)."""
    dims = _dims(x, dim, row.name)
    if row.name in _NO_IDENTITY and x.numel() == 0:
        _refuse_empty(row.name, x, dim, dims)
    result, compute = _dtypes(row.name, x, dtype)
    out = device_ops.reduce(row.name, row.numpy, x, dims, keepdim, result, compute, result_maker((x,)))
    if row.grad is None:
        return out
    return autograd.record(out, row.name, (x,), functools.partial(_backward, row, x, dims, keepdim, out))


# Reductions with no value over no elements (torch's `Expected reduction dim ... to have non-zero size`).
_NO_IDENTITY = ("amax", "amin", "argmax", "argmin")


def _refuse_empty(name: str, x, dim, dims) -> None:
    """torch's error for an extreme over no elements: a zero-size reduced dim, or no dim given for an empty
    tensor."""
    if dim is None:
        raise TensorError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                          f"reduction dim with the 'dim' argument.")
    empty = next((d for d in dims if x.shape[d] == 0), None)
    if empty is not None:
        raise TensorError(f"{name}(): Expected reduction dim {empty} to have non-zero size.")


def _backward(row, x, dims, keepdim: bool, out, grad):
    """The output gradient spread back over the reduced elements (keepdim restored, then broadcast)."""
    if not keepdim:
        for d in dims:
            grad, out = grad.unsqueeze(d), out.unsqueeze(d)
    (rule,) = row.grad
    return (rule(grad, x, out, dims),)


class ValuesIndices(tuple):
    """torch.return_types.max / min: a pair with `.values` and `.indices`."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def extreme(which: str):
    """torch.max or torch.min (`which`): of every element, (values, indices) along `dim`, or with a tensor the
    elementwise maximum or minimum."""
    value, index, elementwise = ("amax", "argmax", "maximum") if which == "max" else ("amin", "argmin", "minimum")

    def op(x, dim=None, keepdim: bool = False):
        if is_tensor(dim):
            return getattr(x, elementwise)(dim)
        if x.numel() == 0:
            _refuse_empty(which, x, dim, _dims(x, dim, which))
        if dim is None:
            return getattr(x, value)()
        return ValuesIndices((getattr(x, value)(dim, keepdim), getattr(x, index)(dim, keepdim)))
    op.__name__ = op.__qualname__ = which
    op.__doc__ = f"The {which}imum of every element, or (values, indices) along `dim`, or with a tensor the " \
                 f"elementwise {which}imum."
    return op


def welford_reduction(correction) -> Reduction:
    """The variance as one pass, as torch's kernel computes it (Welford): each chunk's (count, mean, sum of squared
    deviations), merged pairwise by Chan's rule, finished as the sum over (count − `correction`)."""
    def chunk(values, _):
        mean = values.mean(axis=1)
        return (np.full(mean.shape, values.shape[1], dtype=mean.dtype), mean,
                np.square(values - mean[:, None]).sum(axis=1))

    def merge(a, b):
        (count_a, mean_a, m2_a), (count_b, mean_b, m2_b) = a, b
        count = count_a + count_b
        delta = mean_b - mean_a
        return count, mean_a + delta * (count_b / count), m2_a + m2_b + np.square(delta) * (count_a * count_b / count)

    def finish(partial, count):
        with np.errstate(divide="ignore", invalid="ignore"):
            return partial[2] / max(0, count - correction)

    return Reduction(chunk, merge, finish, parts=(None, None, None), passes=WELFORD_PASSES)


# Vector passes over each element of torch's Welford update (aten's WelfordOps: the count converted to float and
# the division by it, each on an SM's 16-a-cycle units, a pass an eighth of the lanes' rate as functional.py's
# EXPONENTIAL_PASSES; the division's Newton steps and rounding; the mean's and the squares' adds): eight, eight,
# eight and six. Twice the FP32 lanes' time of a load of its element on the H200, so its var is bound by them.
WELFORD_PASSES = 30


def _dims(x, dim, call: str) -> tuple[int, ...]:
    """The dims a reduction over `dim` (an int, a tuple, or None for every dimension) reduces, in order: each
    checked as torch checks it (`wrap_dim`), and none listed twice."""
    if dim is None:
        return tuple(range(x.ndim))
    listed = [wrap_dim(d, x.ndim, call) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    repeated = next((d for d in listed if listed.count(d) > 1), None)
    if repeated is not None:
        raise TensorError(f"dim {repeated} appears multiple times in the list of dims")
    return () if x.ndim == 0 else tuple(sorted(listed))


def var(x, dim=None, *, correction=1, keepdim: bool = False, unbiased=None):
    """Variance with Bessel's `correction` (torch's default 1), as one reduction pass (`welford_reduction`); its
    backward is grad · 2(x − mean) / (count − correction), written with tensor methods."""
    if unbiased is not None:
        correction = 1 if unbiased else 0
    dims = _dims(x, dim, "var")
    compute = wide_type(float_type(x.dtype))
    out = device_ops.reduce("var", welford_reduction(correction), x, dims, keepdim, float_type(x.dtype), compute,
                            result_maker((x,)))
    count = x.numel() // max(1, out.numel())

    def backward(grad):
        if not keepdim:
            for d in dims:
                grad = grad.unsqueeze(d)
        return ((x - x.mean(dims, keepdim=True)) * grad * (2 / max(0, count - correction)),)

    return autograd.record(out, "var", (x,), backward)


def std(x, dim=None, *, correction=1, keepdim: bool = False, unbiased=None):
    """Standard deviation: the square root of `var`."""
    return var(x, dim, correction=correction, keepdim=keepdim, unbiased=unbiased).sqrt()


def norm(x, p="fro", dim=None, keepdim: bool = False):
    """The 2-norm (p=2 or 'fro') as one reduction pass, as torch's kernel computes it: the sum of squares, its square
    root at the end; its backward is grad · x / norm."""
    if p not in (2, 2.0, "fro"):
        raise TensorError(f"norm: p={p!r} is not supported by kernbench; it computes the 2-norm (p=2 or 'fro')")
    dims = _dims(x, dim, "norm")
    squares = Reduction(lambda values, _: np.square(values).sum(axis=1), np.add, lambda partial, _: np.sqrt(partial))
    out = device_ops.reduce("norm", squares, x, dims, keepdim, float_type(x.dtype), wide_type(float_type(x.dtype)),
                            result_maker((x,)))

    def backward(grad):
        total = out
        if not keepdim:
            for d in dims:
                grad, total = grad.unsqueeze(d), total.unsqueeze(d)
        return (x * (grad / total),)

    return autograd.record(out, "norm", (x,), backward)

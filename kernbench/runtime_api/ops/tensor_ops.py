"""torch's tensor operations as rows of tables, bound to `Tensor` and the `torch` namespace in one place.

Each elementwise op is a row — its numpy implementation and its dtype rule
— and each reduction a row of `device_ops.Reduction`s; the same row gives
the method (`x.exp()`), the in-place method (`x.exp_()`), the operator where
there is one (`x + y`, `x += y`) and the `torch.` function (`torch.exp(x)`).
Composite ops (softmax, layer_norm, var, …) are written in terms of rows, so
they are as many device ops as they have steps, each timed and logged. The
cost rules are device_ops.py's: one vector-unit pass over the elements per
elementwise op or reduction step, 2·m·n·k flops on the matrix unit per
matmul block (adr/0016-device-ops.md).
"""

from __future__ import annotations

import functools
import math
import operator
from types import SimpleNamespace

import numpy as np

from kernbench.dtypes import DType, bool_, float32, int64, resolve_dtype
from kernbench.runtime_api import autograd
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.device_ops import Reduction, float_type
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops.promotion import category, is_tensor, result_type
from kernbench.runtime_api.tensor.core import DEFAULT_POLICY, Tensor, device_tensor


def _erf(x):
    """erf to ~1e-7 (Abramowitz & Stegun 7.1.26), enough for every dtype's tolerance; numpy has none."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


# Dtype rules: "same" keeps torch's promoted type; "float" turns integers into float32; "bool" gives bool
# (comparisons, logical ops); "integral" refuses floating types (bitwise ops).
UNARY = {
    "neg": (np.negative, "same"), "abs": (np.abs, "same"), "square": (np.square, "same"),
    "sign": (np.sign, "same"), "floor": (np.floor, "same"), "ceil": (np.ceil, "same"),
    "round": (np.round, "same"), "trunc": (np.trunc, "same"), "relu": (lambda x: np.maximum(x, 0), "same"),
    "exp": (np.exp, "float"), "exp2": (np.exp2, "float"), "expm1": (np.expm1, "float"), "log": (np.log, "float"),
    "log2": (np.log2, "float"), "log10": (np.log10, "float"), "log1p": (np.log1p, "float"),
    "sqrt": (np.sqrt, "float"), "rsqrt": (lambda x: 1.0 / np.sqrt(x), "float"),
    "reciprocal": (lambda x: 1.0 / x, "float"), "sin": (np.sin, "float"), "cos": (np.cos, "float"),
    "tan": (np.tan, "float"), "tanh": (np.tanh, "float"), "sigmoid": (_sigmoid, "float"), "erf": (_erf, "float"),
    "silu": (lambda x: x * _sigmoid(x), "float"), "gelu": (lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))), "float"),
    "logical_not": (np.logical_not, "bool"), "bitwise_not": (np.invert, "integral"),
    "isnan": (np.isnan, "bool"), "isinf": (np.isinf, "bool"), "isfinite": (np.isfinite, "bool"),
}
BINARY = {
    "add": (np.add, "same"), "sub": (np.subtract, "same"), "mul": (np.multiply, "same"),
    "div": (np.true_divide, "float"), "true_divide": (np.true_divide, "float"),
    "floor_divide": (np.floor_divide, "same"), "remainder": (np.remainder, "same"), "fmod": (np.fmod, "same"),
    "pow": (np.power, "same"), "maximum": (np.maximum, "same"), "minimum": (np.minimum, "same"),
    "atan2": (np.arctan2, "float"),
    "eq": (np.equal, "bool"), "ne": (np.not_equal, "bool"), "lt": (np.less, "bool"), "le": (np.less_equal, "bool"),
    "gt": (np.greater, "bool"), "ge": (np.greater_equal, "bool"),
    "logical_and": (np.logical_and, "bool"), "logical_or": (np.logical_or, "bool"),
    "logical_xor": (np.logical_xor, "bool"),
    "bitwise_and": (np.bitwise_and, "integral"), "bitwise_or": (np.bitwise_or, "integral"),
    "bitwise_xor": (np.bitwise_xor, "integral"),
}
# Backward rows: d(op)/d(operand) applied to the output gradient g, given the operands and the output.
_LN2, _LN10 = math.log(2.0), math.log(10.0)
UNARY_GRAD = {
    "neg": lambda g, x, out: -g, "abs": lambda g, x, out: g * x.sign(), "square": lambda g, x, out: g * x * 2,
    "relu": lambda g, x, out: where(x > 0, g, 0.0),
    "exp": lambda g, x, out: g * out, "exp2": lambda g, x, out: g * out * _LN2,
    "expm1": lambda g, x, out: g * (out + 1), "log": lambda g, x, out: g / x,
    "log2": lambda g, x, out: g / (x * _LN2), "log10": lambda g, x, out: g / (x * _LN10),
    "log1p": lambda g, x, out: g / (x + 1), "sqrt": lambda g, x, out: g / (out * 2),
    "rsqrt": lambda g, x, out: g * out * out * out * -0.5, "reciprocal": lambda g, x, out: -(g * out * out),
    "sin": lambda g, x, out: g * x.cos(), "cos": lambda g, x, out: -(g * x.sin()),
    "tan": lambda g, x, out: g * (out * out + 1), "tanh": lambda g, x, out: g * (1 - out * out),
    "sigmoid": lambda g, x, out: g * out * (1 - out),
    "erf": lambda g, x, out: g * (x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)),
    "silu": lambda g, x, out: g * _silu_slope(x),
    "gelu": lambda g, x, out: g * ((x / math.sqrt(2.0)).erf() * 0.5 + 0.5
                                   + x * (x * x * -0.5).exp() / math.sqrt(2.0 * math.pi)),
    **{name: (lambda g, x, out: g * 0.0) for name in ("sign", "floor", "ceil", "round", "trunc")},
}
BINARY_GRAD = {
    "add": (lambda g, a, b, out: g, lambda g, a, b, out: g),
    "sub": (lambda g, a, b, out: g, lambda g, a, b, out: -g),
    "mul": (lambda g, a, b, out: g * b, lambda g, a, b, out: g * a),
    "div": (lambda g, a, b, out: g / b, lambda g, a, b, out: -(g * a / (b * b))),
    "true_divide": (lambda g, a, b, out: g / b, lambda g, a, b, out: -(g * a / (b * b))),
    "pow": (lambda g, a, b, out: g * b * a ** (b - 1), lambda g, a, b, out: g * out * _log(a)),
    "maximum": (lambda g, a, b, out: g * _share(a > b, a == b), lambda g, a, b, out: g * _share(b > a, a == b)),
    "minimum": (lambda g, a, b, out: g * _share(a < b, a == b), lambda g, a, b, out: g * _share(b < a, a == b)),
    "atan2": (lambda g, a, b, out: g * b / (a * a + b * b), lambda g, a, b, out: -(g * a / (a * a + b * b))),
    "remainder": (lambda g, a, b, out: g, lambda g, a, b, out: -(g * (a / b).floor())),
    "fmod": (lambda g, a, b, out: g, lambda g, a, b, out: -(g * (a / b).trunc())),
    "floor_divide": (lambda g, a, b, out: g * 0.0, lambda g, a, b, out: g * 0.0),
}


def _silu_slope(x):
    s = x.sigmoid()
    return s * (x * (1 - s) + 1)


def _share(wins, ties):
    """1 where an operand wins, 1/2 where the two tie (torch splits the gradient of max/min on ties)."""
    return wins.float() + ties.float() * 0.5


def _log(value):
    return value.log() if is_tensor(value) else math.log(value)


OPERATORS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "floordiv": "floor_divide", "mod": "remainder",
    "pow": "pow", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
}
COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _dtypes(name: str, rule: str, operands) -> tuple[DType, DType]:
    """(result dtype, dtype the op computes in) for `operands` under `rule`."""
    promoted = result_type(*operands)
    if rule == "float":
        return float_type(promoted), float_type(promoted)
    if rule == "bool":
        return bool_, bool_ if name.startswith("logical") else promoted
    if rule == "integral" and promoted.is_floating_point:
        raise TensorError(f"{name}: not implemented for floating types ({promoted.name}); it takes integers or bool")
    return promoted, promoted


def _maker(operands):
    """A function making the result tensors of an op over `operands` (in their run)."""
    ctx = next((op._ctx for op in operands if is_tensor(op)), None)
    if ctx is None:
        raise TensorError("a tensor op needs at least one tensor operand")

    def new(shape, dtype: DType, device, name: str) -> Tensor:
        if device.is_host:
            return Tensor(ctx, shape, dtype, device, ctx.next_tensor_name("host"),
                          host_array=np.empty(shape, dtype.numpy))
        return device_tensor(ctx, shape, dtype, device.index, DEFAULT_POLICY, ctx.next_tensor_name(name))

    return new


def apply(name: str, *operands, out: Tensor | None = None) -> Tensor:
    """The elementwise op `name` (a row of UNARY or BINARY, or `where`) over tensors and numbers."""
    fn, rule = UNARY[name] if name in UNARY else BINARY[name]
    result, compute = _dtypes(name, rule, operands)
    if out is not None and category(result) > category(out.dtype):
        raise TensorError(f"{name}: result type {result.name} can't be cast to the output {out.name!r} of type "
                          f"{out.dtype.name}")
    value = device_ops.elementwise(name, fn, list(operands), out.dtype if out is not None else result, compute,
                                   out=out, new_tensor=_maker(operands))
    if out is not None or not result.is_floating_point:
        return value
    return autograd.record(value, name, operands, functools.partial(_elementwise_backward, name, operands, value))


def _elementwise_backward(name: str, operands, out, grad):
    if name in UNARY_GRAD:
        return (UNARY_GRAD[name](grad, operands[0], out),)
    rules = BINARY_GRAD.get(name)
    if rules is None:
        raise TensorError(f"{name}: no gradient is defined for it in kernbench")
    return tuple(rule(grad, *operands, out) if autograd.requires_grad(operand) else None
                 for rule, operand in zip(rules, operands))


def add(x, y, *, alpha=1, out=None):
    """x + alpha·y (one vector op per element)."""
    return apply("add", x, y if alpha == 1 else _scaled(y, alpha), out=out)


def sub(x, y, *, alpha=1, out=None):
    """x − alpha·y."""
    return apply("sub", x, y if alpha == 1 else _scaled(y, alpha), out=out)


def _scaled(y, alpha):
    return apply("mul", y, alpha) if is_tensor(y) else y * alpha


def where(condition, x, y):
    """x where `condition` else y, broadcast (one vector op per element)."""
    dtype = result_type(x, y)
    out = device_ops.elementwise("where", lambda c, a, b: np.where(c.astype(bool), a, b), [condition, x, y],
                                 dtype, dtype, new_tensor=_maker((condition, x, y)))
    return autograd.record(out, "where", (condition, x, y), lambda g: (
        None, where(condition, g, 0.0) if autograd.requires_grad(x) else None,
        where(condition, 0.0, g) if autograd.requires_grad(y) else None))


def clamp(x, min=None, max=None, *, out=None):
    """x limited to [min, max] (either may be None; numbers or tensors)."""
    if min is None and max is None:
        raise TensorError("clamp: at least one of min and max must be given")
    low = x if min is None else apply("maximum", x, min, out=out)
    return low if max is None else apply("minimum", low, max, out=out)


def masked_fill(x, mask, value, *, out=None):
    """`value` where `mask` is true, else x, in x's dtype."""
    if out is not None:
        autograd.check_in_place(out, "masked_fill", (mask, value))
    filled = device_ops.elementwise("masked_fill", lambda m, a, v: np.where(m.astype(bool), v, a), [mask, x, value],
                                    x.dtype, x.dtype, out=out, new_tensor=_maker((x, mask)))
    return filled if out is not None else autograd.record(filled, "masked_fill", (mask, x),
                                                          lambda g: (None, where(mask, 0.0, g)))


def to_dtype(x, dtype) -> Tensor:
    """x converted to `dtype` (itself when it already is): one vector pass, as a cast kernel."""
    dtype = resolve_dtype(dtype)
    if dtype is x.dtype:
        return x
    out = device_ops.elementwise("to", lambda a: a, [x], dtype, x.dtype, new_tensor=_maker((x,)))
    return autograd.record(out, "to", (x,), lambda g: (to_dtype(g, x.dtype),)) if dtype.is_floating_point else out


# ---- reductions ------------------------------------------------------------------------------------
def _argchunk(pick):
    def chunk(values, first):
        index = pick(values, axis=1)
        return np.take_along_axis(values, index[:, None], axis=1)[:, 0], index + first
    return chunk


def _argmerge(better):
    def merge(a, b):
        take_b = better(b[0], a[0])
        return np.where(take_b, b[0], a[0]), np.where(take_b, b[1], a[1])
    return merge


REDUCTIONS = {
    "sum": Reduction(lambda v, _: v.sum(axis=1), np.add),
    "prod": Reduction(lambda v, _: v.prod(axis=1), np.multiply),
    "mean": Reduction(lambda v, _: v.sum(axis=1), np.add, lambda partial, count: partial / count),
    "amax": Reduction(lambda v, _: v.max(axis=1), np.maximum),
    "amin": Reduction(lambda v, _: v.min(axis=1), np.minimum),
    "argmax": Reduction(_argchunk(np.argmax), _argmerge(np.greater), lambda partial, _: partial[1]),
    "argmin": Reduction(_argchunk(np.argmin), _argmerge(np.less), lambda partial, _: partial[1]),
    "all": Reduction(lambda v, _: v.all(axis=1), np.logical_and),
    "any": Reduction(lambda v, _: v.any(axis=1), np.logical_or),
}


def _reduction_dtypes(name: str, x, dtype) -> tuple[DType, DType]:
    if dtype is not None:
        dtype = resolve_dtype(dtype)
        return dtype, _wide(dtype)
    if name in ("all", "any"):
        return bool_, bool_
    if name in ("argmax", "argmin"):
        return int64, _wide(x.dtype)
    if name == "mean" and not x.dtype.is_floating_point:
        raise TensorError(f"mean(): could not infer output dtype. Input dtype must be a floating point type, "
                          f"got {x.dtype.name}; pass dtype=")
    if name in ("sum", "prod") and not x.dtype.is_floating_point:
        return int64, int64
    return x.dtype, _wide(x.dtype)


def _wide(dtype: DType) -> DType:
    """Half types accumulate in float32, as torch's reductions do."""
    return float32 if dtype.name in ("f16", "bf16") else dtype


def reduce(name: str, x, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Reduce `x` over `dim` (an int, a tuple, or None for every dimension)."""
    if dim is None:
        dims = tuple(range(x.ndim))
    else:
        dims = tuple(sorted({operator.index(d) % max(x.ndim, 1) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}))
    if x.ndim == 0:
        dims = ()
    result, compute = _reduction_dtypes(name, x, dtype)
    out = device_ops.reduce(name, REDUCTIONS[name], x, dims, keepdim, result, compute, _maker((x,)))
    if name not in _REDUCTION_GRAD:
        return out
    return autograd.record(out, name, (x,), functools.partial(_reduction_backward, name, x, dims, keepdim, out))


def _reduction_backward(name: str, x, dims, keepdim: bool, out, grad):
    """The output gradient spread back over the reduced elements (keepdim restored, then broadcast)."""
    if not keepdim:
        for d in dims:
            grad, out = grad.unsqueeze(d), out.unsqueeze(d)
    return (_REDUCTION_GRAD[name](grad, x, out, dims),)


_REDUCTION_GRAD = {
    "sum": lambda g, x, out, dims: g.expand(x.shape),
    "mean": lambda g, x, out, dims: g.expand(x.shape) / max(1, x.numel() // max(1, out.numel())),
    "prod": lambda g, x, out, dims: g * out / x,
    **{name: (lambda g, x, out, dims: where(x == out, g / (x == out).to_dtype(g.dtype).sum(dims, keepdim=True), 0.0))
       for name in ("amax", "amin")},
}


class _ValuesIndices(tuple):
    """torch.return_types.max / min: a pair with `.values` and `.indices`."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _max_or_min(which: str):
    def op(x, dim=None, keepdim: bool = False):
        if dim is None:
            return reduce("amax" if which == "max" else "amin", x)
        if is_tensor(dim):  # torch.max(a, b) is the elementwise maximum
            return apply("maximum" if which == "max" else "minimum", x, dim)
        return _ValuesIndices((reduce("amax" if which == "max" else "amin", x, dim, keepdim),
                               reduce("argmax" if which == "max" else "argmin", x, dim, keepdim)))
    op.__name__ = which
    op.__doc__ = f"The {which}imum of every element, or (values, indices) along `dim`."
    return op


def var(x, dim=None, *, correction=1, keepdim: bool = False, unbiased=None):
    """Variance with Bessel's `correction` (torch's default 1): mean, subtract, square, sum, divide."""
    if unbiased is not None:
        correction = 1 if unbiased else 0
    centered = sub(x, reduce("mean", x, dim, keepdim=True))
    total = reduce("sum", apply("square", centered), dim, keepdim)
    count = x.numel() // max(1, total.numel()) if dim is not None else x.numel()
    return apply("div", total, max(0, count - correction))


def std(x, dim=None, *, correction=1, keepdim: bool = False, unbiased=None):
    """Standard deviation: the square root of `var`."""
    return apply("sqrt", var(x, dim, correction=correction, keepdim=keepdim, unbiased=unbiased))


def norm(x, p="fro", dim=None, keepdim: bool = False):
    """The 2-norm (p=2 or 'fro'): square, sum, square root."""
    if p not in (2, 2.0, "fro"):
        raise TensorError(f"norm: p={p!r} is not supported by kernbench; it computes the 2-norm (p=2 or 'fro')")
    return apply("sqrt", reduce("sum", apply("square", x), dim, keepdim))


# ---- matmul and friends ------------------------------------------------------------------------------
def matmul(a, b):
    """torch.matmul: dot, matrix-vector, matrix and batched products (batch dims broadcast)."""
    if a.ndim == 0 or b.ndim == 0:
        raise TensorError("matmul: both arguments need at least one dimension")
    if a.dtype is not b.dtype:
        raise TensorError(f"matmul: expected both operands to have the same dtype, got {a.dtype.name} and "
                          f"{b.dtype.name}")
    device_ops.check_same_device([a, b], "matmul")
    left, right = (a.unsqueeze(0) if a.ndim == 1 else a), (b.unsqueeze(-1) if b.ndim == 1 else b)
    if left.shape[-1] != right.shape[-2]:
        raise TensorError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied "
                          f"({left.shape[-1]} != {right.shape[-2]})")
    batch = device_ops.broadcast_shape([left.shape[:-2], right.shape[:-2]], "matmul")
    out = _maker((a,))(batch + (left.shape[-2], right.shape[-1]), a.dtype, a.device, "matmul")
    if not a.device.is_host:
        try:
            a._ctx.topology.pe.matrix_unit.rate(a.dtype.name)
        except Exception:
            raise TensorError(f"matmul: the matrix unit has no rate for {a.dtype.name} in this topology "
                              f"(it has {', '.join(a._ctx.topology.dtypes)})") from None
    device_ops.matmul(left, right, out)
    autograd.record(out, "matmul", (left, right), lambda g: (
        matmul(g, right.mT) if autograd.requires_grad(left) else None,
        matmul(left.mT, g) if autograd.requires_grad(right) else None))
    if a.ndim == 1:
        out = out.squeeze(-2)
    if b.ndim == 1:
        out = out.squeeze(-1)
    return out


def mm(a, b):
    """Matrix product of two 2-D tensors."""
    if a.ndim != 2 or b.ndim != 2:
        raise TensorError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return matmul(a, b)


def bmm(a, b):
    """Batched matrix product of two 3-D tensors with equal batch sizes."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise TensorError(f"bmm: expected 3-D tensors with one batch size, got shapes {a.shape} and {b.shape}")
    return matmul(a, b)


def linear(x, weight, bias=None):
    """x @ weightᵀ (+ bias): a matmul, then an add."""
    out = matmul(x, weight.mT if weight.ndim >= 2 else weight)
    return out if bias is None else add(out, bias)


# ---- shapes ---------------------------------------------------------------------------------------
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
    out = _maker(tensors)(shape, result_type(*tensors), first.device, "cat")
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


# ---- comparisons to the host ----------------------------------------------------------------------
def isclose(a, b, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False):
    """|a − b| ≤ atol + rtol·|b|, elementwise (one vector op per element)."""
    dtype = float_type(result_type(a, b))

    def close(x, y):
        near = np.abs(x - y) <= atol + rtol * np.abs(y)
        return near | (np.isnan(x) & np.isnan(y)) if equal_nan else near | (x == y)

    return device_ops.elementwise("isclose", close, [a, b], bool_, dtype, new_tensor=_maker((a, b)))


def allclose(a, b, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether every element is close: isclose, an all-reduction, and a host read of one value."""
    return bool(reduce("all", isclose(a, b, rtol, atol, equal_nan)).item())


def equal(a, b) -> bool:
    """Same shape and the same values: eq, an all-reduction, a host read."""
    return a.shape == b.shape and bool(reduce("all", apply("eq", a, b)).item())


# ---- nn.functional ------------------------------------------------------------------------------
def softmax(x, dim: int | None = None, dtype=None, *, axis: int | None = None):
    """exp(x − max) / sum: four device ops (amax, subtract-exp, sum, divide), as a fused kernel's passes."""
    dim = axis if dim is None else dim
    if dtype is not None:
        x = to_dtype(x, dtype)
    shifted = _sub_exp(x, reduce("amax", x, dim, keepdim=True))
    return apply("div", shifted, reduce("sum", shifted, dim, keepdim=True))


def log_softmax(x, dim: int, dtype=None):
    """x − max − log(sum(exp(x − max)))."""
    if dtype is not None:
        x = to_dtype(x, dtype)
    top = reduce("amax", x, dim, keepdim=True)
    total = apply("log", reduce("sum", _sub_exp(x, top), dim, keepdim=True))
    return sub(sub(x, top), total)


def _sub_exp(x, m):
    dtype = float_type(result_type(x, m))
    out = device_ops.elementwise("sub_exp", lambda a, b: np.exp(a - b), [x, m], dtype, dtype,
                                 new_tensor=_maker((x, m)))
    return autograd.record(out, "sub_exp", (x, m), lambda g: (g * out, -(g * out)))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(x − mean) / sqrt(var + eps) · weight + bias over the last dims (biased variance, as torch)."""
    dims = tuple(range(x.ndim - len(tuple(normalized_shape)), x.ndim))
    centered = sub(x, reduce("mean", x, dims, keepdim=True))
    inv = apply("rsqrt", add(reduce("mean", apply("square", centered), dims, keepdim=True), eps))
    out = apply("mul", centered, inv)
    if weight is not None:
        out = apply("mul", out, weight)
    return out if bias is None else add(out, bias)


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    """x / sqrt(mean(x²) + eps) · weight over the last dims (eps: the dtype's machine epsilon by default)."""
    dims = tuple(range(x.ndim - len(tuple(normalized_shape)), x.ndim))
    eps = float(np.finfo(x.dtype.numpy).eps) if eps is None else eps
    inv = apply("rsqrt", add(reduce("mean", apply("square", x), dims, keepdim=True), eps))
    out = apply("mul", x, inv)
    return out if weight is None else apply("mul", out, weight)


def gelu(x, approximate: str = "none"):
    """GELU, exact (erf) or `approximate='tanh'`: one vector op per element."""
    if approximate not in ("none", "tanh"):
        raise TensorError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "tanh":
        dtype = float_type(x.dtype)
        out = device_ops.elementwise("gelu_tanh", _gelu_tanh, [x], dtype, dtype, new_tensor=_maker((x,)))
        return autograd.record(out, "gelu_tanh", (x,), lambda g: (g * gelu_tanh_slope(x),))
    return apply("gelu", x)


def gelu_tanh_slope(x):
    """d/dx of the tanh-approximated GELU, as device ops (also the backward of fused bias-GELU kernels)."""
    k = math.sqrt(2.0 / math.pi)
    t = ((x + x * x * x * 0.044715) * k).tanh()
    return (t + 1) * 0.5 + x * (1 - t * t) * (x * x * (3 * 0.044715) + 1) * (0.5 * k)


def uniform_(x, a: float = 0.0, b: float = 1.0, *, generator=None):
    """Fill with U(a, b) in place (a device fill: one vector pass and a store per tile)."""
    autograd.check_in_place(x, "uniform", ())
    rng = x._ctx.rng_for(generator, x.device)
    device_ops.generate("uniform_", lambda count: rng.uniform(a, b, count), x)
    return x


def normal_(x, mean: float = 0.0, std: float = 1.0, *, generator=None):
    """Fill with N(mean, std²) in place (a device fill)."""
    autograd.check_in_place(x, "normal", ())
    rng = x._ctx.rng_for(generator, x.device)
    device_ops.generate("normal_", lambda count: rng.normal(mean, std, count), x)
    return x


def testing_assert_close(actual, expected, *, rtol=None, atol=None, equal_nan: bool = False, msg=None, **_):
    """`torch.testing.assert_close`: host reads of both, compared with torch's default tolerances per dtype."""
    got = np.asarray(actual.numpy() if is_tensor(actual) else actual, dtype=np.float64)
    want = np.asarray(expected.numpy() if is_tensor(expected) else expected, dtype=np.float64)
    dtype = actual.dtype if is_tensor(actual) else float32
    default_rtol, default_atol = _ASSERT_CLOSE_TOLERANCE.get(dtype.name, (0.0, 0.0))
    np.testing.assert_allclose(got, want, rtol=default_rtol if rtol is None else rtol,
                               atol=default_atol if atol is None else atol, equal_nan=equal_nan,
                               err_msg=msg or "")


# torch.testing.assert_close's defaults (rtol, atol) by dtype.
_ASSERT_CLOSE_TOLERANCE = {"f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "f32": (1.3e-6, 1e-5), "f64": (1e-7, 1e-7)}


def dropout(x, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Identity when not training; else zero each element with probability p and scale the rest by 1/(1−p)."""
    if not 0 <= p <= 1:
        raise TensorError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return x
    rng = x._ctx.rng_for(None, x.device)  # the rank's generator of x's device, drawn from in program order
    new = _maker((x,))
    keep = device_ops.elementwise("rand", lambda a: rng.random(a.shape), [x], float32, float32, new_tensor=new)
    if inplace:
        autograd.check_in_place(x, "dropout", ())
    out = device_ops.elementwise("dropout", lambda a, r: np.where(r >= p, a / (1 - p), 0), [x, keep],
                                 x.dtype, float_type(x.dtype), out=x if inplace else None, new_tensor=new)
    return autograd.record(out, "dropout", (x,), lambda g: (where(keep >= p, g / (1 - p), 0.0),))


FUNCTIONAL = {
    "relu": lambda x, inplace=False: apply("relu", x, out=x if inplace else None),
    "gelu": gelu, "silu": lambda x, inplace=False: apply("silu", x, out=x if inplace else None),
    "sigmoid": lambda x: apply("sigmoid", x), "tanh": lambda x: apply("tanh", x),
    "linear": linear, "layer_norm": layer_norm, "rms_norm": rms_norm, "softmax": softmax,
    "log_softmax": log_softmax, "dropout": dropout,
}


def functional_namespace() -> SimpleNamespace:
    """`torch.nn.functional` as kernbench provides it."""
    return SimpleNamespace(**FUNCTIONAL)


# ---- binding ---------------------------------------------------------------------------------------
def _method(name: str):
    def method(self, *others, out=None):
        return apply(name, self, *others, out=out)
    method.__name__ = name
    method.__doc__ = f"torch.{name} (an elementwise device op: one vector-unit pass over the elements)."
    return method


def _in_place(name: str):
    def method(self, *others):
        autograd.check_in_place(self, name, others)
        apply(name, self, *others, out=self)
        return self
    method.__name__ = name + "_"
    method.__doc__ = f"In-place {name}: the result is written into this tensor."
    return method


def _operator(name: str, reflected: bool = False):
    def method(self, other):
        return apply(name, other, self) if reflected else apply(name, self, other)
    return method


def _reduction_method(name: str):
    def method(self, dim=None, keepdim: bool = False, *, dtype=None):
        return reduce(name, self, dim, keepdim, dtype=dtype)
    method.__name__ = name
    method.__doc__ = f"torch.{name} over `dim` (a reduction: one vector-unit pass per chunk of the reduced elements)."
    return method


TORCH_FUNCTIONS = {
    **{name: _method(name) for name in (*UNARY, *BINARY)},
    **{name: _reduction_method(name) for name in REDUCTIONS},
    "add": add, "sub": sub, "subtract": sub, "multiply": _method("mul"), "divide": _method("div"),
    "where": where, "clamp": clamp, "clip": clamp, "masked_fill": masked_fill,
    "max": _max_or_min("max"), "min": _max_or_min("min"), "var": var, "std": std, "norm": norm,
    "matmul": matmul, "mm": mm, "bmm": bmm, "cat": cat, "concat": cat, "stack": stack,
    "isclose": isclose, "allclose": allclose, "equal": equal,
    "softmax": softmax, "log_softmax": log_softmax, "relu": FUNCTIONAL["relu"], "sigmoid": FUNCTIONAL["sigmoid"],
}


def _install(cls) -> None:
    """Give `Tensor` every row as a method, its in-place form and its operator."""
    for name in (*UNARY, *BINARY):
        setattr(cls, name, _method(name))
        setattr(cls, name + "_", _in_place(name))
    for name in REDUCTIONS:
        setattr(cls, name, _reduction_method(name))
    for dunder, name in OPERATORS.items():
        setattr(cls, f"__{dunder}__", _operator(name))
        setattr(cls, f"__r{dunder}__", _operator(name, reflected=True))
        setattr(cls, f"__i{dunder}__", _in_place(name))
    for dunder, name in COMPARISONS.items():
        setattr(cls, f"__{dunder}__", _operator(name))
    cls.__hash__ = object.__hash__  # defining __eq__ would otherwise drop it; tensors hash by identity, as torch's
    cls.__neg__ = lambda self: apply("neg", self)
    cls.__abs__ = lambda self: apply("abs", self)
    cls.__invert__ = lambda self: apply("logical_not" if self.dtype is bool_ else "bitwise_not", self)
    cls.__matmul__ = lambda self, other: matmul(self, other)
    cls.__rmatmul__ = lambda self, other: matmul(other, self)
    extra = {
        "add": add, "sub": sub, "subtract": sub, "where": lambda self, condition, y: where(condition, self, y),
        "clamp": clamp, "clip": clamp, "clamp_": lambda self, min=None, max=None: clamp(self, min, max, out=self),
        "masked_fill": masked_fill, "masked_fill_": lambda self, mask, value: masked_fill(self, mask, value, out=self),
        "max": _max_or_min("max"), "min": _max_or_min("min"), "var": var, "std": std, "norm": norm,
        "matmul": matmul, "mm": mm, "bmm": bmm, "softmax": softmax, "log_softmax": log_softmax,
        "to_dtype": to_dtype, "float": lambda self: to_dtype(self, float32),
        "half": lambda self: to_dtype(self, "f16"), "bfloat16": lambda self: to_dtype(self, "bf16"),
        "double": lambda self: to_dtype(self, "f64"), "long": lambda self: to_dtype(self, int64),
        "int": lambda self: to_dtype(self, "i32"), "bool": lambda self: to_dtype(self, bool_),
        "type_as": lambda self, other: to_dtype(self, other.dtype),
        "allclose": allclose, "isclose": isclose, "equal": equal, "uniform_": uniform_, "normal_": normal_,
    }
    for name, fn in extra.items():
        setattr(cls, name, fn)


_install(Tensor)

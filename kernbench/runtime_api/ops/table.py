"""The op table: one row per torch op, as ATen's native_functions.yaml and derivatives.yaml declare them.

A row says everything about an op once: its name and aliases, how it
computes (a numpy function for elementwise rows, a `Reduction` for
reductions, a Python function for the rest), its dtype rule, its derivative,
the forms it takes — `torch.X`, `Tensor.X`, the in-place `Tensor.X_`,
`torch.nn.functional.X`, `torch.testing.X` — the Python operator it backs,
and its **cost class**: how its device work is timed, the hook the
device-op cost model plugs into (adr/0016-device-ops.md). `binding.py` makes
`Tensor`'s methods and operators, the `torch`, `torch.nn.functional` and
`torch.testing` names, and the surface page's op table from these rows, so
adding an op is one row here (and a test).

Derivatives follow derivatives.yaml: one rule per operand, applied to the
output gradient `g`. An elementwise rule is `rule(g, *operands, out)`; a
reduction's is `rule(g, x, out, dims)` with `g` and `out` broadcastable to
`x`. Composite rows have none: autograd records their steps.

Dtype rules of elementwise rows: "same" keeps torch's promoted type;
"real" too, but gives a complex type's real one (abs, angle); "float" turns
integers into float32; "bool" gives bool (comparisons, logical ops);
"integral" refuses floating types (bitwise ops); "complex" makes the complex
type of two real tensors (polar, complex).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernbench.dtypes import bool_, float32, int64
from kernbench.runtime_api.ops import (attention, comparisons, complex_numbers, elementwise, fills, functional, linalg,
                                       losses, positional, reductions, selection, shapes)
from kernbench.runtime_api.ops.device_ops import Reduction
from kernbench.runtime_api.ops.elementwise import where
from kernbench.runtime_api.ops.promotion import is_tensor


class Cost(enum.Enum):
    """How a row's device work is timed: the device ops of device_ops.py that run it, and what they charge."""

    ELEMENTWISE = "an elementwise device op: vector-unit passes over the elements, one unless its row says more"
    REDUCTION = "a reduction: one vector-unit op over each program's part of the reduced elements"
    GEMM = ("a GEMM: 2·m·n·k flops on the matrix units, operand tiles over DMA (split over K: a vector pass summing "
            "the partials)")
    COPY = "copies: one DMA copy per input into its slice of the result"
    FILL = "a device fill: one vector pass and a store per tile"
    FUSED = ("a fused row kernel: each row read once and written once, vector passes over it (a softmax's: those "
             "of torch's kernel)")
    ATTENTION = ("a fused attention kernel: Q, K and V read once per block, the scores kept on chip (4·L·S·E flops "
                 "on the matrix units, vector passes over the scores; causal: the blocks past the diagonal skipped)")
    COMPOSITE = "a composite: the device ops of the rows it is written in"
    VIEW = "a view: no device work, the same storage seen through another layout (and dtype)"
    HOST = "a host read of device values (the device ops before it are the rows it is written in)"


FORMS = ("torch", "method", "inplace", "functional", "testing")


@dataclass(frozen=True)
class OpRow:
    """One op: see the module docstring. `function` is the op's torch form (its first argument the input
    tensor); `method` and `functional` are given only where those forms take other arguments;
    `records_backward` says that the function records its own backward (matmul's, a cast's, a copy's)."""

    name: str
    cost: Cost
    forms: frozenset
    function: Callable | None = None
    numpy: Callable | Reduction | None = None
    dtypes: str = "same"
    grad: tuple | None = None
    aliases: tuple = ()
    operator: str | None = None
    method: Callable | None = None
    functional: Callable | None = None
    operands: int = 1
    records_backward: bool = False
    passes: int = 1  # an elementwise row's vector passes over each element (ERF_PASSES for erf and gelu)

    @property
    def derivative(self) -> str:
        """How autograd differentiates the op: by the row's rules, by the backward its function records, through
        the rows a composite is written in, or not at all."""
        if self.grad is not None:
            return "rules in the row"
        if self.records_backward:
            return "recorded by its function"
        return "through its steps" if self.cost is Cost.COMPOSITE else "none"

    @property
    def doc(self) -> str:
        """What the generated forms of the row say of themselves: the op and its cost class."""
        over = " over `dim`" if self.cost is Cost.REDUCTION else ""
        return f"torch.{self.name}{over} ({self.cost.value})."


def _forms(text: str) -> frozenset:
    forms = frozenset(text.split())
    assert forms <= set(FORMS), forms
    return forms


def _elementwise(name, numpy, dtypes, grad=None, *, operands, forms="torch method inplace", **extra) -> OpRow:
    return OpRow(name, Cost.ELEMENTWISE, _forms(forms), numpy=numpy, dtypes=dtypes, grad=grad, operands=operands,
                 **extra)


def _unary(name, numpy, dtypes, grad=None, **extra) -> OpRow:
    return _elementwise(name, numpy, dtypes, None if grad is None else (grad,), operands=1, **extra)


def _binary(name, numpy, dtypes, grad=None, **extra) -> OpRow:
    return _elementwise(name, numpy, dtypes, grad, operands=2, **extra)


def _reduction(name, reduction: Reduction, grad=None) -> OpRow:
    return OpRow(name, Cost.REDUCTION, _forms("torch method"), numpy=reduction,
                 grad=None if grad is None else (grad,))


def _op(name, cost: Cost, function, forms="torch method", **extra) -> OpRow:
    return OpRow(name, cost, _forms(forms), function=function, **extra)


# ---- numpy formulas that numpy lacks ----------------------------------------------------------------
# Vector passes over each element of torch's erf and exact GELU kernels: CUDA's erff is a polynomial for small
# arguments and an exponential (on the SM's 16-a-cycle units) for large ones, and a warp whose lanes take both
# issues both, about thirty instructions; a half type's conversions to float and back, on the same 16-a-cycle units,
# take eight more. Every other elementwise row is one pass: its memory binds it, where these bind the H200's in
# bf16 (adr/0016, "Cost rules").
ERF_PASSES = 38


def _erf(x):
    """erf to ~1e-7 (Abramowitz & Stegun 7.1.26), enough for every dtype's tolerance; numpy has none."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


# ---- derivative helpers ---------------------------------------------------------------------------
_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _silu_slope(x):
    s = x.sigmoid()
    return s * (x * (1 - s) + 1)


def _share(wins, ties):
    """1 where an operand wins, 1/2 where the two tie (torch splits the gradient of max/min on ties)."""
    return wins.float() + ties.float() * 0.5


def _log(value):
    return value.log() if is_tensor(value) else math.log(value)


def _conj(value):
    """The conjugate of a complex operand (a real one as it is): what the gradient of a product multiplies by."""
    if is_tensor(value):
        return complex_numbers.conj(value)
    return value.conjugate() if isinstance(value, complex) else value


def _angle_slope(g, z):
    """The gradient of angle(z): g·i·z/|z|² for a complex z (∂θ/∂x = −y/|z|², ∂θ/∂y = x/|z|²); none for a real one
    (its angle is 0 or π)."""
    if not z.dtype.is_complex:
        return g * 0.0
    return g * (z * 1j) / (z.abs() * z.abs())


def _polar(r, theta):
    """r·(cos θ + i·sin θ), computed in r's real type as PyTorch does."""
    out = np.empty(np.broadcast_shapes(np.shape(r), np.shape(theta)), dtype=np.result_type(r, theta, np.complex64))
    out.real, out.imag = r * np.cos(theta), r * np.sin(theta)
    return out


def _complex(real, imag):
    out = np.empty(np.broadcast_shapes(np.shape(real), np.shape(imag)), dtype=np.result_type(real, imag, np.complex64))
    out.real, out.imag = real, imag
    return out


def _zero(g, *_):
    return g * 0.0


def _extreme_grad(g, x, out, dims):
    """amax/amin: the gradient shared by the elements equal to the extreme."""
    return where(x == out, g / (x == out).to_dtype(g.dtype).sum(dims, keepdim=True), 0.0)


def _add(x, y, *, alpha=1, out=None):
    """x + alpha·y (one vector op per element)."""
    return elementwise.apply(ROWS["add"], x, _scaled(y, alpha), out=out)


def _sub(x, y, *, alpha=1, out=None):
    """x − alpha·y."""
    return elementwise.apply(ROWS["sub"], x, _scaled(y, alpha), out=out)


def _scaled(y, alpha):
    if alpha == 1:
        return y
    return elementwise.apply(ROWS["mul"], y, alpha) if is_tensor(y) else y * alpha


def _cast_row(name: str, dtype, called: str) -> OpRow:
    """`Tensor.half()` and its kind: a cast, differentiable into a floating type."""
    def cast(self):
        return elementwise.to_dtype(self, dtype)
    cast.__doc__ = f"This tensor as {called} (a cast: one vector pass)."
    floating = called.startswith(("float", "bfloat"))
    return _op(name, Cost.ELEMENTWISE, cast, "method", records_backward=floating)


def _type_as(self, other):
    """This tensor in `other`'s dtype (itself when it already is)."""
    return elementwise.to_dtype(self, other.dtype)


def _where_method(self, condition, y):
    """torch.where(condition, self, y)."""
    return elementwise.where(condition, self, y)


# ---- the rows ---------------------------------------------------------------------------------------
_ROWS = [
    # unary elementwise
    _unary("neg", np.negative, "same", lambda g, x, out: -g, operator="neg"),
    _unary("abs", np.abs, "real", lambda g, x, out: g * x.sign(), operator="abs"),
    _unary("angle", np.angle, "real", lambda g, x, out: _angle_slope(g, x), forms="torch method"),
    _unary("square", np.square, "same", lambda g, x, out: g * x * 2),
    _unary("sign", np.sign, "same", _zero),
    _unary("floor", np.floor, "same", _zero),
    _unary("ceil", np.ceil, "same", _zero),
    _unary("round", np.round, "same", _zero),
    _unary("trunc", np.trunc, "same", _zero),
    _unary("relu", lambda x: np.maximum(x, 0), "same", lambda g, x, out: where(x > 0, g, 0.0),
           forms="torch method inplace functional"),
    _unary("exp", np.exp, "float", lambda g, x, out: g * out),
    _unary("exp2", np.exp2, "float", lambda g, x, out: g * out * _LN2),
    _unary("expm1", np.expm1, "float", lambda g, x, out: g * (out + 1)),
    _unary("log", np.log, "float", lambda g, x, out: g / x),
    _unary("log2", np.log2, "float", lambda g, x, out: g / (x * _LN2)),
    _unary("log10", np.log10, "float", lambda g, x, out: g / (x * _LN10)),
    _unary("log1p", np.log1p, "float", lambda g, x, out: g / (x + 1)),
    _unary("sqrt", np.sqrt, "float", lambda g, x, out: g / (out * 2)),
    _unary("rsqrt", lambda x: 1.0 / np.sqrt(x), "float", lambda g, x, out: g * out * out * out * -0.5),
    _unary("reciprocal", lambda x: 1.0 / x, "float", lambda g, x, out: -(g * out * out)),
    _unary("sin", np.sin, "float", lambda g, x, out: g * x.cos()),
    _unary("cos", np.cos, "float", lambda g, x, out: -(g * x.sin())),
    _unary("tan", np.tan, "float", lambda g, x, out: g * (out * out + 1)),
    _unary("tanh", np.tanh, "float", lambda g, x, out: g * (1 - out * out), forms="torch method inplace functional"),
    _unary("sigmoid", _sigmoid, "float", lambda g, x, out: g * out * (1 - out),
           forms="torch method inplace functional"),
    _unary("erf", _erf, "float", lambda g, x, out: g * (x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)),
           passes=ERF_PASSES),
    _unary("silu", lambda x: x * _sigmoid(x), "float", lambda g, x, out: g * _silu_slope(x),
           forms="torch method inplace functional"),
    _unary("gelu", lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))), "float",
           lambda g, x, out: g * ((x / math.sqrt(2.0)).erf() * 0.5 + 0.5
                                  + x * (x * x * -0.5).exp() / math.sqrt(2.0 * math.pi)),
           forms="torch method inplace functional", functional=functional.gelu, passes=ERF_PASSES),
    _unary("logical_not", np.logical_not, "bool"),
    _unary("bitwise_not", np.invert, "integral"),
    _unary("isnan", np.isnan, "bool"),
    _unary("isinf", np.isinf, "bool"),
    _unary("isfinite", np.isfinite, "bool"),
    # binary elementwise
    _binary("add", np.add, "same", (lambda g, a, b, out: g, lambda g, a, b, out: g), function=_add, operator="add"),
    _binary("sub", np.subtract, "same", (lambda g, a, b, out: g, lambda g, a, b, out: -g), function=_sub,
            aliases=("subtract",), operator="sub"),
    _binary("mul", np.multiply, "same", (lambda g, a, b, out: g * _conj(b), lambda g, a, b, out: g * _conj(a)),
            aliases=("multiply",), operator="mul"),
    _binary("div", np.true_divide, "float", (lambda g, a, b, out: g / _conj(b),
                                             lambda g, a, b, out: -(g * _conj(out / b))),
            aliases=("divide",), operator="truediv"),
    _binary("true_divide", np.true_divide, "float",
            (lambda g, a, b, out: g / b, lambda g, a, b, out: -(g * a / (b * b)))),
    _binary("floor_divide", np.floor_divide, "same", (_zero, _zero), operator="floordiv"),
    _binary("remainder", np.remainder, "same", (lambda g, a, b, out: g, lambda g, a, b, out: -(g * (a / b).floor())),
            operator="mod"),
    _binary("fmod", np.fmod, "same", (lambda g, a, b, out: g, lambda g, a, b, out: -(g * (a / b).trunc()))),
    _binary("pow", np.power, "same", (lambda g, a, b, out: g * b * a ** (b - 1),
                                      lambda g, a, b, out: g * out * _log(a)), operator="pow"),
    _binary("maximum", np.maximum, "same", (lambda g, a, b, out: g * _share(a > b, a == b),
                                            lambda g, a, b, out: g * _share(b > a, a == b))),
    _binary("minimum", np.minimum, "same", (lambda g, a, b, out: g * _share(a < b, a == b),
                                            lambda g, a, b, out: g * _share(b < a, a == b))),
    _binary("atan2", np.arctan2, "float", (lambda g, a, b, out: g * b / (a * a + b * b),
                                           lambda g, a, b, out: -(g * a / (a * a + b * b)))),
    _binary("polar", _polar, "complex", (lambda g, r, t, out: g.real * t.cos() + g.imag * t.sin(),
                                         lambda g, r, t, out: g.imag * out.real - g.real * out.imag), forms="torch"),
    _binary("complex", _complex, "complex", (lambda g, re, im, out: g.real, lambda g, re, im, out: g.imag),
            forms="torch"),
    _binary("eq", np.equal, "bool", operator="eq"),
    _binary("ne", np.not_equal, "bool", operator="ne"),
    _binary("lt", np.less, "bool", operator="lt"),
    _binary("le", np.less_equal, "bool", operator="le"),
    _binary("gt", np.greater, "bool", operator="gt"),
    _binary("ge", np.greater_equal, "bool", operator="ge"),
    _binary("logical_and", np.logical_and, "bool"),
    _binary("logical_or", np.logical_or, "bool"),
    _binary("logical_xor", np.logical_xor, "bool"),
    _binary("bitwise_and", np.bitwise_and, "integral", operator="and"),
    _binary("bitwise_or", np.bitwise_or, "integral", operator="or"),
    _binary("bitwise_xor", np.bitwise_xor, "integral", operator="xor"),
    # elementwise ops with arguments of their own
    _op("where", Cost.ELEMENTWISE, elementwise.where, method=_where_method, records_backward=True),
    _op("clamp", Cost.COMPOSITE, elementwise.clamp, "torch method inplace", aliases=("clip",)),
    _op("masked_fill", Cost.ELEMENTWISE, elementwise.masked_fill, "torch method inplace", records_backward=True),
    _op("to_dtype", Cost.ELEMENTWISE, elementwise.to_dtype, "method", records_backward=True),
    _cast_row("float", float32, "float32"),
    _cast_row("half", "f16", "float16"),
    _cast_row("bfloat16", "bf16", "bfloat16"),
    _cast_row("double", "f64", "float64"),
    _cast_row("long", int64, "int64"),
    _cast_row("int", "i32", "int32"),
    _cast_row("bool", bool_, "bool"),
    _op("type_as", Cost.ELEMENTWISE, _type_as, "method", records_backward=True),
    # reductions
    _reduction("sum", Reduction(lambda v, _: v.sum(axis=1), np.add), lambda g, x, out, dims: g.expand(x.shape)),
    _reduction("prod", Reduction(lambda v, _: v.prod(axis=1), np.multiply), lambda g, x, out, dims: g * out / x),
    _reduction("mean", reductions.mean_reduction(),
               lambda g, x, out, dims: g.expand(x.shape) / max(1, x.numel() // max(1, out.numel()))),
    _reduction("amax", Reduction(lambda v, _: v.max(axis=1), np.maximum), _extreme_grad),
    _reduction("amin", Reduction(lambda v, _: v.min(axis=1), np.minimum), _extreme_grad),
    _reduction("argmax", reductions.arg_reduction(np.argmax, np.greater)),
    _reduction("argmin", reductions.arg_reduction(np.argmin, np.less)),
    _reduction("all", Reduction(lambda v, _: v.all(axis=1), np.logical_and)),
    _reduction("any", Reduction(lambda v, _: v.any(axis=1), np.logical_or)),
    _op("max", Cost.COMPOSITE, reductions.extreme("max")),
    _op("min", Cost.COMPOSITE, reductions.extreme("min")),
    _op("var", Cost.REDUCTION, reductions.var, records_backward=True),
    _op("std", Cost.COMPOSITE, reductions.std),
    _op("norm", Cost.REDUCTION, reductions.norm, records_backward=True),
    _op("topk", Cost.REDUCTION, selection.topk),
    _op("multinomial", Cost.REDUCTION, selection.multinomial),
    # matrix products
    _op("matmul", Cost.GEMM, linalg.matmul, operator="matmul", operands=2, records_backward=True),
    _op("mm", Cost.GEMM, linalg.mm, records_backward=True),
    _op("bmm", Cost.GEMM, linalg.bmm, records_backward=True),
    _op("linear", Cost.GEMM, linalg.linear, "functional", records_backward=True),
    # complex numbers: views between a complex tensor and its real pairs
    _op("view_as_real", Cost.VIEW, complex_numbers.view_as_real, "torch", records_backward=True),
    _op("view_as_complex", Cost.VIEW, complex_numbers.view_as_complex, "torch", records_backward=True),
    _op("real", Cost.VIEW, complex_numbers.real, "torch", records_backward=True),
    _op("imag", Cost.VIEW, complex_numbers.imag, "torch", records_backward=True),
    _op("conj", Cost.ELEMENTWISE, complex_numbers.conj, records_backward=True),
    _op("outer", Cost.ELEMENTWISE, complex_numbers.outer, records_backward=True),
    # joining tensors
    _op("cat", Cost.COPY, shapes.cat, "torch", aliases=("concat",), records_backward=True),
    _op("stack", Cost.COPY, shapes.stack, "torch", records_backward=True),
    _op("vstack", Cost.COPY, shapes.vstack, "torch", records_backward=True),
    _op("pad", Cost.COPY, shapes.pad, "functional", records_backward=True),
    # masks made from positions
    _op("tril", Cost.COMPOSITE, positional.tril),
    _op("triu", Cost.COMPOSITE, positional.triu),
    _op("one_hot", Cost.COMPOSITE, positional.one_hot, "functional"),
    # comparisons
    _op("isclose", Cost.ELEMENTWISE, comparisons.isclose),
    _op("allclose", Cost.HOST, comparisons.allclose),
    _op("equal", Cost.HOST, comparisons.equal),
    _op("assert_close", Cost.HOST, comparisons.assert_close, "testing"),
    # torch.nn.functional
    _op("softmax", Cost.FUSED, functional.softmax, "torch method functional", records_backward=True),
    _op("log_softmax", Cost.FUSED, functional.log_softmax, "torch method functional", records_backward=True),
    _op("layer_norm", Cost.FUSED, functional.layer_norm, "functional", records_backward=True),
    _op("rms_norm", Cost.FUSED, functional.rms_norm, "functional", records_backward=True),
    _op("dropout", Cost.COMPOSITE, functional.dropout, "functional", records_backward=True),
    _op("embedding", Cost.COPY, functional.embedding, "functional", records_backward=True),
    _op("scaled_dot_product_attention", Cost.ATTENTION, attention.scaled_dot_product_attention, "functional",
        records_backward=True),
    # losses
    _op("cross_entropy", Cost.COMPOSITE, losses.cross_entropy, "functional"),
    _op("nll_loss", Cost.COMPOSITE, losses.nll_loss, "functional"),
    _op("mse_loss", Cost.COMPOSITE, losses.mse_loss, "functional"),
    # random fills
    _op("uniform_", Cost.FILL, fills.uniform_, "method"),
    _op("normal_", Cost.FILL, fills.normal_, "method"),
]

ROWS: dict[str, OpRow] = {row.name: row for row in _ROWS}
assert len(ROWS) == len(_ROWS), "two rows share a name"


"""`torch.nn.functional`'s composites — softmax, log_softmax, layer_norm, rms_norm, GELU, dropout — written
with tensor methods and the elementwise runner, so each is as many device ops as it has steps (a fused
kernel's passes), each timed, logged and recorded for autograd."""

from __future__ import annotations

import math

import numpy as np

from kernbench.dtypes import float32
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops.device_ops import float_type
from kernbench.runtime_api.ops.elementwise import elementwise_op, to_dtype, where
from kernbench.runtime_api.ops.promotion import result_type


def gelu_tanh(x):
    """The tanh approximation of GELU, over numpy values."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def softmax(x, dim: int | None = None, dtype=None, *, axis: int | None = None):
    """exp(x − max) / sum: four device ops (amax, subtract-exp, sum, divide), as a fused kernel's passes."""
    dim = axis if dim is None else dim
    if dtype is not None:
        x = to_dtype(x, dtype)
    shifted = _sub_exp(x, x.amax(dim, keepdim=True))
    return shifted / shifted.sum(dim, keepdim=True)


def log_softmax(x, dim: int, dtype=None):
    """x − max − log(sum(exp(x − max)))."""
    if dtype is not None:
        x = to_dtype(x, dtype)
    top = x.amax(dim, keepdim=True)
    total = _sub_exp(x, top).sum(dim, keepdim=True).log()
    return (x - top) - total


def _sub_exp(x, m):
    """exp(x − m) as one device op, as a fused softmax kernel computes it."""
    dtype = float_type(result_type(x, m))
    out = elementwise_op("sub_exp", lambda a, b: np.exp(a - b), (x, m), dtype, dtype)
    return autograd.record(out, "sub_exp", (x, m), lambda g: (g * out, -(g * out)))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(x − mean) / sqrt(var + eps) · weight + bias over the last dims (biased variance, as torch)."""
    dims = tuple(range(x.ndim - len(tuple(normalized_shape)), x.ndim))
    centered = x - x.mean(dims, keepdim=True)
    out = centered * (centered.square().mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    """x / sqrt(mean(x²) + eps) · weight over the last dims (eps: the dtype's machine epsilon by default)."""
    dims = tuple(range(x.ndim - len(tuple(normalized_shape)), x.ndim))
    eps = float(np.finfo(x.dtype.numpy).eps) if eps is None else eps
    out = x * (x.square().mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def gelu(x, approximate: str = "none"):
    """GELU, exact (erf) or `approximate='tanh'`: one vector op per element."""
    if approximate not in ("none", "tanh"):
        raise TensorError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "none":
        return x.gelu()
    dtype = float_type(x.dtype)
    return elementwise_op("gelu_tanh", gelu_tanh, (x,), dtype, dtype, lambda g: (g * gelu_tanh_slope(x),))


def gelu_tanh_slope(x):
    """d/dx of the tanh-approximated GELU, as device ops (also the backward of fused bias-GELU kernels)."""
    k = math.sqrt(2.0 / math.pi)
    t = ((x + x * x * x * 0.044715) * k).tanh()
    return (t + 1) * 0.5 + x * (1 - t * t) * (x * x * (3 * 0.044715) + 1) * (0.5 * k)


def dropout(x, p: float = 0.5, training: bool = True, inplace: bool = False):
    """Identity when not training; else zero each element with probability p and scale the rest by 1/(1−p)."""
    if not 0 <= p <= 1:
        raise TensorError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return x
    rng = x._ctx.rng_for(None, x.device)  # the rank's generator of x's device, drawn from in program order
    keep = elementwise_op("rand", lambda a: rng.random(a.shape), (x,), float32, float32)
    if inplace:
        autograd.check_in_place(x, "dropout", ())
    out = elementwise_op("dropout", lambda a, r: np.where(r >= p, a / (1 - p), 0), (x, keep), x.dtype,
                         float_type(x.dtype), out=x if inplace else None)
    return autograd.record(out, "dropout", (x,), lambda g: (where(keep >= p, g / (1 - p), 0.0),))


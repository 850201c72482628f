"""`torch.nn.functional`'s ops beyond single rows: softmax, log_softmax, layer_norm and rms_norm as fused row
kernels (one read and one write of each row, as a GPU library runs them; their backward written with tensor
methods), GELU's tanh form and dropout.

Each forward is device work, timed and logged; each records its backward for
autograd. A softmax over a dim other than the last runs device op by op.
"""

from __future__ import annotations

import math

import numpy as np

from kernbench.dtypes import float32
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import wrap_dim
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.device_ops import float_type, wide_type
from kernbench.runtime_api.ops.elementwise import elementwise_op, result_maker, to_dtype, where
from kernbench.runtime_api.ops.promotion import result_type
from kernbench.runtime_api.ops.overrides import overridable


def gelu_tanh(x):
    """The tanh approximation of GELU, over numpy values."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


@overridable
def softmax(x, dim: int | None = None, dtype=None, *, axis: int | None = None):
    """exp(x − max) / sum over `dim`: over the last dim one fused pass (max, exp and sum, scale) reading each row
    once and writing it once, timed as torch's softmax kernel runs (a warp or a block a row, `softmax_passes`);
    over another dim four device ops (amax, subtract-exp, sum, divide). With no dim, torch's legacy rule picks
    one (`implicit_dim`)."""
    dim = axis if dim is None else dim
    x = _floating(x, dtype, "softmax")
    dim = implicit_dim(x) if dim is None else dim
    if _is_last(x, dim):
        def forward(rows):
            shifted = np.exp(rows - rows.max(axis=1, keepdims=True))
            return shifted / shifted.sum(axis=1, keepdims=True)

        out = _softmax_rows("softmax", forward, x, exponentials=2)
        return autograd.record(out, "softmax", (x,), lambda g: (out * (g - (g * out).sum(-1, keepdim=True)),))
    shifted = _sub_exp(x, x.amax(dim, keepdim=True))
    return shifted / shifted.sum(dim, keepdim=True)


@overridable
def log_softmax(x, dim: int | None = None, dtype=None):
    """x − max − log(sum(exp(x − max))): over the last dim one fused pass, as softmax; else device op by op."""
    x = _floating(x, dtype, "log_softmax")
    dim = implicit_dim(x) if dim is None else dim
    if _is_last(x, dim):
        def forward(rows):
            shifted = rows - rows.max(axis=1, keepdims=True)
            return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

        out = _softmax_rows("log_softmax", forward, x, exponentials=1)
        return autograd.record(out, "log_softmax", (x,),
                               lambda g: (g - out.exp() * g.sum(-1, keepdim=True),))
    top = x.amax(dim, keepdim=True)
    total = _sub_exp(x, top).sum(dim, keepdim=True).log()
    return (x - top) - total


def implicit_dim(x) -> int:
    """The dim torch's softmax family takes when none is given: 0 for 0-, 1- and 3-dimensional inputs, else 1."""
    return 0 if x.ndim in (0, 1, 3) else 1


def _floating(x, dtype, call: str):
    """x in `dtype` when given; a softmax of integers is refused, as torch refuses it."""
    if dtype is not None:
        x = to_dtype(x, dtype)
    if not x.dtype.is_floating_point:
        raise TensorError(f"{call}: expected a floating-point input, got {x.dtype.name}; pass dtype=")
    return x


def _is_last(x, dim) -> bool:
    return x.ndim == 0 or wrap_dim(dim, x.ndim, "softmax") == x.ndim - 1


def _sub_exp(x, m):
    """exp(x − m) as one device op, as a fused softmax kernel computes it."""
    dtype = float_type(result_type(x, m))
    out = elementwise_op("sub_exp", lambda a, b: np.exp(a - b), (x, m), dtype, dtype)
    return autograd.record(out, "sub_exp", (x, m), lambda g: (g * out, -(g * out)))


def _fused_rows(name: str, forward, x, row: int, passes: int, params=(), reads: int = 1):
    """`forward` as one fused row kernel over x, computing in float32 for half types (as torch's kernels do)."""
    compute = float_type(wide_type(x.dtype))
    return device_ops.fused_rows(name, forward, x, row, passes, compute, params, new_tensor=result_maker((x,)),
                                 reads=reads)


# torch's row kernels (softmax, log_softmax, layer norm and rms norm), as adr/0016-device-ops.md "Row kernels' time"
# models them: each element takes ROW_KERNEL_PASSES vector passes (its loads, conversions, arithmetic and stores at
# the rate an SM issues them between a row's reductions) and EXPONENTIAL_PASSES per exponential (an SM's 16
# special-function units a cycle against its 128 FP32 lanes). A softmax runs a warp a row when the row holds at
# most WARP_ROW_ELEMENTS elements of at most WARP_ROW_BYTES bytes in all, else a block of 1024 threads a row, two
# rows resident on an SM, whose elements take BLOCK_ROW_PASSES more: its threads wait at the barriers of its
# block-wide reductions (max, then sum) with few other rows to issue from.
ROW_KERNEL_PASSES = 40
EXPONENTIAL_PASSES = 8
WARP_ROW_ELEMENTS, WARP_ROW_BYTES = 1024, 4096
BLOCK_ROW_PASSES = 24


def softmax_passes(row: int, itemsize: int, exponentials: int) -> int:
    """Vector passes over each element of torch's softmax kernel over rows of `row` elements of `itemsize` bytes
    computing `exponentials` exponentials an element (softmax 2: its epilogue takes the exponential again;
    log_softmax 1)."""
    passes = ROW_KERNEL_PASSES + exponentials * EXPONENTIAL_PASSES
    warp = row <= WARP_ROW_ELEMENTS and row * itemsize <= WARP_ROW_BYTES
    return passes if warp else passes + BLOCK_ROW_PASSES


def _softmax_rows(name: str, forward, x, exponentials: int):
    """`forward` over x's last dim as torch's softmax kernel runs it (`softmax_passes`)."""
    row = x.shape[-1] if x.ndim else 1
    return _fused_rows(name, forward, x, row, softmax_passes(row, x.dtype.itemsize, exponentials))


def as_shape(normalized_shape) -> tuple[int, ...]:
    """A norm's `normalized_shape` as a tuple: an int is one dim, anything else the dims it lists."""
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def _normalized(x, normalized_shape) -> tuple[tuple[int, ...], int]:
    """The dims a norm normalizes over and the number of elements of each normalized row."""
    shape = as_shape(normalized_shape)
    if x.shape[x.ndim - len(shape):] != shape:
        raise TensorError(f"normalized_shape {shape} does not match the last dims of the input of shape {x.shape}")
    return tuple(range(x.ndim - len(shape), x.ndim)), math.prod(shape)


@overridable
def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """(x − mean) / sqrt(var + eps) · weight + bias over the last dims (biased variance, as torch): one fused
    kernel, as torch's vectorized layer norm: it reads each row for its mean and variance, reads it again to
    normalize it, and writes it once."""
    dims, row = _normalized(x, normalized_shape)

    def forward(rows, w, b):
        centered = rows - rows.mean(axis=1, keepdims=True)
        y = centered / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
        y = y if w is None else y * w
        return y if b is None else y + b

    out = _fused_rows("layer_norm", forward, x, row, passes=ROW_KERNEL_PASSES, params=(weight, bias), reads=2)
    lead = tuple(range(x.ndim - len(dims)))

    def backward(g):
        centered = x - x.mean(dims, keepdim=True)
        rstd = (centered.square().mean(dims, keepdim=True) + eps).rsqrt()
        xhat = centered * rstd
        scaled = g if weight is None else g * weight
        dx = (scaled - scaled.mean(dims, keepdim=True) - xhat * (scaled * xhat).mean(dims, keepdim=True)) * rstd
        return (dx if autograd.requires_grad(x) else None,
                (g * xhat).sum(lead) if autograd.requires_grad(weight) else None,
                g.sum(lead) if autograd.requires_grad(bias) else None)

    return autograd.record(out, "layer_norm", (x, weight, bias), backward)


@overridable
def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    """x / sqrt(mean(x²) + eps) · weight over the last dims (eps: the dtype's machine epsilon by default): one
    fused kernel, torch's layer norm kernel without the mean: a read for the mean square, a second read to
    normalize, one write."""
    dims, row = _normalized(x, normalized_shape)
    eps = float(np.finfo(x.dtype.numpy).eps) if eps is None else eps

    def forward(rows, w):
        y = rows / np.sqrt((rows * rows).mean(axis=1, keepdims=True) + eps)
        return y if w is None else y * w

    out = _fused_rows("rms_norm", forward, x, row, passes=ROW_KERNEL_PASSES, params=(weight,), reads=2)
    lead = tuple(range(x.ndim - len(dims)))

    def backward(g):
        rstd = (x.square().mean(dims, keepdim=True) + eps).rsqrt()
        xhat = x * rstd
        scaled = g if weight is None else g * weight
        dx = (scaled - xhat * (scaled * xhat).mean(dims, keepdim=True)) * rstd
        return (dx if autograd.requires_grad(x) else None,
                (g * xhat).sum(lead) if autograd.requires_grad(weight) else None)

    return autograd.record(out, "rms_norm", (x, weight), backward)


@overridable
def gelu(x, approximate: str = "none"):
    """GELU, exact (erf) or `approximate='tanh'`: one vector op per element."""
    if approximate not in ("none", "tanh"):
        raise TensorError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "none":
        return x.gelu()
    dtype = float_type(x.dtype)
    return elementwise_op("gelu_tanh", gelu_tanh, (x,), dtype, dtype, lambda g: (gelu_tanh_backward(g, x),))


def gelu_tanh_slope(x):
    """d/dx of the tanh-approximated GELU, over numpy values."""
    k = math.sqrt(2.0 / math.pi)
    t = np.tanh(k * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * k * x * (1.0 - t * t) * (1.0 + 3 * 0.044715 * x * x)


def gelu_tanh_backward(grad, x):
    """grad · gelu_tanh'(x) as one elementwise device op, as torch's GELU backward kernel computes it."""
    dtype = float_type(x.dtype)
    return elementwise_op("gelu_tanh_backward", lambda g, v: g * gelu_tanh_slope(v), (grad, x), dtype, wide_type(dtype))


@overridable
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



def _stand_in_indices(input, rows: int) -> np.ndarray:
    """A timing-only run has no index values to gather by: each position takes row (position mod rows), which moves
    what the real rows would where every row of the table is equally far (a table whole on one cube)."""
    return np.arange(input.numel()).reshape(input.shape) % max(1, rows)


@overridable
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0, scale_grad_by_freq=False,
              sparse=False):
    """The rows of `weight` at the indices `input`: a gather (the indices are read to the host, which the
    simulator needs to know what moves); its backward sums the gradients of repeated indices (`index_add`). In a
    timing-only run, which has no indices, position i gathers row i mod num_embeddings."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise TensorError("embedding: max_norm, scale_grad_by_freq and sparse are not supported by kernbench")
    if input.dtype.is_floating_point:
        raise TensorError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                          f"Long, Int; but got {input.dtype.name} instead")
    rows = weight[_stand_in_indices(input, weight.shape[0]) if input._ctx.timing_only else input]
    if padding_idx is None or not autograd.requires_grad(weight):
        return rows
    keep = input != (padding_idx % weight.shape[0])
    return where(keep.unsqueeze(-1), rows, rows.detach())

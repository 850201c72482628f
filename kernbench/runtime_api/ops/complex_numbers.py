"""Complex numbers as PyTorch gives them to model code: the views between a complex tensor and its real pairs
(`view_as_real`, `view_as_complex`, `.real`, `.imag`), and `outer`, whose outer product of two position vectors
is how rotary embeddings make their angles.

A complex element is two adjacent elements of its real type (numpy's
layout, and PyTorch's), so each of the four is a view: the same storage seen
through a layout of the other dtype (`Tensor._viewed` with a dtype), costing
no device work, and a write through one is a write of the other. Their
checks and words are PyTorch's (aten's ComplexHelper.h). Autograd follows
PyTorch's convention for complex numbers: the gradient of a real loss with
respect to a complex tensor z = x + iy is ∂L/∂x + i·∂L/∂y (the conjugate
Wirtinger derivative, doubled), so the backward of each view is the other
view of the gradient, and `.real` / `.imag` send back a gradient whose
other part is zero.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import float32, float64, resolve_dtype
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.views import Layout
from kernbench.runtime_api.ops.elementwise import elementwise_op

_REAL_OF = {"c64": float32, "c128": float64}
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}


def view_as_real(input):
    """`input` (complex, shape S) as its real pairs, shape S + (2,): a view of the same storage."""
    if not input.dtype.is_complex:
        raise TensorError("view_as_real is only supported for complex tensors")
    layout = input._layout
    real = Layout(layout.shape + (2,), tuple(2 * s for s in layout.strides) + (1,), 2 * layout.offset)
    out = input._viewed(real, "view_as_real", _REAL_OF[input.dtype.name])
    return autograd.record(out, "view_as_real", (input,), lambda grad: (view_as_complex(grad.contiguous()),))


def view_as_complex(input):
    """`input` (float32 or float64, last dimension 2 of stride 1) as complex numbers, that dimension dropped: a
    view of the same storage."""
    dtype = input.dtype
    if dtype.name not in _COMPLEX_OF:
        if dtype.name == "f16":
            raise TensorError("view_as_complex: half tensors would give complex32, which kernbench does not have")
        raise TensorError("view_as_complex is only supported for half, float and double tensors, but got a tensor of "
                          f"scalar type: {dtype.scalar_type}")
    layout = input._layout
    if not layout.shape:
        raise TensorError("Input tensor must have one or more dimensions")
    if layout.shape[-1] != 2:
        raise TensorError("Tensor must have a last dimension of size 2")
    if layout.strides[-1] != 1:
        raise TensorError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for n, s in zip(layout.shape[:-1], layout.strides[:-1]) if n != 1):
        raise TensorError("Tensor must have a stride divisible by 2 for all but last dimension")
    if layout.offset % 2:
        raise TensorError("Tensor must have a storage_offset divisible by 2")
    pairs = Layout(layout.shape[:-1], tuple(s // 2 for s in layout.strides[:-1]), layout.offset // 2)
    out = input._viewed(pairs, "view_as_complex", resolve_dtype(_COMPLEX_OF[dtype.name]))
    return autograd.record(out, "view_as_complex", (input,), lambda grad: (view_as_real(grad),))


def real(input):
    """The real parts of a complex tensor, as a view (the tensor itself when it is real)."""
    return view_as_real(input).select(-1, 0) if input.dtype.is_complex else input


def imag(input):
    """The imaginary parts of a complex tensor, as a view; real tensors have none (PyTorch's error)."""
    if not input.dtype.is_complex:
        raise TensorError("imag is not implemented for tensors with non-complex dtypes.")
    return view_as_real(input).select(-1, 1)


def conj(input):
    """The complex conjugate (the tensor itself when it is real): one vector pass, a new tensor."""
    if not input.dtype.is_complex:
        return input
    return elementwise_op("conj", np.conj, (input,), input.dtype, input.dtype, lambda grad: (conj(grad),))


def outer(input, vec2):
    """The outer product of two 1-D tensors: input[i] · vec2[j], one elementwise multiply (as PyTorch's)."""
    for name, tensor in (("self", input), ("vec2", vec2)):
        if tensor.ndim != 1:
            raise TensorError(f"outer: Expected 1-D argument {name}, but got {tensor.ndim}-D")
    return input.unsqueeze(1) * vec2


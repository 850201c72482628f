"""Elementwise device ops: the one runner every elementwise row goes through, and the elementwise ops that take
arguments of their own (`where`, `clamp`, `masked_fill`, casts).

A row's result dtype follows its dtype rule over torch's promotion of the
operands; the values are the row's numpy function over what the device op's
DMAs loaded (device_ops.elementwise), and autograd records the row's
derivative. Results are made through an operand (`Tensor._make`), so this
module does not import the tensor class, which is built from the table.
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.dtypes import DType, bool_, resolve_dtype
from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops import device_ops
from kernbench.runtime_api.ops.device_ops import float_type
from kernbench.runtime_api.ops.promotion import category, is_tensor, result_type


def result_dtypes(name: str, rule: str, operands) -> tuple[DType, DType]:
    """(result dtype, dtype the op computes in) for `operands` under dtype rule `rule` (table.py names them)."""
    promoted = result_type(*operands)
    if rule == "float":
        return float_type(promoted), float_type(promoted)
    if rule == "bool":
        return bool_, bool_ if name.startswith("logical") else promoted
    if rule == "complex":
        return complex_of(name, operands), promoted
    if rule == "real" and promoted.is_complex:  # a complex number's magnitude is real
        return resolve_dtype("f32" if promoted.name == "c64" else "f64"), promoted
    if rule == "integral" and promoted.is_floating_point:
        raise TensorError(f"{name}: not implemented for floating types ({promoted.name}); it takes integers or bool")
    return promoted, promoted


def complex_of(name: str, operands) -> DType:
    """The complex type `torch.complex` / `torch.polar` make of their two real tensors: both float32 (complex64) or
    both float64 (complex128), PyTorch's words otherwise (two Half tensors would make complex32, which kernbench
    does not have)."""
    dtypes = [op.dtype for op in operands if is_tensor(op)]
    if len(dtypes) != 2:
        raise TensorError(f"{name}: expected two tensors, got {len(dtypes)} and {len(operands) - len(dtypes)} numbers")
    if dtypes[0] is not dtypes[1]:
        raise TensorError(f"Expected object of scalar type {dtypes[0].scalar_type} but got scalar type "
                          f"{dtypes[1].scalar_type} for second argument")
    if dtypes[0].name == "f16":
        raise TensorError(f"{name}: Half inputs would make complex32, which kernbench does not have")
    if dtypes[0].name not in ("f32", "f64"):
        raise TensorError(f"Expected both inputs to be Half, Float or Double tensors but got {dtypes[0].scalar_type} "
                          f"and {dtypes[1].scalar_type}")
    return resolve_dtype("c64" if dtypes[0].name == "f32" else "c128")


def result_maker(operands):
    """A function making the result tensors of an op over `operands`, in their run."""
    anchor = next((op for op in operands if is_tensor(op)), None)
    if anchor is None:
        raise TensorError("a tensor op needs at least one tensor operand")
    ctx, make = anchor._ctx, anchor._make

    def new(shape, dtype: DType, device, name: str):
        return make(ctx, shape, dtype, device, ctx.next_tensor_name("host" if device.is_host else name))

    return new


def apply(row, *operands, out=None):
    """Elementwise row `row` over tensors and numbers, into `out` or a new tensor, recorded for autograd."""
    result, compute = result_dtypes(row.name, row.dtypes, operands)
    if out is not None and category(result) > category(out.dtype):
        raise TensorError(f"{row.name}: result type {result.name} can't be cast to the output {out.name!r} of type "
                          f"{out.dtype.name}")
    value = device_ops.elementwise(row.name, row.numpy, list(operands), out.dtype if out is not None else result,
                                   compute, out=out, new_tensor=result_maker(operands), passes=row.passes)
    if out is not None or not result.is_differentiable:
        return value
    return autograd.record(value, row.name, operands, functools.partial(_backward, row, operands, value))


def _backward(row, operands, out, grad):
    if row.grad is None:
        raise TensorError(f"{row.name}: no gradient is defined for it in kernbench")
    return tuple(rule(grad, *operands, out) if autograd.requires_grad(operand) else None
                 for rule, operand in zip(row.grad, operands))


def elementwise_op(name: str, fn, operands, dtype: DType, compute: DType, backward=None, *, out=None):
    """A one-off elementwise device op `fn` over `operands` (no row of its own), recorded with `backward` when
    given and no `out` was."""
    value = device_ops.elementwise(name, fn, list(operands), dtype, compute, out=out,
                                   new_tensor=result_maker(operands))
    if backward is None or out is not None:
        return value
    return autograd.record(value, name, operands, backward)


def where(condition, x, y):
    """x where `condition` else y, broadcast (one vector op per element)."""
    dtype = result_type(x, y)
    return elementwise_op("where", lambda c, a, b: np.where(c.astype(bool), a, b), (condition, x, y), dtype, dtype,
                          lambda g: (None, where(condition, g, 0.0) if autograd.requires_grad(x) else None,
                                     where(condition, 0.0, g) if autograd.requires_grad(y) else None))


def clamp(x, min=None, max=None, *, out=None):
    """x limited to [min, max] (either may be None; numbers or tensors)."""
    if min is None and max is None:
        raise TensorError("clamp: at least one of min and max must be given")
    low = x if min is None else x.maximum(min, out=out)
    return low if max is None else low.minimum(max, out=out)


def masked_fill(x, mask, value, *, out=None):
    """`value` where `mask` is true, else x, in x's dtype."""
    filled = elementwise_op("masked_fill", lambda m, a, v: np.where(m.astype(bool), v, a), (mask, x, value),
                            x.dtype, x.dtype, out=out)
    return filled if out is not None else autograd.record(filled, "masked_fill", (mask, x),
                                                          lambda g: (None, where(mask, 0.0, g)))


def to_dtype(x, dtype):
    """x converted to `dtype` (itself when it already is): one vector pass, as a cast kernel."""
    dtype = resolve_dtype(dtype)
    if dtype is x.dtype:
        return x
    backward = (lambda g: (to_dtype(g, x.dtype),)) if dtype.is_differentiable else None
    dropped = x.dtype.is_complex and not dtype.is_complex  # a complex value cast to a real type keeps its real part
    return elementwise_op("to", np.real if dropped else (lambda a: a), (x,), dtype, x.dtype, backward)

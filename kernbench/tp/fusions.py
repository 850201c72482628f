"""Megatron's fused elementwise ops (`megatron.core.fusions`) as fused elementwise device ops.

What Megatron's MLP calls between its two linears: `bias_gelu_impl(input,
bias)` is `gelu(input + bias)` with the tanh approximation, bias broadcast
over the last dim, into a new tensor (Megatron's `fused_bias_gelu`), a
`torch.autograd.Function` whose backward is the tanh-GELU's derivative.
Megatron compiles both with `torch.jit.script`, so each is one fused
elementwise kernel on the GPU; here each is one elementwise device op
(ADR 0016), computing in float32. The Triton bias kernels of
`kernbench.tp.kernels` are for benches that launch them themselves
(`tp_mlp`), in the block a library would pick (`elementwise_block_of`).
"""

from __future__ import annotations

from kernbench.runtime_api.autograd import Function
from kernbench.runtime_api.ops.device_ops import elementwise_block, float_type, wide_type
from kernbench.runtime_api.ops.elementwise import elementwise_op
from kernbench.runtime_api.ops.functional import gelu_tanh, gelu_tanh_slope
from kernbench.tp import kernels
from kernbench.tp.errors import ModelParallelError


def bias_gelu_impl(input, bias):
    """gelu_tanh(input + bias), bias broadcast over the last dim of input, as a new tensor on input's device."""
    if tuple(bias.shape) != (input.shape[-1],):
        raise ModelParallelError(f"bias_gelu_impl: bias {bias.name!r} has shape {tuple(bias.shape)}, expected "
                                 f"({input.shape[-1]},), the last dim of input {input.name!r} {tuple(input.shape)}")
    return BiasGeluFunction.apply(input, bias)


def elementwise_block_of(input, bias) -> int:
    """The block of a bias kernel over `input` (input, bias and output elements in TCM): a library's pick."""
    return elementwise_block(input._ctx, input.numel(), 2 * input.dtype.itemsize + bias.dtype.itemsize,
                             kernels.ELEMENTWISE_BLOCK)


class BiasGeluFunction(Function):
    """Forward: gelu_tanh(input + bias), one fused elementwise op. Backward: grad · gelu_tanh'(input + bias), one
    fused elementwise op, and its column sums."""

    @staticmethod
    def forward(ctx, input, bias):
        ctx.save_for_backward(input, bias)
        return elementwise_op("bias_gelu", lambda x, b: gelu_tanh(x + b), (input, bias), input.dtype,
                              wide_type(float_type(input.dtype)))

    @staticmethod
    def backward(ctx, grad_output):
        input, bias = ctx.saved_tensors
        grad = elementwise_op("bias_gelu_back", lambda g, x, b: g * gelu_tanh_slope(x + b),
                              (grad_output, input, bias), input.dtype, wide_type(float_type(input.dtype)))
        return grad, grad.reshape(-1, grad.shape[-1]).sum(0)

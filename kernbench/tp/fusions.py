"""Megatron's fused elementwise ops (`megatron.core.fusions`) over the Triton kernels of `kernbench.tp.kernels`.

What Megatron's MLP calls between its two linears: `bias_gelu_impl(input,
bias)` is `gelu(input + bias)` with the tanh approximation, bias broadcast
over the last dim, into a new tensor (Megatron's `fused_bias_gelu`), a
`torch.autograd.Function` whose backward is the tanh-GELU's derivative as
device ops. The
output is allocated with the `torch` namespace `parallel_state` holds, so
these, like the layers, need `initialize_model_parallel` first.
"""

from __future__ import annotations

from kernbench.runtime_api.autograd import Function
from kernbench.runtime_api.ops.device_ops import elementwise_block
from kernbench.runtime_api.ops.functional import gelu_tanh_slope
from kernbench.tp import kernels, parallel_state
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
    """Forward: the Triton bias_gelu kernel. Backward: grad · gelu_tanh'(input + bias), and its column sums."""

    @staticmethod
    def forward(ctx, input, bias):
        ctx.save_for_backward(input, bias)
        torch = parallel_state.get_torch_namespace()
        output = torch.empty(*input.shape, dtype=input.dtype, device=input.device, name=f"{input.name}.bias_gelu")
        return kernels.bias_gelu(input.contiguous(), bias, output, block_size=elementwise_block_of(input, bias))

    @staticmethod
    def backward(ctx, grad_output):
        input, bias = ctx.saved_tensors
        grad = grad_output * gelu_tanh_slope(input + bias)
        return grad, grad.reshape(-1, grad.shape[-1]).sum(0)

"""Megatron's fused elementwise ops (`megatron.core.fusions`) over the Triton kernels of `kernbench.tp.kernels`.

What Megatron's MLP calls between its two linears: `bias_gelu_impl(input,
bias)` is `gelu(input + bias)` with the tanh approximation, bias broadcast
over the last dim, into a new tensor (Megatron's `fused_bias_gelu`). The
output is allocated with the `torch` namespace `parallel_state` holds, so
these, like the layers, need `initialize_model_parallel` first.
"""

from __future__ import annotations

from kernbench.tp import kernels, parallel_state
from kernbench.tp.errors import ModelParallelError


def bias_gelu_impl(input, bias):
    """gelu_tanh(input + bias), bias broadcast over the last dim of input, as a new tensor on input's device."""
    if tuple(bias.shape) != (input.shape[-1],):
        raise ModelParallelError(f"bias_gelu_impl: bias {bias.name!r} has shape {tuple(bias.shape)}, expected "
                                 f"({input.shape[-1]},), the last dim of input {input.name!r} {tuple(input.shape)}")
    torch = parallel_state.get_torch_namespace()
    output = torch.empty(*input.shape, dtype=input.dtype, device=input.device, name=f"{input.name}.bias_gelu")
    return kernels.bias_gelu(input, bias, output)

"""Megatron's tensor-parallel linear layers: `ColumnParallelLinear` and `RowParallelLinear`.

A linear layer computes `Y = X @ W.T + b` with `W` of shape (output_size,
input_size), torch's and Megatron's layout. Across the tensor-parallel group
it is split one of two ways:

- *column parallel*: `W` split along its output features (rows). Each rank
  computes its own columns of `Y` from the whole `X`; gathering them is
  optional, because the next layer is usually row parallel and wants them
  split.
- *row parallel*: `W` split along its input features (columns). Each rank
  multiplies its slice of `X`'s features and holds a partial sum of the whole
  `Y`; an all-reduce completes it. The bias is added once, after the
  all-reduce, or it would be counted once per rank.

The layers compose `kernbench.tp.mappings` and ask `parallel_state` for their
rank and group. Weights are device tensors on the rank's current device.
They are initialized as Megatron's CPU initialization does: the full master
weight is drawn on the host (numpy, from `seed`) and each rank keeps its
partition, so a layer's weights are the same whatever the tensor-parallel
size; biases start at zero. `load_full_weight` partitions given arrays the
same way. Activations are 2-D (tokens, features); the matmul, bias and GELU
are the Triton kernels of `kernbench.tp.kernels`. Forward only.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kernbench.tp import kernels, parallel_state
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    scatter_to_tensor_model_parallel_region,
)

InitMethod = Callable[[np.ndarray, np.random.Generator], None]


def init_method_normal(sigma: float) -> InitMethod:
    """Megatron's `init_method_normal`: fill the master weight in place from N(0, sigma^2)."""

    def init_(weight: np.ndarray, rng: np.random.Generator) -> None:
        weight[...] = rng.normal(0.0, sigma, size=weight.shape)

    return init_


class _ParallelLinear:
    """What both layers share: the master weight's partition along one axis, and its loading."""

    partition_axis: int  # 0: output features (column parallel); 1: input features (row parallel)

    def __init__(self, input_size: int, output_size: int, bias: bool, skip_bias_add: bool,
                 init_method: InitMethod | None, params_dtype, seed: int):
        self._torch = parallel_state.get_torch_namespace()
        self.input_size, self.output_size = input_size, output_size
        self.skip_bias_add = skip_bias_add
        self.tensor_model_parallel_size = parallel_state.get_tensor_model_parallel_world_size()
        self.tensor_model_parallel_rank = parallel_state.get_tensor_model_parallel_rank()
        full_shape = (output_size, input_size)
        split = _divide(full_shape[self.partition_axis], self.tensor_model_parallel_size,
                        f"{type(self).__name__}: {('output_size', 'input_size')[self.partition_axis]}")
        shape = list(full_shape)
        shape[self.partition_axis] = split
        self.weight = self._torch.empty(*shape, dtype=params_dtype, name=f"{type(self).__name__}.weight")
        bias_size = split if self.partition_axis == 0 else output_size
        self.bias = (self._torch.empty(bias_size, dtype=params_dtype, name=f"{type(self).__name__}.bias")
                     if bias else None)

        master = np.empty(full_shape, dtype=np.float32)
        (init_method or init_method_normal(0.02))(master, np.random.default_rng(seed))
        self.load_full_weight(master, np.zeros(output_size, dtype=np.float32) if bias else None)

    def load_full_weight(self, weight: np.ndarray, bias: np.ndarray | None = None) -> None:
        """Load unpartitioned `weight` (output_size, input_size) and `bias` (output_size,); keep this rank's part."""
        weight, bias = np.asarray(weight), None if bias is None else np.asarray(bias)
        what = f"{type(self).__name__}.load_full_weight"
        if weight.shape != (self.output_size, self.input_size):
            raise ModelParallelError(f"{what}: weight has shape {weight.shape}, "
                                     f"expected (output_size, input_size) = {(self.output_size, self.input_size)}")
        if (bias is None) != (self.bias is None):
            raise ModelParallelError(f"{what}: the layer was built with bias={self.bias is not None} "
                                     f"but was given bias={bias is not None}")
        if bias is not None and bias.shape != (self.output_size,):
            raise ModelParallelError(f"{what}: bias has shape {bias.shape}, expected ({self.output_size},)")
        self.weight.copy_(self._partition(weight, self.partition_axis), non_blocking=True)
        if bias is not None:
            # A row-parallel layer adds its whole bias once, after the all-reduce.
            self.bias.copy_(self._partition(bias, 0) if self.partition_axis == 0 else bias, non_blocking=True)

    def _partition(self, array: np.ndarray, axis: int) -> np.ndarray:
        return np.split(array, self.tensor_model_parallel_size, axis=axis)[self.tensor_model_parallel_rank]

    def _check_input(self, input_, features: int) -> None:
        if input_.ndim != 2 or input_.shape[1] != features:
            raise ModelParallelError(f"{type(self).__name__}: input {input_.name!r} has shape {input_.shape}, "
                                     f"expected (tokens, {features})")

    def _matmul(self, input_, bias):
        """This rank's `input_ @ weight.T (+ bias)` into a new tensor on the input's device."""
        output = self._torch.empty(input_.shape[0], self.weight.shape[0], dtype=input_.dtype, device=input_.device,
                                   name=f"{input_.name}.{type(self).__name__}")
        return kernels.linear(input_, self.weight, bias, output)


class ColumnParallelLinear(_ParallelLinear):
    """`Y = X @ W.T + b` with `W` split along its output features; `forward` returns `(output, output_bias)`.

    Each rank's output is its `output_size / tp` columns of `Y` (the bias
    fused into the matmul), or all of `Y` with `gather_output=True`. With
    `skip_bias_add=True` the bias is not added but returned, for the caller
    to fuse into its next kernel (as Megatron's MLP fuses it into GELU).
    """

    partition_axis = 0

    def __init__(self, input_size: int, output_size: int, bias: bool = True, gather_output: bool = False,
                 init_method: InitMethod | None = None, skip_bias_add: bool = False, params_dtype="f16",
                 seed: int = 0):
        super().__init__(input_size, output_size, bias, skip_bias_add, init_method, params_dtype, seed)
        self.gather_output = gather_output
        self.output_size_per_partition = self.weight.shape[0]

    def forward(self, input_):
        self._check_input(input_, self.input_size)
        input_parallel = copy_to_tensor_model_parallel_region(input_)
        output_parallel = self._matmul(input_parallel, None if self.skip_bias_add else self.bias)
        output = gather_from_tensor_model_parallel_region(output_parallel) if self.gather_output else output_parallel
        return output, (self.bias if self.skip_bias_add else None)

    __call__ = forward


class RowParallelLinear(_ParallelLinear):
    """`Y = X @ W.T + b` with `W` split along its input features; `forward` returns `(output, output_bias)`.

    The input is this rank's `input_size / tp` features when
    `input_is_parallel=True` (the output of a column-parallel layer), else the
    whole `X`, split here. Every rank's output is all of `Y`, completed by an
    all-reduce, with the (unpartitioned) bias added after it — or returned
    instead with `skip_bias_add=True`.
    """

    partition_axis = 1

    def __init__(self, input_size: int, output_size: int, bias: bool = True, input_is_parallel: bool = False,
                 init_method: InitMethod | None = None, skip_bias_add: bool = False, params_dtype="f16",
                 seed: int = 0):
        super().__init__(input_size, output_size, bias, skip_bias_add, init_method, params_dtype, seed)
        self.input_is_parallel = input_is_parallel
        self.input_size_per_partition = self.weight.shape[1]

    def forward(self, input_):
        self._check_input(input_, self.input_size_per_partition if self.input_is_parallel else self.input_size)
        input_parallel = input_ if self.input_is_parallel else scatter_to_tensor_model_parallel_region(input_)
        output = reduce_from_tensor_model_parallel_region(self._matmul(input_parallel, None))
        if self.skip_bias_add or self.bias is None:
            return output, (self.bias if self.skip_bias_add else None)
        return kernels.add_bias(output, self.bias, output), None

    __call__ = forward


def _divide(size: int, world_size: int, what: str) -> int:
    if size % world_size:
        raise ModelParallelError(f"{what} ({size}) is not divisible by the tensor-parallel size ({world_size})")
    return size // world_size

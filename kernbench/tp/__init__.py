"""Megatron-style tensor parallelism on kernbench: groups, mappings, parallel linear layers, their kernels."""

from kernbench.tp import fusions, kernels, mappings, parallel_state
from kernbench.tp.config import ModelParallelConfig
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.fusions import bias_gelu_impl
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear, init_method_normal, scaled_init_method_normal

__all__ = ["ColumnParallelLinear", "ModelParallelConfig", "ModelParallelError", "RowParallelLinear", "bias_gelu_impl",
           "fusions", "init_method_normal", "kernels", "mappings", "parallel_state", "scaled_init_method_normal"]

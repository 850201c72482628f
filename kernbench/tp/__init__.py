"""Megatron-style tensor parallelism on kernbench: groups, mappings, parallel linear layers, their kernels."""

from kernbench.tp.errors import ModelParallelError
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear, init_method_normal

__all__ = ["ColumnParallelLinear", "ModelParallelError", "RowParallelLinear", "init_method_normal"]

"""`ModelParallelConfig`: Megatron's layer configuration, the fields a forward-only simulated run reads.

Megatron's layers take `config=` (a `megatron.core.ModelParallelConfig`, or a
`TransformerConfig` built on it) and read from it how to allocate and
initialize their weights and whether sequence parallelism is on. This is the
same dataclass with the same names and defaults, restricted to the fields
that mean something here:

- read by the layers: `params_dtype` (Megatron's default, float32),
  `perform_initialization`, `sequence_parallel`;
- accepted for a Megatron script's sake, with no effect on a forward pass:
  `tensor_model_parallel_size` and `pipeline_model_parallel_size` (as in
  Megatron, the layers ask `parallel_state`, not the config),
  `use_cpu_initialization` (weights are always initialized Megatron's CPU
  way: one master weight, partitioned), `fp16`, `bf16`,
  `gradient_accumulation_fusion`, `deterministic_mode` (runs are
  deterministic by construction);
- context and expert parallelism are not implemented: their sizes must be 1.

Any object with these attribute names works as `config=`; missing ones take
the defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernbench.dtypes import float32
from kernbench.tp.errors import ModelParallelError


@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    context_parallel_size: int = 1
    expert_model_parallel_size: int = 1
    sequence_parallel: bool = False
    perform_initialization: bool = True
    use_cpu_initialization: bool = False
    params_dtype: Any = float32
    fp16: bool = False
    bf16: bool = False
    gradient_accumulation_fusion: bool = False
    deterministic_mode: bool = False

    def __post_init__(self) -> None:
        for name in ("context_parallel_size", "expert_model_parallel_size"):
            if getattr(self, name) != 1:
                raise ModelParallelError(f"ModelParallelConfig({name}={getattr(self, name)!r}): context and expert "
                                         f"parallelism are not implemented in kernbench.tp (their sizes must be 1)")


DEFAULT_CONFIG = ModelParallelConfig()


def config_value(config, name: str):
    """`config.name`, or the `ModelParallelConfig` default when `config` is None or has no such attribute."""
    return getattr(config, name, getattr(DEFAULT_CONFIG, name))

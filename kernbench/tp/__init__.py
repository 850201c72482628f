"""Megatron-style tensor parallelism on kernbench: groups, mappings, parallel layers, their kernels, the RNG tracker,
activation checkpointing, the vocabulary-parallel loss; `kernbench.tp` also carries every name Megatron's
`megatron.core.tensor_parallel` re-exports (`kernbench.tp.tensor_parallel`)."""

from kernbench.tp import (cross_entropy, data, embedding, fusions, kernels, layers, mappings, parallel_state, random,
                          tensor_parallel, utils)
from kernbench.tp.config import ModelParallelConfig, TransformerConfig
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.finalize import finalize_model_grads
from kernbench.tp.fusions import bias_gelu_impl
from kernbench.tp.init_methods import init_method_normal, scaled_init_method_normal
from kernbench.tp.parallel_state import ParallelSizeError
from kernbench.tp.tensor_parallel import *  # noqa: F401,F403 (Megatron's tensor_parallel names)
from kernbench.tp.tensor_parallel import __all__ as _TENSOR_PARALLEL_NAMES

__all__ = ["ModelParallelConfig", "ModelParallelError", "ParallelSizeError", "TransformerConfig", "bias_gelu_impl",
           "cross_entropy", "data", "embedding", "finalize_model_grads", "fusions", "init_method_normal", "kernels",
           "layers", "mappings", "parallel_state", "random", "scaled_init_method_normal", "tensor_parallel",
           "utils", *_TENSOR_PARALLEL_NAMES]

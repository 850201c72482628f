"""Megatron-style tensor parallelism on kernbench: groups, mappings, parallel layers, their kernels, the RNG tracker."""

from kernbench.tp import embedding, fusions, kernels, mappings, parallel_state, random, tensor_parallel
from kernbench.tp.config import ModelParallelConfig, TransformerConfig
from kernbench.tp.embedding import VocabParallelEmbedding
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.finalize import finalize_model_grads
from kernbench.tp.fusions import bias_gelu_impl
from kernbench.tp.init_methods import init_method_normal, scaled_init_method_normal
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear
from kernbench.tp.parallel_state import ParallelSizeError
from kernbench.tp.random import get_cuda_rng_tracker, model_parallel_cuda_manual_seed

__all__ = ["ColumnParallelLinear", "ModelParallelConfig", "ModelParallelError", "ParallelSizeError",
           "RowParallelLinear", "TransformerConfig", "VocabParallelEmbedding", "bias_gelu_impl", "embedding",
           "finalize_model_grads", "fusions", "get_cuda_rng_tracker", "init_method_normal", "kernels", "mappings",
           "model_parallel_cuda_manual_seed", "parallel_state", "random", "scaled_init_method_normal",
           "tensor_parallel"]

"""Megatron's `megatron.core.tensor_parallel` names, re-exported: `from kernbench.tp import tensor_parallel`.

With `from kernbench.tp import parallel_state, tensor_parallel` in place of
`from megatron.core import parallel_state, tensor_parallel`, a script's
`tensor_parallel.ColumnParallelLinear(...)`,
`tensor_parallel.model_parallel_cuda_manual_seed(...)` and
`tensor_parallel.reduce_from_tensor_model_parallel_region(...)` read as
Megatron's, and so do its submodules: `tensor_parallel.random`,
`.mappings`, `.layers`, `.cross_entropy`, `.data` and `.utils` are
`kernbench.tp.random`, `kernbench.tp.mappings`, ... (Megatron's
`VocabParallelEmbedding`, in its `layers`, is `kernbench.tp.embedding`'s).
The names are those Megatron's `tensor_parallel/__init__.py` re-exports,
less Transformer Engine's inference layers and the all-to-all mappings,
which kernbench does not have (generalized tensor parallelism is off: its
attribute helpers are Megatron's answers for that case).
"""

from kernbench.tp import cross_entropy, data, layers, mappings, random, utils  # noqa: F401 (Megatron's submodules)
from kernbench.tp.cross_entropy import vocab_parallel_cross_entropy
from kernbench.tp.data import broadcast_data
from kernbench.tp.embedding import VocabParallelEmbedding
from kernbench.tp.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    copy_gtp_attributes,
    copy_tensor_model_parallel_attributes,
    linear_with_grad_accumulation_and_async_allreduce,
    param_is_not_gtp_duplicate,
    param_is_not_tensor_parallel_duplicate,
    set_defaults_if_not_set_tensor_model_parallel_attributes,
    set_tensor_model_parallel_attributes,
)
from kernbench.tp.mappings import (
    all_gather_last_dim_from_tensor_parallel_region,
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_last_dim_to_tensor_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from kernbench.tp.random import (
    CheckpointWithoutOutput,
    CudaRNGStatesTracker,
    checkpoint,
    convert_cuda_rng_state,
    get_cuda_rng_tracker,
    get_data_parallel_rng_tracker_name,
    get_expert_parallel_rng_tracker_name,
    is_graph_safe_cuda_rng_tracker,
    model_parallel_cuda_manual_seed,
)
from kernbench.tp.utils import gather_split_1d_tensor, split_tensor_along_last_dim, split_tensor_into_1d_equal_chunks

__all__ = [
    "CheckpointWithoutOutput", "ColumnParallelLinear", "CudaRNGStatesTracker", "RowParallelLinear",
    "VocabParallelEmbedding", "all_gather_last_dim_from_tensor_parallel_region", "broadcast_data", "checkpoint",
    "convert_cuda_rng_state", "copy_gtp_attributes", "copy_tensor_model_parallel_attributes",
    "copy_to_tensor_model_parallel_region",
    "gather_from_sequence_parallel_region", "gather_from_tensor_model_parallel_region", "gather_split_1d_tensor",
    "get_cuda_rng_tracker", "get_data_parallel_rng_tracker_name", "get_expert_parallel_rng_tracker_name",
    "is_graph_safe_cuda_rng_tracker", "linear_with_grad_accumulation_and_async_allreduce",
    "model_parallel_cuda_manual_seed", "param_is_not_gtp_duplicate", "param_is_not_tensor_parallel_duplicate",
    "reduce_from_tensor_model_parallel_region", "reduce_scatter_last_dim_to_tensor_parallel_region",
    "reduce_scatter_to_sequence_parallel_region", "scatter_to_sequence_parallel_region",
    "scatter_to_tensor_model_parallel_region", "set_defaults_if_not_set_tensor_model_parallel_attributes",
    "set_tensor_model_parallel_attributes", "split_tensor_along_last_dim", "split_tensor_into_1d_equal_chunks",
    "vocab_parallel_cross_entropy",
]

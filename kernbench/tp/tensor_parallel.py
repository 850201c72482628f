"""Megatron's `megatron.core.tensor_parallel` names, re-exported: `from kernbench.tp import tensor_parallel`.

With `from kernbench.tp import parallel_state, tensor_parallel` in place of
`from megatron.core import parallel_state, tensor_parallel`, a script's
`tensor_parallel.ColumnParallelLinear(...)`,
`tensor_parallel.model_parallel_cuda_manual_seed(...)` and
`tensor_parallel.reduce_from_tensor_model_parallel_region(...)` read as
Megatron's. Megatron's `tensor_parallel.random` and `tensor_parallel.layers`
are `kernbench.tp.random`, and `kernbench.tp.layers` with
`kernbench.tp.embedding`.
"""

from kernbench.tp.embedding import VocabParallelEmbedding
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear
from kernbench.tp.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from kernbench.tp.random import (
    CudaRNGStatesTracker,
    get_cuda_rng_tracker,
    get_data_parallel_rng_tracker_name,
    get_expert_parallel_rng_tracker_name,
    model_parallel_cuda_manual_seed,
)

__all__ = [
    "ColumnParallelLinear", "CudaRNGStatesTracker", "RowParallelLinear", "VocabParallelEmbedding",
    "copy_to_tensor_model_parallel_region", "gather_from_sequence_parallel_region",
    "gather_from_tensor_model_parallel_region", "get_cuda_rng_tracker", "get_data_parallel_rng_tracker_name",
    "get_expert_parallel_rng_tracker_name", "model_parallel_cuda_manual_seed",
    "reduce_from_tensor_model_parallel_region",
    "reduce_scatter_to_sequence_parallel_region", "scatter_to_sequence_parallel_region",
    "scatter_to_tensor_model_parallel_region",
]

"""Megatron's `VocabParallelEmbedding`: an embedding table split over the tensor-parallel group by vocabulary.

Rank r of a group of p holds rows [r·V/p, (r+1)·V/p) of the (V, hidden)
table. A lookup runs on every rank with the whole batch of token ids: ids
outside the rank's rows read row 0 and are then zeroed, so each rank holds
its rows' part of the output and zeros elsewhere, and the all-reduce (sum)
of `reduce_from_tensor_model_parallel_region` completes it on every rank.
With `reduce_scatter_embeddings` (sequence parallelism) the [b, s, h] output
is transposed to [s, b, h] and reduce-scattered along the sequence instead,
each rank keeping its slice.

The lookup is device work on the run's `torch`: comparisons and
`masked_fill` for the mask, advanced indexing (a gathered copy) for the rows.
Indexing reads the ids to the host, as the simulator must know which rows
move, so a `--timing-only` run (which computes no values) cannot look up:
it raises `ValuesNotComputed`. Megatron's `deterministic_mode` picks between
two equal lookups there; here there is one. The backward of the lookup is
autograd's for indexing, which sums the gradients of repeated ids (the
batch's repeats, and row 0 that every masked id reads) with the `index_add`
device op.

Initialization as Megatron's: with `config.use_cpu_initialization` the
whole (V, hidden) master table is drawn in float32 on the host from the
rank's default generator (seed it with `torch.manual_seed`, the same on
every rank) and each rank keeps its rows, so the table does not depend on
the tensor-parallel size; otherwise each rank draws its own rows inside the
RNG tracker's "model-parallel-rng" fork (`model_parallel_cuda_manual_seed`
first). `init_method(array, rng)` fills a float32 numpy array in place from
the numpy generator it is given, as `kernbench.tp.layers`' initializers do
(`config.init_method` of a `TransformerConfig` is one); Megatron's kind,
`init_method(tensor)` (`torch.nn.init.normal_` and the like), fills a
float32 tensor from the same generator (`random.initial_values`).
"""

from __future__ import annotations

import numpy as np

from kernbench.runtime_api.nn.module import Module
from kernbench.tp import parallel_state
from kernbench.tp.config import config_value
from kernbench.tp.errors import ModelParallelError, NotDivisibleError
from kernbench.tp.mappings import reduce_from_tensor_model_parallel_region, reduce_scatter_to_sequence_parallel_region
from kernbench.tp.param_attributes import set_tensor_model_parallel_attributes
from kernbench.tp.random import get_cuda_rng_tracker, initial_values
from kernbench.tp.utils import VocabUtility


class VocabParallelEmbedding(Module):
    """Embedding parallelized in the vocabulary dimension: `forward(ids)` is `table[ids]`, summed over the group.

    Megatron's signature. `tp_group` is the group to split over (default: the
    rank's tensor-parallel group); `pg_collection` is accepted and unused
    (Megatron reads only its generalized-tensor-parallel group, which does
    not exist here). The weight is a parameter of shape
    (num_embeddings / tp, embedding_dim) in `config.params_dtype` on the
    rank's current device, marked as Megatron marks it (`tensor_model_parallel`,
    partition dim 0); the layer is a `torch.nn.Module`. `forward` takes integer ids of
    any shape and returns (*ids.shape, embedding_dim) in the weight's dtype,
    or [s, b, h] from [b, s] ids with `reduce_scatter_embeddings`, this
    rank's s / tp rows.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, *, init_method, reduce_scatter_embeddings: bool = False,
                 config, tp_group=None, pg_collection=None):
        super().__init__()
        self._torch = torch = parallel_state.get_torch_namespace()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.reduce_scatter_embeddings = reduce_scatter_embeddings
        self.config = config
        self.deterministic_mode = config_value(config, "deterministic_mode")
        self.tp_group = tp_group if tp_group is not None else parallel_state.get_tensor_model_parallel_group()
        if tp_group is None:
            rank = parallel_state.get_tensor_model_parallel_rank()
            self.tp_size = parallel_state.get_tensor_model_parallel_world_size()
        else:
            rank, self.tp_size = tp_group.rank(), tp_group.size()
            if rank < 0:
                raise ModelParallelError(f"VocabParallelEmbedding: tp_group {tp_group.name} (ranks "
                                         f"{list(tp_group.ranks)}) does not hold the calling rank")
        if num_embeddings % self.tp_size:
            raise NotDivisibleError(f"VocabParallelEmbedding: num_embeddings ({num_embeddings}) is not divisible by "
                                    f"the tensor-parallel size ({self.tp_size})")
        self.vocab_start_index, self.vocab_end_index = VocabUtility.vocab_range_from_global_vocab_size(
            num_embeddings, rank, self.tp_size)
        self.num_embeddings_per_partition = self.vocab_end_index - self.vocab_start_index
        params_dtype = config_value(config, "params_dtype")
        self.weight = torch.nn.Parameter(torch.empty(self.num_embeddings_per_partition, embedding_dim,
                                                     dtype=params_dtype, name="VocabParallelEmbedding.weight"))
        set_tensor_model_parallel_attributes(self.weight, True, 0, 1)
        if config_value(config, "perform_initialization") and not torch.is_timing_only():  # no values: no draw
            rows = self._initial_rows(init_method, config_value(config, "use_cpu_initialization"))
            with torch.no_grad():
                self.weight.data.copy_(rows.astype(self.weight.dtype.numpy), non_blocking=True)

    def _initial_rows(self, init_method, on_host: bool) -> np.ndarray:
        """This rank's rows, float32: of the whole master table (host initialization) or drawn alone (device's)."""
        if on_host:
            master = initial_values(self._torch, init_method, (self.num_embeddings, self.embedding_dim))
            return master[self.vocab_start_index:self.vocab_end_index]
        tracker = get_cuda_rng_tracker()
        if "model-parallel-rng" not in tracker.get_states():
            raise ModelParallelError("VocabParallelEmbedding: initializing on the device draws from the RNG tracker's "
                                     "model-parallel-rng state; call model_parallel_cuda_manual_seed(seed) first, or "
                                     "set use_cpu_initialization=True in the config")
        with tracker.fork():
            return initial_values(self._torch, init_method, (self.num_embeddings_per_partition, self.embedding_dim),
                                  device="ahbm")

    def forward(self, input_):
        """The embeddings of token ids `input_`: this rank's rows looked up, then summed (or reduce-scattered)."""
        if self.tp_size > 1:
            input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
            masked_input = (input_ - self.vocab_start_index).masked_fill(input_mask, 0)
        else:
            masked_input = input_
        output_parallel = self.weight[masked_input]
        if self.tp_size > 1:
            output_parallel = output_parallel.masked_fill(input_mask.unsqueeze(-1), 0.0)
        if self.reduce_scatter_embeddings:
            # Megatron's [b, s, h] -> [s, b, h], so the sequence is the dim the reduce-scatter splits.
            output_parallel = output_parallel.transpose(0, 1).contiguous()
            return reduce_scatter_to_sequence_parallel_region(output_parallel, group=self._mapping_group())
        if self.tp_size > 1:
            return reduce_from_tensor_model_parallel_region(output_parallel, group=self._mapping_group())
        return output_parallel

    def _mapping_group(self):
        """The group for the mappings: None (their default, the tensor-parallel group) unless `tp_group` was given."""
        return None if self.tp_group is parallel_state.get_tensor_model_parallel_group() else self.tp_group

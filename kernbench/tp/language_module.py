"""Megatron's `LanguageModule`: the base of its language models, for their tensor- and pipeline-parallel parts.

A model subclasses it as Megatron's GPT model does, setting `pre_process`
and `post_process` (whether this pipeline stage holds the word embeddings
and the output layer), `embedding` (with `word_embeddings`),
`output_layer` and `share_embeddings_and_output_weights`. It gives:

- `compute_language_model_loss(labels, logits)`: labels [b, s], logits
  [s, b, V/p] split over the vocabulary → the loss [b, s], through
  `tensor_parallel.vocab_parallel_cross_entropy` (looked up at each call,
  as Megatron's module does) over the model's tensor-parallel group.
  Megatron's fused losses are not here: Transformer Engine's (`'te'`) is
  Megatron's RuntimeError without Transformer Engine, the `'native'` fused
  kernel one line saying to set `cross_entropy_loss_fusion=False`.
- `shared_embedding_or_output_weight()` and
  `setup_embeddings_and_output_layer()`: the word embeddings tied to the
  output layer — marked, and across pipeline stages the last stage's copy
  zeroed and all-reduced over the embedding group so that it starts as the
  first stage's, as Megatron does.

The groups come from `pg_collection` (default: this rank's
`parallel_state` groups). Megatron's other model machinery (attention
backend environment, CUDA graphs, multi-token prediction, sharded
checkpoints, MuP, which kernbench's config refuses) is not here.
"""

from __future__ import annotations

import logging

from kernbench.runtime_api.nn.module import Module
from kernbench.tp import tensor_parallel
from kernbench.tp.config import config_value
from kernbench.tp.errors import MegatronAssertionError, ModelParallelError
from kernbench.tp.mappings import get_tensor_model_parallel_group_if_none
from kernbench.tp.parallel_state import torch_namespace
from kernbench.tp.process_groups_config import ProcessGroupCollection


class LanguageModule(Module):
    """Megatron's base of language models (module docstring): `config` and the model's process groups."""

    def __init__(self, config, pg_collection: ProcessGroupCollection | None = None):
        super().__init__()
        self.config = config
        if pg_collection is None:
            pg_collection = ProcessGroupCollection.use_mpu_process_groups()
        self.pg_collection = pg_collection
        self.cp_group = pg_collection.cp
        self.tp_group = get_tensor_model_parallel_group_if_none(pg_collection.tp)
        self.pp_group = pg_collection.pp
        self.embd_group = pg_collection.embd
        self.vp_stage = None
        self.vp_size = config_value(config, "virtual_pipeline_model_parallel_size")

    def compute_language_model_loss(self, labels, logits):
        """The cross-entropy loss [b, s] of `logits` [s, b, V/p] against `labels` [b, s]."""
        labels = labels.transpose(0, 1).contiguous()  # [b, s] -> [s, b], the logits' order
        if config_value(self.config, "cross_entropy_loss_fusion"):
            implementation = config_value(self.config, "cross_entropy_fusion_impl")
            if implementation == "te":
                raise RuntimeError("Trying to use a TE block when it's not present.")
            raise ModelParallelError(f"LanguageModule: cross_entropy_loss_fusion with cross_entropy_fusion_impl="
                                     f"{implementation!r} (a fused kernel) is not implemented in kernbench; set "
                                     "cross_entropy_loss_fusion=False for vocab_parallel_cross_entropy")
        loss = tensor_parallel.vocab_parallel_cross_entropy(logits, labels, tp_group=self.tp_group)
        return loss.transpose(0, 1).contiguous()

    def shared_embedding_or_output_weight(self):
        """The word embeddings' weight on the first stage, the output layer's on the last, else None."""
        if getattr(self, "pre_process", False):
            return self.embedding.word_embeddings.weight
        if getattr(self, "post_process", False):
            return self.output_layer.weight
        return None

    def setup_embeddings_and_output_layer(self) -> None:
        """Mark the embedding and output weights, and with tied weights over several pipeline stages start the
        last stage's copy as the first stage's (zeroed there, then all-reduced over the embedding group)."""
        pre, post = getattr(self, "pre_process", False), getattr(self, "post_process", False)
        if pre and hasattr(self, "embedding"):
            self.embedding.word_embeddings.weight.is_embedding_or_output_parameter = True
        if post and getattr(getattr(self, "output_layer", None), "weight", None) is not None:
            self.output_layer.weight.is_embedding_or_output_parameter = True
        if not getattr(self, "share_embeddings_and_output_weights", False):
            return
        if config_value(self.config, "pipeline_model_parallel_size") == 1:
            self.shared_embedding_or_output_weight().zero_out_wgrad = True
            return
        first, last = self._is_first_stage(), self._is_last_stage()
        if first and pre and not post:
            self.shared_embedding_or_output_weight().shared_embedding = True
        if post and not pre:
            if first:
                raise MegatronAssertionError("LanguageModule: the last stage's copy of the tied embeddings is on the "
                                             "first pipeline stage")
            weight = self.shared_embedding_or_output_weight()
            weight.data.fill_(0)
            weight.shared = weight.shared_embedding = True
        dist = torch_namespace().distributed
        if not dist.is_initialized():
            logging.getLogger(__name__).warning(
                "Distributed processes aren't initialized, so the output layer is not initialized with weights "
                "from the word embeddings.")
            return
        if self._is_in_embd_group() and not getattr(self.config, "init_model_with_meta_device", False):
            dist.all_reduce(self.shared_embedding_or_output_weight().data, group=self.embd_group)

    def _is_first_stage(self) -> bool:
        return (self.vp_size is None or self.vp_stage == 0) and self.pp_group.rank() == 0

    def _is_last_stage(self) -> bool:
        return (self.vp_size is None or self.vp_stage == self.vp_size - 1) and \
            self.pp_group.rank() == self.pp_group.size() - 1

    def _is_in_embd_group(self) -> bool:
        """Whether this rank takes part in the tied embeddings' all-reduce: the embedding group's first rank at its
        first stage, its last at its last stage, any other member always."""
        if self.embd_group is None:
            return False
        dist = torch_namespace().distributed
        ranks, me = dist.get_process_group_ranks(self.embd_group), dist.get_rank()
        if me not in ranks:
            return False
        if me == ranks[0]:
            return self._is_first_stage()
        if me == ranks[-1]:
            return self._is_last_stage()
        return True

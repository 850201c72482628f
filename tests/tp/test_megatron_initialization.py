# Ported from Megatron-LM tests/unit_tests/tensor_parallel/test_initialization.py (commit d98e8a6).
# Copyright (c) 2023, NVIDIA CORPORATION. All rights reserved. BSD-3-Clause, as Megatron-LM's LICENSE.
"""Megatron's initialization unit tests: a layer's weights are partitions of one table whatever the tp size.

Each test's statements are Megatron's, inside a `body(torch, rank,
world_size)` that every rank of a world of 8 SIPs runs (megatron_utils.py);
edits are marked `# kernbench:`. The `skipif(not torch.cuda.is_available())`
marks go (the simulated device is always there).

Not ported: `test_te_col_init` and `test_te_row_init` (no Transformer Engine).
"""

import pytest

import kernbench.tp.parallel_state as ps  # kernbench: import megatron.core.parallel_state as ps
from kernbench.tp.embedding import VocabParallelEmbedding  # kernbench: megatron.core.tensor_parallel.layers
from kernbench.tp.layers import ColumnParallelLinear, RowParallelLinear  # kernbench: the same
from kernbench.tp.random import model_parallel_cuda_manual_seed  # kernbench: megatron.core.tensor_parallel.random
from kernbench.tp.config import TransformerConfig  # kernbench: megatron.core.transformer.transformer_config
from tests.tp.megatron_utils import Utils, on_every_rank  # kernbench: from tests.unit_tests.test_utilities


class Test:

    transformer_config = TransformerConfig(
        num_layers=1, hidden_size=12, num_attention_heads=4, use_cpu_initialization=True
    )

    def teardown_method(self, method):
        Utils.destroy_model_parallel()

    def test_embedding_init(self):
        def body(torch, rank, world_size):
            Utils.initialize_model_parallel(1, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(42)

            tp1 = VocabParallelEmbedding(
                num_embeddings=16,
                embedding_dim=4,
                init_method=self.transformer_config.init_method,
                config=self.transformer_config,
            ).weight
            Utils.destroy_model_parallel()

            Utils.initialize_model_parallel(4, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(41)  # intentionally different.
            tp4 = VocabParallelEmbedding(
                num_embeddings=16,
                embedding_dim=4,
                init_method=self.transformer_config.init_method,
                config=self.transformer_config,
            ).weight

            rank = ps.get_tensor_model_parallel_rank()
            assert tp4.shape[0] * 4 == tp1.shape[0]
            assert torch.equal(tp1[rank * 4 : (rank + 1) * 4], tp4)

        on_every_rank(body)

    def test_row_init(self):
        def body(torch, rank, world_size):
            Utils.initialize_model_parallel(1, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(42)

            tp1 = RowParallelLinear(
                input_size=16,
                output_size=16,
                init_method=self.transformer_config.init_method,
                bias=True,
                input_is_parallel=False,
                config=self.transformer_config,
                skip_bias_add=False,
            ).weight
            Utils.destroy_model_parallel()

            Utils.initialize_model_parallel(4, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(41)  # intentionally different.
            tp4 = RowParallelLinear(
                input_size=16,
                output_size=16,
                init_method=self.transformer_config.init_method,
                bias=True,
                input_is_parallel=False,
                config=self.transformer_config,
                skip_bias_add=False,
            ).weight

            rank = ps.get_tensor_model_parallel_rank()
            assert tp4.shape[1] * 4 == tp1.shape[1]
            assert torch.equal(tp1[:, rank * 4 : (rank + 1) * 4], tp4)

        on_every_rank(body)

    def test_col_init(self):
        def body(torch, rank, world_size):
            Utils.initialize_model_parallel(1, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(42)

            tp1 = ColumnParallelLinear(
                input_size=16,
                output_size=16,
                init_method=self.transformer_config.init_method,
                bias=True,
                config=self.transformer_config,
                skip_bias_add=False,
            ).weight
            Utils.destroy_model_parallel()

            Utils.initialize_model_parallel(4, 1)
            torch.manual_seed(42)
            model_parallel_cuda_manual_seed(41)  # intentionally different.
            tp4 = ColumnParallelLinear(
                input_size=16,
                output_size=16,
                init_method=self.transformer_config.init_method,
                bias=True,
                config=self.transformer_config,
                skip_bias_add=False,
            ).weight

            rank = ps.get_tensor_model_parallel_rank()
            assert tp4.shape[0] * 4 == tp1.shape[0]
            assert torch.equal(tp1[rank * 4 : (rank + 1) * 4], tp4)

        on_every_rank(body)

# Ported from Megatron-LM tests/unit_tests/tensor_parallel/test_layers.py (commit 00caa53).
# Copyright (c) 2024, NVIDIA CORPORATION. All rights reserved. BSD-3-Clause, as Megatron-LM's LICENSE.
"""Megatron's layers unit test: a frozen-weight linear's output and input gradient at tp 1 and tp 8.

The test's statements are Megatron's, inside a `body(torch, rank,
world_size)` that every rank of a world of 8 SIPs runs (megatron_utils.py);
edits are marked `# kernbench:`.
"""

import pytest

from kernbench.tp.layers import linear_with_frozen_weight  # kernbench: megatron.core.tensor_parallel.layers
from kernbench.tp.mappings import gather_from_tensor_model_parallel_region  # kernbench: megatron.core...mappings
from tests.tp.megatron_utils import Utils, on_every_rank  # kernbench: from tests.unit_tests.test_utilities


@pytest.mark.parametrize("tensor_parallel,allreduce_dgrad", [(1, False), (8, True)])
def test_LinearWithFrozenWeight(tensor_parallel, allreduce_dgrad):
    def body(torch, rank, world_size):  # kernbench: each rank runs the test's statements
        Utils.initialize_model_parallel(tensor_parallel, 1)

        size_per_partition = int(8 / tensor_parallel)

        # Input is an 8x8 identity matrix.
        input_data = torch.eye(8).cuda()
        input_data.requires_grad = True

        # Weight is an 8x8 matrix of all ones. If tensor parallelism > 1, the weight is partitioned evenly across GPUs.  # noqa: E501
        weight = torch.ones((size_per_partition, 8)).cuda()

        # Bias is a vector of length 8 of all zeros. If tensor parallelism > 1, the bias is partitioned evenly across GPUs  # noqa: E501
        bias = torch.zeros((size_per_partition)).cuda()

        gradient_accumulation_fusion = False
        sequence_parallel = False
        grad_output_buffer = None
        wgrad_deferral_limit = None

        output_parallel = linear_with_frozen_weight(
            input_data,
            weight,
            bias,
            gradient_accumulation_fusion,
            allreduce_dgrad,
            sequence_parallel,
            grad_output_buffer,
            wgrad_deferral_limit,
        )
        output = gather_from_tensor_model_parallel_region(
            output_parallel
        )  # no-op if tensor_parallel == 1.
        output.sum().backward()

        expected_output = torch.ones(8).cuda()
        expected_grad = 8 * torch.ones(8).cuda()

        assert torch.allclose(output, expected_output)
        assert torch.allclose(input_data.grad, expected_grad)

        Utils.destroy_model_parallel()

    on_every_rank(body)  # kernbench: the 8 ranks of Megatron's torchrun

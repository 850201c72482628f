# Ported from Megatron-LM tests/unit_tests/tensor_parallel/test_random.py (commit d98e8a6).
# Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved. BSD-3-Clause, as Megatron-LM's LICENSE.
"""Megatron's RNG-tracker unit tests, run on a world of 8 SIPs (megatron_utils.py).

Each test's statements are Megatron's, inside a `body(torch, rank,
world_size)` that every rank runs; edits are marked `# kernbench:`.

Not ported: `test_convert_cuda_rng_state` (no CUDA graphs, so no graph-safe
state to convert to), and the `checkpoint` / `CheckpointWithoutOutput`
tests (activation recomputation is not implemented).
"""

import pytest

from kernbench.tp.random import (  # kernbench: from megatron.core.tensor_parallel.random import
    CudaRNGStatesTracker,
    get_cuda_rng_tracker,
    model_parallel_cuda_manual_seed,
)
from tests.tp.megatron_utils import Utils, on_every_rank  # kernbench: from tests.unit_tests.test_utilities


def test_cuda_rng_states_tracker():
    def body(torch, rank, world_size):
        rng_tracker = CudaRNGStatesTracker()
        rng_tracker.set_states({"state1": 1234})
        assert rng_tracker.get_states()["state1"] == 1234
        rng_tracker.reset()
        assert rng_tracker.get_states() == {}
        seed = 1111
        rng_tracker.add("state2", seed)
        with pytest.raises(Exception):
            assert rng_tracker.add("state3", seed)
        with pytest.raises(Exception):
            assert rng_tracker.add("state2", 111)
        assert rng_tracker.get_states()['state2'] is not None
        with pytest.raises(Exception):
            assert ()

        rng_tracker.fork("state2")
        torch.cuda.manual_seed(seed)
        rng_state = torch.cuda.get_rng_state()
        assert torch.equal(rng_tracker.get_states()['state2'], rng_state)

    on_every_rank(body)


@pytest.mark.parametrize("use_cudagraphable_rng", [True, False])
def test_double_fork_cuda_rng_states_tracker(use_cudagraphable_rng):
    def body(torch, rank, world_size):
        rng_tracker = CudaRNGStatesTracker(use_cudagraphable_rng=use_cudagraphable_rng)
        rng_tracker.add("state1", 1234)
        rng_tracker.add("state2", 5678)
        randn_double_fork_1 = []
        randn_double_fork_2 = []
        with rng_tracker.fork("state1"):
            randn_double_fork_1.append(torch.randn(10, device="cuda"))
            with rng_tracker.fork("state2"):
                randn_double_fork_2.append(torch.randn(10, device="cuda"))
                with rng_tracker.fork("state1"):
                    randn_double_fork_1.append(torch.randn(10, device="cuda"))
                randn_double_fork_2.append(torch.randn(10, device="cuda"))
            randn_double_fork_1.append(torch.randn(10, device="cuda"))
        if use_cudagraphable_rng:
            double_fork_state1 = rng_tracker.get_states()["state1"].get_state()
            double_fork_state2 = rng_tracker.get_states()["state2"].get_state()
        else:
            double_fork_state1 = rng_tracker.get_states()["state1"]
            double_fork_state2 = rng_tracker.get_states()["state2"]

        rng_tracker.reset()
        rng_tracker.add("state1", 1234)
        rng_tracker.add("state2", 5678)
        randn_single_fork_1 = []
        randn_single_fork_2 = []
        with rng_tracker.fork("state1"):
            randn_single_fork_1.append(torch.randn(10, device="cuda"))
            randn_single_fork_1.append(torch.randn(10, device="cuda"))
            randn_single_fork_1.append(torch.randn(10, device="cuda"))
        with rng_tracker.fork("state2"):
            randn_single_fork_2.append(torch.randn(10, device="cuda"))
            randn_single_fork_2.append(torch.randn(10, device="cuda"))
        if use_cudagraphable_rng:
            single_fork_state1 = rng_tracker.get_states()["state1"].get_state()
            single_fork_state2 = rng_tracker.get_states()["state2"].get_state()
        else:
            single_fork_state1 = rng_tracker.get_states()["state1"]
            single_fork_state2 = rng_tracker.get_states()["state2"]

        assert torch.equal(randn_double_fork_1[0], randn_single_fork_1[0])
        assert torch.equal(randn_double_fork_1[1], randn_single_fork_1[1])
        assert torch.equal(randn_double_fork_1[2], randn_single_fork_1[2])
        assert torch.equal(randn_double_fork_2[0], randn_single_fork_2[0])
        assert torch.equal(randn_double_fork_2[1], randn_single_fork_2[1])
        assert torch.equal(double_fork_state1, single_fork_state1)
        assert torch.equal(double_fork_state2, single_fork_state2)

    on_every_rank(body)


def test_model_parallel_cuda_manual_seed():
    def body(torch, rank, world_size):
        Utils.initialize_model_parallel(4, 2)
        model_parallel_cuda_manual_seed(0, force_reset_rng=True)
        rng_tracker = get_cuda_rng_tracker()
        assert rng_tracker.get_states()['model-parallel-rng'] is not None
        Utils.destroy_model_parallel()

    on_every_rank(body)

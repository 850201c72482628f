"""ADR 0011: parallel_state owns the groups; each rank sees its own."""

from __future__ import annotations

import pytest

from kernbench.session import Session
from kernbench.tp import ColumnParallelLinear, ModelParallelError, parallel_state
from kernbench.tp.parallel_state import rank_groups
from tests.tp.harness import needs_distributed, run_tensor_parallel


def test_adr0011_t1_groups_follow_megatrons_layout():
    # Megatron's docstring example: 16 ranks, tp 2, pp 4 -> 8 tensor, 8 data and 4 pipeline groups.
    groups = rank_groups(16, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    assert groups.tensor == tuple((r, r + 1) for r in range(0, 16, 2))
    assert groups.data == ((0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14), (13, 15))
    assert groups.pipeline == ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15))
    # The default machine with tp 2: tensor groups are neighbours, data groups stride across them.
    groups = rank_groups(4, tensor_model_parallel_size=2)
    assert groups.tensor == ((0, 1), (2, 3))
    assert groups.data == ((0, 2), (1, 3))


@needs_distributed
def test_adr0011_t2_each_rank_sees_its_own_tensor_and_data_groups():
    def lookups(torch, rank):
        return (parallel_state.get_tensor_model_parallel_rank(), parallel_state.get_tensor_model_parallel_world_size(),
                parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_world_size(),
                parallel_state.get_tensor_model_parallel_group() is not None)

    seen = run_tensor_parallel(2, lookups)
    # world 4, tp 2: tensor groups (0, 1), (2, 3); data groups (0, 2), (1, 3).
    assert seen == {0: (0, 2, 0, 2, True), 1: (1, 2, 0, 2, True), 2: (0, 2, 1, 2, True), 3: (1, 2, 1, 2, True)}


def test_adr0011_t3_sizes_that_do_not_divide_the_world_are_named():
    with pytest.raises(ModelParallelError, match=r"size \(3\) x .* = 3 does not divide the world size \(4\)"):
        rank_groups(4, tensor_model_parallel_size=3)
    with pytest.raises(ModelParallelError, match=r"\(2\) x pipeline_model_parallel_size \(4\) = 8 .*world size \(4\)"):
        rank_groups(4, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    with pytest.raises(ModelParallelError, match="tensor_model_parallel_size must be a positive integer, got 0"):
        rank_groups(4, tensor_model_parallel_size=0)
    with pytest.raises(ModelParallelError, match=r"\(2\) .*does not divide the world size \(1\)"):
        run_tensor_parallel(2, lambda torch, rank: None, topology="single_sip")


def test_adr0011_t4_lookups_before_initialization_are_a_clear_error():
    session = Session("single_sip")

    def uninitialized(torch):
        assert not parallel_state.model_parallel_is_initialized()
        with pytest.raises(ModelParallelError, match="not initialized on this rank.*initialize_model_parallel"):
            parallel_state.get_tensor_model_parallel_world_size()
        with pytest.raises(ModelParallelError, match="not initialized"):
            ColumnParallelLinear(8, 8)

    session.run(uninitialized, session.torch)


def test_adr0011_t5_state_is_per_rank():
    # Two ranks, no process group: each is a world of one, and only rank 0 initializes. Module-global
    # state (Megatron's) would show rank 0's groups to rank 1.
    session = Session("default")
    initialized = {}

    def worker(rank, torch):
        if rank == 0:
            parallel_state.initialize_model_parallel(1, torch=torch)
        initialized[rank] = parallel_state.model_parallel_is_initialized()

    session.run(lambda torch: torch.multiprocessing.spawn(worker, args=(torch,), nprocs=2), session.torch)
    assert initialized == {0: True, 1: False}


def test_adr0011_t6_destroy_allows_reinitializing_and_double_initialization_is_refused():
    session = Session("single_sip")

    def cycle(torch):
        parallel_state.initialize_model_parallel(1, torch=torch)
        with pytest.raises(ModelParallelError, match="already initialized.*destroy_model_parallel"):
            parallel_state.initialize_model_parallel(1, torch=torch)
        parallel_state.destroy_model_parallel()
        assert not parallel_state.model_parallel_is_initialized()
        parallel_state.initialize_model_parallel(1, torch=torch)
        assert parallel_state.get_torch_namespace() is torch
        assert parallel_state.get_tensor_model_parallel_world_size() == 1
        assert parallel_state.get_data_parallel_world_size() == 1
        assert parallel_state.get_pipeline_model_parallel_world_size() == 1

    session.run(cycle, session.torch)

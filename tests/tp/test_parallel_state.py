"""ADR 0011: parallel_state owns the groups; each rank sees its own."""

from __future__ import annotations

import pytest

from kernbench.ccl import install
from kernbench.runtime_api import current_run
from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.session import Session
from kernbench.tp import (ColumnParallelLinear, ModelParallelError, RowParallelLinear, mappings,
                          parallel_state)
from kernbench.tp.parallel_state import rank_groups
from tests.tp.harness import run_tensor_parallel


@pytest.mark.quick
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


@pytest.mark.quick
def test_adr0011_t2_each_rank_sees_its_own_tensor_and_data_groups():
    def lookups(torch, rank):
        return (parallel_state.get_tensor_model_parallel_rank(), parallel_state.get_tensor_model_parallel_world_size(),
                parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_world_size(),
                parallel_state.get_tensor_model_parallel_group() is not None)

    seen = run_tensor_parallel(2, lookups)
    # world 4, tp 2: tensor groups (0, 1), (2, 3); data groups (0, 2), (1, 3).
    assert seen == {0: (0, 2, 0, 2, True), 1: (1, 2, 0, 2, True), 2: (0, 2, 1, 2, True), 3: (1, 2, 1, 2, True)}

    def groups(torch, rank):
        tensor, data = parallel_state.get_tensor_model_parallel_group(), parallel_state.get_data_parallel_group()
        return (torch.distributed.get_process_group_ranks(tensor), torch.distributed.get_process_group_ranks(data),
                parallel_state.get_tensor_model_parallel_src_rank())

    assert run_tensor_parallel(2, groups) == {0: ([0, 1], [0, 2], 0), 1: ([0, 1], [1, 3], 0),
                                              2: ([2, 3], [0, 2], 2), 3: ([2, 3], [1, 3], 2)}


@pytest.mark.quick
def test_adr0011_t3_sizes_that_do_not_divide_the_world_are_named():
    with pytest.raises(ModelParallelError, match=r"size \(3\) x .* = 3 does not divide the world size \(4\)"):
        rank_groups(4, tensor_model_parallel_size=3)
    with pytest.raises(ModelParallelError, match=r"\(2\) x pipeline_model_parallel_size \(4\) = 8 .*world size \(4\)"):
        rank_groups(4, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    with pytest.raises(ModelParallelError, match="tensor_model_parallel_size must be a positive integer, got 0"):
        rank_groups(4, tensor_model_parallel_size=0)
    # Through initialize_model_parallel on every rank of a real process group: the default machine's 4 SIPs...
    for tp in (3, 8):
        with pytest.raises(ModelParallelError, match=rf"\({tp}\) x .* = {tp} does not divide the world size \(4\)"):
            run_tensor_parallel(tp, lambda torch, rank: None)
    # ... and a one-SIP machine, whose process group has one rank.
    session = Session("single_sip")

    def one_sip(torch):
        torch.distributed.init_process_group(backend="ahbm")
        with pytest.raises(ModelParallelError, match=r"\(2\) .*does not divide the world size \(1\)"):
            parallel_state.initialize_model_parallel(2, torch=torch)

    session.run(one_sip, session.torch)


@pytest.mark.quick
def test_adr0011_t4_lookups_before_initialization_are_a_clear_error():
    session = Session("single_sip")
    lookups = [getattr(parallel_state, f"get_{kind}_parallel_{what}")
               for kind in ("tensor_model", "data", "pipeline_model") for what in ("group", "rank", "world_size")]
    lookups += [parallel_state.get_tensor_model_parallel_src_rank, parallel_state.get_torch_namespace]

    def uninitialized(torch):
        assert not parallel_state.model_parallel_is_initialized()
        for lookup in lookups:
            with pytest.raises(ModelParallelError, match="not initialized on this rank.*initialize_model_parallel"):
                lookup()
        x = torch.zeros(4, 8, dtype="f16")
        for use in (lambda: ColumnParallelLinear(8, 8), lambda: RowParallelLinear(8, 8),
                    lambda: mappings.reduce_from_tensor_model_parallel_region(x),
                    lambda: mappings.gather_from_sequence_parallel_region(x)):
            with pytest.raises(ModelParallelError, match="not initialized on this rank"):
                use()

    session.run(uninitialized, session.torch)


@pytest.mark.quick
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


@pytest.mark.quick
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


def test_adr0011_t23_worlds_model_parallelism_cannot_use_are_named(monkeypatch):
    session = Session("default")

    def no_process_group(torch):
        with pytest.raises(ModelParallelError, match=r"tensor_model_parallel_size=2.*torch.distributed is not "
                                                     r"initialized.*init_process_group\(backend='ahbm'\)"):
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=2, torch=torch)
        assert not parallel_state.model_parallel_is_initialized()
        with pytest.raises(ModelParallelError, match=r"context_parallel_size=2: .* not implemented"):
            parallel_state.initialize_model_parallel(context_parallel_size=2, torch=torch)

    session.run(no_process_group, session.torch)

    # ccl.yaml's world_size above the SIP count: ranks are PEs, all driven by one worker.
    monkeypatch.setattr(current_run, "_current", current_run._current)  # the Session's run becomes current
    pe_ranks = Session("default", ccl={**install.load_ccl_config(install.SHIPPED_CCL_PATH), "world_size": 8})

    def pe_world(torch):
        torch.distributed.init_process_group(backend="ahbm")
        with pytest.raises(ModelParallelError, match=r"8 ranks but the machine has 4 SIPs.*one worker per rank"):
            parallel_state.initialize_model_parallel(1, torch=torch)

    pe_ranks.run(pe_world, pe_ranks.torch)


def test_adr0011_t24_without_torch_keyword_the_callers_torch_is_used(monkeypatch):
    session = Session("default")
    seen = {}

    def worker(rank, torch):
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group()
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)  # Megatron's call, unchanged
        seen[rank] = (parallel_state.get_torch_namespace() is torch, parallel_state.get_tensor_model_parallel_rank())

    def bench(torch):
        torch.multiprocessing.spawn(worker, args=(torch,), nprocs=4)

    session.run(bench, session.torch)
    assert seen == {0: (True, 0), 1: (True, 1), 2: (True, 0), 3: (True, 1)}

    monkeypatch.setattr(current_run, "_current", None)  # as in a process where no run has started
    with pytest.raises(RuntimeUsageError, match=r"no kernbench run is in progress.*torch=torch"):
        parallel_state.initialize_model_parallel()

"""ADR 0007, "Kept access plans": a launch works out where a block of addresses goes once, and nothing can tell."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.kernels.library.matmul import matmul
from kernbench.runtime_api.launch import access_plans
from kernbench.runtime_api.ops import library_gemm
from kernbench.runtime_api.launch.access_plans import AccessPlan, AccessPlans
from kernbench.session import Session


def _kernels(torch):
    # A rows spread over every cube (a 64-row block spans cubes: several DMAs per load), B replicated per cube
    # (each PE reads its own cube's replica), masked K and N tails, masked stores.
    props = torch.ahbm.get_device_properties()
    rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
    per_cube = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
    a = torch.randn(320, 200, dtype="f16", dp=rows, name="A")
    b = torch.randn(200, 136, dtype="f16", dp=per_cube, name="B")
    c = torch.empty(320, 136, dtype="f16", dp=rows, name="C")
    matmul(a, b, c, block_m=64, block_n=64, block_k=32, group_m=2)
    torch.ahbm.synchronize()
    return None if torch.ahbm.is_timing_only() else c.numpy()


def _kept_and_not(monkeypatch, program, timing_only: bool, noted: list) -> list[tuple]:
    """[(op log, engine time, result, what was noted)] of `program` run with the run's access-plan pool, then with
    none (nothing kept)."""
    runs = []
    for budget in (access_plans.PLAN_BYTES, 0):
        monkeypatch.setattr(access_plans, "PLAN_BYTES", budget)
        noted.clear()
        session = Session("default", timing_only=timing_only)
        result = session.run(program, session.torch)
        runs.append((session.ctx.machine.oplog.to_json(), session.ctx.engine.now, result, list(noted)))
    return runs


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0007_t98_kept_access_plans_give_the_op_log_and_results_of_plans_worked_out_every_time(
        timing_only, monkeypatch):
    found = []
    real_find = AccessPlans.find

    def counting_find(self, *args):
        plan = real_find(self, *args)
        found.append(plan is not None)
        return plan

    monkeypatch.setattr(AccessPlans, "find", counting_find)
    (kept_log, kept_now, kept_result, kept_found), (fresh_log, fresh_now, fresh_result, fresh_found) = \
        _kept_and_not(monkeypatch, _kernels, timing_only, found)
    assert sum(kept_found) >= len(kept_found) // 4 and not any(fresh_found)  # the plans were used, then never
    assert kept_log == fresh_log and kept_now == fresh_now
    if not timing_only:
        assert kept_result.tobytes() == fresh_result.tobytes()


class _Memory:
    def __init__(self, allocation):
        self.allocation = allocation

    def find(self, address):
        return self.allocation


def _plan(allocation, size: int = 64) -> AccessPlan:
    addresses = np.arange(size, dtype=np.int64) * 2 + 4096
    return AccessPlan(addresses, None, None, size, allocation, 4096, np.arange(size, dtype=np.int64), {})


def test_adr0007_t99_a_plan_is_found_only_for_its_arrays_while_its_allocation_holds_them_and_within_its_bytes():
    allocation, other = object(), object()
    plans = AccessPlans([access_plans.PLAN_BYTES])
    plan = _plan(allocation)
    plans.keep_plan(plan, 2)
    memory = _Memory(allocation)
    assert plans.find(plan.addresses, None, 2, memory) is plan
    assert plans.find(plan.addresses.copy(), None, 2, memory) is None  # equal contents, another array
    assert plans.find(plan.addresses, np.ones(64, dtype=bool), 2, memory) is None
    assert plans.find(plan.addresses, None, 4, memory) is None
    assert plans.find(plan.addresses, None, 2, _Memory(other)) is None  # freed, or another allocation now
    assert plans.find(plan.addresses, None, 2, _Memory(None)) is None

    pool = [3 * plan.nbytes]  # the run's, shared with another launch holding one plan's worth
    other_launch, bounded = AccessPlans(pool), AccessPlans(pool)
    other_launch.keep_plan(_plan(allocation), 2)
    kept = [_plan(allocation) for _ in range(4)]
    for each in kept:
        bounded.keep_plan(each, 2)
        assert pool[0] >= 0
    memory = _Memory(allocation)
    assert [bounded.find(each.addresses, None, 2, memory) is each for each in kept] == [False, False, True, True]
    bounded.keep_plan(_plan(allocation, size=1024), 2)  # more than the pool: not kept, nothing else dropped
    assert [bounded.find(each.addresses, None, 2, memory) is each for each in kept] == [False, False, True, True]
    bounded.release()
    other_launch.release()
    assert pool == [3 * plan.nbytes]  # every byte back when the launches end


def _device_matmuls(torch):
    props = torch.ahbm.get_device_properties()
    per_cube = torch.DPPolicy(cube="replicate", pe="row_wise", num_pes=props.multi_processor_count)
    rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
    a = torch.randn(4, 1, 150, 70, name="a")  # batch (4, 1) broadcast against b's (1, 2)
    b = torch.randn(1, 2, 70, 90, name="b")
    w = torch.randn(72, 130, dtype="f16", dp=per_cube, name="w")
    x = torch.randn(160, 72, dtype="f16", dp=rows, name="x")  # 20 rows a PE: 64-row blocks span PEs and cubes
    batched, plain = a @ b, x @ w
    torch.ahbm.synchronize()
    return None if torch.ahbm.is_timing_only() else (batched.numpy(), plain.numpy())


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0016_t100_a_matmuls_kept_blocks_give_the_op_log_and_values_of_blocks_worked_out_every_time(
        timing_only, monkeypatch):
    made = []
    real_block = library_gemm.block_selector

    def counting_block(*args):
        made.append(1)
        return real_block(*args)

    monkeypatch.setattr(library_gemm, "block_selector", counting_block)
    runs = []
    for keep in (library_gemm.KeptValues.keep, lambda *args: False):
        monkeypatch.setattr(library_gemm.KeptValues, "keep", keep)
        made.clear()
        session = Session("default", timing_only=timing_only)
        result = session.run(_device_matmuls, session.torch)
        runs.append((session.ctx.machine.oplog.to_json(), session.ctx.engine.now, result, len(made)))
    (kept_log, kept_now, kept_result, kept_made), (fresh_log, fresh_now, fresh_result, fresh_made) = runs
    assert kept_made < fresh_made  # blocks were kept and used
    assert kept_log == fresh_log and kept_now == fresh_now
    if not timing_only:
        for kept, fresh in zip(kept_result, fresh_result):
            assert kept.tobytes() == fresh.tobytes()

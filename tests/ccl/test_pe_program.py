"""What a member's `start`ed work costs the simulator, and that it never changes what is simulated (adr/0010)."""

from __future__ import annotations

import sys
import types
import weakref

import numpy as np
import pytest

from kernbench.ccl import pe_program
from kernbench.ccl.errors import CollectiveError
from kernbench.session import Session
from tests.ccl.harness import config, device_tensor, member, region, run

STARTS = 300


@pytest.fixture
def user_module(monkeypatch):
    module = types.ModuleType("my_started_work")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def user_config(module) -> dict:
    return {**config("direct"), "algorithm": "mine", "module": module.__name__}


def two_members(session: Session, count: int = 64):
    tensors = [device_tensor(session, r, np.arange(count, dtype=np.float64), "f32") for r in range(2)]
    return [member(r, r, region(t)) for r, t in enumerate(tensors)]


def test_adr0010_t22_finished_started_work_is_released_while_the_member_runs(user_module):
    alive_at_end = []

    def all_reduce(ctx, request):
        loaded = []
        for _ in range(STARTS):
            loaded.append(weakref.ref(ctx.start(ctx.load, ctx.member.input, 0, 16).wait()))
        alive_at_end.append(sum(ref() is not None for ref in loaded))

    user_module.all_reduce = all_reduce
    session = Session("default")
    run(session, "all_reduce", two_members(session), user_config(user_module))
    # The handles were dropped as each load finished; what the member still holds is bounded, not all of it.
    assert len(alive_at_end) == 2 and max(alive_at_end) <= STARTS // 2


def test_adr0010_t22_a_failed_start_still_fails_the_member_after_later_work_finished(user_module):
    def all_reduce(ctx, request):
        me = ctx.member
        try:
            ctx.start(ctx.store, me.output, 0, 2, np.zeros(3, dtype=np.float32)).wait()
        except CollectiveError:
            pass  # caught here, but the member's part still ends with it
        for _ in range(STARTS):
            ctx.start(ctx.load, me.input, 0, 16).wait()

    user_module.all_reduce = all_reduce
    session = Session("default")
    with pytest.raises(CollectiveError, match=r"store of 3 float32 values into elements \[0, 2\)"):
        run(session, "all_reduce", two_members(session), user_config(user_module))


@pytest.mark.parametrize("algorithm, buffer_kind, n", [("ring", "tcm", 4), ("ring", "hbm", 3), ("tree", "sram", 4),
                                                       ("halving_doubling", "tcm", 4)])
def test_adr0010_t23_started_loads_and_stores_time_exactly_as_processes_would(monkeypatch, algorithm, buffer_kind, n):
    """A started `load`/`store` runs as an engine task; forcing processes instead changes no op of the log."""

    def op_log(as_processes: bool):
        if as_processes:
            monkeypatch.setattr(pe_program, "_AS_TASKS", {})
        session = Session("default")
        data = [np.arange(5000, dtype=np.float64) * (r + 1) for r in range(n)]
        tensors = [device_tensor(session, r, x, "bf16") for r, x in enumerate(data)]
        run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
            config(algorithm, buffer_kind=buffer_kind))
        monkeypatch.undo()
        return list(session.ctx.machine.oplog), [t.numpy().tobytes() for t in tensors]

    assert op_log(as_processes=False) == op_log(as_processes=True)

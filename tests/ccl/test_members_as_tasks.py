"""ADR 0010, "Simulation cost": the shipped algorithms' members run as engine tasks, and nothing simulated changes.

The reference is the same algorithm run the way any user's blocking
algorithm runs: a greenlet process per member, each started load and store a
process too. Both must give the same op log (every record, in order), the
same values, the same hazards and the same reservations on every channel —
on an idle machine and with other work contending for the members' PEs,
memories and links, which is where the order of reservations matters.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from kernbench.ccl import pe_program
from kernbench.ccl.collective import SHIPPED_ALGORITHMS
from kernbench.machine import Transfer, hbm, tcm
from kernbench.machine.placed_dma import RunDmas, issue_load, issue_store, load_elements, store_elements
from kernbench.policy import DPPolicy
from kernbench.session import Session
from tests.ccl.harness import config, device_tensor, member, region, run, values_of

P, COUNT = 4, 5000
SHIPPED = [("ring", "all_reduce"), ("ring", "all_gather"), ("ring", "reduce_scatter"), ("tree", "all_reduce"),
           ("direct", "all_reduce"), ("direct", "all_gather"), ("direct", "reduce_scatter"),
           ("halving_doubling", "all_reduce"), ("halving_doubling", "all_gather"),
           ("halving_doubling", "reduce_scatter"), ("ring", "broadcast"), ("ring", "reduce"), ("ring", "send")]


def contend(session: Session, tensors) -> None:
    """Other work on the machine while the collective runs: a copy through rank 1's HBM and TCM and over the link
    from SIP 0, a vector op and a load on rank 0's PE, and a reader and writer racing rank 1's tensor (hazards)."""
    machine, engine = session.ctx.machine, session.engine

    def copies():
        engine.sleep(300_000)
        for k in range(8):
            machine.run_transfers([Transfer(hbm(1, 0), tcm(1, 0, 0), 24_000), Transfer(hbm(0, 0), hbm(1, 0), 8_000)],
                                  label="copy", data=False)
            engine.sleep(150_000 + 7_000 * k)

    def kernel():
        engine.sleep(500_000)
        pe = machine.pe(0, 0, 0)
        for _ in range(8):
            machine.compute(pe.vector, 90_000, kind="vector", label="kernel", program=0)
            machine.run_transfers([Transfer(hbm(0, 0), tcm(0, 0, 0), 16_384)], label="kernel", data=False,
                                  unit="cube0.pe0.dma", dma_engine=pe.free_dma_engine())
            engine.sleep(100_000)

    def racer():
        engine.sleep(400_000)
        pe, allocation = machine.pe(1, 0, 0), tensors[1]._allocation
        count = allocation.nbytes // 4
        for k in range(12):
            first = 300 * k % (count - 400)
            store_elements(machine, pe, allocation, slice(first, first + 400), np.zeros(400, np.float32),
                           label="racer", program=0, data=True)
            load_elements(machine, pe, allocation, np.dtype(np.float32), slice(0, count), label="racer", program=0,
                          data=True)
            engine.sleep(120_000)

    for work in (copies, kernel, racer):
        engine.spawn(work, name=work.__name__)


def outcome(algorithm: str, kind: str, *, as_processes: bool, contended: bool, timing_only: bool,
            buffer_kind: str, monkeypatch) -> tuple:
    """Run one collective; return what must not depend on how its members are run."""
    # Whole tensors are ranges, so a timing-only shipped ring could run symmetric (rank 0 alone, the others
    # copied in rank order): off, so that the two runs are compared event by event.
    cfg = config(algorithm, buffer_kind=buffer_kind, symmetric=False)
    if as_processes:
        shipped = getattr(importlib.import_module(SHIPPED_ALGORITHMS[algorithm]), kind)
        module = types.ModuleType("members_as_processes")

        def blocking(ctx, request):  # a user's algorithm: runs as a process, calls the shipped one blocking
            shipped(ctx, request)

        if hasattr(shipped, "ccl_wiring"):
            blocking.ccl_wiring = shipped.ccl_wiring
        setattr(module, kind, blocking)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setattr(pe_program, "_AS_TASKS", {})
        monkeypatch.setattr(pe_program, "_STEPS_AS_TASKS", False)
        cfg = {**cfg, "module": module.__name__}
    session = Session("default")
    rng = np.random.default_rng(7)
    size = {"all_gather": COUNT // P, "reduce_scatter": COUNT}.get(kind, COUNT)
    sources = [device_tensor(session, r, rng.integers(-8, 9, size).astype(np.float64), "f32") for r in range(P)]
    outputs = {"all_gather": [session.torch.empty(size * P, dtype="f32", device=f"ahbm:{r}") for r in range(P)],
               "reduce_scatter": [session.torch.empty(size // P, dtype="f32", device=f"ahbm:{r}") for r in range(P)]
               }.get(kind, sources)
    members = [member(r, r, region(s), region(o)) for r, (s, o) in enumerate(zip(sources, outputs))]
    if kind == "send":
        members = members[:2]
    if contended:
        contend(session, outputs)
    elapsed = run(session, kind, members, cfg, op=None if kind in ("all_gather", "broadcast", "send") else "sum",
                  root=1 if kind in ("broadcast", "reduce") else None, timing_only=timing_only)
    monkeypatch.undo()
    machine = session.ctx.machine
    channels = {name: (c.free_at, c.busy_ps, c.bytes_moved, c.ops) for name, c in machine.channels.items()}
    return (elapsed, session.engine.now, list(machine.oplog), [values_of(t).tobytes() for t in outputs],
            [h.as_dict() for h in machine.hazards.hazards], list(channels.items()))


@pytest.mark.parametrize("algorithm, kind", SHIPPED)
@pytest.mark.parametrize("contended", [False, True], ids=["idle", "contended"])
def test_adr0010_t24_members_run_as_tasks_exactly_as_greenlet_processes(algorithm, kind, contended, monkeypatch):
    for timing_only, buffer_kind in [(False, "tcm"), (True, "hbm")]:
        settings = dict(contended=contended, timing_only=timing_only, buffer_kind=buffer_kind, monkeypatch=monkeypatch)
        as_tasks = outcome(algorithm, kind, as_processes=False, **settings)
        assert as_tasks == outcome(algorithm, kind, as_processes=True, **settings)
        assert any(record.kind == "ipcq_send" for record in as_tasks[2])


def test_adr0010_t24_contention_reaches_the_members_and_hazards_are_still_reported(monkeypatch):
    """The contended runs above are not idle ones in disguise: the collective takes longer, and the races on a
    member's tensor are reported as hazards."""
    settings = dict(as_processes=False, timing_only=False, buffer_kind="tcm", monkeypatch=monkeypatch)
    idle = outcome("ring", "all_reduce", contended=False, **settings)
    contended = outcome("ring", "all_reduce", contended=True, **settings)
    assert contended[0] > idle[0] and contended[4] and not idle[4]


def _ring_vs_simpy():
    pytest.importorskip("simpy")  # the test extra installs it; without it the oracle cannot run
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "ring_vs_simpy.py"
    spec = importlib.util.spec_from_file_location("ring_vs_simpy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("ranks, nbytes", [(3, 3 << 20), (5, 5 << 19)])
@pytest.mark.parametrize("symmetric", [False, True])
def test_adr0010_t25_the_timing_only_ring_matches_an_independent_simpy_model(tmp_path, ranks, nbytes, symmetric):
    """benchmarks/ring_vs_simpy.py's SimPy model, written from the timing rules and not from kernbench's code
    paths, gives the same picoseconds and messages (several slabs, a ring on a switch), every rank simulated or
    rank 0 alone (ADR 0010, "Symmetric collectives")."""
    oracle = _ring_vs_simpy()
    topology = oracle.switch_topology(ranks, tmp_path)
    kernbench_ps, kernbench_messages, _, ran_symmetric = oracle.run_kernbench(topology, ranks, nbytes, symmetric)
    simpy_ps, simpy_messages, _ = oracle.run_simpy(topology, ranks, nbytes)
    assert ran_symmetric == symmetric
    assert (kernbench_ps, kernbench_messages) == (simpy_ps, simpy_messages)


def _load_through(use_runs: bool, placement) -> tuple:
    """A load racing another process's store into the same elements, issued by `RunDmas` or by `issue_load`."""
    session = Session("default")
    tensor = device_tensor(session, 0, np.arange(4096, dtype=np.float64), "f32") if placement is None else \
        session.torch.tensor(np.arange(4096, dtype=np.float32), device="ahbm:0", dp=placement)
    machine, engine = session.ctx.machine, session.engine
    pe, allocation, dtype = machine.pe(0, 1, 0), tensor._allocation, np.dtype(np.float32)
    got = []

    def writer():
        store_elements(machine, pe, allocation, slice(1000, 3000), np.full(2000, -1, np.float32), label="w",
                       program=0, data=True)

    def reader():
        engine.sleep(1)
        runs = RunDmas.of(machine, pe, allocation, dtype, 0, 4096, label="r", program=1, data=True)
        got.append(runs is not None)
        if use_runs and runs is not None:
            out, landing = runs.load(500, 2500, engine.current_process)
        else:
            out, landing = issue_load(machine, pe, allocation, dtype, slice(500, 2500), label="r", program=1,
                                      data=True, owner=engine.current_process)
        for end, effect in landing:
            engine.sleep_until(end)
            machine.land(effect)
        got.append(out.copy())
        if use_runs and runs is not None:
            landing = runs.store(100, 200, np.full(100, 7, np.float32), engine.current_process)
        else:
            landing = issue_store(machine, pe, allocation, slice(100, 200), np.full(100, 7, np.float32), label="r",
                                  program=1, data=True, owner=engine.current_process)
        for end, effect in landing:
            engine.sleep_until(end)
            machine.land(effect)

    engine.spawn(writer)
    engine.spawn(reader)
    engine.run()
    return (got[0], list(machine.oplog), got[1].tobytes(), [h.as_dict() for h in machine.hazards.hazards],
            allocation.storage.typed(dtype, slice(0, 4096))[:].tobytes())


def test_adr0010_t28_runs_of_one_cube_are_the_placed_dmas_a_load_or_store_would_issue():
    runs_of_one_cube, *with_runs = _load_through(True, None)
    assert runs_of_one_cube and with_runs == list(_load_through(False, None)[1:])
    assert with_runs[2], "the load raced the store: a hazard is reported either way"
    spread = DPPolicy(cube="row_wise", pe="row_wise", num_cubes=4, num_pes=4)
    assert _load_through(True, spread)[0] is False  # a region over several cubes takes the general path


def test_adr0010_t29_an_algorithm_written_as_a_generator_runs_as_a_task(monkeypatch):
    module = types.ModuleType("generator_algorithm")
    seen = []

    def all_reduce(ctx, request):
        engine = ctx._engine
        seen.append((engine.current_process, engine.current_task is not None))
        me, peer = ctx.member, 1 - ctx.rank
        own = yield from ctx.load_steps(me.input, 0, me.input.count)
        yield from ctx.send_steps(peer, own)
        total = yield from ctx.reduce_steps("sum", own, (yield from ctx.recv_steps(peer)))
        yield from ctx.store_steps(me.output, 0, me.input.count, total)

    module.all_reduce = all_reduce
    monkeypatch.setitem(sys.modules, module.__name__, module)
    session = Session("default")
    tensors = [device_tensor(session, r, np.full(100, r + 1.0), "f32") for r in range(2)]
    run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
        {**config("direct"), "algorithm": "mine", "module": module.__name__})
    assert seen == [(None, True), (None, True)]
    assert all((values_of(t) == 3).all() for t in tensors)


def _spread_run(first: int, count: int) -> tuple:
    """A load then a store of elements [first, first + count) of an interleaved f32 tensor on h200x4, through
    `RunDmas.spread`: the values read, the DMAs' records (no label, the same for both) and the storage after."""
    session = Session("h200x4")
    tensor = device_tensor(session, 0, np.arange(1 << 16, dtype=np.float32), "f32")
    machine, engine = session.ctx.machine, session.engine
    allocation, got = tensor._allocation, []
    runs = RunDmas.spread(machine, machine.pe(0, 1, 0), allocation, np.dtype(np.float32), label="r", program=0,
                          data=True)

    def program():
        out, landing = runs.load(first, first + count, engine.current_process)
        for end, effect in landing:
            engine.sleep_until(end)
            machine.land(effect)
        got.append(out.copy())
        for end, effect in runs.store(first, first + count, -out, engine.current_process):
            engine.sleep_until(end)
            machine.land(effect)

    engine.spawn(program)
    engine.run()
    records = [(r.kind, r.nbytes, r.start, r.end, r.args.get("src"), r.args.get("dst"))
               for r in machine.oplog.select(kind="dma") if r.unit.endswith(".dma")]
    return got[0], records, allocation.storage.typed(np.float32, slice(0, 1 << 16))[:].copy()


@pytest.mark.parametrize("count", [4096, 4099, 3])
def test_adr0010_t121_an_interleaved_run_is_spread_over_every_cube_alike_wherever_it_starts(count):
    """Over the interleaved default a run is one DMA per cube, its elements dealt in order into shares equal to
    within one (the first cubes take the odd ones): the same DMAs, to the picosecond, at any offset, and the
    values read and written are the run's."""
    at_start, records, storage = _spread_run(0, count)
    cubes = Session("h200x4").ctx.topology.cubes_per_sip
    shares = [count // cubes + (k < count % cubes) for k in range(min(cubes, count))]
    loads = [r for r in records if r[5].endswith(".tcm")]
    assert [r[1] for r in loads] == [4 * share for share in shares]
    assert [r[4] for r in loads] == [f"sip0.cube{k}.hbm" for k in range(len(shares))]
    for first in (1, 12_345, (1 << 16) - count):
        values, elsewhere, written = _spread_run(first, count)
        assert elsewhere == records
        assert (values == np.arange(first, first + count, dtype=np.float32)).all()
        expected = np.arange(1 << 16, dtype=np.float32)
        expected[first:first + count] *= -1
        assert (written == expected).all()
    assert (at_start == np.arange(count, dtype=np.float32)).all()

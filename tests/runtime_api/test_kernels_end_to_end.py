"""ADR 0009: kernels through Session and `kernbench run` — timing-only runs and faults; launches of any grid size."""

from __future__ import annotations

import textwrap
import tracemalloc

import pytest
import triton
import triton.language as tl

from kernbench.benches import gemm, vector_add
from kernbench.cli import main
from kernbench.kernels import PreparedLaunch
from kernbench.kernels.library.matmul import matmul
from kernbench.kernels.library.vector_add import add
from kernbench.runtime_api.launch import kernel_launch
from kernbench.session import Session


def _kernels(torch):
    spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
    x, y, out = (torch.randn(1 << 13, dp=spread, name=n) for n in ("x", "y", "out"))
    add(x, y, out, block_size=128)
    rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
    a = torch.randn(128, 96, dtype="f16", dp=rows, name="A")
    b = torch.randn(96, 64, dtype="f16", name="B")
    c = torch.empty(128, 64, dtype="f16", dp=rows, name="C")
    matmul(a, b, c, block_m=32, block_n=32, block_k=32)
    torch.ahbm.synchronize()


def test_adr0009_t7_timing_only_runs_give_the_same_op_log_as_runs_with_data():
    logs = []
    for timing_only in (False, True):
        session = Session("default", timing_only=timing_only)
        session.run(_kernels, session.torch)
        logs.append(session.ctx.machine.oplog.to_json())
    assert logs[0] == logs[1]


@pytest.mark.parametrize("bench, shrink", [(gemm, ("SHAPES", [(128, 128, 128)])), (vector_add, ("SIZES", [1 << 12]))])
def test_adr0009_t8_shipped_benches_skip_their_value_check_in_timing_only_runs(bench, shrink, monkeypatch, capsys):
    monkeypatch.setattr(bench, *shrink)
    session = Session("default", timing_only=True)
    assert session.torch.ahbm.is_timing_only()
    session.run(bench.run, session.torch)
    assert capsys.readouterr().out.rstrip().endswith("skipped")
    assert not Session("default").torch.ahbm.is_timing_only()


BRANCHY = """
    import triton
    import triton.language as tl


    @triton.jit
    def branchy(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets)
        if tl.sum(x) > 0:
            tl.store(out_ptr + offsets, x)


    def run(torch):
        x, out = torch.ones(64, name="x"), torch.zeros(64, name="out")
        branchy[(1,)](x, out, BLOCK=64)
"""

OVERRUN = """
    import triton
    import triton.language as tl


    @triton.jit
    def overrun(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


    def run(torch):
        x, out = torch.ones(100, name="x"), torch.empty(100, name="out")
        overrun[(1,)](x, out, BLOCK=128)
"""


def _run_cli(tmp_path, capsys, source: str, *flags: str) -> tuple[int, str]:
    bench = tmp_path / "bench.py"
    bench.write_text(textwrap.dedent(source))
    status = main(["run", str(bench), *flags])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("host_reads", [False, True])
def test_adr0009_t9_data_dependent_kernels_are_refused_timing_only_with_one_message(tmp_path, capsys, host_reads):
    source = BRANCHY + ("        out.numpy()\n" if host_reads else "")
    status, err = _run_cli(tmp_path, capsys, source, "--timing-only")
    assert status == 2
    assert err.startswith("kernbench: error: kernel 'branchy' program (0, 0, 0) cannot run timing-only: "
                          "branch or loop condition depends on a value loaded from memory")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert _run_cli(tmp_path, capsys, source)[0] == 0


@pytest.mark.parametrize("host_reads", [False, True])
def test_adr0009_t10_an_out_of_bounds_kernel_ends_the_run_with_one_message_naming_the_fault(tmp_path, capsys, host_reads):
    source = OVERRUN + ("        out.numpy()\n" if host_reads else "")
    status, err = _run_cli(tmp_path, capsys, source)
    assert status == 2
    # The memcheck's report (ADR 0014 T20): address, lane, tensor, argument, how far past the end.
    assert err == ("kernbench: error: kernel 'overrun' program (0, 0, 0): out-of-bounds 4-byte load at "
                   "0x100000000190 (lane 100): 0 bytes past the end of tensor 'x' (argument 'x_ptr', 400 bytes)\n")


@triton.jit
def _value_math(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Elementwise math, casts and reductions on loaded values, each row of a block masked at `n`."""
    rows = tl.arange(0, 4)
    cols = tl.arange(0, BLOCK)
    mask = (cols < n)[None, :] & (rows < 4)[:, None]
    x = tl.load(x_ptr + rows[:, None] * BLOCK + cols[None, :], mask=mask, other=-float("inf"))
    shifted = x - tl.max(x, axis=1)[:, None]
    e = tl.exp(shifted)
    soft = e / tl.sum(e, axis=1)[:, None]
    mixed = tl.where(soft > 0.1, tl.sqrt(soft), soft.to(tl.float16).to(tl.float32) * 2.0)
    tl.store(out_ptr + rows[:, None] * BLOCK + cols[None, :], mixed, mask=mask)
    tl.store(out_ptr + 4 * BLOCK + rows, tl.argmax(mixed, axis=1).to(tl.float32))


def test_adr0007_t36_timing_only_runs_charge_value_math_as_runs_with_data():
    logs = []
    for timing_only in (False, True):
        session = Session("default", timing_only=timing_only)

        def bench(torch):
            x = torch.randn(4, 64, name="x")
            out = torch.zeros(5 * 64, name="out")
            _value_math[(3,)](x, out, 50, BLOCK=64)
            torch.ahbm.synchronize()

        session.run(bench, session.torch)
        logs.append(session.ctx.machine.oplog.to_json())
    assert logs[0] == logs[1]


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0007_t61_replayed_launches_give_the_op_log_and_results_of_interpreted_ones(timing_only, monkeypatch):
    # A spread vector add, a grouped matmul with two program shapes and masked tails, value math.
    def kernels(torch):
        spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
        x, y, out = (torch.randn(1 << 13, dp=spread, name=n) for n in ("x", "y", "out"))
        add(x, y, out, block_size=128)
        rows = torch.DPPolicy(cube="row_wise", pe="row_wise")
        a = torch.randn(256, 96, dtype="f16", dp=rows, name="A")
        b = torch.randn(96, 72, dtype="f16", name="B")
        c = torch.empty(256, 72, dtype="f16", dp=rows, name="C")
        matmul(a, b, c, block_m=32, block_n=32, block_k=64, group_m=4)
        values = torch.zeros(5 * 64, name="values")
        _value_math[(3,)](torch.randn(4, 64, name="v"), values, 50, BLOCK=64)
        torch.ahbm.synchronize()
        return None if timing_only else [t.numpy() for t in (out, c, values)]

    runs = []
    for replays in (False, True):
        monkeypatch.setattr(PreparedLaunch, "replays", replays)
        session = Session("default", timing_only=timing_only)
        results = session.run(kernels, session.torch)
        runs.append((session.ctx.machine.oplog.to_json(), results))
    assert runs[1][0] == runs[0][0]
    if not timing_only:
        for replayed, interpreted in zip(runs[1][1], runs[0][1]):
            assert replayed.tobytes() == interpreted.tobytes()


def _spread(torch, n_elements: int):
    return torch.empty(n_elements, dp=torch.DPPolicy(cube="column_wise", pe="column_wise"), name="spread")


@pytest.mark.parametrize("spread", [True, False], ids=["blocks over owners", "round robin"])
def test_program_placement_maps_each_program_by_the_rule_and_keeps_first_use_order(spread):
    session = Session("default", timing_only=True)
    ctx, torch = session.ctx, session.torch
    topology = ctx.topology
    x = _spread(torch, 64 * topology.pes_per_sip) if spread else torch.empty(64, name="x")
    if spread:  # ADR 0008: program p of n to owner floor(p·k/n), owners in shard order
        owners = list(dict.fromkeys((s.cube, s.pe) for s in x.placement.shards if s.replica == 0))
        rule = lambda p, n: owners[p * len(owners) // n]  # noqa: E731
    else:  # ADR 0008: round-robin over every PE, PE index first, cubes nearest cube 0 first
        cubes = sorted(range(topology.cubes_per_sip), key=lambda c: (len(topology.noc_route(0, c, sip=0)), c))
        order = [(cube, pe) for pe in range(topology.pes_per_cube) for cube in cubes]
        rule = lambda p, n: order[p % len(order)]  # noqa: E731
    k = topology.pes_per_sip
    for n in (1, 3, k - 1, k, k + 1, 2 * k + 5, 100):
        assignment = kernel_launch.place_programs(ctx, [x], 0, n)
        placed = {p: (pe.cube, pe.pe) for pe, programs in assignment for p in programs}
        assert placed == {p: rule(p, n) for p in range(n)}
        assert [(pe.cube, pe.pe) for pe, _ in assignment] == list(dict.fromkeys(rule(p, n) for p in range(n)))


@triton.jit
def _touch(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))


@pytest.mark.parametrize("spread", [True, False], ids=["blocks over owners", "round robin"])
def test_a_huge_grid_is_placed_and_enqueued_in_memory_independent_of_its_size(spread):
    programs = 1 << 40
    session = Session("default", timing_only=True, max_programs=programs)  # a run that asks for it may launch it
    torch = session.torch
    x = _spread(torch, 64 * session.ctx.topology.pes_per_sip) if spread else torch.empty(64, name="x")

    assignment = kernel_launch.place_programs(session.ctx, [x], 0, programs)
    assert all(type(share) is range for _, share in assignment)
    assert sum(len(share) for _, share in assignment) == programs

    tracemalloc.start()
    try:
        _touch[(programs,)](x, BLOCK=64)  # enqueued only: the engine never runs it
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_every_finished_program_is_counted_for_the_progress_line():
    session = Session("default", timing_only=True)

    def bench(torch):
        x = _spread(torch, 64 * 40)
        _touch[(40,)](x, BLOCK=64)
        _touch[(3,)](x, BLOCK=64)
        torch.ahbm.synchronize()

    session.run(bench, session.torch)
    assert session.ctx.programs_done == 43

"""ADR 0001 T9, T10 and ADR 0007 T116: the run's speed caches (`kernbench.run_caches`) change its speed only.

Each case runs twice, with the caches on and off (`Session(caches=False)`),
and the two runs must log the same ops at the same picoseconds (every
op-log row), end at the same time, compute the same values and print the
same lines.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.cli.bench_loader import load_bench
from kernbench.kernels.library.vector_add import add
from kernbench.run_caches import RunCaches
from kernbench.session import Session


def kernel_launched_repeatedly(torch):
    """A Triton kernel launched again with the same and with other signatures: its traced shapes are reused."""
    spread = torch.DPPolicy(cube="column_wise", pe="column_wise")
    results = []
    for n, block in ((4096, 256), (8192, 256), (4096, 256), (4096, 512)):
        x, y = torch.randn(n, dp=spread), torch.randn(n, dp=spread)
        results.append(add(x, y, torch.empty(n, dp=spread), block_size=block).numpy())
    return results


def device_ops_with_autograd(torch):
    """Device ops forward and backward, under no_grad too, on a tensor split over cubes and PEs."""
    spread = torch.DPPolicy(cube="row_wise", pe="row_wise")
    x = torch.randn(64, 32, dp=spread).requires_grad_()
    w = torch.nn.Parameter(torch.randn(8, 32))
    loss = torch.nn.functional.gelu(torch.nn.functional.linear(x, w)).sum() + torch.softmax(x, dim=-1).var()
    loss.backward()
    with torch.no_grad():
        scaled = x * 2
    return [loss.detach().numpy(), x.grad.numpy(), w.grad.numpy(), scaled.numpy(), scaled.requires_grad]


def bench(name: str, shapes: int | None = None, **env):
    """A shipped bench, with `env` set; `shapes`: the first that many of its `SHAPES` (the module is loaded afresh
    for the run, so the change is the run's alone)."""
    def run(torch, monkeypatch):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        entry = load_bench(name)
        if shapes is not None:
            monkeypatch.setitem(entry.__globals__, "SHAPES", entry.__globals__["SHAPES"][:shapes])
        return entry(torch)
    return run


CASES = {
    "kernel launched repeatedly": lambda torch, _: kernel_launched_repeatedly(torch),
    "device ops with autograd": lambda torch, _: device_ops_with_autograd(torch),
    "all-reduce bench": bench("ccl_allreduce"),
    "distributed tutorial bench": bench("dist_tutorial"),
    "gemm bench": bench("gemm", shapes=3),  # up to 512 x 512 x 512: the fourth shape only repeats them, larger
    "tp_mlp step": bench("tp_mlp", KERNBENCH_HIDDEN="64", KERNBENCH_TOKENS="32"),
}


def _run(case, caches: bool, monkeypatch, capsys, **options):
    session = Session("default", caches=caches, **options)
    values = session.run(CASES[case], session.torch, monkeypatch)
    return list(session.ctx.machine.oplog.rows()), session.engine.now, values, capsys.readouterr().out


def _assert_same_values(off, on):
    assert type(off) is type(on)
    if isinstance(on, (list, tuple)):
        assert len(off) == len(on)
        for a, b in zip(off, on):
            _assert_same_values(a, b)
    elif isinstance(on, np.ndarray):
        np.testing.assert_array_equal(off, on)
    else:
        assert off == on


# Cases that read values run with values only; the others in timing-only runs too.
RUNS = [(case, False) for case in CASES] + [(case, True) for case in ("all-reduce bench", "gemm bench", "tp_mlp step")]


@pytest.mark.parametrize("case, timing_only", RUNS, ids=[f"{case}{', timing only' * t}" for case, t in RUNS])
def test_adr0001_t9_a_run_with_caches_off_logs_the_same_ops_times_and_values(case, timing_only, monkeypatch, capsys):
    rows, end, values, printed = _run(case, True, monkeypatch, capsys, timing_only=timing_only)
    rows_off, end_off, values_off, printed_off = _run(case, False, monkeypatch, capsys, timing_only=timing_only)
    assert len(rows) > 0
    assert end_off == end
    assert len(rows_off) == len(rows)
    assert rows_off == rows
    _assert_same_values(values_off, values)
    assert printed_off == printed


@pytest.mark.quick
def test_adr0001_t10_caches_off_keep_nothing_and_caches_on_keep_within_the_run():
    """Off, a slot drops what is put in it; on, it keeps it, and a run's slots are its own."""
    off = RunCaches(enabled=False)["a"]
    off["key"] = 1
    assert off.setdefault("other", [2]) == [2]
    assert off.get("key") is None and len(off) == 0
    on = RunCaches()
    on["a"]["key"] = 1
    assert on["a"] == {"key": 1} and on["b"] == {}
    assert RunCaches()["a"] == {}


def test_adr0007_t116_a_kernels_traced_shapes_are_kept_in_its_runs_caches():
    """Two launches of one signature keep one shape, in the caches of the run that launched them; a new run starts
    with none."""
    def launch_twice(torch):
        x = torch.randn(4096)
        return [add(x, x, torch.empty(4096), block_size=256) for _ in range(2)]

    session = Session("default")
    session.run(launch_twice, session.torch)
    assert [len(shapes) for shapes in session.ctx.caches["triton_bridge.kept_shapes"].values()] == [1]
    assert Session("default").ctx.caches["triton_bridge.kept_shapes"] == {}

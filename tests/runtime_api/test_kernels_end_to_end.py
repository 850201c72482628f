"""ADR 0009: kernels through Session and `kernbench run` — timing-only runs and faults."""

from __future__ import annotations

import textwrap

import pytest

from kernbench.benches import gemm, vector_add
from kernbench.cli import main
from kernbench.kernels.library.matmul import matmul
from kernbench.kernels.library.vector_add import add
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
    assert err == ("kernbench: error: kernel 'overrun' program (0, 0, 0): out-of-bounds 4-byte access "
                   "to tensor 'x' at byte offset 400\n")

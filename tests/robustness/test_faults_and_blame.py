"""ADR 0014, "Memcheck" and "Blame": kernel faults from the command line, failures blamed on the operation
that was running, unsupported Triton operations refused at their launch."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

from kernbench.kernels import UnsupportedKernelError
from kernbench.kernels.library.vector_add import add
from kernbench.session import Session
from kernbench.sim_engine import ProcessFailed
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, write

# The issue's bench: 4 MB past the end of a 4 KB tensor is the middle of the next one.
FAR_LOAD = '''
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs + shift, mask=mask), mask=mask)


def run(torch):
    small = torch.full((1024,), 1.0, name="small")
    big = torch.full((4 << 20,), 7.0, name="big")
    out = torch.zeros(1024, name="out")
    copy_kernel[(1,)](small, out, 1024, (4 << 20) // 4 + 1024, BLOCK=1024)  # 4 MB past small's end
    print("read", out.numpy()[0])
'''


def test_adr0014_t28_the_issues_far_load_is_one_line_naming_the_fault_and_runs_on_with_no_memcheck(tmp_path):
    bench = write(tmp_path, "far_load.py", FAR_LOAD)
    result = run_kernbench_in_process("run", str(bench), "--topology", "single_sip", cwd=tmp_path)
    assert_one_error_line(
        result, "kernel 'copy_kernel' program (0, 0, 0): out-of-bounds 4-byte load at ",
        " (lane 0): 4194304 bytes past the end of tensor 'small' (argument 'src', 4096 bytes), inside tensor 'big'\n")
    assert "read" not in result.stdout
    result = run_kernbench_in_process("run", str(bench), "--topology", "single_sip", "--no-memcheck", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("read 7.0\n"), "without the memcheck the neighbour is read, as on a GPU"


@triton.jit
def buggy_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    table = [1, 2]
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) + table[5])  # a Python bug, met when the program runs


BUGGY_CCL = "def all_reduce(ctx, request):\n    raise IndexError('an internal error of the collective')\n"


def _with_buggy_algorithm(tmp_path, monkeypatch) -> str:
    write(tmp_path, "buggy_algorithm.py", BUGGY_CCL)
    monkeypatch.syspath_prepend(str(tmp_path))
    return str(write(tmp_path, "ccl.yaml", """\
        defaults: {algorithm: buggy}
        algorithms:
          buggy: {module: buggy_algorithm, wiring: ring_1d}
        """))


def test_adr0014_t29_a_failure_nobody_waited_for_is_blamed_on_the_operation_it_arose_in(tmp_path, monkeypatch):
    # A kernel whose body fails, then a kernel that merely shares its stream: the first is named.
    def kernels(torch):
        x, y, out = torch.ones(256, name="x"), torch.ones(256, name="y"), torch.empty(256, name="out")
        buggy_kernel[(1,)](x, BLOCK=256)
        add(y, y, out, block_size=256)

    session = Session("single_sip")
    with pytest.raises(ProcessFailed) as caught:
        session.run(kernels, session.torch)
    assert str(caught.value).startswith("process 'ahbm:0.default: kernel buggy_kernel(1, 1, 1)' failed at t=")
    assert "IndexError: list index out of range (nothing was waiting for it)" in str(caught.value)
    assert isinstance(caught.value.__cause__, IndexError)

    # The issue's case: a collective fails inside (here its algorithm raises), then each rank launches a kernel
    # on the same stream and nobody waits: the all_reduce is blamed, on whichever rank ran it, not the kernel.
    def ranks(torch):
        torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(rank_body, args=(torch,), nprocs=torch.distributed.get_world_size())

    session = Session("default", ccl=_with_buggy_algorithm(tmp_path, monkeypatch))
    with pytest.raises(ProcessFailed) as caught:
        session.run(ranks, session.torch)
    message = str(caught.value)
    assert message.startswith("process 'ahbm:") and ".default: all_reduce#0' failed at t=" in message, message
    assert "kernel" not in message
    assert "IndexError: an internal error of the collective (nothing was waiting for it)" in message


def rank_body(rank, torch):
    torch.ahbm.set_device(rank)
    x, bias, out = torch.ones(1024), torch.ones(1024), torch.empty(1024)
    torch.distributed.all_reduce(x)
    add(x, bias, out, block_size=128)


def test_adr0014_t30_the_blamed_operation_is_named_on_the_command_line_too(tmp_path, monkeypatch):
    ccl = _with_buggy_algorithm(tmp_path, monkeypatch)
    bench = write(tmp_path, "bench.py", '''
        from kernbench.kernels.library.vector_add import add


        def run(torch):
            torch.distributed.init_process_group(backend="ahbm")
            torch.multiprocessing.spawn(rank, args=(torch,), nprocs=torch.distributed.get_world_size())


        def rank(rank, torch):
            torch.ahbm.set_device(rank)
            x, bias, out = torch.ones(1024), torch.ones(1024), torch.empty(1024)
            torch.distributed.all_reduce(x)
            add(x, bias, out, block_size=128)
        ''')
    result = run_kernbench_in_process("run", str(bench), "--ccl", ccl, cwd=tmp_path, python_path=tmp_path)
    line = assert_one_error_line(result, ".default: all_reduce#0' failed at t=",
                                 "IndexError: an internal error of the collective")
    assert "add_kernel" not in line


@triton.jit
def scan_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.cumsum(tl.load(x_ptr + offsets), 0))


@triton.jit
def histogram_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.histogram(tl.load(x_ptr + offsets), BLOCK))


@pytest.mark.parametrize("kernel, op", [(scan_kernel, "tl.associative_scan"), (histogram_kernel, "'histogram'")],
                         ids=["scan", "histogram"])
def test_adr0014_t31_an_unsupported_op_fails_at_its_launch_naming_kernel_and_op(kernel, op):
    reached = []

    def bench(torch):
        x, out = torch.ones(16, dtype=torch.int32, name="x"), torch.zeros(16, dtype=torch.int32, name="out")
        args = (x,) if kernel is scan_kernel else (x, out)
        torch.ahbm.synchronize()
        try:
            kernel[(4,)](*args, BLOCK=16)
        except UnsupportedKernelError as error:
            reached.append(("launch", str(error), torch.ahbm.current_stream().query()))
        else:
            reached.append(("returned",))
        try:
            kernel.warmup(*args, BLOCK=16, grid=(1,))
        except UnsupportedKernelError as error:
            reached.append(("warmup", str(error)))

    session = Session("single_sip")
    session.run(bench, session.torch)
    name = kernel.fn.__name__
    assert [entry[0] for entry in reached] == ["launch", "warmup"]
    assert reached[0][1].startswith(f"kernel '{name}' uses {op}") and reached[0][1] == reached[1][1]
    assert reached[0][2], "nothing was enqueued"
    assert session.ctx.programs_done == 0


def test_adr0014_t32_a_bench_option_that_prefixes_no_memcheck_reaches_the_bench(tmp_path, capsys):
    # `kernbench run` passes the options it does not know to the bench, so it abbreviates none of its own:
    # `--n 64` is the bench's, not `--no-memcheck` followed by a stray `64`.
    from kernbench.cli import main

    bench = write(tmp_path, "bench.py", '''
        import argparse


        def add_arguments(parser):
            parser.add_argument("--n", type=int, default=1)


        def run(torch, argv):
            parser = argparse.ArgumentParser()
            add_arguments(parser)
            print("n =", parser.parse_args(argv).n)
        ''')
    assert main(["run", str(bench), "--topology", "single_sip", "--n", "64"]) == 0
    assert capsys.readouterr().out.startswith("n = 64\n")

"""ADR 0014, "Launches a kernel cannot take": arguments that do not bind and grids no run could finish are one
line at `kernel[grid](...)`, naming the kernel, before anything is enqueued."""

from __future__ import annotations

import pytest
import triton
import triton.language as tl

from kernbench.kernels import KernelLaunchError
from kernbench.runtime_api.launch.kernel_launch import MAX_PROGRAMS
from kernbench.session import Session
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, write

ADD_BENCH = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def run(torch, argv):
    x, y, out = torch.ones(64), torch.ones(64), torch.zeros(64)
    add_kernel[eval(argv[0])](x, y, out, *eval(argv[1]), BLOCK=64)
    print("sum", out.numpy().sum())
'''


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _launch(grid, *scalars, max_programs: int | None = None):
    """`add_kernel[grid](x, y, out, *scalars, BLOCK=64)` in a run: the sum of what it wrote."""
    session = Session("single_sip", **({} if max_programs is None else {"max_programs": max_programs}))

    def bench(torch):
        x, y, z = torch.ones(64), torch.ones(64), torch.zeros(64)
        add_kernel[grid](x, y, z, *scalars, BLOCK=64)
        return float(z.numpy().sum())

    return session.run(bench, session.torch)


@pytest.mark.parametrize("scalars, got", [
    ((), "got 3 positional and BLOCK by keyword: missing a required argument: 'n'"),
    ((64, 5), "got 5 positional and BLOCK by keyword: multiple values for argument 'BLOCK'"),
])
def test_adr0014_t38_kernel_arguments_that_do_not_bind_are_one_line_naming_kernel_and_parameters(tmp_path, scalars,
                                                                                                  got):
    expected = f"kernel 'add_kernel' takes 5 arguments (x_ptr, y_ptr, out_ptr, n, BLOCK), {got}"
    with pytest.raises(KernelLaunchError) as caught:
        _launch((1,), *scalars)
    assert str(caught.value) == expected
    bench = write(tmp_path, "add.py", ADD_BENCH)
    result = run_kernbench_in_process("run", str(bench), "--topology", "single_sip", "(1,)", repr(scalars),
                                      cwd=tmp_path)
    assert_one_error_line(result, expected + "\n")


@pytest.mark.parametrize("grid", [(2**40,), (10**6,), (1 << 10, 1 << 10, 1)])
def test_adr0014_t39_a_grid_above_the_program_limit_is_refused_at_its_launch_saying_how_to_raise_it(grid):
    programs = grid[0] * (grid[1] if len(grid) > 1 else 1)
    padded = tuple(grid) + (1,) * (3 - len(grid))
    with pytest.raises(KernelLaunchError) as caught:
        _launch(grid, 64)
    assert str(caught.value).startswith(
        f"kernel 'add_kernel' grid {padded} is {programs:,} programs, above the limit of {MAX_PROGRAMS:,} ")
    assert "--max-programs N (Session(max_programs=N))" in str(caught.value)


def test_adr0014_t39_the_limit_is_the_runs_and_a_grid_within_it_runs(tmp_path):
    assert _launch((1,), 64) == 128.0
    with pytest.raises(KernelLaunchError, match=r"grid \(3, 1, 1\) is 3 programs, above the limit of 2 "):
        _launch((3,), 64, max_programs=2)
    assert _launch((3,), 64, max_programs=3) == 128.0
    bench = write(tmp_path, "add.py", ADD_BENCH)
    refused = run_kernbench_in_process("run", str(bench), "--topology", "single_sip", "--max-programs", "2", "(3,)",
                                       "(64,)", cwd=tmp_path)
    assert_one_error_line(refused, "kernel 'add_kernel' grid (3, 1, 1) is 3 programs, above the limit of 2 ")
    ran = run_kernbench_in_process("run", str(bench), "--topology", "single_sip", "--max-programs", "3", "(3,)",
                                   "(64,)", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.startswith("sum 128.0\n"), ran.stderr


@pytest.mark.parametrize("grid", [(1.5,), ("a",), (-1,), (1, 1, 1, 1)])
def test_adr0014_t39_a_grid_that_is_not_one_to_three_non_negative_integers_is_refused_not_truncated(grid):
    with pytest.raises(KernelLaunchError, match=r"^kernel 'add_kernel' grid .* is not 1 to 3 non-negative integers$"):
        _launch(grid, 64)


@pytest.mark.parametrize("value, shown", [("abc", "'abc' (str)"), ([1, 2], "[1, 2] (list)"),
                                          (2**70, "1180591620717411303424, beyond what 64 bits hold")])
def test_adr0014_t38_a_kernel_argument_no_launch_can_pass_is_one_line_naming_it(value, shown):
    with pytest.raises(KernelLaunchError) as caught:
        _launch((1,), value)
    assert str(caught.value).startswith(f"kernel 'add_kernel' argument 'n' is {shown}")

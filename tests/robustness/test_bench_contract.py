"""ADR 0014, the bench contract: a `run` that cannot be called as run(torch) is refused at load, and the
shipped benches refuse arguments they cannot use, each with one line."""

from __future__ import annotations

import pytest

from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line, write


@pytest.mark.parametrize("source, needle", [
    ("def run():\n    print('the bench ran')\n", "run() cannot be called as run(torch)"),
    ("def run(torch, size, dtype):\n    print('the bench ran')\n",
     "run(torch, size, dtype) cannot be called as run(torch)"),
    ("async def run(torch):\n    print('the bench ran')\n", "run is `async def`"),
    ("def run(torch):\n    print('the bench ran')\n    yield\n", "run is a generator"),
], ids=["no-parameters", "too-many-parameters", "async", "generator"])
def test_adr0014_t18_a_run_that_breaks_the_bench_contract_is_refused_at_load(tmp_path, source, needle):
    bench = write(tmp_path, "bench.py", "import os\n\n" + source)
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert_one_error_line(result, f"{bench}:3: {needle}", "run(torch)")
    assert "the bench ran" not in result.stdout


@pytest.mark.parametrize("bench, args, env, needle", [
    ("tp_mlp", (), {"KERNBENCH_TP": "abc"}, "tp_mlp: KERNBENCH_TP='abc': expected a positive whole number"),
    ("tp_mlp", (), {"KERNBENCH_TP": "3"}, "tp_mlp: KERNBENCH_TP=3 does not divide the 4 ranks"),
    ("tp_mlp", (), {"KERNBENCH_HIDDEN": "-512"}, "tp_mlp: KERNBENCH_HIDDEN='-512': expected a positive whole number"),
    ("tp_mlp", (), {"KERNBENCH_TOKENS": "0"}, "tp_mlp: KERNBENCH_TOKENS='0': expected a positive whole number"),
    ("ccl_sweep", ("--min-bytes", "-64"), {}, "ccl_sweep: argument --min-bytes: '-64' is not a positive size"),
    ("ccl_sweep", ("--plot", "busbw.txt"), {}, "ccl_sweep: --plot busbw.txt: expected a name ending in .png"),
], ids=["tp-not-a-number", "tp-not-a-divisor", "negative-hidden", "zero-tokens", "negative-size", "plot-format"])
def test_adr0014_t19_a_shipped_bench_refuses_an_argument_it_cannot_use_in_one_line(tmp_path, bench, args, env,
                                                                                  needle):
    result = run_kernbench_in_process("run", bench, "--timing-only", *args, cwd=tmp_path, env=env)
    assert_one_error_line(result, needle)

"""ADR 0020, issue 39: the tensor-parallel variant of gpt_train trains the same GPT to the same losses."""

from __future__ import annotations

import re

import pytest

from kernbench.cli.bench_loader import load_bench_entry
from kernbench.session import Session
from tests.cli import run_kernbench_in_process

STEP = re.compile(r"^\s*step (\d+): (?:loss (\S+), )?(\S+) us simulated$")


def _steps(output: str) -> dict:
    """{tp (None: the single-device bench): [(loss or None, microseconds) per step]} from a bench's output."""
    runs, tp = {}, None
    for line in output.splitlines():
        if line.startswith("tp "):
            tp = int(line.split(":")[0].split()[1])
        found = STEP.match(line)
        if found:
            runs.setdefault(tp, []).append((found.group(2) and float(found.group(2)), float(found.group(3))))
    return runs


def test_adr0020_t29_the_tp_gpt_trains_to_the_single_device_losses_at_every_tp_size(capsys):
    session = Session("default")
    session.run(load_bench_entry("gpt_train").run, session.torch)
    single = _steps(capsys.readouterr().out)[None]
    session = Session("default")
    session.run(load_bench_entry("gpt_train_tp").run, session.torch, ["--tp", "1,2"])
    parallel = _steps(capsys.readouterr().out)
    assert sorted(parallel) == [1, 2]
    for tp, steps in parallel.items():
        assert len(steps) == len(single) == 3
        for (loss, _), (want, _) in zip(steps, single):
            assert loss == pytest.approx(want, abs=2e-4), tp
    assert single[-1][0] < single[0][0]  # it trains
    collectives = {row["world_size"] for row in session.ctx.collectives}
    assert collectives == {1, 2}  # the layers' all-reduces and the gradient norm's ran in each group


@pytest.mark.parametrize("timing_only", [False, True], ids=["values", "timing only"])
def test_adr0020_t30_the_tp_gpt_bench_prints_each_steps_loss_and_time_and_its_times_alone_in_timing_only(
        tmp_path, timing_only):
    result = run_kernbench_in_process("run", "gpt_train_tp", "--tp", "2", "--steps", "2",
                                      *(["--timing-only"] if timing_only else []), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [(tp, steps)] = _steps(result.stdout).items()
    assert tp == 2 and len(steps) == 2
    assert all((loss is None) == timing_only for loss, _ in steps)
    assert all(us > 0 for _, us in steps)


@pytest.mark.parametrize("argv", [["--tp", "3"], ["--tp", "x"], ["--steps", "0"]])
def test_adr0020_t31_a_tp_size_the_sips_or_heads_cannot_take_is_one_line(tmp_path, argv):
    result = run_kernbench_in_process("run", "gpt_train_tp", *argv, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "gpt_train_tp: --" in result.stderr

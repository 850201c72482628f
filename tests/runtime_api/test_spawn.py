"""ADR 0006: spawn, worker-wait, failures, deadlocks, and `kernbench run` on benches that misbehave."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kernbench.runtime_api.namespace.spawn import SpawnException
from kernbench.session import Session
from kernbench.sim_engine import Deadlock
from tests.cli import run_kernbench_in_process


@pytest.mark.quick
def test_adr0006_t1_spawn_calls_fn_with_rank_and_args_and_joins_all(session):
    calls = []
    session.run(lambda: session.torch.multiprocessing.spawn(lambda rank, a, b: calls.append((rank, a, b)),
                                                            args=("x", 2), nprocs=5))
    assert calls == [(r, "x", 2) for r in range(5)]


@pytest.mark.quick
def test_adr0006_t2_join_false_returns_a_context_whose_join_waits(session):
    torch = session.torch
    order = []

    def worker(rank):
        torch.ahbm.set_device(rank)
        torch.ones(1024).numpy()
        order.append(rank)

    def main():
        context = torch.multiprocessing.spawn(worker, nprocs=2, join=False)
        order.append("spawned")
        assert context.join() is True
        order.append("joined")

    session.run(main)
    assert order[0] == "spawned" and order[-1] == "joined" and sorted(order[1:3]) == [0, 1]


@pytest.mark.quick
def test_adr0006_t3_a_rank_that_raises_aborts_siblings_and_is_named_with_its_traceback(session):
    torch = session.torch
    cleaned_up = []

    def worker(rank):
        try:
            torch.ahbm.set_device(rank)
            if rank in (1, 2):
                raise ValueError(f"bad input on rank {rank}")
            torch.ones(1 << 20).numpy()  # long enough to be aborted while waiting
        finally:
            cleaned_up.append(rank)

    with pytest.raises(SpawnException) as caught:
        session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=4))
    error = caught.value
    assert error.error_index == 1
    assert sorted(error.failures) == [1, 2]
    message = str(error)
    assert "rank 1, rank 2" in message and "ValueError: bad input on rank 2" in message
    assert 'in worker' in message  # the rank's own traceback
    session.engine.run()  # let the aborted ranks unwind
    assert sorted(cleaned_up) == [0, 1, 2, 3]


@pytest.mark.quick
def test_adr0006_t4_a_waiting_rank_yields_so_others_progress_in_simulated_time(session):
    torch = session.torch
    log = []

    def worker(rank):
        torch.ahbm.set_device(rank)
        n = (1 << 20) if rank == 0 else 16
        torch.ones(n).numpy()  # rank 0 waits long, rank 1 briefly
        log.append((rank, session.engine.now))

    session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=2))
    assert [rank for rank, _ in log] == [1, 0]
    assert log[0][1] < log[1][1]


@pytest.mark.quick
def test_adr0006_t5_a_rank_waiting_forever_is_a_deadlock_report_naming_it(session):
    torch = session.torch
    never = session.engine.event("a message from rank 1 that is never sent")

    def worker(rank):
        if rank == 0:
            session.engine.wait(never)

    with pytest.raises(Deadlock) as caught:
        session.run(lambda: torch.multiprocessing.spawn(worker, nprocs=2))
    report = str(caught.value)
    assert "process 'rank0' waits on 'a message from rank 1 that is never sent'" in report
    assert "'rank1'" not in report  # it returned; only the waiters are named


@pytest.mark.quick
def test_adr0006_t6_same_bench_twice_gives_the_same_op_log_byte_for_byte():
    def bench(torch):
        def worker(rank):
            torch.ahbm.set_device(rank)
            x = torch.randn(64, 64, dp=torch.DPPolicy(cube="column_wise", pe="row_wise"))
            y = torch.empty(64, 64, device=(rank + 1) % 4)
            y.copy_(x)
            y.numpy()
        torch.multiprocessing.spawn(worker, nprocs=4)

    logs = []
    for _ in range(2):
        session = Session("default")
        session.run(bench, session.torch)
        logs.append(session.ctx.machine.oplog.to_json())
    assert logs[0] == logs[1] and len(logs[0]) > 100


def run_bench_file(tmp_path, body: str) -> subprocess.CompletedProcess:
    bench = tmp_path / "bench.py"
    bench.write_text(textwrap.dedent(body))
    return run_kernbench_in_process("run", str(bench), cwd=tmp_path)


@pytest.mark.parametrize("body, status, needle", [
    ("def run():\n    pass\n", 2, "cannot be called as run(torch)"),
    ("import not_a_module_anywhere\n\ndef run(torch):\n    pass\n", 2, "importing the bench failed: ModuleNotFoundError"),
    ("def run(torch):\n    raise ValueError('my bug')\n", 1, "ValueError: my bug"),
    ("def run(torch):\n    torch.empty(1, 1 << 40, dtype='f16', name='w')\n", 2, "cannot allocate tensor 'w'"),
    ("def run(torch):\n    torch.empty(1, 30, dp=torch.DPPolicy(num_cubes=4, num_pes=4))\n", 2, "does not split"),
    ("def run(torch):\n    torch.multiprocessing.spawn(lambda r: 1 / (r - 1), nprocs=3)\n", 1, "ZeroDivisionError"),
    ("def run(torch):\n    torch.multiprocessing.spawn(lambda r: r and torch.empty(1 << 40, name='w'), nprocs=2)\n",
     2, "-- rank 1: sip0: cannot allocate tensor 'w'"),
])
def test_adr0006_t7_bench_failures_are_one_message_or_the_bench_traceback(tmp_path, body, status, needle):
    result = run_bench_file(tmp_path, body)
    assert result.returncode == status, result.stderr
    assert needle in result.stderr
    if status == 2:
        assert result.stderr.startswith("kernbench: error:")
        assert "Traceback" not in result.stderr.split("\n")[0]
    else:
        assert "Traceback" in result.stderr


def test_adr0006_t8_run_prints_a_report_and_writes_json_and_trace(tmp_path):
    bench = tmp_path / "bench.py"
    bench.write_text("def run(torch):\n    x = torch.ones(4096)\n    x.numpy()\n")
    result = run_kernbench_in_process("run", str(bench), "--json", "r.json", "--trace", "t.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "simulated time:" in result.stdout and "bytes moved per link class:" in result.stdout
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bytes_by_link_class"]["host"] == 4096 * 4
    assert report["total_time_ps"] > 0
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(event.get("ph") == "X" for event in trace["traceEvents"])


SCRIPT = '''\
import os
import sys

import torch
import torch.distributed as dist

from sibling import greeting

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
assert int(os.environ["RANK"]) == rank and int(os.environ["LOCAL_RANK"]) == rank
os.environ["LOCAL_RANK"] = "mine"  # a rank's own torchrun variable stays its own
torch.cuda.set_device(rank)
x = torch.full((4,), float(rank + 1), device="cuda")
dist.all_reduce(x)
print(greeting, rank, world, os.environ["WORLD_SIZE"], dist.is_torchelastic_launched(), sys.argv[1:], x.tolist())
dist.destroy_process_group()
'''


def test_adr0006_t9_a_script_runs_once_per_rank_as_torchrun_runs_it(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    (tmp_path / "sibling.py").write_text("greeting = 'hello from'\n")
    run = ["run", "script.py", "--topology", "h200x4"]
    result = run_kernbench_in_process(*run, "--nproc-per-node", "2", "--", "--steps", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("hello from"))
    assert lines == [f"hello from {rank} 2 2 True ['--steps', '3'] [3.0, 3.0, 3.0, 3.0]" for rank in (0, 1)]
    single = run_kernbench_in_process(*run, cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    assert "hello from 0 1 1 True [] [1.0, 1.0, 1.0, 1.0]" in single.stdout
    bench = tmp_path / "bench.py"
    bench.write_text("def run(torch):\n    pass\n")
    refused = run_kernbench_in_process("run", str(bench), "--nproc-per-node", "2", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--nproc-per-node runs a script" in refused.stderr


def test_adr0006_t9_the_process_is_as_it_was_after_a_script_ran(tmp_path):
    import os

    from kernbench.cli.scripts import script_run

    (tmp_path / "script.py").write_text("import os\nassert os.environ['WORLD_SIZE'] == '2'\n")
    environ, argv, path = os.environ, list(sys.argv), list(sys.path)
    session = Session("h200x4", timing_only=True)
    session.run(script_run(tmp_path / "script.py", 2), session.torch, ["--flag"])
    assert os.environ is environ and "WORLD_SIZE" not in os.environ and sys.argv == argv and sys.path == path

"""ADR 0014, "A collective that does not end": a user's algorithm that loops forever is stopped by the watchdog,
in one line naming the collective, the algorithm and how to give it longer."""

from __future__ import annotations

import re
import signal
import time

import pytest

from tests.cli import run_kernbench_in_process
from tests.robustness.harness import PROBE_TIMEOUT_S, assert_one_error_line, kernbench, started, write

# Every rank all-reduces once under a process group whose timeout (seconds) is the bench's argument.
BENCH = '''
import datetime


def _rank(rank, torch, timeout_s):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm", timeout=datetime.timedelta(seconds=timeout_s))
    x = torch.ones(8)
    torch.distributed.all_reduce(x)
    print(rank, x.tolist())


def run(torch, argv):
    torch.multiprocessing.spawn(_rank, args=(torch, float(argv[0])), nprocs=torch.ahbm.device_count())
'''

ALGORITHMS = {
    # A loop in the algorithm's own Python code: no op ever reaches the engine.
    "spin": "def all_reduce(ctx, request):\n    while True:\n        pass\n",
    # The same, written as a generator (its members run as engine tasks).
    "spin_steps": "def all_reduce(ctx, request):\n    while True:\n        pass\n    yield 0\n",
    # A loop of PE ops: simulated time goes on, the collective never ends.
    "op_loop": "import numpy as np\n\n\ndef all_reduce(ctx, request):\n    values = np.ones(16, dtype=np.float32)\n"
               "    while True:\n        values = ctx.reduce('sum', values, values)\n",
}


def _ccl_with(tmp_path, algorithm: str):
    write(tmp_path, f"{algorithm}_algorithm.py", ALGORITHMS[algorithm])
    return write(tmp_path, "ccl.yaml", f"defaults: {{algorithm: {algorithm}}}\nalgorithms:\n"
                                       f"  {algorithm}: {{module: {algorithm}_algorithm, wiring: ring_1d}}\n")


def _run_with(tmp_path, algorithm: str, timeout_s: float):
    ccl = _ccl_with(tmp_path, algorithm)
    bench = write(tmp_path, "bench.py", BENCH)
    began = time.monotonic()
    result = kernbench("run", str(bench), "--topology", "default", "--ccl", str(ccl), str(timeout_s), cwd=tmp_path,
                       python_path=tmp_path)
    return result, time.monotonic() - began


@pytest.mark.parametrize("timeout_s", [8, 4])
@pytest.mark.parametrize("algorithm", ["spin", "spin_steps"])
def test_adr0014_t40_an_algorithm_looping_without_ops_is_stopped_after_a_twentieth_of_the_timeout(tmp_path, algorithm,
                                                                                                  timeout_s):
    result, wall = _run_with(tmp_path, algorithm, timeout_s)
    limit = timeout_s / 20
    assert_one_error_line(result, f"all_reduce#0: algorithm '{algorithm}' ({algorithm}_algorithm): rank ",
                          f"has run {limit:g} s of host time without an op, a twentieth of its process group's "
                          "timeout; is it looping? (a longer timeout is "
                          "init_process_group(timeout=datetime.timedelta(seconds=N)))\n")
    assert wall < 15, f"stopped after {wall:.1f} s, where a twentieth of the {timeout_s} s timeout is {limit:g} s"


def test_adr0014_t40_an_algorithm_looping_over_ops_is_stopped_at_the_timeout(tmp_path):
    result, wall = _run_with(tmp_path, "op_loop", 2)
    assert_one_error_line(result, "all_reduce#0: algorithm 'op_loop' (op_loop_algorithm) has not finished after 2 s "
                                  "of host time, its process group's timeout; is it looping? (a longer timeout is "
                                  "init_process_group(timeout=datetime.timedelta(seconds=N)))\n")
    assert wall < 15


def test_adr0014_t40_a_collective_within_its_timeout_runs_and_a_timeout_must_be_a_timedelta(tmp_path):
    bench = write(tmp_path, "bench.py", BENCH)
    result = run_kernbench_in_process("run", str(bench), "--topology", "default", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "0 [4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]\n" in result.stdout
    bad = write(tmp_path, "bad.py", BENCH.replace("datetime.timedelta(seconds=timeout_s)", "timeout_s"))
    assert_one_error_line(run_kernbench_in_process("run", str(bad), "--topology", "default", "2", cwd=tmp_path),
                          "init_process_group(timeout=2.0): expected a positive datetime.timedelta")


# BENCH, saying that the simulation is under way before the collective that spins.
ANNOUNCED_BENCH = BENCH.replace("    torch.distributed.all_reduce(x)\n",
                                "    if rank == 0:\n        print('running', flush=True)\n"
                                "    torch.distributed.all_reduce(x)\n")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_adr0014_t44_a_signal_ends_a_member_spinning_inside_the_engines_loop_with_one_line_and_status_130(tmp_path,
                                                                                                          signum):
    """A generator member runs in the engine's own loop, whose step never returns while it spins: the signal is
    raised through it, not left for a next step that never comes."""
    ccl = _ccl_with(tmp_path, "spin_steps")
    bench = write(tmp_path, "bench.py", ANNOUNCED_BENCH)
    child = started("run", str(bench), "--topology", "default", "--ccl", str(ccl), "600", cwd=tmp_path,
                    python_path=tmp_path)
    time.sleep(0.5)  # the members spin, far inside the 30 s a twentieth of the timeout gives them
    began = time.monotonic()
    child.send_signal(signum)
    try:
        _, stderr = child.communicate(timeout=PROBE_TIMEOUT_S)
    finally:
        child.kill()
    assert time.monotonic() - began < 5
    assert child.returncode == 130, stderr
    assert re.fullmatch(r"kernbench: interrupted at simulated t=[\d.]+ (ps|ns|us|ms|s) \([\d,]+ events, "
                        r"wall [\d.]+ s\)\n", stderr), stderr


LEFT_OPEN = '''
import atexit, signal
from kernbench.ccl import watchdog

class Engine:
    _running = True
    _current = _task = None
    events_scheduled = 0

watch = watchdog.watching(Engine(), "all_reduce#0", "ring", "ring", 30.0)
watch.__enter__()  # a run stopped by Ctrl-C: the collective's greenlet never leaves its watch
armed = signal.getitimer(signal.ITIMER_REAL)[0] > 0
atexit._run_exitfuncs()
print(armed, signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), signal.getsignal(signal.SIGALRM) is signal.SIG_DFL)
'''


def test_adr0014_t45_a_watch_left_open_is_closed_at_exit_so_no_tick_meets_the_interpreters_shutdown():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", LEFT_OPEN], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    assert (result.returncode, result.stdout.split()) == (0, ["True", "True", "True"]), result.stderr

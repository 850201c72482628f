"""ADR 0014, signals: Ctrl-C, SIGTERM and SIGHUP end a run with one line and status 130; a rank's sys.exit is one
line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pytest

from kernbench.kernels.library.vector_add import add
from kernbench.session import Session
from tests.cli import REPO_ROOT, run_kernbench_in_process, sigint_at_default
from tests.robustness.harness import (
    CCL_PROBE,
    PROBE_TIMEOUT_S,
    SHIPPED_CCL,
    assert_one_error_line,
    leftovers,
    started,
    write,
)
from tests.sweep.harness import read_table, sweep_folder

# Each runs until it is stopped; the first printed line says the simulation is under way.
KERNELS_FOREVER = '''
from kernbench.kernels.library.vector_add import add


def run(torch):
    x, y, out = torch.ones(4096), torch.ones(4096), torch.empty(4096)
    print("running", flush=True)
    while True:
        add(x, y, out, block_size=256)
        torch.ahbm.synchronize()
'''
COLLECTIVES_FOREVER = '''
def _rank(rank, torch):
    torch.ahbm.set_device(rank)
    torch.distributed.init_process_group(backend="ahbm")
    x = torch.ones(1024)
    torch.distributed.all_reduce(x, op="max")  # the values stay ones, however long it runs
    if rank == 0:
        print("running", flush=True)
    while True:
        torch.distributed.all_reduce(x, op="max")
        torch.ahbm.synchronize()


def run(torch):
    torch.multiprocessing.spawn(_rank, args=(torch,), nprocs=torch.ahbm.device_count())
'''
INTERRUPTED = re.compile(
    r"kernbench: interrupted at simulated t=[\d.]+ (ps|ns|us|ms|s) \([\d,]+ events, wall [\d.]+ s\)\n")
GOOD = '{"an earlier": "good report"}\n'


@pytest.mark.parametrize("bench, signum", [
    (KERNELS_FOREVER, signal.SIGINT),
    (KERNELS_FOREVER, signal.SIGTERM),
    (KERNELS_FOREVER, signal.SIGHUP),
    (COLLECTIVES_FOREVER, signal.SIGINT),
], ids=["kernels-SIGINT", "kernels-SIGTERM", "kernels-SIGHUP", "collectives-SIGINT"])
def test_adr0014_t9_a_signal_ends_the_run_with_one_line_and_status_130(tmp_path, bench, signum):
    path = write(tmp_path, "forever.py", bench)
    (tmp_path / "report.json").write_text(GOOD)
    child = started("run", str(path), "--json", "report.json", "--trace", "trace.json", cwd=tmp_path)
    threading.Event().wait(0.3)  # well inside the simulation: kernels and collectives in flight
    child.send_signal(signum)
    _, stderr = child.communicate(timeout=PROBE_TIMEOUT_S)
    assert child.returncode == 130, stderr
    assert INTERRUPTED.fullmatch(stderr), stderr  # one line: no traceback, no kernel or collective blamed
    assert (tmp_path / "report.json").read_text() == GOOD
    assert not (tmp_path / "trace.json").exists()
    assert leftovers(tmp_path) == []


def test_adr0014_t10_ctrl_c_inside_a_kernel_is_a_keyboard_interrupt_out_of_session_run():
    """In a script or a test, as on the command line: the interrupt leaves `run` as itself, never as a
    failure of the kernel program that happened to be running when it came."""
    session = Session("single_sip")
    torch = session.torch

    def forever():
        x, y, out = torch.ones(4096), torch.ones(4096), torch.empty(4096)
        while True:
            add(x, y, out, block_size=256)
            torch.ahbm.synchronize()

    # Python's own Ctrl-C handler, whatever this process inherited: run as a background job (`pytest &`), a
    # shell starts it with SIGINT ignored, and the signal would never arrive.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            session.run(forever)
    finally:
        timer.cancel()
    assert type(caught.value) is KeyboardInterrupt
    # Raised where the engine loops, not unwound through the kernel program or the bench it interrupted.
    where = {Path(frame.filename).name for frame in traceback.extract_tb(caught.value.__traceback__)}
    assert where <= {Path(__file__).name, "session.py", "engine.py", "interrupts.py"}, where
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Session put Python's handler back
    signal.signal(signal.SIGINT, inherited)


RANK_EXITS = '''
import sys


def _rank(rank, torch):
    torch.ahbm.set_device(rank)
    torch.ones(16).numpy()
    if rank == 2:
        sys.exit(0)  # a rank that is done: as in PyTorch, not a failure
    if rank == 1:
        sys.exit(3)
    torch.ones(1 << 16).numpy()


def run(torch):
    torch.multiprocessing.spawn(_rank, args=(torch,), nprocs=4)
'''


@pytest.mark.quick
def test_adr0014_t11_a_rank_calling_sys_exit_is_one_line_like_pytorchs_process_exited_exception(tmp_path):
    result = run_kernbench_in_process("run", str(write(tmp_path, "exits.py", RANK_EXITS)), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == "kernbench: process 1 terminated with exit code 3\n"


def test_adr0014_t12_ranks_failing_with_one_user_error_share_one_line(tmp_path):
    config = tmp_path / "ccl.yaml"
    # A named algorithm's slots are checked against the machine (`auto` keeps within them by itself).
    config.write_text(SHIPPED_CCL.replace("n_slots: 8 ", "n_slots: 999 ", 1).replace("algorithm: auto ",
                                                                                      "algorithm: ring ", 1))
    result = run_kernbench_in_process("run", str(write(tmp_path, "probe.py", CCL_PROBE)), "--ccl", str(config),
                                      "--timing-only", cwd=tmp_path)
    assert_one_error_line(result, "4 rank(s) raised", "-- ranks 0, 1, 2, 3: ", "n_slots")


# `kernbench ARGV` whose sweep plot is where Ctrl-C lands: drawing sends the process SIGINT and waits for it.
CTRL_C_WHILE_PLOTTING = '''
import os, signal, sys, time
import kernbench.sweep.plot
from kernbench.cli import main


def drawing(*args):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)


kernbench.sweep.plot.draw_plot = drawing
sys.exit(main(sys.argv[1:]))
'''


def test_adr0014_t33_ctrl_c_while_a_sweep_draws_its_plot_names_the_plot_and_keeps_the_table(tmp_path):
    sweep = sweep_folder(tmp_path, "bench: probe.py\naxes:\n  --n: [8]\n")
    out = tmp_path / "out"
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_PLOTTING, "sweep", str(sweep), "--out", str(out),
                             "--plot", "elements", "--x", "n"], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": path}, timeout=PROBE_TIMEOUT_S,
                            preexec_fn=sigint_at_default)
    assert result.returncode == 130, result.stderr
    plot = out / "plot-elements-vs-n.png"
    line = result.stderr.splitlines()[-1]
    assert line.startswith(f"kernbench sweep: interrupted while drawing the plot {plot}; the table is written (")
    assert str(out / "results.csv") in line and line.endswith("run the same command again to draw it, "
                                                              "the points done are skipped")
    assert "before the simulation started" not in result.stderr and "Traceback" not in result.stderr
    assert [row["status"] for row in read_table(out)] == ["ok"]
    assert not plot.exists() and not list(out.rglob("*.tmp*"))

# Twenty thousand device ops: a trace of about 13 MB, written for a second or more after the bench's line.
A_FEW_OPS = '''
def run(torch):
    x = torch.ones(64)
    for _ in range(8):
        x = x + 1
    print("ran", x[0].item(), flush=True)
'''

# Loaded by the child before kernbench (Python imports `sitecustomize` from its path at start-up): the trace writer
# begins the document and then waits, so the signal lands while the trace is being written, whatever the host's load.
TRACE_WRITER_THAT_WAITS = f'''
import time

import kernbench.sim_engine.trace as trace


def _write_trace_slowly(oplog, file):
    file.write('{{"traceEvents": [')
    time.sleep({PROBE_TIMEOUT_S})


trace._write_trace = _write_trace_slowly
'''


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_adr0014_t43_a_hangup_while_the_trace_is_written_removes_its_temporary_and_exits_130(tmp_path, signum):
    path = write(tmp_path, "a_few_ops.py", A_FEW_OPS)
    write(tmp_path, "sitecustomize.py", TRACE_WRITER_THAT_WAITS)
    (tmp_path / "trace.json").write_text(GOOD)
    child = started("run", str(path), "--trace", "trace.json", cwd=tmp_path,
                    python_path=tmp_path)  # the bench has run: outputs come next
    while not leftovers(tmp_path) and child.poll() is None:
        threading.Event().wait(0.005)
    assert leftovers(tmp_path), "the run ended before its trace was staged"
    child.send_signal(signum)
    _, stderr = child.communicate(timeout=PROBE_TIMEOUT_S)
    assert child.returncode == 130, stderr
    assert INTERRUPTED.fullmatch(stderr), stderr
    assert (tmp_path / "trace.json").read_text() == GOOD
    assert leftovers(tmp_path) == []

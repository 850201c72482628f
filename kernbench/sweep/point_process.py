"""One point, run as its own `kernbench run` in a fresh interpreter, and what came of it as plain data.

    python -m kernbench run BENCH --topology T.yaml --ccl C.yaml --json R.json [ARGS]

A crash, a hang past the point's timeout, or a bench's own exception ends
that process only; the outcome says which (`status`: ok, failed, timeout,
crashed or interrupted) with the line that explains it (`error`). This
function is the same on every executor: the local one calls it in a
thread, Ray in a task on any machine of the cluster, which is why it takes
the files' text rather than paths.

**Metrics.** A bench reports figures of its own by printing one line
`metrics: {"name": value, ...}` (a JSON object, the last such line wins);
they become the table's `metric.NAME` columns. A line that is not a JSON
object fails the point, since the figures it meant are lost otherwise.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kernbench.sweep.derive import PointTask

METRICS_PREFIX = "metrics: "
KERNEL_TOTALS = ("launches", "time_ps", "bytes", "flops", "roofline_ps")
# `kernbench run` ends with 130 when Ctrl-C, SIGTERM or SIGHUP stops it; a signal that kills it outright is negative.
INTERRUPTED_STATUSES = (130, -signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP)


def run_point(task: PointTask, *, ship_bench: bool = False,
              started: Callable[[subprocess.Popen], None] | None = None) -> dict:
    """Run `task` as a `kernbench run` process and return its outcome (see the module docstring).

    `ship_bench` runs the task's copy of the bench file instead of the path
    it names (for a machine that does not have the sweep's files).
    `started` is called with the process as soon as it exists, so an
    executor can stop it.
    """
    with tempfile.TemporaryDirectory(prefix=f"kernbench-point-{task.short_key}-") as name:
        folder = Path(name)
        topology, ccl, report = folder / "topology.yaml", folder / "ccl.yaml", folder / "report.json"
        topology.write_text(task.topology_text, encoding="utf-8")
        ccl.write_text(task.ccl_text, encoding="utf-8")
        bench = task.bench
        if ship_bench and task.bench_is_file:
            (folder / "bench").mkdir()
            bench = str(folder / "bench" / Path(task.bench).name)
            Path(bench).write_text(task.bench_text, encoding="utf-8")
        command = [sys.executable, "-m", "kernbench", "run", bench, "--topology", str(topology), "--ccl", str(ccl),
                   "--json", str(report), *task.argv]
        began = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   errors="replace", cwd=folder if ship_bench else None)
        if started is not None:
            started(process)
        try:
            stdout, stderr = process.communicate(timeout=task.timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            timed_out = True
        except BaseException:  # Ctrl-C, or the executor cancelling: the process must not outlive the point
            process.kill()
            process.wait()
            raise
        wall_s = time.monotonic() - began
        report_text = report.read_text(encoding="utf-8") if report.is_file() else None
    outcome = {"key": task.key, "point": task.index, "values": dict(task.values), "wall_s": round(wall_s, 3),
               "exit_status": process.returncode, "host": socket.gethostname(), "report": None, "metrics": {},
               "stdout": stdout, "stderr": stderr, "report_json": report_text}
    outcome.update(_verdict(process.returncode, timed_out, task, stdout, stderr, report_text))
    return outcome


def _verdict(status: int, timed_out: bool, task: PointTask, stdout: str, stderr: str,
             report_text: str | None) -> dict:
    if timed_out:
        return {"status": "timeout", "error": f"stopped after the sweep's timeout_s of {task.timeout_s:g} s"}
    if status in INTERRUPTED_STATUSES:
        return {"status": "interrupted", "error": "interrupted"}
    if status < 0:
        return {"status": "crashed", "error": f"killed by {_signal_name(-status)}; {last_line(stderr) or 'no output'}"}
    if status != 0:
        return {"status": "failed", "error": last_line(stderr) or last_line(stdout) or f"exit status {status}"}
    if report_text is None:
        return {"status": "failed", "error": "the run ended with status 0 but wrote no report"}
    try:
        metrics = bench_metrics(stdout)
    except ValueError as error:
        return {"status": "failed", "error": str(error)}
    return {"status": "ok", "error": "", "report": report_summary(json.loads(report_text)), "metrics": metrics}


def bench_metrics(stdout: str) -> dict:
    """The bench's last `metrics: {...}` line as a dict; {} when it printed none. ValueError when malformed."""
    lines = [line for line in stdout.splitlines() if line.startswith(METRICS_PREFIX)]
    if not lines:
        return {}
    text = lines[-1][len(METRICS_PREFIX):]
    try:
        metrics = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the bench printed a metrics line that is not JSON ({error.msg}): {text[:120]}") from None
    if not isinstance(metrics, dict):
        raise ValueError(f"the bench printed a metrics line that is not a JSON object: {text[:120]}")
    return metrics


def report_summary(report: dict) -> dict:
    """The parts of the run report the sweep's table shows (the whole report stays in the point's folder)."""
    return {"total_time_ps": report.get("total_time_ps"), "ops": report.get("ops"),
            "bytes_by_link_class": report.get("bytes_by_link_class", {}),
            "hazards": len(report.get("hazards", ())),
            "collectives": [{k: v for k, v in row.items() if k != "ranks"} for row in report.get("collectives", ())],
            "kernels": kernel_totals(report.get("kernels", ()))}


def kernel_totals(launches) -> dict[str, dict]:
    """Per kernel name, over all its launches on every device: launches, time_ps, bytes, flops, roofline_ps.

    A sweep compares points, and a launch's row (one of hundreds, per device)
    is no column two points share; a kernel's totals are.
    """
    totals: dict[str, dict] = {}
    for launch in launches:
        entry = totals.setdefault(str(launch.get("kernel")), dict.fromkeys(KERNEL_TOTALS, 0))
        entry["launches"] += 1
        for figure in KERNEL_TOTALS[1:]:
            entry[figure] += launch.get(figure) or 0
    return totals


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"

"""ADR 0018, "A sweep's own cost" and "One sweep per folder": 100,000 points start at once, and a second sweep
into a folder another is writing is one line naming it."""

from __future__ import annotations

import io
import time

from kernbench.sweep.derive import derive_tasks
from kernbench.sweep.lock import LOCK_NAME
from kernbench.sweep.points import expand_points
from kernbench.sweep.runner import POINTS_FOLDER, run_sweep
from kernbench.sweep.sweep_file import MAX_POINTS, load_sweep
from tests.cli import run_kernbench_in_process
from tests.robustness.harness import assert_one_error_line
from tests.sweep.harness import journal_lines, read_table, sweep_folder, sweep_process


class _FinishesFirst:
    """An executor that finishes the first `count` tasks at once, with an ok outcome each, and no others."""

    name = "test"

    def __init__(self, count: int):
        self.count = count

    def describe(self) -> str:
        return "the test's executor"

    def run(self, tasks, on_done) -> None:
        for task in list(tasks)[:self.count]:
            on_done({"key": task.key, "point": task.index, "values": dict(task.values), "status": "ok",
                     "wall_s": 0.0, "exit_status": 0, "report": None, "metrics": {"n": task.index}})


def test_adr0018_t17_a_sweep_of_the_most_points_allowed_is_checked_in_seconds_and_starts_at_once(tmp_path):
    sweep = sweep_folder(tmp_path, f"bench: probe.py\naxes:\n  --n: {{start: 1, stop: {MAX_POINTS}, step: 1}}\n")
    began = time.monotonic()
    spec = load_sweep(sweep)
    tasks = derive_tasks(spec, expand_points(spec))
    assert len(tasks) == MAX_POINTS
    assert time.monotonic() - began < 60, "reading the range and writing each point's files took minutes"
    out = tmp_path / "out"
    log = io.StringIO()
    began = time.monotonic()
    progress = run_sweep(tasks, out, _FinishesFirst(3), log=log)
    assert time.monotonic() - began < 60
    assert log.getvalue().startswith(f"kernbench sweep: {MAX_POINTS} points, 0 already done; running {MAX_POINTS} ")
    assert sorted(path.name for path in (out / POINTS_FOLDER).iterdir()) == sorted(t.short_key for t in tasks[:3]), \
        "a point's folder is written once it has run"
    assert len(journal_lines(out)) == 3 and progress.ran == 3
    assert [row["metric.n"] for row in read_table(out)] == ["1", "2", "3"]


def test_adr0018_t18_a_second_sweep_into_a_folder_in_use_is_one_line_naming_the_first(tmp_path):
    sweep = sweep_folder(tmp_path, "bench: probe.py\nargs: [--sleep, 2]\naxes:\n  --n: [8, 16]\n")
    out = tmp_path / "out"
    first = sweep_process(str(sweep), "--out", str(out), "--jobs", "1", cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not ((out / LOCK_NAME).is_file() and (out / LOCK_NAME).read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = run_kernbench_in_process("sweep", str(sweep), "--out", str(out), cwd=tmp_path)
    assert_one_error_line(second, f"--out {out}: another kernbench sweep is writing into it (pid {first.pid} on ",
                          "; wait for it to finish, or choose another --out\n")
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert len(journal_lines(out)) == 2, "the second sweep ran no point"
    again = run_kernbench_in_process("sweep", str(sweep), "--out", str(out), cwd=tmp_path)
    assert again.returncode == 0 and "2 points, 2 already done; running 0" in again.stderr, again.stderr

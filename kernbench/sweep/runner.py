"""A sweep's run: lay out the output folder, skip what is done, run the rest, record each point as it finishes.

The output folder holds

    results.jsonl     the journal: one line per finished point (journal.py)
    results.csv       the table, rebuilt from the journal as points finish
                      (at most every `CSV_EVERY_S` seconds) and at the end
    results.parquet   the same, when pyarrow is installed
    points/<hash>/    per point once it ran: topology.yaml, ccl.yaml,
                      command.txt (the `kernbench run` that reproduces it),
                      report.json, stdout.txt, stderr.txt

Nothing is lost: a point's record is on disk before the next is handed
over, and the tables are replaced whole, so Ctrl-C, a crash or `kill -9`
leaves every finished row in the journal (and, but for the last few
seconds', in the CSV). What a point costs here does not grow with the
sweep: the journal is read once, its records are kept as they come, the
CSV is not rebuilt more often than every few seconds, and a point's folder
is written when it has run, so a sweep of 100,000 points starts at once. A rerun skips the points whose input hash
already has a record (an `interrupted` point never gets one); `fresh` runs
every point again, `retry_failed` those whose record is not `ok`.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import kernbench
from kernbench.sweep.derive import PointTask
from kernbench.sweep.files import replace_text
from kernbench.sweep.journal import Journal
from kernbench.sweep.lock import holding
from kernbench.sweep.table import short_names, table_rows, write_csv, write_tables

POINTS_FOLDER = "points"
CSV_EVERY_S = 2.0  # the CSV is rebuilt at most this often while points finish (a rebuild costs O(rows))


@dataclass
class SweepProgress:
    """What a sweep's run did: `rows` is the table (every point with a record, this run's and earlier)."""

    total: int
    skipped: int
    ran: int = 0
    failed: int = 0
    rows: list | None = None
    written: list | None = None


def run_sweep(tasks: list[PointTask], folder: Path, executor, *, fresh: bool = False, retry_failed: bool = False,
              log: TextIO | None = None) -> SweepProgress:
    """Run the tasks not yet done through `executor`, recording each; the table is written even on Ctrl-C.

    Progress goes to `log`, one line per finished point (default: stderr). The
    folder is locked while it runs (`lock.py`): a second sweep into it is one
    `SweepError` naming this one.
    """
    log = log or sys.stderr
    folder.mkdir(parents=True, exist_ok=True)
    with holding(folder):
        return _run_locked(tasks, folder, executor, fresh, retry_failed, log)


def _run_locked(tasks: list[PointTask], folder: Path, executor, fresh: bool, retry_failed: bool,
                log: TextIO) -> SweepProgress:
    journal = Journal(folder)
    latest = journal.latest()
    todo = [task for task in tasks
            if fresh or task.key not in latest or (retry_failed and latest[task.key].get("status") != "ok")]
    progress = SweepProgress(total=len(tasks), skipped=len(tasks) - len(todo))
    by_key = {task.key: task for task in todo}
    print(f"kernbench sweep: {len(tasks)} points, {progress.skipped} already done; running {len(todo)} on "
          f"{executor.describe()}; results in {folder}", file=log, flush=True)
    began = csv_written = time.monotonic()

    def record(outcome: dict) -> None:
        nonlocal csv_written
        if outcome["status"] == "interrupted":
            return  # not a result: the point runs again on resume
        point_folder = _lay_out(folder, by_key[outcome["key"]])
        replace_text(point_folder / "stdout.txt", outcome.pop("stdout", "") or "")
        replace_text(point_folder / "stderr.txt", outcome.pop("stderr", "") or "")
        report_json = outcome.pop("report_json", None)
        if report_json is not None:
            replace_text(point_folder / "report.json", report_json)
        latest[outcome["key"]] = journal.append({**outcome, "kernbench": kernbench.__version__,
                                                 "finished_at": time.time()})
        progress.ran += 1
        progress.failed += outcome["status"] != "ok"
        if time.monotonic() - csv_written > CSV_EVERY_S:  # Parquet is written once, at the end
            write_csv(folder, table_rows(tasks, latest))
            csv_written = time.monotonic()
        print(_progress_line(progress, len(todo), began, outcome), file=log, flush=True)

    try:
        executor.run(todo, record)
    finally:
        progress.rows = table_rows(tasks, latest)
        progress.written = write_tables(folder, progress.rows)
    return progress


def _lay_out(folder: Path, task: PointTask) -> Path:
    """The point's own folder with its derived files and the command that reproduces it by hand; its path."""
    point_folder = folder / POINTS_FOLDER / task.short_key
    if (point_folder / "command.txt").is_file():
        return point_folder
    point_folder.mkdir(parents=True, exist_ok=True)
    replace_text(point_folder / "topology.yaml", task.topology_text)
    replace_text(point_folder / "ccl.yaml", task.ccl_text)
    command = ["kernbench", "run", task.bench, "--topology", str(point_folder / "topology.yaml"),
               "--ccl", str(point_folder / "ccl.yaml"), *task.argv]
    replace_text(point_folder / "command.txt", shlex.join(command) + "\n")
    return point_folder


def _progress_line(progress: SweepProgress, todo: int, began: float, outcome: dict) -> str:
    elapsed = time.monotonic() - began
    left = (todo - progress.ran) * elapsed / progress.ran
    short = short_names(list(outcome["values"]))
    values = ", ".join(f"{short[name]}={value}" for name, value in outcome["values"].items())
    status = outcome["status"] + (f": {outcome['error']}" if outcome["status"] != "ok" else "")
    eta = f", ~{left:.0f} s left" if progress.ran < todo else ""
    return (f"[{progress.ran}/{todo}] {100 * progress.ran // max(todo, 1)}%{eta} | point {outcome['point']} "
            f"({values}) {status} in {outcome.get('wall_s') or 0:.1f} s")

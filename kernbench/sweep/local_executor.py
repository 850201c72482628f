"""Points on this machine: up to `jobs` `kernbench run` processes at once.

Each point is its own process already (`point_process.py`), so the pool
that feeds them is a pool of threads, each waiting on one process: the
processes use the cores, the threads only wait. Outcomes are handed back
on the calling thread, in the order points finish, so whatever records them
needs no lock.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import threading
from collections.abc import Callable, Iterable

from kernbench.sweep.derive import PointTask
from kernbench.sweep.point_process import run_point


def usable_cores() -> int:
    """The cores this process may run on (a container's or `taskset`'s limit), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalExecutor:
    """Runs points as processes on this machine, `jobs` at a time (default: one per usable core)."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = jobs or usable_cores()
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopping = False

    def describe(self) -> str:
        return f"{self.jobs} local job{'s' if self.jobs != 1 else ''}"

    def run(self, tasks: Iterable[PointTask], on_done: Callable[[dict], None]) -> None:
        """Run every task, calling `on_done(outcome)` on this thread as each finishes.

        On any exception here (Ctrl-C included) every point still running is
        killed and none not yet started begins; the exception then propagates.
        """
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="sweep-point")
        try:
            pending = {pool.submit(self._run_one, task) for task in tasks}
            while pending:
                finished, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    outcome = future.result()
                    if outcome is not None:
                        on_done(outcome)
        except BaseException:
            self._stop_all()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run_one(self, task: PointTask) -> dict | None:
        if self._stopping:
            return None
        return run_point(task, started=self._started)

    def _started(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._running = {p for p in self._running if p.poll() is None}  # forget the finished
            self._running.add(process)
            stop = self._stopping
        if stop:
            process.kill()

    def _stop_all(self) -> None:
        with self._lock:
            self._stopping = True
            running = list(self._running)
        for process in running:
            if process.poll() is None:
                process.kill()

"""Points as Ray tasks, on a cluster (`--address`, or `RAY_ADDRESS`) or on a Ray instance started here.

Each task is `point_process.run_point` with the point's files as its
argument — derived topology, ccl.yaml and the bench file's text — so a
worker needs kernbench installed (the same version: it is part of every
input hash) and nothing of the sweep's folder. A task asks for one CPU, so
Ray runs as many points at once as the cluster has cores; `--jobs` caps it.
Outcomes come back to the calling thread as tasks finish, exactly as the
local executor hands them, so the table is the same.

Ray is optional (`pip install 'kernbench[ray]'`) and imported only here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable

from kernbench.sweep.derive import PointTask
from kernbench.sweep.errors import SweepError
from kernbench.sweep.point_process import run_point


class RayExecutor:
    """Runs points as Ray tasks; connects at `run` and disconnects after (unless Ray was already initialized)."""

    name = "ray"

    def __init__(self, address: str | None = None, jobs: int | None = None):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise SweepError("--executor ray needs Ray, which is not installed; "
                             "pip install 'kernbench[ray]'") from None
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.jobs = jobs

    def describe(self) -> str:
        where = f"the Ray cluster at {self.address}" if self.address else "Ray on this machine"
        return where + (f", at most {self.jobs} at once" if self.jobs else "")

    def run(self, tasks: Iterable[PointTask], on_done: Callable[[dict], None]) -> None:
        """Run every task as a Ray task, calling `on_done(outcome)` here as each finishes.

        On any exception here (Ctrl-C included) the tasks in flight are
        cancelled, which stops their `kernbench run` processes.
        """
        waiting = list(tasks)
        if not waiting:
            return  # a sweep already done needs no cluster
        import ray

        started_here = not ray.is_initialized()
        if started_here:
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise SweepError(f"--executor ray: cannot connect to {self.address or 'a new local Ray'}: "
                                 f"{str(error).splitlines()[0] if str(error) else type(error).__name__}") from None
        remote = ray.remote(num_cpus=1)(run_point)
        in_flight: dict = {}
        try:
            while waiting or in_flight:
                while waiting and (self.jobs is None or len(in_flight) < self.jobs):
                    task = waiting.pop(0)
                    in_flight[remote.remote(task, ship_bench=True)] = task
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    task = in_flight.pop(ref)
                    on_done(_outcome(ray, ref, task))
        except BaseException:
            for ref in in_flight:
                ray.cancel(ref)
            raise
        finally:
            if started_here:
                ray.shutdown()


def _outcome(ray, ref, task: PointTask) -> dict:
    """The task's outcome; a task Ray itself could not run (a worker lost, no kernbench there) is a failed point."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return {"key": task.key, "point": task.index, "values": dict(task.values), "status": "failed",
                "error": f"ray: {lines[-1].strip() if lines else type(error).__name__}", "exit_status": None,
                "wall_s": None, "host": None, "report": None, "metrics": {}, "stdout": "", "stderr": str(error),
                "report_json": None}

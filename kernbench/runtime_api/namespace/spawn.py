"""`torch.multiprocessing.spawn`: one greenlet per rank, with PyTorch's failure contract.

Ranks are engine processes, scheduled cooperatively in simulated-time order
(process isolation is a non-goal). `join` waits until every rank has
returned. When a rank raises, the ranks still running are aborted (their
greenlets get `RankAborted` where they wait, so their `finally` blocks run)
and `SpawnException` names every rank that raised on its own — the root
causes, not the aborted siblings — with its traceback. A rank that calls
`sys.exit(n)` ends as a process of PyTorch's would: with `n` 0 (or None) it
simply finished; otherwise it failed with exit code `n`, and when every
failing rank exited so, `join` raises `ProcessExitedException`, one line.
"""

from __future__ import annotations

import traceback

from kernbench.errors import KernbenchError
from kernbench.runtime_api import spmd
from kernbench.runtime_api.namespace.worker_stdout import as_worker


class RankAborted(Exception):
    """Thrown into a rank whose sibling failed; never a root cause."""


class SpawnException(KernbenchError):
    """One or more ranks raised. `error_index` is the lowest failing rank, as in PyTorch's
    `ProcessRaisedException`; `failures` maps each root-cause rank to its exception.

    A rank's user error (a `KernbenchError`: a mismatched collective, a
    kernel fault, a tensor that does not fit) is shown as its one-line
    message (ranks that raised the same message share it); any other
    exception is the bench's own bug and keeps its traceback.
    `user_errors_only` tells the command line which it is.
    """

    def __init__(self, failures: dict[int, BaseException]):
        self.failures = dict(sorted(failures.items()))
        self.error_index = min(self.failures)
        self.user_errors_only = all(isinstance(exc, KernbenchError) for exc in self.failures.values())
        super().__init__(self._message())

    def _message(self) -> str:
        """The header, then one part per failure. Ranks with the same one-line message share a part (a
        bad ccl.yaml fails every rank alike), and a lone one-line part stays on the header's line."""
        header = f"{len(self.failures)} rank(s) raised: {', '.join(f'rank {r}' for r in self.failures)}"
        one_line: dict[str, list[int]] = {}  # message -> the ranks that raised it
        parts: list[tuple[list[int] | None, str]] = []  # (ranks of a one-line message, or None; text)
        for rank, exc in self.failures.items():
            if isinstance(exc, (KernbenchError, SystemExit)):
                text = str(exc) if isinstance(exc, KernbenchError) else f"terminated with exit code {exit_code(exc)}"
                if text not in one_line:
                    one_line[text] = []
                    parts.append((one_line[text], text))
                one_line[text].append(rank)
            else:
                text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
                parts.append((None, f"\n-- Process {rank} terminated with the following error:\n{text}"))
        lines = [text if ranks is None else f"-- {_ranks(ranks)}: {text}" for ranks, text in parts]
        if len(parts) == 1 and parts[0][0] is not None:
            return f"{header} {lines[0]}"
        return "\n".join([header, *lines])


class ProcessExitedException(SpawnException):
    """Every failing rank called `sys.exit(n)` with a non-zero `n`, as PyTorch's `ProcessExitedException`.

    The message is one line, `process R terminated with exit code N` for each
    such rank; `exit_code` is the lowest failing rank's. Exiting is the
    bench's own decision, not a user error, so the command line reports it
    with status 1.
    """

    def __init__(self, failures: dict[int, SystemExit]):
        self.exit_code = exit_code(failures[min(failures)])
        super().__init__(failures)

    def _message(self) -> str:
        return "; ".join(_exited(rank, exc) for rank, exc in self.failures.items())


def exit_code(exc: SystemExit) -> int:
    """The status `sys.exit(code)` gives a process: None is 0, an int itself, anything else (a message) 1."""
    code = exc.code
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


def _exited(rank: int, exc: SystemExit) -> str:
    return f"process {rank} terminated with exit code {exit_code(exc)}"


def spawn_failure(failures: dict[int, BaseException]) -> SpawnException:
    if all(isinstance(exc, SystemExit) for exc in failures.values()):
        return ProcessExitedException(failures)
    return SpawnException(failures)


def failed(process) -> bool:
    """A rank that ended by raising on its own: not an aborted sibling, not `sys.exit(0)`."""
    if not process.triggered or process.ok or isinstance(process.value, RankAborted):
        return False
    return not (isinstance(process.value, SystemExit) and exit_code(process.value) == 0)


class ProcessContext:
    """What `spawn(..., join=False)` returns: the rank processes, and `join()`."""

    def __init__(self, ctx, processes, episode=None):
        self._ctx = ctx
        self.processes = processes
        self._episode = episode  # the spawn's replication (spmd.py), closed when its ranks have ended

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def join(self, timeout=None) -> bool:
        """Wait until every rank has returned (True), or raise `SpawnException` when one raised
        (`ProcessExitedException` when the failing ranks called `sys.exit` with a non-zero code)."""
        episode, self._episode = self._episode, None
        try:
            wait_for_ranks(self._ctx, dict(enumerate(self.processes)), lambda: False, abort_running=True)
        except BaseException:
            if episode is not None:
                episode.close()
            raise
        if episode is not None:
            episode.close()
        return True


def wait_for_ranks(ctx, ranks: dict, done, *, abort_running: bool) -> None:
    """Wait until `done()` or every rank process of `ranks` (rank -> process) has ended; a rank that failed
    before then is raised as `SpawnException`, naming every rank that failed by then.

    With `abort_running`, the ranks still running are aborted first (they
    would wait for ever on the failed one): spawn's contract.
    """
    while True:
        if done():
            return
        failures = {rank: p.value for rank, p in ranks.items() if failed(p)}
        if failures:
            if abort_running:
                for process in ranks.values():
                    if process.is_alive:
                        process.kill(RankAborted(f"aborted because rank(s) {sorted(failures)} raised"))
            raise spawn_failure(failures)
        running = [p for p in ranks.values() if p.is_alive]
        if not running:
            return
        ctx.block_on([_first_to_finish(ctx.engine, running)])


def spawn(ctx, fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Call `fn(rank, *args)` for rank 0..nprocs-1, each in its own greenlet."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise KernbenchError(f"spawn(nprocs={nprocs!r}): expected a positive integer")
    episode = spmd.begin(ctx, nprocs)
    processes = [ctx.engine.spawn(_as_rank, ctx, fn, rank, nprocs, args, name=f"rank{rank}") for rank in range(nprocs)]
    context = ProcessContext(ctx, processes, episode)
    for process in processes:
        process.add_callback(ignore_failure)  # join() observes failures; the engine need not report them
    if not join:
        return context
    context.join()
    return None


def _as_rank(ctx, fn, rank: int, nprocs: int, args):
    """The body of rank `rank`'s greenlet: remember which rank it is (for `torch.distributed`), then run `fn`
    as a worker with its own stdout line."""
    ctx.set_spawned_rank(rank, nprocs)
    return as_worker(fn, rank, *args)


def _first_to_finish(engine, processes):
    event = engine.event(f"any of {', '.join(p.name for p in processes)} to finish")

    def finished(_process) -> None:
        if not event.triggered:
            event.succeed()

    for process in processes:
        process.add_callback(finished)
    return event


def ignore_failure(_event) -> None:
    pass

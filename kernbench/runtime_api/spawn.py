"""`torch.multiprocessing.spawn`: one greenlet per rank, with PyTorch's failure contract.

Ranks are engine processes, scheduled cooperatively in simulated-time order
(process isolation is a non-goal). `join` waits until every rank has
returned. When a rank raises, the ranks still running are aborted (their
greenlets get `RankAborted` where they wait, so their `finally` blocks run)
and `SpawnException` names every rank that raised on its own — the root
causes, not the aborted siblings — with its traceback.
"""

from __future__ import annotations

import traceback

from kernbench.errors import KernbenchError


class RankAborted(Exception):
    """Thrown into a rank whose sibling failed; never a root cause."""


class SpawnException(KernbenchError):
    """One or more ranks raised. `error_index` is the lowest failing rank, as in PyTorch's
    `ProcessRaisedException`; `failures` maps each root-cause rank to its exception.

    A rank's user error (a `KernbenchError`: a mismatched collective, a
    kernel fault, a tensor that does not fit) is shown as its one-line
    message; any other exception is the bench's own bug and keeps its
    traceback. `user_errors_only` tells the command line which it is.
    """

    def __init__(self, failures: dict[int, BaseException]):
        self.failures = dict(sorted(failures.items()))
        self.error_index = min(self.failures)
        self.user_errors_only = all(isinstance(exc, KernbenchError) for exc in self.failures.values())
        parts = [f"{len(self.failures)} rank(s) raised: {', '.join(f'rank {r}' for r in self.failures)}"]
        for rank, exc in self.failures.items():
            if isinstance(exc, KernbenchError):
                parts.append(f"-- rank {rank}: {exc}")
            else:
                text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
                parts.append(f"\n-- Process {rank} terminated with the following error:\n{text}")
        super().__init__("\n".join(parts))


class ProcessContext:
    """What `spawn(..., join=False)` returns: the rank processes, and `join()`."""

    def __init__(self, ctx, processes):
        self._ctx = ctx
        self.processes = processes

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def join(self, timeout=None) -> bool:
        """Wait until every rank has returned (True), or raise `SpawnException` when one raised."""
        while True:
            failures = {rank: p.value for rank, p in enumerate(self.processes)
                        if p.triggered and not p.ok and not isinstance(p.value, RankAborted)}
            if failures:
                for process in self.processes:
                    if process.is_alive:
                        process.kill(RankAborted(f"aborted because rank(s) {sorted(failures)} raised"))
                raise SpawnException(failures)
            running = [p for p in self.processes if p.is_alive]
            if not running:
                return True
            self._ctx.block_on([_first_to_finish(self._ctx.engine, running)])


def spawn(ctx, fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """Call `fn(rank, *args)` for rank 0..nprocs-1, each in its own greenlet."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise KernbenchError(f"spawn(nprocs={nprocs!r}): expected a positive integer")
    processes = [ctx.engine.spawn(_as_rank, ctx, fn, rank, args, name=f"rank{rank}") for rank in range(nprocs)]
    context = ProcessContext(ctx, processes)
    for process in processes:
        process.add_callback(_ignore)  # join() observes failures; the engine need not report them
    if not join:
        return context
    context.join()
    return None


def _as_rank(ctx, fn, rank: int, args):
    """The body of rank `rank`'s greenlet: remember which rank it is (for `torch.distributed`), then run `fn`."""
    ctx.set_spawned_rank(rank)
    return fn(rank, *args)


def _first_to_finish(engine, processes):
    event = engine.event(f"any of {', '.join(p.name for p in processes)} to finish")

    def finished(_process) -> None:
        if not event.triggered:
            event.succeed()

    for process in processes:
        process.add_callback(finished)
    return event


def _ignore(_event) -> None:
    pass

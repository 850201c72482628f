"""`torch.multiprocessing`: `spawn`, and `Process` with the start-method calls a script makes around it.

PyTorch's distributed tutorial starts its workers one by one
(`mp.Process(target=...).start()`, then `join()`) rather than with `spawn`.
Here a `Process` is a greenlet like a spawned rank, and its rank is the order
in which processes were started, which is the rank the tutorial passes them.
A worker that raises does not pass silently as a real child process would
(a traceback on stderr, `exitcode` 1): `join()` raises it as a
`SpawnException` naming the rank, so a failure is never lost.

Start methods do not exist for greenlets: `set_start_method` accepts
PyTorch's three and `get_context` returns this module.
"""

from __future__ import annotations

from kernbench.errors import KernbenchError
from kernbench.runtime_api.namespace.spawn import (ProcessContext, ProcessExitedException, SpawnException, exit_code, failed,
                                         ignore_failure, spawn, spawn_failure, wait_for_ranks)
from kernbench.runtime_api.unsupported import Namespace
from kernbench.runtime_api.namespace.worker_stdout import as_worker

START_METHODS = ("spawn", "fork", "forkserver")


class Process:
    """`torch.multiprocessing.Process(target=fn, args=(...))`: `start()`, `join()`, `is_alive()`, `exitcode`."""

    _ctx = None  # set on the run's own subclass (multiprocessing_namespace)
    _started: list = []

    def __init__(self, group=None, target=None, name=None, args=(), kwargs=None, *, daemon=None):
        if target is not None and not callable(target):
            raise KernbenchError(f"Process(target={target!r}): target must be callable")
        self._target, self._args, self._kwargs = target, tuple(args), dict(kwargs or {})
        self.name, self.daemon = name, daemon
        self.rank: int | None = None
        self._handle = None

    def __repr__(self) -> str:
        state = "initial" if self._handle is None else ("started" if self.is_alive() else f"stopped {self.exitcode}")
        return f"<Process {self.name or '?'} {state}>"

    def start(self) -> None:
        if self._handle is not None:
            raise KernbenchError(f"Process {self.name}: cannot start a process twice")
        self.rank = sum(1 for process in self._started if process.is_alive())
        self._started.append(self)
        self.name = self.name or f"Process-{self.rank + 1}"
        self._handle = self._ctx.engine.spawn(_as_process, self._ctx, self._target, self.rank, self._args,
                                              self._kwargs, name=f"rank{self.rank}")
        self._handle.add_callback(ignore_failure)  # join() observes failures

    def run(self) -> None:
        if self._target is not None:
            self._target(*self._args, **self._kwargs)

    def join(self, timeout=None) -> None:
        """Wait until the worker has returned. A worker that raised is re-raised here, naming its rank, and so
        is a sibling's failure while this one still runs: it may be waiting on the failed rank for ever."""
        if self._handle is None:
            raise KernbenchError(f"Process {self.name}: can only join a started process")
        started = {p.rank: p._handle for p in self._started if p._handle is not None}
        wait_for_ranks(self._ctx, started, lambda: not self._handle.is_alive, abort_running=False)
        if failed(self._handle):
            raise spawn_failure({self.rank: self._handle.value})

    def is_alive(self) -> bool:
        return self._handle is not None and self._handle.is_alive

    @property
    def exitcode(self) -> int | None:
        handle = self._handle
        if handle is None or handle.is_alive:
            return None
        if handle.ok:
            return 0
        return exit_code(handle.value) if isinstance(handle.value, SystemExit) else 1

    @property
    def pid(self) -> int | None:
        return None if self._handle is None else self._handle.pid


def _as_process(ctx, target, rank: int, args, kwargs):
    ctx.set_spawned_rank(rank)
    return None if target is None else as_worker(target, *args, **kwargs)


def multiprocessing_namespace(ctx, check_spawn) -> Namespace:
    """The run's `torch.multiprocessing`; `check_spawn(nprocs)` refuses a spawn the world size rules out."""

    def spawn_ranks(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
        """Run `fn(rank, *args)` per rank, each in a greenlet of its own, with PyTorch's signature and failures."""
        check_spawn(nprocs)
        return spawn(ctx, fn, args, nprocs, join, daemon, start_method)

    def set_start_method(method, force: bool = False) -> None:
        if method not in START_METHODS:
            raise KernbenchError(f"set_start_method({method!r}): expected one of {', '.join(START_METHODS)}")

    def get_context(method=None):
        if method is not None:
            set_start_method(method)
        return module

    bound = type("Process", (Process,), {"_ctx": ctx, "_started": [], "__doc__": Process.__doc__})
    module = Namespace(
        "torch.multiprocessing", None,
        spawn=spawn_ranks,
        Process=bound,
        set_start_method=set_start_method,
        get_start_method=lambda allow_none=False: "spawn",
        get_all_start_methods=lambda: list(START_METHODS),
        get_context=get_context,
        ProcessContext=ProcessContext,
        ProcessRaisedException=SpawnException,
        ProcessExitedException=ProcessExitedException,
        SpawnException=SpawnException,
    )
    return module

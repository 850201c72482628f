"""A script run as torchrun runs it: `kernbench run script.py --nproc-per-node N [script arguments]`.

PyTorch's distributed examples are scripts, not functions: their module
body reads `WORLD_SIZE` and `LOCAL_RANK` from the environment torchrun
gives each of its N processes, builds a device mesh or a process group,
and trains, under `if __name__ == "__main__":` or at top level. A file
with no top-level `run` is such a script here. Each of the N ranks is a
spawned worker (`torch.multiprocessing.spawn`, so the world is N ranks, ADR
0012) that executes the script's code as `__main__`, its `import torch`
giving kernbench's torch, its folder first on `sys.path` (a sibling module
such as `log_utils.py` imports as it does under torchrun) and `sys.argv`
the script and the arguments kernbench does not take itself.

`os.environ` holds, for the calling rank, what torchrun's elastic agent
sets: `RANK`, `LOCAL_RANK`, `GROUP_RANK`, `ROLE_RANK`, `WORLD_SIZE`,
`LOCAL_WORLD_SIZE`, `ROLE_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`,
`TORCHELASTIC_RUN_ID` (so `dist.is_torchelastic_launched()` is True, as
PyTorch checks it). The process's other variables are every rank's; a
variable a rank sets is its own when it is one of those, the process's
otherwise. The ranks share one Python process, so a module a script
imports is imported once for all of them, as a package's state would be
per process under torchrun: a script that keeps per-rank state in a
module's globals sees the other ranks' too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from contextlib import contextmanager
from pathlib import Path

from greenlet import getcurrent

RUN_ID = "kernbench"
MASTER = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def script_run(path: Path, nprocs: int):
    """The `run(torch, argv)` that runs the script at `path` once on each of `nprocs` ranks."""
    code = compile(path.read_bytes(), str(path), "exec")

    def run(torch, argv):
        with _script_process(path, argv) as ranks:
            def worker(rank):
                ranks[getcurrent()] = torchrun_environment(rank, nprocs)
                try:
                    exec(code, {"__name__": "__main__", "__file__": str(path), "__builtins__": __builtins__})
                finally:
                    del ranks[getcurrent()]

            torch.multiprocessing.spawn(worker, nprocs=nprocs)

    return run


def torchrun_environment(rank: int, nprocs: int) -> dict[str, str]:
    """What torchrun's agent puts in the environment of rank `rank` of `nprocs` on one node."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0", "ROLE_RANK": str(rank),
            "WORLD_SIZE": str(nprocs), "LOCAL_WORLD_SIZE": str(nprocs), "ROLE_WORLD_SIZE": str(nprocs),
            "TORCHELASTIC_RUN_ID": RUN_ID, **MASTER}


@contextmanager
def _script_process(path: Path, argv):
    """While the script's ranks run: its folder first on `sys.path`, `sys.argv` its own, `os.environ` the calling
    rank's; all put back after. Yields the ranks' environments by worker greenlet."""
    ranks: dict = {}
    saved_environ, saved_argv, folder = os.environ, sys.argv, str(path.resolve().parent)
    os.environ = RankEnviron(saved_environ, ranks)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, folder)
    try:
        yield ranks
    finally:
        os.environ, sys.argv = saved_environ, saved_argv
        if folder in sys.path:
            sys.path.remove(folder)


class RankEnviron(MutableMapping):
    """`os.environ` while a script's ranks run: torchrun's variables are the calling rank's, the rest the process's
    (`base`). The calling rank is the worker greenlet, or the worker a greenlet was started from."""

    def __init__(self, base, ranks: dict):
        self._base, self._ranks = base, ranks

    def _mine(self) -> dict:
        current = getcurrent()
        while current is not None:
            mine = self._ranks.get(current)
            if mine is not None:
                return mine
            current = current.parent
        return {}

    def __getitem__(self, key):
        mine = self._mine()
        return mine[key] if key in mine else self._base[key]

    def __setitem__(self, key, value) -> None:
        mine = self._mine()
        if key in mine:
            mine[key] = value
        else:
            self._base[key] = value

    def __delitem__(self, key) -> None:
        mine = self._mine()
        if key in mine:
            del mine[key]
        else:
            del self._base[key]

    def __iter__(self):
        mine = self._mine()
        yield from mine
        yield from (key for key in self._base if key not in mine)

    def __len__(self) -> int:
        return len(set(self._mine()) | set(self._base))

    def copy(self) -> dict:
        return dict(self)

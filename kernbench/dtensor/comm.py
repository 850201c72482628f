"""Where DTensor's collectives are issued: one function, so that `CommDebugMode` sees every one of them.

`issue(name, ...)` calls `torch.distributed.<name>` of the run in progress
and tells the `CommDebugMode`s the calling rank has entered which
collective ran and whether in the forward or the backward pass (the
backward Functions of redistribution run inside `backward_pass()`).
"""

from __future__ import annotations

from contextlib import contextmanager

import greenlet

from kernbench.dtensor.errors import DTensorError
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.tensor.core import Tensor

# The functional collective PyTorch's DTensor would run for each torch.distributed call kernbench makes.
FUNCTIONAL_NAMES = {"all_reduce": "c10d_functional.all_reduce",
                    "all_gather_into_tensor": "c10d_functional.all_gather_into_tensor",
                    "reduce_scatter_tensor": "c10d_functional.reduce_scatter_tensor",
                    "all_to_all_single": "c10d_functional.all_to_all_single",
                    "broadcast": "c10d.broadcast_", "scatter": "c10d.scatter_"}

_LISTENERS: dict = {}  # a rank's greenlet -> the CommDebugModes it is inside, innermost last
_BACKWARD: dict = {}  # a rank's greenlet -> how many backward Functions of DTensor it is inside


def issue(name: str, *args, **kwargs):
    """`torch.distributed.<name>(*args, **kwargs)`, noted by the calling rank's CommDebugModes.

    A DTensor's collective needs every rank of its group in a worker of its
    own: one run outside any spawned worker is refused in one line (its
    collective would wait for ranks that never come).
    """
    distributed = current_torch().distributed
    _check_a_worker_per_rank(name, distributed, args, kwargs.get("group"))
    me = greenlet.getcurrent()
    for listener in _LISTENERS.get(me, ()):
        listener.note(FUNCTIONAL_NAMES[name], "backward" if _BACKWARD.get(me) else "forward")
    return getattr(distributed, name)(*args, **kwargs)


def _check_a_worker_per_rank(name: str, distributed, args, group) -> None:
    tensor = next((arg for arg in args if isinstance(arg, Tensor)), None)
    ranks = distributed.get_world_size(group)
    if tensor is not None and ranks > 1 and tensor._ctx.spawned_rank() is None:
        raise DTensorError(f"{name} over a mesh of {ranks} ranks: this code runs in no spawned worker, so the other "
                           f"ranks never join; run it under torch.multiprocessing.spawn(fn, nprocs={ranks}), one "
                           "worker per rank, as torchrun starts a process per rank")


@contextmanager
def backward_pass():
    """The block is part of the backward pass (a redistribution's backward twin)."""
    me = greenlet.getcurrent()
    _BACKWARD[me] = _BACKWARD.get(me, 0) + 1
    try:
        yield
    finally:
        _BACKWARD[me] -= 1
        if not _BACKWARD[me]:
            del _BACKWARD[me]


def listen(listener) -> None:
    _LISTENERS.setdefault(greenlet.getcurrent(), []).append(listener)


def stop_listening(listener) -> None:
    me = greenlet.getcurrent()
    _LISTENERS[me].remove(listener)
    if not _LISTENERS[me]:
        del _LISTENERS[me]

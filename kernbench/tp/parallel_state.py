"""Model-parallel groups: which ranks form each group, and each rank's view of its own.

The one place that owns groups (Megatron's `parallel_state`): layers and
mappings ask it for their group, rank and size and never compute ranks
themselves. Megatron's layout: a tensor-parallel group is
`tensor_model_parallel_size` consecutive ranks (they exchange activations in
every layer, so they should be the closest devices); a data-parallel group
takes one rank from each tensor-parallel group of a pipeline stage, striding
across them; a pipeline group strides across the stages.

**Per rank, in one process.** Megatron keeps its groups in module globals,
one copy per process. Here every rank is a greenlet of one Python process, so
the state lives in a `ContextVar`: each greenlet has its own context, so each
rank sees only what it initialized itself, and a rank's state ends with it.
As in Megatron, every rank calls `initialize_model_parallel` itself.

**The run's `torch`.** kernbench's `torch` is a namespace bound to one run,
not an importable module, and layers and mappings need it (to allocate
tensors and call collectives). `initialize_model_parallel(..., torch=torch)`
stores the namespace the bench received; `get_torch_namespace()` gives it
back to them.

**A world of one.** Without `torch.distributed.init_process_group` the world
is the calling rank alone: every group is that rank, there is nothing to
create, and the groups are None (which `torch.distributed` reads as the
whole world, the same single rank). Mappings never communicate in one-rank
groups, so a one-SIP bench needs no process group.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kernbench.tp.errors import ModelParallelError


@dataclass(frozen=True)
class RankGroups:
    """Every group of each kind, as tuples of global ranks in ascending order."""

    tensor: tuple[tuple[int, ...], ...]
    data: tuple[tuple[int, ...], ...]
    pipeline: tuple[tuple[int, ...], ...]


def rank_groups(world_size: int, tensor_model_parallel_size: int = 1,
                pipeline_model_parallel_size: int = 1) -> RankGroups:
    """Megatron's partition of `world_size` ranks into tensor, data and pipeline groups.

    Raises `ModelParallelError` when a size is not a positive integer or
    tensor x pipeline does not divide the world size.
    """
    tp, pp = tensor_model_parallel_size, pipeline_model_parallel_size
    for name, size in (("tensor_model_parallel_size", tp), ("pipeline_model_parallel_size", pp)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ModelParallelError(f"{name} must be a positive integer, got {size!r}")
    if world_size % (tp * pp):
        raise ModelParallelError(
            f"tensor_model_parallel_size ({tp}) x pipeline_model_parallel_size ({pp}) = {tp * pp} "
            f"does not divide the world size ({world_size})")
    ranks_per_stage = world_size // pp
    return RankGroups(
        tensor=tuple(tuple(range(start, start + tp)) for start in range(0, world_size, tp)),
        data=tuple(tuple(range(stage * ranks_per_stage + j, (stage + 1) * ranks_per_stage, tp))
                   for stage in range(pp) for j in range(tp)),
        pipeline=tuple(tuple(range(first, world_size, ranks_per_stage)) for first in range(ranks_per_stage)),
    )


@dataclass(frozen=True)
class _Membership:
    """The one group of a kind that holds the calling rank: its process group, its ranks, the rank's index."""

    group: Any
    ranks: tuple[int, ...]
    rank: int


@dataclass(frozen=True)
class _ModelParallelState:
    torch: Any
    tensor: _Membership
    data: _Membership
    pipeline: _Membership


_STATE: ContextVar[_ModelParallelState | None] = ContextVar("kernbench_model_parallel_state", default=None)


def initialize_model_parallel(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1,
                              *, torch) -> None:
    """Create this rank's tensor, data and pipeline groups; `torch` is the run's namespace.

    Every rank of the world must call it with the same sizes: each calls
    `torch.distributed.new_group` for every group, in the same order, as
    PyTorch requires. Raises `ModelParallelError` for sizes that do not divide
    the world, or when this rank is already initialized.
    """
    if _STATE.get() is not None:
        raise ModelParallelError("model parallel state is already initialized on this rank; "
                                 "call destroy_model_parallel() before initializing it again")
    rank, world_size = _rank_and_world_size(torch)
    layout = rank_groups(world_size, tensor_model_parallel_size, pipeline_model_parallel_size)
    # Megatron's creation order: data, tensor, pipeline (new_group must be called in one order on every rank).
    data = _join(torch, layout.data, rank)
    tensor = _join(torch, layout.tensor, rank)
    pipeline = _join(torch, layout.pipeline, rank)
    _STATE.set(_ModelParallelState(torch=torch, tensor=tensor, data=data, pipeline=pipeline))


def model_parallel_is_initialized() -> bool:
    """Whether this rank has called `initialize_model_parallel` (and not `destroy_model_parallel` since)."""
    return _STATE.get() is not None


def destroy_model_parallel() -> None:
    """Forget this rank's groups, so it can initialize again with other sizes."""
    _STATE.set(None)


def get_torch_namespace():
    """The `torch` namespace given to `initialize_model_parallel` on this rank."""
    return _state().torch


def get_tensor_model_parallel_group():
    return _state().tensor.group


def get_tensor_model_parallel_world_size() -> int:
    return len(_state().tensor.ranks)


def get_tensor_model_parallel_rank() -> int:
    return _state().tensor.rank


def get_data_parallel_group():
    return _state().data.group


def get_data_parallel_world_size() -> int:
    return len(_state().data.ranks)


def get_data_parallel_rank() -> int:
    return _state().data.rank


def get_pipeline_model_parallel_group():
    return _state().pipeline.group


def get_pipeline_model_parallel_world_size() -> int:
    return len(_state().pipeline.ranks)


def get_pipeline_model_parallel_rank() -> int:
    return _state().pipeline.rank


def _state() -> _ModelParallelState:
    state = _STATE.get()
    if state is None:
        raise ModelParallelError("model parallel state is not initialized on this rank: call "
                                 "kernbench.tp.parallel_state.initialize_model_parallel(..., torch=torch) first")
    return state


def _rank_and_world_size(torch) -> tuple[int, int]:
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def _join(torch, groups: tuple[tuple[int, ...], ...], rank: int) -> _Membership:
    """Create every group of one kind (collectively) and keep the one holding `rank`."""
    dist = getattr(torch, "distributed", None)
    created = None
    own = next(ranks for ranks in groups if rank in ranks)
    if dist is not None and dist.is_initialized():
        for ranks in groups:
            group = dist.new_group(ranks=list(ranks))
            if ranks == own:
                created = group
    return _Membership(group=created, ranks=own, rank=own.index(rank))

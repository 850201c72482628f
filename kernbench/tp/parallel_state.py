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
tensors and call collectives). `initialize_model_parallel` keeps the one it
is given (`torch=`), or else the namespace of the run in progress
(`kernbench.runtime_api.current_run`), as `import torch` would give
Megatron's code one module, so a Megatron script runs with only its
imports changed. `get_torch_namespace()` gives it back to layers and
mappings.

**A world of one.** Without `torch.distributed.init_process_group` the world
is the calling rank alone: every group is that rank, there is nothing to
create, and the groups are None (which `torch.distributed` reads as the
whole world, the same single rank). Mappings never communicate in one-rank
groups, so a one-SIP bench needs no process group. Asking for more than one
rank per group without a process group is an error that says to create one.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kernbench.runtime_api.current_run import current_torch
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


def initialize_model_parallel(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1, *,
                              context_parallel_size: int = 1, expert_model_parallel_size: int = 1,
                              distributed_timeout_minutes: int = 30, torch=None) -> None:
    """Create this rank's tensor, data and pipeline groups (Megatron's signature, plus `torch=`).

    Every rank of the world must call it with the same sizes: each calls
    `torch.distributed.new_group` for every group, in the same order, as
    PyTorch requires. `torch` is the run's namespace; when omitted, the one
    the caller sees as `torch` (module docstring). Context and expert
    parallelism are not implemented, so their sizes must be 1;
    `distributed_timeout_minutes` is accepted and unused (a simulated rank
    that never arrives is reported as a deadlock, not timed out).

    Raises `ModelParallelError` for sizes that do not divide the world, for
    more than one rank per group without a process group, for a world of PE
    ranks (more ranks than SIPs: one worker drives them all, so no rank has a
    worker of its own to run its layers), when no `torch` is given or found,
    or when this rank is already initialized.
    """
    if _STATE.get() is not None:
        raise ModelParallelError("model parallel state is already initialized on this rank; "
                                 "call destroy_model_parallel() before initializing it again")
    for name, size in (("context_parallel_size", context_parallel_size),
                       ("expert_model_parallel_size", expert_model_parallel_size)):
        if size != 1:
            raise ModelParallelError(f"{name}={size!r}: kernbench.tp implements tensor, data and pipeline groups; "
                                     f"context and expert parallelism are not implemented (their sizes must be 1)")
    if torch is None:
        torch = current_torch()
    dist = torch.distributed
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
        if world_size > torch.ahbm.device_count():
            raise ModelParallelError(
                f"initialize_model_parallel: the world has {world_size} ranks but the machine has "
                f"{torch.ahbm.device_count()} SIPs, so its ranks are PEs driven by one worker; model parallelism "
                f"needs one worker per rank (a world size of at most the SIP count)")
    else:
        rank, world_size = 0, 1
        if _positive_ints(tensor_model_parallel_size, pipeline_model_parallel_size) and \
                tensor_model_parallel_size * pipeline_model_parallel_size > 1:
            raise ModelParallelError(
                f"initialize_model_parallel(tensor_model_parallel_size={tensor_model_parallel_size}, "
                f"pipeline_model_parallel_size={pipeline_model_parallel_size}): torch.distributed is not initialized, "
                f"so the world is this rank alone; call torch.distributed.init_process_group(backend='ahbm') on "
                f"every rank first")
    layout = rank_groups(world_size, tensor_model_parallel_size, pipeline_model_parallel_size)
    # Megatron's creation order: data, tensor, pipeline (new_group must be called in one order on every rank).
    data = _join(dist, layout.data, rank)
    tensor = _join(dist, layout.tensor, rank)
    pipeline = _join(dist, layout.pipeline, rank)
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


def get_tensor_model_parallel_src_rank() -> int:
    """The global rank of the first rank of this rank's tensor-parallel group (the one that broadcasts to it)."""
    return _state().tensor.ranks[0]


# `with_context_parallel` is Megatron's keyword; with a context-parallel size of 1 both answers are the same.
def get_data_parallel_group(with_context_parallel: bool = False):
    return _state().data.group


def get_data_parallel_world_size(with_context_parallel: bool = False) -> int:
    return len(_state().data.ranks)


def get_data_parallel_rank(with_context_parallel: bool = False) -> int:
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
        raise ModelParallelError("model parallel state is not initialized on this rank: call kernbench.tp."
                                 "parallel_state.initialize_model_parallel(tensor_model_parallel_size=...) first")
    return state


def _positive_ints(*sizes) -> bool:
    return all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in sizes)


def _join(dist, groups: tuple[tuple[int, ...], ...], rank: int) -> _Membership:
    """Create every group of one kind (collectively) and keep the one holding `rank`.

    In a world of one (no process group) nothing is created: the group is None, `torch.distributed`'s default.
    """
    created = None
    own = next(ranks for ranks in groups if rank in ranks)
    if dist.is_initialized():
        for ranks in groups:
            group = dist.new_group(ranks=list(ranks))
            if ranks == own:
                created = group
    return _Membership(group=created, ranks=own, rank=own.index(rank))

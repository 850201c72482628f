"""Model-parallel groups: which ranks form each group, and each rank's view of its own.

The one place that owns groups (Megatron's `parallel_state`, with its names
and signatures): layers and mappings ask it for their group, rank and size
and never compute ranks themselves.

**Megatron's layout** (`kernbench.tp.rank_layout`). The world is a grid of
tensor (tp), context (cp), expert (ep), data (dp) and pipeline (pp)
coordinates laid out along `order` (default `"tp-cp-ep-dp-pp"`): the first
token varies fastest, so a tensor group is `tp` consecutive ranks (they
exchange activations in every layer, so they should be the closest devices)
and pipeline groups stride across the rest. Expert layers have a grid of
their own over the same pipelines.

**Per rank, in one process.** Megatron keeps its groups in module globals,
one copy per process. Here every rank is a greenlet of one Python process, so
the state lives in `ContextVar`s: each greenlet has its own context, so each
rank sees only what it initialized (or set) itself, and a rank's state ends
with it. As in Megatron every rank calls `initialize_model_parallel` itself.
The values the `set_*` functions override (Megatron's "change the mpu sizes
on the fly") are per rank too, and `destroy_model_parallel` clears them.

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
(Megatron asserts a process group even for a world of one.)
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from math import log2
from typing import Any, Callable, Mapping

from kernbench.runtime_api.current_run import current_torch
from kernbench.tp.errors import (MegatronAssertionError, ModelParallelError, NotInitializedError,
                                 StateNotInitializedRuntimeError)
# RankGenerator and the default embedding ranks are Megatron's parallel_state names too.
from kernbench.tp.rank_layout import (DEFAULT_ORDER, ParallelSizeError, RankGenerator, RankGroups,  # noqa: F401
                                      default_embedding_ranks, default_position_embedding_ranks, positive_int,
                                      rank_groups)


@dataclass(frozen=True)
class _Membership:
    """The one group of a kind that holds the calling rank: its process group, its ranks, the rank's index."""

    group: Any
    ranks: tuple[int, ...]
    rank: int


@dataclass(frozen=True)
class _ModelParallelState:
    torch: Any
    global_rank: int
    groups: Mapping[str, _Membership | None]  # None: the rank is in no group of that kind (embedding groups)
    create_gloo_process_groups: bool
    hybrid_data_context: Mapping[int, Any]  # hybrid data x context parallelism: size -> the rank's group of it


_STATE: ContextVar[_ModelParallelState | None] = ContextVar("kernbench_model_parallel_state", default=None)
# What the set_* functions override, and the virtual pipeline's rank and size: never mutated, replaced.
_SET: ContextVar[Mapping[str, Any]] = ContextVar("kernbench_model_parallel_overrides", default={})

# Megatron's parameters that are not implemented: the value each must keep.
_NOT_IMPLEMENTED = {
    "hierarchical_context_parallel_sizes": (None, "hierarchical context parallelism"),
    "gtp_remat_size": (1, "generalized tensor parallelism with weight rematerialization"),
    "expert_gtp_remat_size": (1, "expert generalized tensor parallelism with weight rematerialization"),
    "num_distributed_optimizer_instances": (1, "partial distributed-optimizer groups"),
    "rank_offset": (0, "a world shared by several models (rank offsets)"),
    "local_world_size": (None, "a world shared by several models (a local world size)"),
}


def initialize_model_parallel(
    tensor_model_parallel_size: int = 1,
    pipeline_model_parallel_size: int = 1,
    virtual_pipeline_model_parallel_size: int | None = None,
    pipeline_model_parallel_comm_backend: str | None = None,
    use_sharp: bool = False,
    context_parallel_size: int = 1,
    hierarchical_context_parallel_sizes: list[int] | None = None,
    hybrid_context_parallel: bool = False,
    expert_model_parallel_size: int = 1,
    gtp_remat_size: int = 1,
    expert_gtp_remat_size: int = 1,
    num_distributed_optimizer_instances: int = 1,
    expert_tensor_parallel_size: int | None = None,
    nccl_communicator_config_path: str | None = None,
    distributed_timeout_minutes: int = 30,
    order: str = DEFAULT_ORDER,
    get_embedding_ranks: Callable | None = None,
    get_position_embedding_ranks: Callable | None = None,
    create_gloo_process_groups: bool = True,
    high_priority_stream_groups: list[str] | None = None,
    sharp_enabled_group: str | None = None,
    rank_offset: int = 0,
    local_world_size: int | None = None,
    *,
    torch=None,
) -> None:
    """Create this rank's groups of every kind: Megatron's signature and positional order, plus `torch=`.

    Every rank of the world must call it with the same arguments: each calls
    `torch.distributed.new_group` for every group, in the same order, as
    PyTorch requires. `torch` is the run's namespace; when omitted, the one
    the caller sees as `torch` (module docstring).

    Honoured: the tensor, pipeline, context and expert (model and tensor)
    sizes, `order` (any order of tp, cp, ep, dp, pp), the virtual pipeline
    size (its rank starts at 0; it needs pipelining, as in Megatron),
    `get_embedding_ranks` / `get_position_embedding_ranks`,
    `hybrid_context_parallel` (Megatron's groups of every power-of-two size
    within each data x context group), and
    `create_gloo_process_groups` (the Gloo getters then return the group of
    the same ranks: there is one backend). Accepted without effect, as they
    tune NCCL rather than the layout: `pipeline_model_parallel_comm_backend`
    (None, "nccl" or "ucc"), `use_sharp`, `sharp_enabled_group`,
    `nccl_communicator_config_path`, `high_priority_stream_groups`,
    `distributed_timeout_minutes` (a simulated rank that never arrives is a
    deadlock, not a timeout). Refused with one line naming the argument:
    hierarchical context parallelism, generalized tensor
    parallelism, several distributed-optimizer instances, `rank_offset` and
    `local_world_size`.

    Raises `ParallelSizeError` (a `RuntimeError`, as Megatron's) for sizes or
    an order that cannot lay out the world, checked first, as Megatron does,
    and `ModelParallelError` for more
    than one rank per group without a process group, for a world of PE ranks
    (more ranks than SIPs: a worker drives several of them, so no rank has
    a worker of its own to run its layers), when no `torch` is given or found,
    or when this rank is already initialized.
    """
    given = {"hierarchical_context_parallel_sizes": hierarchical_context_parallel_sizes,
             "gtp_remat_size": gtp_remat_size,
             "expert_gtp_remat_size": expert_gtp_remat_size,
             "num_distributed_optimizer_instances": num_distributed_optimizer_instances,
             "rank_offset": rank_offset, "local_world_size": local_world_size}
    for name, (allowed, feature) in _NOT_IMPLEMENTED.items():
        if given[name] != allowed:
            raise ModelParallelError(f"initialize_model_parallel({name}={given[name]!r}): {feature} is not "
                                     f"implemented in kernbench.tp ({name} must be {allowed!r})")
    if pipeline_model_parallel_comm_backend not in (None, "nccl", "ucc"):
        raise ModelParallelError(f"initialize_model_parallel(pipeline_model_parallel_comm_backend="
                                 f"{pipeline_model_parallel_comm_backend!r}): Megatron accepts None, 'nccl' or 'ucc'")
    if virtual_pipeline_model_parallel_size is not None and not pipeline_model_parallel_size > 1:
        raise ParallelSizeError(f"initialize_model_parallel(virtual_pipeline_model_parallel_size="
                                f"{virtual_pipeline_model_parallel_size}): the pipeline-model-parallel size should "
                                f"be greater than 1 with an interleaved schedule")
    sizes = {"tensor_model_parallel_size": tensor_model_parallel_size,
             "pipeline_model_parallel_size": pipeline_model_parallel_size,
             "context_parallel_size": context_parallel_size,
             "expert_model_parallel_size": expert_model_parallel_size,
             "expert_tensor_parallel_size": expert_tensor_parallel_size}
    if torch is None:
        torch = current_torch()
    dist = torch.distributed
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
        if world_size > torch.ahbm.device_count():
            raise ModelParallelError(
                f"initialize_model_parallel: the world has {world_size} ranks but the machine has "
                f"{torch.ahbm.device_count()} SIPs, so its ranks are PEs a worker drives several of; model parallelism "
                f"needs one worker per rank (a world size of at most the SIP count)")
    else:
        rank, world_size = 0, 1
        above_one = [f"{name}={size}" for name, size in sizes.items() if positive_int(size) and size > 1]
        if above_one:
            raise ModelParallelError(
                f"initialize_model_parallel with {', '.join(above_one)}: torch.distributed is not initialized, so "
                f"the world is this rank alone and groups of more than one rank are not implemented; call "
                f"torch.distributed.init_process_group(backend='ahbm') on every rank first")
    layout = rank_groups(world_size, tensor_model_parallel_size, pipeline_model_parallel_size,
                         context_parallel_size=context_parallel_size,
                         expert_model_parallel_size=expert_model_parallel_size,
                         expert_tensor_parallel_size=expert_tensor_parallel_size, order=order,
                         get_embedding_ranks=get_embedding_ranks,
                         get_position_embedding_ranks=get_position_embedding_ranks)
    if _STATE.get() is not None:  # after the sizes, as Megatron checks the world before its groups
        raise ModelParallelError("model parallel state is already initialized on this rank; "
                                 "call destroy_model_parallel() before initializing it again")
    groups = {kind: _join(dist, getattr(layout, kind), rank) for kind in layout.kinds()}
    hybrid = _hybrid_data_context_groups(dist, layout.data_with_context, rank) if hybrid_context_parallel else {}
    _STATE.set(_ModelParallelState(torch=torch, global_rank=rank, groups=groups,
                                   create_gloo_process_groups=create_gloo_process_groups, hybrid_data_context=hybrid))
    if virtual_pipeline_model_parallel_size is not None:
        _set(virtual_pipeline_rank=0, virtual_pipeline_world_size=virtual_pipeline_model_parallel_size)


def is_initialized() -> bool:
    """Whether this rank's data-parallel group exists (Megatron's test for code run with or without groups)."""
    return _STATE.get() is not None


def model_parallel_is_initialized() -> bool:
    """Whether this rank has called `initialize_model_parallel` (and not `destroy_model_parallel` since)."""
    return _STATE.get() is not None


def destroy_model_parallel() -> None:
    """Forget this rank's groups and every value the `set_*` functions set, so it can initialize again."""
    _STATE.set(None)
    _SET.set({})


def get_torch_namespace():
    """The `torch` namespace given to `initialize_model_parallel` on this rank."""
    return _state().torch


def torch_namespace():
    """The `torch` namespace given to `initialize_model_parallel` on this rank, else the run's: for code that
    Megatron runs with or without model parallelism (mappings given a group, the RNG tracker, checkpointing)."""
    state = _STATE.get()
    return current_torch() if state is None else state.torch


# ---- groups ---------------------------------------------------------------------------------------------------
# `check_initialized=False` (Megatron's keyword) returns None instead of raising when this rank has no groups.

def get_model_parallel_group(check_initialized: bool = True):
    """The tensor x pipeline group holding this rank."""
    return _group("model", check_initialized)


def get_tensor_model_parallel_group(check_initialized: bool = True):
    return _group("tensor", check_initialized)


def get_pipeline_model_parallel_group(check_initialized: bool = True):
    return _group("pipeline", check_initialized)


def get_data_parallel_group(with_context_parallel: bool = False, with_gtp_remat: bool = True,
                            partial_data_parallel: bool = False):
    """The data-parallel group, with the context-parallel ranks when asked (partial: the same, one instance)."""
    _check_partial(with_context_parallel, partial_data_parallel)
    return _group("data_with_context" if with_context_parallel else "data")


def get_data_parallel_group_gloo(with_context_parallel: bool = False, partial_data_parallel: bool = False):
    """The data-parallel group: one backend serves host and device, so it is also the Gloo group."""
    if not _state().create_gloo_process_groups:
        raise ModelParallelError("get_data_parallel_group_gloo: initialize_model_parallel was called with "
                                 "create_gloo_process_groups=False")
    return get_data_parallel_group(with_context_parallel, partial_data_parallel=partial_data_parallel)


def get_context_parallel_group(check_initialized: bool = True):
    return _group("context", check_initialized)


def get_context_parallel_global_ranks(check_initialized: bool = True) -> list[int] | None:
    membership = _membership("context", check_initialized)
    return None if membership is None else list(membership.ranks)


def get_hybrid_data_context_parallel_groups(check_initialized: bool = True, group_size: int | None = None):
    """The hybrid data x context group of `group_size` ranks holding this rank (`hybrid_context_parallel=True`):
    the data x context group itself at its whole size."""
    if get_data_parallel_world_size(with_context_parallel=True) == group_size:
        return _group("data_with_context", check_initialized)
    hybrid = _state().hybrid_data_context
    if group_size not in hybrid:
        raise MegatronAssertionError(f"get_hybrid_data_context_parallel_groups(group_size={group_size!r}): this rank "
                                     f"has hybrid data x context groups of sizes {sorted(hybrid)} "
                                     "(initialize_model_parallel(hybrid_context_parallel=True) makes them)")
    return hybrid[group_size]


def get_embedding_group(check_initialized: bool = True):
    """The first and last pipeline stages of this rank's pipeline (None on a rank holding no embedding)."""
    return _group("embedding", check_initialized)


def get_position_embedding_group(check_initialized: bool = True):
    """The first pipeline stage of this rank's pipeline (None on a rank holding no position embedding)."""
    return _group("position_embedding", check_initialized)


def get_amax_reduction_group(with_context_parallel: bool = False, tp_only_amax_red: bool = False):
    """Megatron's FP8 amax group: tensor x data (x context), or tensor (x context) alone with `tp_only_amax_red`."""
    if tp_only_amax_red:
        return _group("tensor_and_context" if with_context_parallel else "tensor")
    return _group("tensor_and_data_with_context" if with_context_parallel else "tensor_and_data")


def get_tensor_and_data_parallel_group(check_initialized: bool = True, with_context_parallel: bool = False):
    return _group("tensor_and_data_with_context" if with_context_parallel else "tensor_and_data", check_initialized)


def get_tensor_and_context_parallel_group(check_initialized: bool = True):
    return _group("tensor_and_context", check_initialized)


# ---- sizes and ranks (each `set_*` overrides its getter on this rank until set to None or destroyed) ----------

def set_tensor_model_parallel_world_size(world_size) -> None:
    _set(tensor_world_size=world_size)


def set_pipeline_model_parallel_world_size(world_size) -> None:
    _set(pipeline_world_size=world_size)


def set_virtual_pipeline_model_parallel_world_size(world_size) -> None:
    _set(virtual_pipeline_world_size=world_size)


def set_tensor_model_parallel_rank(rank) -> None:
    _set(tensor_rank=rank)


def set_pipeline_model_parallel_rank(rank) -> None:
    _set(pipeline_rank=rank)


def set_virtual_pipeline_model_parallel_rank(rank) -> None:
    _set(virtual_pipeline_rank=rank)


def set_data_parallel_rank(rank) -> None:
    _set(data_rank=rank)


def set_expert_model_parallel_world_size(world_size) -> None:
    _set(expert_model_world_size=world_size)


def set_expert_model_parallel_rank(rank) -> None:
    _set(expert_model_rank=rank)


def set_expert_tensor_parallel_world_size(world_size) -> None:
    _set(expert_tensor_world_size=world_size)


def set_expert_tensor_parallel_rank(rank) -> None:
    _set(expert_tensor_rank=rank)


def get_tensor_model_parallel_world_size() -> int:
    return _overridden("tensor_world_size", lambda: len(_membership("tensor").ranks))


def get_tensor_model_parallel_rank() -> int:
    return _overridden("tensor_rank", lambda: _membership("tensor").rank)


def get_pipeline_model_parallel_world_size() -> int:
    return _overridden("pipeline_world_size", lambda: len(_membership("pipeline").ranks))


def get_pipeline_model_parallel_rank() -> int:
    return _overridden("pipeline_rank", lambda: _membership("pipeline").rank)


def get_virtual_pipeline_model_parallel_rank() -> int | None:
    return _SET.get().get("virtual_pipeline_rank")


def get_virtual_pipeline_model_parallel_world_size() -> int | None:
    return _SET.get().get("virtual_pipeline_world_size")


def get_data_parallel_world_size(with_context_parallel: bool = False, with_gtp_remat: bool = True,
                                 partial_data_parallel: bool = False) -> int:
    _check_partial(with_context_parallel, partial_data_parallel)
    return len(_membership("data_with_context" if with_context_parallel else "data").ranks)


def get_data_parallel_rank(with_context_parallel: bool = False, with_gtp_remat: bool = True,
                           partial_data_parallel: bool = False) -> int:
    _check_partial(with_context_parallel, partial_data_parallel)
    return _overridden("data_rank",
                       lambda: _membership("data_with_context" if with_context_parallel else "data").rank)


def get_context_parallel_world_size() -> int:
    return len(_membership("context").ranks)


def get_context_parallel_rank() -> int:
    return _membership("context").rank


def get_tensor_and_context_parallel_world_size() -> int:
    return len(_membership("tensor_and_context").ranks)


def get_tensor_and_context_parallel_rank() -> int:
    return _membership("tensor_and_context").rank


def get_expert_model_parallel_group(check_initialized: bool = True):
    return _group("expert_model", check_initialized)


def get_expert_model_parallel_world_size() -> int:
    return _overridden("expert_model_world_size", lambda: len(_membership("expert_model").ranks))


def get_expert_model_parallel_rank() -> int:
    return _overridden("expert_model_rank", lambda: _membership("expert_model").rank)


def get_expert_tensor_parallel_group(check_initialized: bool = True):
    return _group("expert_tensor", check_initialized)


def get_expert_tensor_parallel_world_size() -> int:
    """The expert tensor-parallel size; without groups, the tensor-parallel size (Megatron's fallback)."""
    if _STATE.get() is None:
        return _overridden("expert_tensor_world_size", lambda: _SET.get().get("tensor_world_size"))
    return _overridden("expert_tensor_world_size", lambda: len(_membership("expert_tensor").ranks))


def get_expert_tensor_parallel_rank() -> int:
    """This rank's expert tensor-parallel rank; without groups, its tensor-parallel rank (Megatron's fallback)."""
    if _STATE.get() is None:
        return _overridden("expert_tensor_rank", lambda: _SET.get().get("tensor_rank"))
    return _overridden("expert_tensor_rank", lambda: _membership("expert_tensor").rank)


def get_expert_tensor_and_model_parallel_group(check_initialized: bool = True):
    return _group("expert_tensor_and_model", check_initialized)


def get_expert_tensor_and_model_parallel_world_size() -> int:
    return len(_membership("expert_tensor_and_model").ranks)


def get_expert_tensor_and_model_parallel_rank() -> int:
    return _membership("expert_tensor_and_model").rank


def get_expert_tensor_model_pipeline_parallel_group(check_initialized: bool = True, with_egtp_remat: bool = False):
    return _group("expert_tensor_model_pipeline", check_initialized)


def get_expert_data_parallel_group(check_initialized: bool = True, with_gtp_remat: bool = True,
                                   partial_expert_data_parallel: bool = False):
    return _group("expert_data", check_initialized)


def get_expert_data_parallel_rank(with_gtp_remat: bool = True, partial_expert_data_parallel: bool = False) -> int:
    return _membership("expert_data").rank


def get_expert_data_parallel_world_size(with_gtp_remat: bool = True,
                                        partial_expert_data_parallel: bool = False) -> int:
    return len(_membership("expert_data").ranks)


# ---- source ranks and pipeline neighbours (global ranks) --------------------------------------------------------

def get_tensor_model_parallel_src_rank() -> int:
    """The global rank of the first rank of this rank's tensor-parallel group (the one that broadcasts to it)."""
    return _membership("tensor").ranks[0]


def get_model_parallel_src_rank() -> int:
    return _membership("model").ranks[0]


def get_data_parallel_src_rank(with_context_parallel: bool = False) -> int:
    return _membership("data_with_context" if with_context_parallel else "data").ranks[0]


def get_expert_model_parallel_src_rank() -> int:
    return _membership("expert_model").ranks[0]


def get_pipeline_model_parallel_first_rank() -> int:
    return _membership("pipeline").ranks[0]


def get_pipeline_model_parallel_last_rank() -> int:
    return _membership("pipeline").ranks[get_pipeline_model_parallel_world_size() - 1]


def get_pipeline_model_parallel_next_rank() -> int:
    ranks = _membership("pipeline").ranks
    return ranks[(get_pipeline_model_parallel_rank() + 1) % get_pipeline_model_parallel_world_size()]


def get_pipeline_model_parallel_prev_rank() -> int:
    ranks = _membership("pipeline").ranks
    return ranks[(get_pipeline_model_parallel_rank() - 1) % get_pipeline_model_parallel_world_size()]


def is_pipeline_first_stage(ignore_virtual: bool = True, vp_stage: int | None = None) -> bool:
    """Whether this rank is its pipeline's first stage (and, not ignoring the virtual pipeline, at its stage 0)."""
    if not ignore_virtual and get_virtual_pipeline_model_parallel_world_size() is not None:
        if vp_stage is None:
            raise ModelParallelError("is_pipeline_first_stage(ignore_virtual=False): pass vp_stage= when the "
                                     "virtual pipeline is enabled")
        if vp_stage != 0:
            return False
    return get_pipeline_model_parallel_rank() == 0


def is_pipeline_last_stage(ignore_virtual: bool = True, vp_stage: int | None = None) -> bool:
    """Whether this rank is its pipeline's last stage (and, not ignoring the virtual pipeline, at its last stage)."""
    virtual_size = get_virtual_pipeline_model_parallel_world_size()
    if not ignore_virtual and virtual_size is not None:
        if vp_stage is None:
            raise ModelParallelError("is_pipeline_last_stage(ignore_virtual=False): pass vp_stage= when the "
                                     "virtual pipeline is enabled")
        if vp_stage != virtual_size - 1:
            return False
    return get_pipeline_model_parallel_rank() == get_pipeline_model_parallel_world_size() - 1


def is_rank_in_embedding_group(ignore_virtual: bool = True, vp_stage: int | None = None) -> bool:
    state = _STATE.get()
    membership = None if state is None else state.groups["embedding"]
    if membership is None:
        return False
    if ignore_virtual:
        return True
    if state.global_rank == membership.ranks[0]:
        return is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage)
    if state.global_rank == membership.ranks[-1]:
        return is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage)
    return True


def is_rank_in_position_embedding_group() -> bool:
    state = _STATE.get()
    return state is not None and state.groups["position_embedding"] is not None


def get_all_ranks() -> str:
    """This rank's tensor, generalized-tensor (always 0), data, context, pipeline and expert ranks, joined by _."""
    ranks = [get_tensor_model_parallel_rank(), 0, get_data_parallel_rank(), get_context_parallel_rank(),
             get_pipeline_model_parallel_rank(), get_expert_model_parallel_rank()]
    return "_".join(str(rank or 0) for rank in ranks)


# ---- helpers -----------------------------------------------------------------------------------------------------

def _state() -> _ModelParallelState:
    state = _STATE.get()
    if state is None:
        raise NotInitializedError("model parallel state is not initialized on this rank: call kernbench.tp."
                                 "parallel_state.initialize_model_parallel(tensor_model_parallel_size=...) first")
    return state


def _membership(kind: str, check_initialized: bool = True) -> _Membership | None:
    if not check_initialized and _STATE.get() is None:
        return None
    membership = _state().groups[kind]
    if membership is None and check_initialized:
        raise ModelParallelError(f"this rank (global rank {_state().global_rank}) is in no "
                                 f"{kind.replace('_', ' ')} group")
    return membership


def create_all_gather_groups(for_expert_parallelism: bool = False, timeout=None, nccl_comm_cfgs=None):
    """Megatron's all-gather communicators for overlapping the distributed optimizer's all-gathers with its
    reduce-scatters: new groups with the ranks of the data x context groups (and, with
    `for_expert_parallelism` and ep > 1, of the expert data groups), laid out along Megatron's default order as
    Megatron lays them; (this rank's, this rank's expert one or None). Every rank calls it; `timeout` and
    `nccl_comm_cfgs` tune NCCL and are accepted without effect. In a world of one: (None, None)."""
    state = _STATE.get()
    if state is None:
        raise StateNotInitializedRuntimeError("create_all_gather_groups() requires parallel state to be initialized. "
                                              "Call initialize_model_parallel() first.")
    dist = state.torch.distributed
    pp, cp = get_pipeline_model_parallel_world_size(), get_context_parallel_world_size()
    dense = RankGenerator(tp=get_tensor_model_parallel_world_size(), ep=1, dp=get_data_parallel_world_size(), pp=pp,
                          cp=cp, order=DEFAULT_ORDER)
    groups = [_join(dist, tuple(map(tuple, dense.get_ranks("dp-cp"))), state.global_rank), None]
    ep = get_expert_model_parallel_world_size()
    if for_expert_parallelism and ep > 1:
        expert = RankGenerator(tp=get_expert_tensor_parallel_world_size(), ep=ep,
                               dp=get_expert_data_parallel_world_size(), pp=pp, cp=1, order=DEFAULT_ORDER)
        groups[1] = _join(dist, tuple(map(tuple, expert.get_ranks("dp"))), state.global_rank)
    return tuple(None if membership is None else membership.group for membership in groups)


# Megatron's module globals holding this rank's groups, by the kind of group each holds.
_MEGATRON_GLOBALS = {
    "_TENSOR_MODEL_PARALLEL_GROUP": "tensor", "_PIPELINE_MODEL_PARALLEL_GROUP": "pipeline",
    "_MODEL_PARALLEL_GROUP": "model", "_EMBEDDING_GROUP": "embedding",
    "_POSITION_EMBEDDING_GROUP": "position_embedding", "_DATA_PARALLEL_GROUP": "data",
    "_DATA_PARALLEL_GROUP_WITH_CP": "data_with_context", "_CONTEXT_PARALLEL_GROUP": "context",
    "_TENSOR_AND_DATA_PARALLEL_GROUP": "tensor_and_data",
    "_TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP": "tensor_and_data_with_context",
    "_TENSOR_AND_CONTEXT_PARALLEL_GROUP": "tensor_and_context", "_EXPERT_MODEL_PARALLEL_GROUP": "expert_model",
    "_EXPERT_TENSOR_PARALLEL_GROUP": "expert_tensor",
    "_EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP": "expert_tensor_and_model",
    "_EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP": "expert_tensor_model_pipeline",
    "_EXPERT_DATA_PARALLEL_GROUP": "expert_data",
}


def __getattr__(name: str):
    """Megatron's globals (`parallel_state._MODEL_PARALLEL_GROUP`, ...), read by code that checks them: the
    calling rank's group, None before `initialize_model_parallel` and after `destroy_model_parallel`."""
    if name not in _MEGATRON_GLOBALS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _group(_MEGATRON_GLOBALS[name], check_initialized=False)


def _group(kind: str, check_initialized: bool = True):
    membership = _membership(kind, check_initialized)
    return None if membership is None else membership.group


def _set(**values) -> None:
    _SET.set({**_SET.get(), **values})


def _overridden(key: str, otherwise: Callable[[], int]):
    value = _SET.get().get(key)
    return otherwise() if value is None else value


def _check_partial(with_context_parallel: bool, partial_data_parallel: bool) -> None:
    if partial_data_parallel and not with_context_parallel:
        raise ModelParallelError("partial_data_parallel=True needs with_context_parallel=True (Megatron's partial "
                                 "data-parallel groups include the context-parallel ranks)")


def _hybrid_data_context_groups(dist, data_with_context, rank: int) -> dict:
    """Megatron's hybrid data x context groups: each data x context group cut into consecutive groups of every
    power of two from 2 below its size; {size: the group of that size holding `rank`}."""
    mine = {}
    for ranks in data_with_context:
        if len(ranks) % 2:
            raise MegatronAssertionError(f"Hybrid context parallel requires an even number of ranks (the data x "
                                         f"context group {list(ranks)} has {len(ranks)})")
        for size in [2 ** i for i in range(int(log2(len(ranks))))][1:]:
            for start in range(0, len(ranks), size):
                membership = _join(dist, (ranks[start:start + size],), rank)
                if membership is not None:
                    mine[size] = membership.group
    return mine


def _join(dist, groups: tuple[tuple[int, ...], ...], rank: int) -> _Membership | None:
    """Create every group of one kind (collectively) and keep the one holding `rank` (None if none does).

    In a world of one (no process group) nothing is created: the group is None, `torch.distributed`'s default.
    """
    own = next((ranks for ranks in groups if rank in ranks), None)
    created = None
    if dist.is_initialized():
        for ranks in groups:
            group = dist.new_group(ranks=list(ranks))
            if ranks == own:
                created = group
    return None if own is None else _Membership(group=created, ranks=own, rank=own.index(rank))

"""Moving activations into and out of the tensor-parallel region (Megatron's `mappings`).

Each function is named for what it does to the region and says its forward
collective and the backward one Megatron pairs with it. Each is a
`torch.autograd.Function` (as Megatron's are), so a loss's `backward()` runs
the twin collective — all-reduce behind a copy, all-gather behind a split,
reduce-scatter behind a sequence-parallel gather — as device work
(adr/0017-autograd.md).

All of them run in the calling rank's tensor-parallel group, or in the
process group given as `group=` (Megatron's keyword); the sequence-parallel
ones work along the first (sequence) dim. All of them return their input
untouched when the group has one rank: the fast path lives here, not in
callers. Inputs may have any number of dims (Megatron's are
[sequence, batch, hidden]); gradients arriving at a backward are made
contiguous first, since collectives and the layout kernels take contiguous
tensors.

Collectives only concatenate and split along dim 0
(`all_gather_into_tensor`, `reduce_scatter_tensor`), so the last-dim split
and gather change the layout with the Triton `copy_chunks_kernel` of
`kernbench.tp.kernels` on the device: (rows, p x cols) <-> (p x rows, cols).
`reduce_from_tensor_model_parallel_region` reduces in place, as Megatron's
does, and returns an alias of its input.
"""

from __future__ import annotations

from kernbench.runtime_api.autograd import Function
from kernbench.tp import kernels, parallel_state
from kernbench.tp.errors import ModelParallelError


def copy_to_tensor_model_parallel_region(input_, group=None):
    """Forward: identity (every rank already holds the input). Backward: all-reduce."""
    return _apply(_CopyToRegion, input_, group)


def reduce_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-reduce (sum) across the tensor-parallel group, in place. Backward: identity."""
    return _apply(_ReduceFromRegion, input_, group)


def scatter_to_tensor_model_parallel_region(input_, group=None):
    """Forward: split the last dim, keep this rank's chunk. Backward: all-gather along the last dim."""
    return _apply(_ScatterToRegion, input_, group)


def gather_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-gather along the last dim, in rank order. Backward: split the last dim."""
    return _apply(_GatherFromRegion, input_, group)


def scatter_to_sequence_parallel_region(input_, group=None):
    """Forward: split the first dim, keep this rank's rows. Backward: all-gather along the first dim."""
    return _apply(_ScatterToSequenceRegion, input_, group)


def reduce_scatter_to_sequence_parallel_region(input_, group=None):
    """Forward: reduce-scatter (sum) along the first dim. Backward: all-gather along the first dim."""
    return _apply(_ReduceScatterToSequenceRegion, input_, group)


def gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad: bool = True, group=None):
    """Forward: all-gather along the first dim, in rank order. Backward: reduce-scatter along the first dim,
    or, with `tensor_parallel_output_grad=False`, split it (the gradient is then the same on every rank)."""
    return _apply(_GatherFromSequenceRegion, input_, group, tensor_parallel_output_grad)


def _apply(function, input_, group, *extra):
    resolved = resolve_group(group)
    if resolved[1] == 1:
        return input_
    return function.apply(input_, resolved, *extra)


# ---- the collectives each direction runs, on a resolved (group, size, rank) ---------------------------
def _all_reduce(input_, resolved):
    parallel_state.get_torch_namespace().distributed.all_reduce(input_, group=resolved[0])
    return input_.view(input_.shape)  # the same storage under a new name, so autograd sees an output


def _split_last(input_, resolved):
    _, world_size, rank = resolved
    width = _divide_dim(input_, -1, world_size, "scatter_to_tensor_model_parallel_region")
    output = new_like(input_, (*input_.shape[:-1], width), "scattered")
    return kernels.columns_to_chunks(input_, output, n_chunks=1, first_chunk=rank)


def _gather_last(input_, resolved):
    group, world_size, _ = resolved
    stacked = _all_gather_first_dim(input_, group, world_size)
    output = new_like(input_, (*input_.shape[:-1], world_size * input_.shape[-1]), "gathered")
    return kernels.chunks_to_columns(stacked, output, n_chunks=world_size)


def _split_first(input_, resolved):
    _, world_size, rank = resolved
    rows = _divide_dim(input_, 0, world_size, "scatter_to_sequence_parallel_region")
    return input_[rank * rows:(rank + 1) * rows].contiguous()


def _reduce_scatter_first(input_, resolved):
    group, world_size, _ = resolved
    rows = _divide_dim(input_, 0, world_size, "reduce_scatter_to_sequence_parallel_region")
    output = new_like(input_, (rows, *input_.shape[1:]), "reduce_scattered")
    parallel_state.get_torch_namespace().distributed.reduce_scatter_tensor(output, input_, group=group)
    return output


def gather_along_first_dim(input_, resolved):
    group, world_size, _ = resolved
    return _all_gather_first_dim(input_, group, world_size)


class _Mapping(Function):
    """A forward collective and its backward twin, both on the group resolved at the call."""

    forward_op = backward_op = None

    @classmethod
    def forward(cls, ctx, input_, resolved, *extra):
        ctx.resolved = resolved
        return cls.forward_op(input_.contiguous(), resolved)

    @classmethod
    def backward(cls, ctx, grad_output):
        return cls.backward_op(grad_output.contiguous(), ctx.resolved), None


def _identity(input_, resolved):
    return input_


class _CopyToRegion(_Mapping):
    forward_op, backward_op = staticmethod(_identity), staticmethod(_all_reduce)

    @classmethod
    def forward(cls, ctx, input_, resolved, *extra):
        ctx.resolved = resolved
        return input_.view(input_.shape)


class _ReduceFromRegion(_Mapping):
    forward_op, backward_op = staticmethod(_all_reduce), staticmethod(_identity)


class _ScatterToRegion(_Mapping):
    forward_op, backward_op = staticmethod(_split_last), staticmethod(_gather_last)


class _GatherFromRegion(_Mapping):
    forward_op, backward_op = staticmethod(_gather_last), staticmethod(_split_last)


class _ScatterToSequenceRegion(_Mapping):
    forward_op, backward_op = staticmethod(_split_first), staticmethod(gather_along_first_dim)


class _ReduceScatterToSequenceRegion(_Mapping):
    forward_op, backward_op = staticmethod(_reduce_scatter_first), staticmethod(gather_along_first_dim)


class _GatherFromSequenceRegion(_Mapping):
    forward_op = staticmethod(gather_along_first_dim)

    @classmethod
    def forward(cls, ctx, input_, resolved, tensor_parallel_output_grad=True):
        ctx.resolved, ctx.reduce = resolved, tensor_parallel_output_grad
        return gather_along_first_dim(input_.contiguous(), resolved)

    @classmethod
    def backward(cls, ctx, grad_output):
        twin = _reduce_scatter_first if ctx.reduce else _split_first
        return twin(grad_output.contiguous(), ctx.resolved), None, None


def resolve_group(group) -> tuple:
    """(process group, its size, the calling rank's index in it): `group`, else this rank's tensor-parallel group."""
    if group is None:
        return (parallel_state.get_tensor_model_parallel_group(),
                parallel_state.get_tensor_model_parallel_world_size(), parallel_state.get_tensor_model_parallel_rank())
    rank = group.rank()
    if rank < 0:
        raise ModelParallelError(f"group {group.name} (ranks {list(group.ranks)}) does not hold the calling rank")
    return group, group.size(), rank


def _all_gather_first_dim(input_, group, world_size: int):
    """The group's inputs stacked along dim 0 in rank order."""
    output = new_like(input_, (world_size * input_.shape[0], *input_.shape[1:]), "gathered_rows")
    parallel_state.get_torch_namespace().distributed.all_gather_into_tensor(output, input_, group=group)
    return output


def new_like(input_, shape: tuple[int, ...], suffix: str):
    """An uninitialized tensor of `shape` with the input's dtype, on the input's device."""
    torch = parallel_state.get_torch_namespace()
    return torch.empty(*shape, dtype=input_.dtype, device=input_.device, name=f"{input_.name}.{suffix}")


def _divide_dim(tensor, dim: int, world_size: int, what: str) -> int:
    size = tensor.shape[dim]
    if size % world_size:
        raise ModelParallelError(f"{what}: dim {dim} of {tensor.name!r} (shape {tensor.shape}) has size {size}, "
                                 f"not divisible by the tensor-parallel size {world_size}")
    return size // world_size

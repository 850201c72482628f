"""Moving activations into and out of the tensor-parallel region (Megatron's `mappings`).

Each public function is named for what it does to the region and says its
forward collective and the backward one Megatron pairs with it. Each runs a
`torch.autograd.Function` of Megatron's name (`_CopyToModelParallelRegion`,
`_GatherFromSequenceParallelRegion`, ...) with Megatron's signatures —
`forward(ctx, input_, group, ...)`, `backward(ctx, grad_output)` returning
one gradient per forward input, `symbolic(graph, input_, group, ...)` — so
a loss's `backward()` runs the twin collective (all-reduce behind a copy,
all-gather behind a split, reduce-scatter behind a sequence-parallel gather)
as device work (adr/0017-autograd.md), and code that calls the classes
directly (Megatron's unit tests) runs as written. A backward reads only
`ctx.group` (and the sequence-parallel options), as Megatron's does.

All of them run in the calling rank's tensor-parallel group, or in the
process group given as `group=` (Megatron's keyword); the sequence-parallel
ones work along the first (sequence) dim. All of them return their input
untouched when the group has one rank: the fast path lives here, not in
callers. Inputs may have any number of dims (Megatron's are
[sequence, batch, hidden]); inputs are made contiguous before a collective
or a layout kernel, since those take contiguous tensors.

Collectives only concatenate and split along dim 0
(`all_gather_into_tensor`, `reduce_scatter_tensor`), so the last-dim split
and gather change the layout with the Triton `copy_chunks_kernel` of
`kernbench.tp.kernels` on the device: (rows, p x cols) <-> (p x rows, cols).
`reduce_from_tensor_model_parallel_region` reduces in place, as Megatron's
does. Unequal splits (`output_split_sizes`, `input_split_sizes`) are not
implemented and are refused in one line; `use_global_buffer` (Megatron's
reuse of one buffer) allocates a new tensor here.
"""

from __future__ import annotations

from kernbench.runtime_api.autograd import Function
from kernbench.tp import kernels, parallel_state
from kernbench.tp.errors import ModelParallelError, NotDivisibleError


def get_tensor_model_parallel_group_if_none(tp_group, is_expert: bool = False, check_initialized: bool = True):
    """Megatron's `megatron.core.utils.get_tensor_model_parallel_group_if_none`: `tp_group`, else this rank's
    (expert) tensor-parallel group; `tp_group` as given when model parallelism is not initialized."""
    if tp_group is not None or not parallel_state.model_parallel_is_initialized():
        return tp_group
    if is_expert:
        return parallel_state.get_expert_tensor_parallel_group(check_initialized=check_initialized)
    return parallel_state.get_tensor_model_parallel_group(check_initialized=check_initialized)


def copy_to_tensor_model_parallel_region(input_, group=None):
    """Forward: identity (every rank already holds the input). Backward: all-reduce."""
    return _apply(_CopyToModelParallelRegion, input_, group)


def reduce_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-reduce (sum) across the tensor-parallel group, in place. Backward: identity."""
    return _apply(_ReduceFromModelParallelRegion, input_, group)


def scatter_to_tensor_model_parallel_region(input_, group=None):
    """Forward: split the last dim, keep this rank's chunk. Backward: all-gather along the last dim."""
    return _apply(_ScatterToModelParallelRegion, input_, group)


def gather_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-gather along the last dim, in rank order. Backward: split the last dim."""
    return _apply(_GatherFromModelParallelRegion, input_, group)


def scatter_to_sequence_parallel_region(input_, group=None):
    """Forward: split the first dim, keep this rank's rows. Backward: all-gather along the first dim."""
    return _apply(_ScatterToSequenceParallelRegion, input_, group)


def reduce_scatter_to_sequence_parallel_region(input_, group=None, input_split_sizes=None,
                                               use_global_buffer: bool = False):
    """Forward: reduce-scatter (sum) along the first dim. Backward: all-gather along the first dim."""
    return _apply(_ReduceScatterToSequenceParallelRegion, input_, group, input_split_sizes, use_global_buffer)


def gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad: bool = True, group=None,
                                         output_split_sizes=None, use_global_buffer: bool = False):
    """Forward: all-gather along the first dim, in rank order. Backward: reduce-scatter along the first dim,
    or, with `tensor_parallel_output_grad=False`, split it (the gradient is then the same on every rank)."""
    return _apply(_GatherFromSequenceParallelRegion, input_, group, tensor_parallel_output_grad,
                  output_split_sizes, use_global_buffer)


def all_gather_last_dim_from_tensor_parallel_region(input_, group=None):
    """Forward: all-gather along the last dim. Backward: reduce-scatter along the last dim."""
    return _apply(_AllGatherFromTensorParallelRegion, input_, group)


def reduce_scatter_last_dim_to_tensor_parallel_region(input_, group=None):
    """Forward: reduce-scatter along the last dim. Backward: all-gather along the last dim."""
    return _apply(_ReduceScatterToTensorParallelRegion, input_, group)


def _apply(function, input_, group, *extra):
    if group is None:  # this rank's group; before initialization, parallel_state's one line saying so
        group = parallel_state.get_tensor_model_parallel_group()
    if _size_and_rank(group)[0] == 1:
        return input_
    return function.apply(input_, group, *extra)


# ---- the collectives, on a process group (None: a world of one) -----------------------------------------
def _reduce(input_, group):
    """All-reduce (sum) over `group`, in place when `input_` is contiguous; returns the reduced tensor."""
    if _size_and_rank(group)[0] == 1:
        return input_
    input_ = input_.contiguous()
    parallel_state.torch_namespace().distributed.all_reduce(input_, group=group)
    return input_


def _split_along_last_dim(input_, group):
    """This rank's chunk of the last dim, contiguous."""
    world_size, rank = _size_and_rank(group)
    if world_size == 1:
        return input_
    width = _divide_dim(input_, -1, world_size, "scatter_to_tensor_model_parallel_region")
    output = new_like(input_, (*input_.shape[:-1], width), "scattered")
    return kernels.columns_to_chunks(input_.contiguous(), output, n_chunks=1, first_chunk=rank)


def _split_along_first_dim(input_, group):
    """This rank's rows of the first dim, contiguous."""
    world_size, rank = _size_and_rank(group)
    if world_size == 1:
        return input_
    rows = _divide_dim(input_, 0, world_size, "scatter_to_sequence_parallel_region")
    return input_[rank * rows:(rank + 1) * rows].contiguous()


def _gather_along_last_dim(input_, group):
    """The group's inputs side by side along the last dim, in rank order."""
    world_size, _ = _size_and_rank(group)
    if world_size == 1:
        return input_
    stacked = _gather_along_first_dim(input_, group)
    output = new_like(input_, (*input_.shape[:-1], world_size * input_.shape[-1]), "gathered")
    return kernels.chunks_to_columns(stacked, output, n_chunks=world_size)


def _reduce_scatter_along_last_dim(input_, group):
    """The sum over the group of the inputs, this rank's chunk of the last dim."""
    world_size, _ = _size_and_rank(group)
    if world_size == 1:
        return input_
    width = _divide_dim(input_, -1, world_size, "reduce_scatter_last_dim_to_tensor_parallel_region")
    stacked = new_like(input_, (world_size * (input_.numel() // input_.shape[-1]), width), "column_chunks")
    kernels.columns_to_chunks(input_.contiguous(), stacked, n_chunks=world_size)
    return _reduce_scatter_along_first_dim(stacked, group).reshape(*input_.shape[:-1], width)


def _gather_along_first_dim(input_, group, output_split_sizes=None, use_global_buffer: bool = False):
    """The group's inputs stacked along dim 0, in rank order."""
    _equal_splits(output_split_sizes, "output_split_sizes")
    world_size, _ = _size_and_rank(group)
    if world_size == 1:
        return input_
    output = new_like(input_, (world_size * input_.shape[0], *input_.shape[1:]), "gathered_rows")
    parallel_state.torch_namespace().distributed.all_gather_into_tensor(output, input_.contiguous(), group=group)
    return output


def _reduce_scatter_along_first_dim(input_, group, input_split_sizes=None, use_global_buffer: bool = False):
    """The sum over the group of the inputs, this rank's rows of dim 0."""
    _equal_splits(input_split_sizes, "input_split_sizes")
    world_size, _ = _size_and_rank(group)
    if world_size == 1:
        return input_
    rows = _divide_dim(input_, 0, world_size, "reduce_scatter_to_sequence_parallel_region")
    output = new_like(input_, (rows, *input_.shape[1:]), "reduce_scattered")
    parallel_state.torch_namespace().distributed.reduce_scatter_tensor(output, input_.contiguous(), group=group)
    return output


# ---- Megatron's autograd functions ----------------------------------------------------------------------
def _identity(input_, group):
    return input_


class _RegionMapping(Function):
    """Megatron's shape of a mapping: `forward(ctx, input_, group)` runs `forward_op` and keeps the group for
    `backward(ctx, grad_output)`, which runs `backward_op` on it; `symbolic(graph, input_, group)` is the forward.
    Each mapping below is its pair of collectives."""

    forward_op = backward_op = staticmethod(_identity)

    @classmethod
    def symbolic(cls, graph, input_, group):
        return cls.forward_op(input_, group)

    @classmethod
    def forward(cls, ctx, input_, group):
        ctx.group = group
        return cls.forward_op(input_, group)

    @classmethod
    def backward(cls, ctx, grad_output):
        return cls.backward_op(grad_output, ctx.group), None


class _CopyToModelParallelRegion(_RegionMapping):
    """Forward: identity. Backward: all-reduce."""
    backward_op = staticmethod(_reduce)


class _ReduceFromModelParallelRegion(_RegionMapping):
    """Forward: all-reduce, in place. Backward: identity."""
    forward_op = staticmethod(_reduce)


class _ScatterToModelParallelRegion(_RegionMapping):
    """Forward: split the last dim. Backward: all-gather along the last dim."""
    forward_op, backward_op = staticmethod(_split_along_last_dim), staticmethod(_gather_along_last_dim)


class _GatherFromModelParallelRegion(_RegionMapping):
    """Forward: all-gather along the last dim. Backward: split the last dim."""
    forward_op, backward_op = staticmethod(_gather_along_last_dim), staticmethod(_split_along_last_dim)


class _ScatterToSequenceParallelRegion(_RegionMapping):
    """Forward: split the first dim. Backward: all-gather along the first dim."""
    forward_op, backward_op = staticmethod(_split_along_first_dim), staticmethod(_gather_along_first_dim)


class _AllGatherFromTensorParallelRegion(_RegionMapping):
    """Forward: all-gather along the last dim. Backward: reduce-scatter along the last dim."""
    forward_op, backward_op = staticmethod(_gather_along_last_dim), staticmethod(_reduce_scatter_along_last_dim)


class _ReduceScatterToTensorParallelRegion(_RegionMapping):
    """Forward: reduce-scatter along the last dim. Backward: all-gather along the last dim."""
    forward_op, backward_op = staticmethod(_reduce_scatter_along_last_dim), staticmethod(_gather_along_last_dim)


class _GatherFromSequenceParallelRegion(Function):
    """Forward: all-gather along the first dim. Backward: reduce-scatter it, or split it when the computation
    after the gather is duplicated on every rank (`tensor_parallel_output_grad=False`)."""

    @staticmethod
    def symbolic(graph, input_, group, tensor_parallel_output_grad=True, output_split_sizes=None,
                 use_global_buffer=False):
        return _gather_along_first_dim(input_, group, output_split_sizes, use_global_buffer)

    @staticmethod
    def forward(ctx, input_, group, tensor_parallel_output_grad=True, output_split_sizes=None,
                use_global_buffer=False):
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        ctx.group, ctx.output_split_sizes, ctx.use_global_buffer = group, output_split_sizes, use_global_buffer
        return _gather_along_first_dim(input_, group, output_split_sizes, use_global_buffer)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.tensor_parallel_output_grad:
            grad = _reduce_scatter_along_first_dim(grad_output, ctx.group, ctx.output_split_sizes,
                                                   ctx.use_global_buffer)
        else:
            grad = _split_along_first_dim(grad_output, ctx.group)
        return grad, None, None, None, None


class _ReduceScatterToSequenceParallelRegion(Function):
    """Forward: reduce-scatter along the first dim. Backward: all-gather along the first dim."""

    @staticmethod
    def symbolic(graph, input_, group, input_split_sizes=None, use_global_buffer=False):
        return _reduce_scatter_along_first_dim(input_, group, input_split_sizes, use_global_buffer)

    @staticmethod
    def forward(ctx, input_, group, input_split_sizes=None, use_global_buffer=False):
        ctx.group, ctx.input_split_sizes, ctx.use_global_buffer = group, input_split_sizes, use_global_buffer
        return _reduce_scatter_along_first_dim(input_, group, input_split_sizes, use_global_buffer)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_first_dim(grad_output, ctx.group, ctx.input_split_sizes, ctx.use_global_buffer), \
            None, None, None


# ---- helpers ------------------------------------------------------------------------------------------
def _size_and_rank(group) -> tuple[int, int]:
    """(size, the calling rank's index) of `group`; None is a world of one (no process group)."""
    if group is None:
        return 1, 0
    rank = group.rank()
    if rank < 0:
        raise ModelParallelError(f"group {group.name} (ranks {list(group.ranks)}) does not hold the calling rank")
    return group.size(), rank


def new_like(input_, shape: tuple[int, ...], suffix: str):
    """An uninitialized tensor of `shape` with the input's dtype, on the input's device."""
    torch = parallel_state.torch_namespace()
    return torch.empty(*shape, dtype=input_.dtype, device=input_.device, name=f"{input_.name}.{suffix}")


def _divide_dim(tensor, dim: int, world_size: int, what: str) -> int:
    size = tensor.shape[dim]
    if size % world_size:
        raise NotDivisibleError(f"{what}: dim {dim} of {tensor.name!r} (shape {tensor.shape}) has size {size}, "
                                f"not divisible by the tensor-parallel size {world_size}")
    return size // world_size


def _equal_splits(split_sizes, keyword: str) -> None:
    if split_sizes is not None:
        raise ModelParallelError(f"{keyword}={split_sizes!r}: unequal splits across the group are not implemented "
                                 "in kernbench.tp; pass None (equal splits)")

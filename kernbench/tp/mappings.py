"""Moving activations into and out of the tensor-parallel region (Megatron's `mappings`).

Each function is named for what it does to the region and says its forward
collective and the backward one Megatron pairs with it. Only the forward
pass is implemented: kernbench simulates inference-style forward steps, and
the backward twins are named so the pairing stays visible.

All of them run in the calling rank's tensor-parallel group, or in the
process group given as `group=` (Megatron's keyword); the sequence-parallel
ones work along the first (sequence) dim. All of them return their input
untouched when the group has one rank: the fast path lives here, not in
callers. Inputs may have any number of dims (Megatron's are
[sequence, batch, hidden]); tensors are contiguous, so "the last dim" and
"the first dim" are plain row-major layouts.

Collectives only concatenate and split along dim 0
(`all_gather_into_tensor`, `reduce_scatter_tensor`), so the last-dim split
and gather change the layout with the Triton `copy_chunks_kernel` of
`kernbench.tp.kernels` on the device: (rows, p x cols) <-> (p x rows, cols).
`reduce_from_tensor_model_parallel_region` reduces in place, as Megatron's
does.
"""

from __future__ import annotations

from kernbench.tp import kernels, parallel_state
from kernbench.tp.errors import ModelParallelError


def copy_to_tensor_model_parallel_region(input_, group=None):
    """Forward: identity (every rank already holds the input). Backward: all-reduce."""
    return input_


def reduce_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-reduce (sum) across the tensor-parallel group, in place. Backward: identity."""
    group, world_size, _ = _group(group)
    if world_size == 1:
        return input_
    parallel_state.get_torch_namespace().distributed.all_reduce(input_, group=group)
    return input_


def scatter_to_tensor_model_parallel_region(input_, group=None):
    """Forward: split the last dim, keep this rank's chunk. Backward: all-gather along the last dim."""
    group, world_size, rank = _group(group)
    if world_size == 1:
        return input_
    width = _divide_dim(input_, -1, world_size, "scatter_to_tensor_model_parallel_region")
    output = _new_like(input_, (*input_.shape[:-1], width), "scattered")
    return kernels.columns_to_chunks(input_, output, n_chunks=1, first_chunk=rank)


def gather_from_tensor_model_parallel_region(input_, group=None):
    """Forward: all-gather along the last dim, in rank order. Backward: split the last dim."""
    group, world_size, _ = _group(group)
    if world_size == 1:
        return input_
    stacked = _all_gather_first_dim(input_, group, world_size)
    output = _new_like(input_, (*input_.shape[:-1], world_size * input_.shape[-1]), "gathered")
    return kernels.chunks_to_columns(stacked, output, n_chunks=world_size)


def reduce_scatter_to_sequence_parallel_region(input_, group=None):
    """Forward: reduce-scatter (sum) along the first dim. Backward: all-gather along the first dim."""
    group, world_size, _ = _group(group)
    if world_size == 1:
        return input_
    rows = _divide_dim(input_, 0, world_size, "reduce_scatter_to_sequence_parallel_region")
    output = _new_like(input_, (rows, *input_.shape[1:]), "reduce_scattered")
    parallel_state.get_torch_namespace().distributed.reduce_scatter_tensor(output, input_, group=group)
    return output


def gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad: bool = True, group=None):
    """Forward: all-gather along the first dim, in rank order. Backward: reduce-scatter along the first dim.

    `tensor_parallel_output_grad` is Megatron's choice of that backward (reduce-scatter or split); forward only here.
    """
    group, world_size, _ = _group(group)
    if world_size == 1:
        return input_
    return _all_gather_first_dim(input_, group, world_size)


def _group(group) -> tuple:
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
    output = _new_like(input_, (world_size * input_.shape[0], *input_.shape[1:]), "gathered_rows")
    parallel_state.get_torch_namespace().distributed.all_gather_into_tensor(output, input_, group=group)
    return output


def _new_like(input_, shape: tuple[int, ...], suffix: str):
    """An uninitialized tensor of `shape` with the input's dtype, on the input's device."""
    torch = parallel_state.get_torch_namespace()
    return torch.empty(*shape, dtype=input_.dtype, device=input_.device, name=f"{input_.name}.{suffix}")


def _divide_dim(tensor, dim: int, world_size: int, what: str) -> int:
    size = tensor.shape[dim]
    if size % world_size:
        raise ModelParallelError(f"{what}: dim {dim} of {tensor.name!r} (shape {tensor.shape}) has size {size}, "
                                 f"not divisible by the tensor-parallel size {world_size}")
    return size // world_size

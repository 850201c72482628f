"""Megatron's `tensor_parallel.utils`: splitting tensors over the tensor-parallel group, and vocabulary ranges.

`split_tensor_into_1d_equal_chunks` and `gather_split_1d_tensor` are the
pair activation checkpointing uses to keep one rank's slice of a saved
activation (`checkpoint(..., distribute_saved_activations=True)`): the flat
elements cut into equal chunks, this rank's kept, all-gathered back later.
`divide` is Megatron's `megatron.core.utils.divide`, which asserts.
"""

from __future__ import annotations

from kernbench.tp import parallel_state
from kernbench.tp.errors import NotDivisibleError
from kernbench.tp.mappings import _size_and_rank, get_tensor_model_parallel_group_if_none


def ensure_divisibility(numerator: int, denominator: int) -> None:
    """Megatron's check that `numerator` is divisible by `denominator`, its words."""
    if numerator % denominator:
        raise NotDivisibleError(f"{numerator} is not divisible by {denominator}")


def divide(numerator: int, denominator: int) -> int:
    """`numerator // denominator`, refused (an `AssertionError`, as Megatron's) where it does not divide."""
    ensure_divisibility(numerator, denominator)
    return numerator // denominator


def split_tensor_along_last_dim(tensor, num_partitions: int, contiguous_split_chunks: bool = False):
    """`num_partitions` equal views along the last dim (contiguous copies with `contiguous_split_chunks`)."""
    chunks = tensor.split(divide(tensor.shape[-1], num_partitions), dim=-1)
    return tuple(chunk.contiguous() for chunk in chunks) if contiguous_split_chunks else chunks


def split_tensor_into_1d_equal_chunks(tensor, new_buffer: bool = False, tp_group=None):
    """This rank's equal part of `tensor`'s flat elements: a view, or a new tensor with `new_buffer`."""
    world_size, rank = _size_and_rank(get_tensor_model_parallel_group_if_none(tp_group))
    size = tensor.numel() // world_size
    part = tensor.reshape(-1)[rank * size:(rank + 1) * size]
    return part.clone() if new_buffer else part


def gather_split_1d_tensor(tensor, tp_group=None):
    """The group's 1-D parts all-gathered in rank order into a new flat tensor (the inverse of the split)."""
    group = get_tensor_model_parallel_group_if_none(tp_group)
    world_size, _ = _size_and_rank(group)
    torch = parallel_state.torch_namespace()
    gathered = torch.empty(tensor.numel() * world_size, dtype=tensor.dtype, device=tensor.device,
                           name=f"{tensor.name}.gathered_1d")
    if world_size == 1:
        return gathered.copy_(tensor.reshape(-1))
    torch.distributed.all_gather_into_tensor(gathered, tensor.contiguous().reshape(-1), group=group)
    return gathered


class VocabUtility:
    """The vocabulary range [first, last) that `rank` of `world_size` holds: equal, consecutive partitions."""

    @staticmethod
    def vocab_range_from_per_partition_vocab_size(per_partition_vocab_size: int, rank: int,
                                                   world_size: int) -> tuple[int, int]:
        first = rank * per_partition_vocab_size
        return first, first + per_partition_vocab_size

    @staticmethod
    def vocab_range_from_global_vocab_size(global_vocab_size: int, rank: int, world_size: int) -> tuple[int, int]:
        return VocabUtility.vocab_range_from_per_partition_vocab_size(divide(global_vocab_size, world_size), rank,
                                                                       world_size)

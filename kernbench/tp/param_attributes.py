"""Megatron's tensor-parallel attributes of a parameter: whether it is a shard, along which dim, with which stride.

Megatron marks each sharded weight (`tensor_model_parallel`,
`partition_dim`, `partition_stride`) so that gradient clipping, the
optimizer and checkpointing know which parameters hold a part and which a
copy; `param_is_not_tensor_parallel_duplicate` is the test they use. The
parallel layers and the embedding mark their weights with these.
"""

from __future__ import annotations

from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError

# Megatron's tensor-parallel attributes of a parameter, and their values on one that is not sharded.
_MODEL_PARALLEL_ATTRIBUTE_DEFAULTS = {"expert_tp": False, "is_qkv": False, "qkv_split_shapes": None,
                                      "tensor_model_parallel": False, "partition_dim": -1, "partition_stride": 1}


def set_tensor_model_parallel_attributes(tensor, is_parallel: bool, dim: int, stride: int) -> None:
    """Mark `tensor` as sharded (`is_parallel`) along `dim` with `stride` (Megatron's `tensor_model_parallel`,
    `partition_dim`, `partition_stride`); a tensor already marked is refused, as Megatron asserts."""
    for attribute in _MODEL_PARALLEL_ATTRIBUTE_DEFAULTS:
        if hasattr(tensor, attribute):
            raise ModelParallelError(f"set_tensor_model_parallel_attributes: {tensor.name!r} already has "
                                     f"{attribute!r}")
    tensor.tensor_model_parallel, tensor.partition_dim, tensor.partition_stride = is_parallel, dim, stride


def set_defaults_if_not_set_tensor_model_parallel_attributes(tensor) -> None:
    """Give `tensor` the unsharded default of every tensor-parallel attribute it does not have."""
    for attribute, value in _MODEL_PARALLEL_ATTRIBUTE_DEFAULTS.items():
        if not hasattr(tensor, attribute):
            setattr(tensor, attribute, value)


def copy_tensor_model_parallel_attributes(destination_tensor, source_tensor) -> None:
    """Copy the tensor-parallel attributes `source_tensor` has onto `destination_tensor`."""
    for attribute in _MODEL_PARALLEL_ATTRIBUTE_DEFAULTS:
        if hasattr(source_tensor, attribute):
            setattr(destination_tensor, attribute, getattr(source_tensor, attribute))


def param_is_not_tensor_parallel_duplicate(param, tp_group=None, expert_tp_group=None) -> bool:
    """Whether `param` counts once across the tensor-parallel group: a shard always, a replicated parameter on
    the group's first rank only (the expert tensor-parallel group's for one marked `allreduce=False`)."""
    if getattr(param, "tensor_model_parallel", False):
        return True
    if not getattr(param, "allreduce", True) and expert_tp_group is not None:
        tp_group = expert_tp_group
    if tp_group is not None:
        return tp_group.rank() == 0
    return parallel_state.get_tensor_model_parallel_rank() == 0


# Megatron's generalized-tensor-parallel (GTP) marks of a parameter; kernbench has no GTP, so they only travel.
_GTP_ATTRIBUTES = ("is_gtp_weight_remat", "allreduce", "gtp_replica_group", "pad_length")


def copy_gtp_attributes(destination, source) -> None:
    """Copy the GTP marks `source` has onto `destination` (a copy of a parameter keeps how it is counted)."""
    for attribute in _GTP_ATTRIBUTES:
        if hasattr(source, attribute):
            setattr(destination, attribute, getattr(source, attribute))


def param_is_not_gtp_duplicate(param) -> bool:
    """Whether `param`'s gradient counts once across the GTP axis: always here, where every GTP group is one rank
    (Megatron's answer with GTP off)."""
    return True

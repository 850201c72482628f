"""Megatron's `tensor_parallel.data`: `broadcast_data`, a batch sent from the first rank of each tensor-parallel
group to the others.

Megatron reads a batch on the tensor-parallel group's first rank only and
broadcasts it: first the shapes (each key's sizes, up to 8 dims, in one
integer tensor), then the values of every key flattened into one tensor of
`datatype`. The other ranks' `data` is not read. Both broadcasts are
device collectives (`torch.distributed.broadcast` from
`get_tensor_model_parallel_src_rank()` in the tensor-parallel group).
"""

from __future__ import annotations

import math

from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError

_MAX_DATA_DIM = 8  # Megatron's limit on a key's number of dims


def broadcast_data(keys, data, datatype):
    """`{key: tensor}` for `keys`, each the tensor-parallel group's first rank's `data[key]` (which must all be
    `datatype`), as views of one flat device tensor of `datatype` on every rank of the group."""
    torch = parallel_state.get_torch_namespace()
    first = parallel_state.get_tensor_model_parallel_rank() == 0
    sizes = _broadcast_sizes(torch, keys, data if first else None)
    total = sum(math.prod(size) for size in sizes.values())
    if first:
        for key in keys:
            if data[key].dtype != datatype:
                raise ModelParallelError(f"broadcast_data: {key} has data type {data[key].dtype} which is different "
                                         f"than {datatype}")
        flat = torch.cat([data[key].contiguous().reshape(-1) for key in keys], dim=0).cuda()
    else:
        flat = torch.empty(total, dtype=datatype, device=torch.cuda.current_device(), name="broadcast_data")
    _broadcast(torch, flat)
    output, offset = {}, 0
    for key in keys:
        numel = math.prod(sizes[key])
        output[key] = flat.narrow(0, offset, numel).view(*sizes[key])
        offset += numel
    return output


def _broadcast_sizes(torch, keys, data) -> dict:
    """Each key's shape, as the first rank's `data` has it (None on the other ranks)."""
    flat_sizes = [0] * (_MAX_DATA_DIM * len(keys))
    if data is not None:
        for index, key in enumerate(keys):
            shape = tuple(data[key].shape)
            if len(shape) >= _MAX_DATA_DIM:
                raise ModelParallelError(f"broadcast_data: {key} has {len(shape)} dims; you should increase "
                                         f"MAX_DATA_DIM ({_MAX_DATA_DIM})")
            flat_sizes[index * _MAX_DATA_DIM:index * _MAX_DATA_DIM + len(shape)] = shape
    sizes_tensor = torch.tensor(flat_sizes, dtype=torch.int64).cuda()
    _broadcast(torch, sizes_tensor)
    received = [int(v) for v in sizes_tensor.cpu().tolist()]
    shapes = {}
    for index, key in enumerate(keys):
        row = received[index * _MAX_DATA_DIM:(index + 1) * _MAX_DATA_DIM]
        shapes[key] = tuple(row[:row.index(0)] if 0 in row else row)
    return shapes


def _broadcast(torch, tensor) -> None:
    if parallel_state.get_tensor_model_parallel_world_size() > 1:
        torch.distributed.broadcast(tensor, parallel_state.get_tensor_model_parallel_src_rank(),
                                    group=parallel_state.get_tensor_model_parallel_group())

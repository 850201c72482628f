"""The members of a collective call: where each rank's data lives and which PE moves it.

Rank per SIP: a rank's buffer is its whole (contiguous) tensor. PE ranks: a
worker driving m of a group's ranks reads one tensor's last dimension as m
equal chunks, chunk j being its j-th rank's buffer (ADR 0012). Either way a
member's program runs on the PE holding its buffer's first element.
"""

from __future__ import annotations

from math import prod

import numpy as np

from kernbench.ccl.collective import Member, Region
from kernbench.ccl.errors import CollectiveError


def check_device_tensor(tensor, call: str) -> None:
    if getattr(tensor, "allocation", None) is None:
        raise CollectiveError(f"{call}: expected a tensor on an ahbm device, got "
                              f"{getattr(tensor, 'name', type(tensor).__name__)!r} on {getattr(tensor, 'device', '?')}")
    if not tensor.is_contiguous():
        raise CollectiveError(f"{call}: tensor {tensor.name!r} is not contiguous (strides {tensor.stride()}); "
                              "collectives take contiguous tensors, as NCCL's do: pass tensor.contiguous()")


def whole(tensor) -> Region:
    first = tensor.storage_offset()
    return Region(tensor.allocation, tensor.dtype.numpy, range(first, first + tensor.numel()))


def chunks(tensor, n: int, kind: str) -> list[Region]:
    """Chunk r of the last dimension, for r in 0..n-1, as regions in logical order."""
    shape = tensor.shape or (1,)
    last = shape[-1]
    if last % n:
        raise CollectiveError(f"{kind}: tensor {tensor.name!r} of shape {tuple(tensor.shape)} has a last dimension "
                              f"of {last}, which does not split into {n} equal chunks (one per PE rank)")
    width = last // n
    rows = prod(shape) // last if last else 1
    first = tensor.storage_offset()
    if rows == 1:  # one row: each chunk is a contiguous run
        return [Region(tensor.allocation, tensor.dtype.numpy, range(first + r * width, first + (r + 1) * width))
                for r in range(n)]
    grid = np.arange(first, first + prod(shape), dtype=np.int64).reshape(rows, last)
    return [Region(tensor.allocation, tensor.dtype.numpy, np.ascontiguousarray(grid[:, r * width:(r + 1) * width])
                   .reshape(-1)) for r in range(n)]


def member(group_rank: int, tensor, source: Region, target: Region) -> Member:
    """The member whose program runs on the PE holding the first element of its input."""
    placement = tensor.placement
    first = source.elements(0, 1) if source.count else np.zeros(1, dtype=np.int64)
    shard = placement.shards[int(placement.owners(first)[0])]
    return Member(group_rank, tensor.device.index, shard.cube, shard.pe, source, target)


def check_own_pes(members: list[Member], tensor, kind: str) -> None:
    """Each PE rank needs a PE of its own: the queues of a collective join two different PEs."""
    holders = {}
    for m in members:
        if (m.cube, m.pe) in holders:
            raise CollectiveError(
                f"{kind}: chunks {holders[m.cube, m.pe]} and {m.rank} of tensor {tensor.name!r} (one per PE rank) both "
                f"start on cube {m.cube} PE {m.pe}, but each PE rank needs a PE of its own; place the tensor's last "
                f"dimension over {len(members)} PEs, e.g. dp=torch.distributed.pe_rank_policy()")
        holders[m.cube, m.pe] = m.rank

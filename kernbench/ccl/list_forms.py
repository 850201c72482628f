"""The list forms of the collectives (`all_gather(tensor_list, ...)`, `scatter`, `gather`, `all_to_all`, ...).

The collectives move one contiguous buffer per rank. A list of tensors is
made into one the way PyTorch's NCCL process group does it for
`all_gather` and `reduce_scatter`: a flat scratch tensor on the rank's
device, filled by device copies before the collective or copied out of it
after. The copies are real device work on the calling rank's current
stream, timed like any copy, so a list form costs what it costs there.
"""

from __future__ import annotations

from kernbench.ccl.errors import CollectiveError
from kernbench.runtime_api.namespace.factories import Factories


class FlatLists:
    """The list forms of one group of `n` ranks, each rank driven by a worker of its own."""

    def __init__(self, ctx, n: int):
        self.ctx, self.n = ctx, n

    def check(self, tensors, like, call: str, what: str, *, equal: bool = True) -> list:
        """`tensors` as a list of n tensors of `like`'s dtype and device (and, with `equal`, its size)."""
        return check_list(tensors, self.n, like, call, what, equal=equal)

    def scratch(self, like, count: int, call: str):
        """A flat tensor of `count` elements of `like`'s dtype on its device, for one list-form call."""
        return Factories(self.ctx).empty(count, dtype=like.dtype, device=like.device, name=f"{call} buffer")

    def pack(self, flat, tensors, root: int | None = None) -> None:
        """Copy `tensors` one after another into `flat` (enqueued on the current stream); `root` is only
        read by PE ranks, where a worker packs for every rank it drives."""
        offset = 0
        for tensor in tensors:
            count = tensor.numel()
            if count:
                flat[offset:offset + count].copy_(tensor.reshape(-1), non_blocking=True)
            offset += count

    def unpack(self, flat, tensors, root: int | None = None) -> list:
        """Copy consecutive runs of `flat` into `tensors` (enqueued); the copies' completion handles."""
        handles, offset = [], 0
        for tensor in tensors:
            count = tensor.numel()
            if count:
                # A collective writes its outputs outside autograd, as c10d does: a parameter may receive one.
                tensor.detach().copy_(flat[offset:offset + count].view(tuple(tensor.shape)), non_blocking=True)
                handles.append(tensor._pending_writes[-1])
            offset += count
        return handles


def check_list(tensors, size: int, like, call: str, what: str, *, equal: bool = True) -> list:
    """`tensors` as a list of `size` tensors of `like`'s dtype and device (and, with `equal`, its size)."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != size:
        got = f"{len(tensors)} tensors" if isinstance(tensors, (list, tuple)) else repr(tensors)
        raise CollectiveError(f"{call}: {what} must be a list of {size} tensors, one per rank of the group; "
                              f"got {got}")
    for index, tensor in enumerate(tensors):
        problem = None
        if getattr(tensor, "dtype", None) != like.dtype:
            kind = getattr(getattr(tensor, "dtype", None), "name", type(tensor).__name__)
            problem = f"is {kind}, not {like.dtype.name}"
        elif tensor.device != like.device:
            problem = f"is on {tensor.device}, not {like.device}"
        elif equal and tensor.numel() != like.numel():
            problem = f"has {tensor.numel()} elements, not {like.numel()}"
        if problem:
            raise CollectiveError(f"{call}: {what}[{index}] {problem}")
    return list(tensors)

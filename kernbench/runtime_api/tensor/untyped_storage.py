"""`Tensor.untyped_storage()`: the bytes a tensor and all its views share, as PyTorch's `UntypedStorage`.

PyTorch code reaches a storage to identify memory (`data_ptr()`: do two
tensors share bytes?), to measure it (`size()`, `nbytes()`) and to give it
back while tensors still view it: Megatron's `CheckpointWithoutOutput` calls
`output.untyped_storage().resize_(0)` to free a discarded output until its
recomputation. Here a device tensor's storage is its HBM allocation, shared
by every view of it, so a resize is seen through all of them:

- `resize_(0)` gives the allocation's HBM back (`torch.ahbm.memory_allocated`
  drops by its bytes; the views keep their shape; work enqueued before still
  reads the values, as stream order lets it on a GPU, and an op or a host
  read of a view after it is one line, as PyTorch refuses it), and
  `resize_(n)` to the size it had charges it again, at a new address, its
  values uninitialized, as a resized CUDA storage's are. Other sizes are
  refused: a storage's bytes are laid out over the cubes by its tensor's
  placement, which fixes their number.
- `share_storage(tensor, source)` points a tensor's released storage at
  another tensor's bytes, charged once, the source kept alive while the
  tensor lives (what Megatron's zero-copy recomputation does in C++).

A host tensor's storage has its size and address; it is not resized.
"""

from __future__ import annotations

from kernbench.runtime_api.errors import TensorError


class UntypedStorage:
    """The storage of `tensor` (and of every view sharing its bytes): sizes in bytes, as PyTorch's."""

    def __init__(self, tensor):
        self._tensor = tensor

    @property
    def device(self):
        return self._tensor.device

    @property
    def is_cuda(self) -> bool:
        return not self._tensor.device.is_host

    def size(self) -> int:
        """The storage's bytes (0 once resized to 0)."""
        allocation = self._tensor.allocation
        if allocation is None:
            return self._tensor._host_storage.nbytes
        return allocation.nbytes

    nbytes = size
    __len__ = size

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        """The address of the storage's first byte (0 while it holds none), whatever view it came from."""
        allocation = self._tensor.allocation
        if allocation is None:
            return self._tensor._host_storage.ctypes.data
        return allocation.base if allocation.nbytes else 0

    def resize_(self, size: int) -> "UntypedStorage":
        """To 0: its HBM goes back. To the size it had: charged again, values uninitialized."""
        tensor = self._tensor
        allocation = tensor.allocation
        if allocation is None:
            raise TensorError(f"untyped_storage().resize_({size}) of {tensor.name!r}: kernbench resizes the storages "
                              "of device tensors only")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise TensorError(f"untyped_storage().resize_({size!r}) of {tensor.name!r}: expected a size in bytes >= 0")
        memory = tensor._ctx.machine.memory[allocation.sip]
        if size == allocation.nbytes:
            return self
        if size == 0:
            memory.release(allocation)
        elif allocation.nbytes == 0 and size == allocation.size_when_made:
            memory.restore(allocation)
        else:
            raise TensorError(f"untyped_storage().resize_({size}) of {tensor.name!r} ({allocation.nbytes} bytes): "
                              f"kernbench resizes a storage to 0 and back to its {allocation.size_when_made} bytes "
                              "only (its placement over the cubes fixes its size)")
        return self

    def __repr__(self) -> str:
        return f"UntypedStorage({self.size()} bytes on {self.device}, of {self._tensor.name!r})"


def share_storage(tensor, source) -> None:
    """`tensor`'s released storage (resized to 0) becomes `source`'s bytes, for `tensor` and every view of it;
    the bytes are charged once and go back when both tensors are gone."""
    allocation, given = tensor.allocation, source.allocation
    if allocation is None or given is None or allocation.nbytes or given.nbytes != allocation.size_when_made:
        raise TensorError(f"share_storage({tensor.name!r}, {source.name!r}): expected a released device storage and "
                          "a device tensor's storage of the bytes it had")
    tensor._ctx.machine.memory[allocation.sip].share(allocation, given, keeps=source)
    tensor._pending_writes.extend(source._pending_writes)  # a host read through any view waits for them

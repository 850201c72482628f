"""A tensor whose storage was resized to 0 (`untyped_storage().resize_(0)`), used: one line, as PyTorch refuses it.

The storage gave its HBM back and holds no values until it is resized to
its size or given bytes again; an op or a host read of a tensor viewing it
would otherwise see what the bytes held before. Checked only while such a
storage exists (`machine.memory.RELEASED`), so other runs pay one test of an
empty set per op.
"""

from __future__ import annotations

from kernbench.machine.memory import RELEASED
from kernbench.runtime_api.errors import TensorError


def check_storages(values, call: str) -> None:
    """Refuse `call` when a tensor among `values` (or in a list or tuple among them) views a released storage."""
    if not RELEASED:
        return
    for value in values:
        for item in value if type(value) in (list, tuple) else (value,):
            allocation = getattr(item, "allocation", None)
            if allocation is not None and allocation in RELEASED and item.numel():
                raise TensorError(f"{call}: tensor {item.name!r} (shape {tuple(item.shape)}, {item.dtype.name}) "
                                  f"views a storage of size 0: untyped_storage().resize_(0) gave its memory back; "
                                  f"resize it to its {allocation.size_when_made} bytes before using the tensor")

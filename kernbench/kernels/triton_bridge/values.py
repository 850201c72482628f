"""`Value`: what a `tl.tensor` holds while a kernel runs on the bridge.

Triton's language layer treats a tensor's `handle` as opaque and passes it
back to the builder, so the bridge chooses its shape: a numpy array, the
scalar Triton dtype of its elements (a `pointer_type` for pointers, whose
data are int64 virtual byte addresses) and a `poisoned` flag. In timing-only
mode every value derived from memory contents is poisoned: its data is a
`placeholder` (nothing derived from memory is computed), and the bridge
refuses to let it decide anything the timeline depends on — a branch or loop
bound (`patches`), an address or a mask (`builder`).
Scalars are one-element arrays, as in Triton's own interpreter.

A pointer value also carries its `origin` when the bridge knows it: the
kernel argument (a kernbench tensor) it was computed from, with the bytes
that tensor's allocation spans. Pointer arithmetic, splats, broadcasts and
reshapes keep it; a `where` between pointers of two origins, or a pointer
made from an integer (`int_to_ptr`, a pointer loaded from memory), has none.
The memcheck (`builder`) holds every access through a pointer with an
origin to that allocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the port's helpers here are used where no kernel runs, and Triton is not loaded for them
    import triton.language as tl

# Per process, not per run (`kernbench.run_caches`): one read-only zero per dtype, the same in every run.
_ZERO: dict[np.dtype, np.ndarray] = {}


def placeholder(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A read-only array of zeros standing in for a poisoned value: no memory, no arithmetic.

    Zeros, not garbage, so that a stand-in reaching a port or a print is the
    same value every run (the runtime's timing-only loads also return zeros).
    """
    zero = _ZERO.get(dtype)
    if zero is None:
        zero = _ZERO[dtype] = np.zeros(1, dtype)
        zero.flags.writeable = False
    return np.ndarray(shape, dtype, zero, 0, (0,) * len(shape))


class Origin:
    """Where a pointer comes from: kernel argument `argument`, in tensor `tensor`'s allocation [base, end)."""

    __slots__ = ("argument", "tensor", "base", "end")

    def __init__(self, argument: str, tensor: str, base: int, nbytes: int) -> None:
        self.argument = argument
        self.tensor = tensor
        self.base = base
        self.end = base + nbytes

    def __repr__(self) -> str:
        return f"Origin({self.argument!r}, {self.tensor!r}, {self.base:#x}, {self.end - self.base})"


def same_origin(*values) -> Origin | None:
    """The origin every value shares, or None."""
    origin = values[0].origin
    for value in values[1:]:
        if value.origin is not origin:
            return None
    return origin


class Value:
    """One tensor's data, element dtype and provenance (poisoned; a pointer's origin)."""

    __slots__ = ("data", "dtype", "poisoned", "origin")

    def __init__(self, data: np.ndarray, dtype: tl.dtype, poisoned: bool = False, origin: Origin | None = None) -> None:
        self.data = data
        self.dtype = dtype
        self.poisoned = poisoned
        self.origin = origin

    def __repr__(self) -> str:
        mark = ", poisoned" if self.poisoned else ""
        origin = f", from {self.origin.argument!r}" if self.origin is not None else ""
        return f"Value({self.data!r}, {self.dtype}{mark}{origin})"


def all_set(mask: np.ndarray) -> bool:
    """Whether every lane of a boolean `mask` is set.

    A mask is usually a broadcast view of a much smaller array; when the
    array it views is all set, so is the view, which is one small reduction.
    """
    base = mask.base
    if base is not None and base.__class__ is np.ndarray and base.dtype == mask.dtype and base.all():
        return True
    return bool(mask.all())

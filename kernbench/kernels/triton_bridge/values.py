"""`Value`: what a `tl.tensor` holds while a kernel runs on the bridge.

Triton's language layer treats a tensor's `handle` as opaque and passes it
back to the builder, so the bridge chooses its shape: a numpy array, the
scalar Triton dtype of its elements (a `pointer_type` for pointers, whose
data are int64 virtual byte addresses) and a `poisoned` flag. In timing-only
mode every value derived from memory contents is poisoned, and the bridge
refuses to turn a poisoned value into a Python decision (see `refusals`).
Scalars are one-element arrays, as in Triton's own interpreter.
"""

from __future__ import annotations

import numpy as np
import triton.language as tl


class Value:
    """One tensor's data, element dtype and provenance."""

    __slots__ = ("data", "dtype", "poisoned")

    def __init__(self, data: np.ndarray, dtype: tl.dtype, poisoned: bool = False) -> None:
        self.data = data
        self.dtype = dtype
        self.poisoned = poisoned

    def __repr__(self) -> str:
        mark = ", poisoned" if self.poisoned else ""
        return f"Value({self.data!r}, {self.dtype}{mark})"

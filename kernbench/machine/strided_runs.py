"""A block of a matrix in flat storage, named by its corner rather than by an index array.

A GEMM program moves blocks of its operands: `count` rows of `width`
elements, `stride` elements apart. Spelled as an index array, such a block
costs a pass over every element each time it is placed, tagged or checked,
which made a large matmul's simulation O(its elements) in bookkeeping alone.
`StridedRuns` names the same elements in O(1) — a selector the placed DMAs,
the storage, the L2 and the hazard detector take beside a slice (one run) and
an index array (anything else) — and is expanded only where values move,
as a strided view of the storage, never as indices.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided


class StridedRuns(NamedTuple):
    """Flat elements `start + r·stride + c` for r < count, c < width, in that (row-major) order; rows do not
    overlap (stride >= width >= 1)."""

    start: int
    stride: int
    count: int
    width: int

    @property
    def size(self) -> int:
        return self.count * self.width

    @property
    def stop(self) -> int:
        """One past the last element."""
        return self.start + (self.count - 1) * self.stride + self.width

    def indices(self) -> np.ndarray:
        """The elements as an index array (for a rule that has no strided form)."""
        return (self.start + np.arange(self.count, dtype=np.int64)[:, None] * self.stride
                + np.arange(self.width, dtype=np.int64)[None, :]).reshape(-1)

    def view(self, flat: np.ndarray) -> np.ndarray:
        """The elements of `flat` (a 1-D array over the storage) as a (count, width) view, writable when
        `flat` is."""
        item = flat.strides[0]
        return as_strided(flat[self.start:], shape=(self.count, self.width), strides=(self.stride * item, item))

    def within(self, first: int, stop: int) -> list[tuple[slice, "StridedRuns | slice"]]:
        """The elements in the flat range [first, stop): (lanes of this selector they are, the elements), as at
        most three pieces in order — the partial row the range starts in, the whole rows, the partial row
        it ends in — each piece a slice when it is one run."""
        pieces = []
        row = max(0, (first - self.start) // self.stride)
        while row < self.count:
            row_start = self.start + row * self.stride
            if row_start >= stop:
                break
            lo, hi = max(first, row_start), min(stop, row_start + self.width)
            if lo >= hi:
                row += 1
                continue
            if lo == row_start and hi == row_start + self.width:
                # Whole rows from here for as long as every one lies in the range.
                rows = min(self.count - row, (stop - self.width - row_start) // self.stride + 1)
                lanes = slice(row * self.width, (row + rows) * self.width)
                pieces.append((lanes, runs_or_slice(row_start, self.stride, rows, self.width)))
                row += rows
                continue
            lanes = slice(row * self.width + lo - row_start, row * self.width + hi - row_start)
            pieces.append((lanes, slice(lo, hi)))
            row += 1
        return pieces


def runs_or_slice(start: int, stride: int, count: int, width: int) -> StridedRuns | slice:
    """The elements of `StridedRuns(start, stride, count, width)` as a slice when they are one run."""
    if count == 1 or stride == width:
        return slice(start, start + (count - 1) * stride + width)
    return StridedRuns(start, stride, count, width)


def gather(flat: np.ndarray, selector) -> np.ndarray:
    """A copy of the elements `selector` (a slice, an index array or `StridedRuns`) of `flat`, in order: taken
    now, so a write landing later does not show through a view."""
    if isinstance(selector, StridedRuns):
        return selector.view(flat).flatten()
    values = flat[selector]
    return values.copy() if isinstance(selector, slice) else values


def scatter(flat: np.ndarray, selector, values: np.ndarray) -> None:
    """`values` into the elements `selector` of `flat`, in order."""
    if isinstance(selector, StridedRuns):
        selector.view(flat)[...] = values.reshape(selector.count, selector.width)
    else:
        flat[selector] = values


def element_bounds(selector) -> tuple[int, int]:
    """[first, stop) of the elements a non-empty selector names."""
    if isinstance(selector, (slice, StridedRuns)):
        return selector.start, selector.stop
    return int(selector.min()), int(selector.max()) + 1

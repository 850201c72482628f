"""Boxes of a row-major tensor: where the elements of `index` (one slice per axis) lie in memory.

Placement shards, copies and fills address a tensor by boxes; the data
executor and the storage address it by flat element offsets. This is the one
translation between the two.
"""

from __future__ import annotations


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a contiguous row-major layout, as torch reports them."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def box_span(shape: tuple[int, ...], index: tuple[slice, ...]) -> tuple[int, int, bool]:
    """(first, stop, contiguous): flat offsets [first, stop) covering the box, and whether it fills them.

    Row-major, a box is contiguous when every axis before its last partial
    axis holds a single index. An empty box is (0, 0, True).
    """
    extents = [s.stop - s.start for s in index]
    if any(extent <= 0 for extent in extents):
        return 0, 0, True
    strides = row_major_strides(shape)
    first = sum(s.start * stride for s, stride in zip(index, strides))
    last = sum((s.stop - 1) * stride for s, stride in zip(index, strides))
    partial = [axis for axis, (extent, n) in enumerate(zip(extents, shape)) if extent != n]
    contiguous = not partial or all(extents[axis] == 1 for axis in range(partial[-1]))
    return first, last + 1, contiguous

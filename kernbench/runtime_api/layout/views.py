"""Views: how a tensor's elements sit in its storage — shape, strides and offset — and torch's view rules.

A tensor is a `Layout` over a flat storage of elements (adr/0015-views.md):
element `(i0, i1, ...)` is storage element `offset + i0*s0 + i1*s1 + ...`.
Every view operation (`view`, `reshape`, `permute`, `transpose`, `expand`,
`narrow`, `squeeze`, `unsqueeze`, basic indexing, `chunk`, `split`,
`unbind`) is a function from one layout to another, written here once for
host and device tensors alike, with PyTorch's rules: `view` never copies and
refuses what no strides can express; `reshape` views when `view` can and
otherwise says a copy is needed. The data motion a copy implies is the
runtime's (copies.py); this module never touches a byte.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from math import prod

import numpy as np

from kernbench.runtime_api.layout.boxes import row_major_strides
from kernbench.runtime_api.errors import DimensionError, TensorError


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a tensor's elements are: `offset + sum(index[d] * strides[d])`, in storage elements."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def contiguous(cls, shape: tuple[int, ...], offset: int = 0) -> "Layout":
        return cls(tuple(shape), row_major_strides(tuple(shape)), offset)

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def is_contiguous(self) -> bool:
        """torch's rule: row-major strides, where dimensions of size 1 may have any stride."""
        expected = 1
        for n, stride in zip(reversed(self.shape), reversed(self.strides)):
            if n == 1:
                continue
            if stride != expected:
                return False
            expected *= n
        return True

    def selector(self) -> slice | np.ndarray:
        """The storage elements in logical (row-major) order: a slice when contiguous, else their indices."""
        if self.is_contiguous():
            return slice(self.offset, self.offset + self.numel)
        return self.indices().reshape(-1)

    def indices(self) -> np.ndarray:
        """Storage element of every logical element, as an array of this layout's shape."""
        grid = np.full((), self.offset, dtype=np.int64)
        for n, stride in zip(self.shape, self.strides):
            grid = grid[..., None] + np.arange(n, dtype=np.int64) * stride
        return grid

    def span(self) -> tuple[int, int]:
        """[lo, hi) storage elements that hold every element of the view (empty: (offset, offset))."""
        if not self.numel:
            return self.offset, self.offset
        lo = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0)
        hi = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0) + 1
        return lo, hi


def wrap_dim(dim: int, ndim: int, call: str) -> int:
    """A dimension index wrapped as torch wraps it (-1 is the last; a 0-d tensor takes 0 and -1); out of range is
    torch's `IndexError` with torch's words, never a silent wrap-around. The one place a dim is checked."""
    extent = max(ndim, 1)
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TensorError(f"{call}: dimension must be an integer, got {dim!r}") from None
    if not -extent <= dim < extent:
        raise DimensionError(f"Dimension out of range (expected to be in range of [{-extent}, {extent - 1}], "
                             f"but got {dim})")
    return dim % extent


def infer_shape(shape, numel: int, call: str) -> tuple[int, ...]:
    """A requested shape with at most one -1 filled in from `numel`."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(operator.index(n) for n in shape)
    unknown = [d for d, n in enumerate(shape) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in shape):
        raise TensorError(f"{call}: invalid shape {shape}")
    if unknown:
        known = prod(n for n in shape if n != -1)
        if known == 0 or numel % known:
            raise TensorError(f"{call}: shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if n == -1 else n for n in shape)
    if prod(shape) != numel:
        raise TensorError(f"{call}: shape {shape} is invalid for input of size {numel}")
    return shape


def view(layout: Layout, shape: tuple[int, ...]) -> Layout | None:
    """`layout` seen with `shape` without moving data, or None where no strides can say it (torch's rule).

    Dimensions are grouped into runs that are contiguous with each other in
    the input; each run of the output must fit inside one such run.
    """
    if layout.numel == 0 or layout.is_contiguous():
        return Layout.contiguous(shape, layout.offset)
    old = [(n, s) for n, s in zip(layout.shape, layout.strides) if n != 1]
    strides = [0] * len(shape)
    out = len(shape) - 1
    chunk, inner = 1, 0  # elements and innermost stride of the current input run, walking outwards
    for position in range(len(old) - 1, -1, -1):
        n, stride = old[position]
        if chunk == 1:
            inner = stride
        chunk *= n
        if position > 0 and old[position - 1][1] == n * stride:
            continue  # the next outer dimension continues this run
        base, remaining = inner, chunk
        while out >= 0 and (remaining > 1 or shape[out] == 1):
            if remaining % shape[out]:
                return None
            strides[out] = base
            base *= shape[out]
            remaining //= shape[out]
            out -= 1
        if remaining != 1:
            return None
        chunk = 1
    while out >= 0:  # leading dimensions of size 1
        if shape[out] != 1:
            return None
        strides[out] = 1
        out -= 1
    return Layout(tuple(shape), tuple(strides), layout.offset)


def permute(layout: Layout, dims) -> Layout:
    dims = tuple(wrap_dim(d, len(layout.shape), "permute") for d in dims)
    if sorted(dims) != list(range(len(layout.shape))):
        raise TensorError(f"permute: dims {dims} are not a permutation of 0..{len(layout.shape) - 1}")
    return Layout(tuple(layout.shape[d] for d in dims), tuple(layout.strides[d] for d in dims), layout.offset)


def transpose(layout: Layout, a: int, b: int) -> Layout:
    a, b = wrap_dim(a, len(layout.shape), "transpose"), wrap_dim(b, len(layout.shape), "transpose")
    if not layout.shape:
        return layout
    order = list(range(len(layout.shape)))
    order[a], order[b] = order[b], order[a]
    return permute(layout, order)


def expand(layout: Layout, sizes) -> Layout:
    """Broadcast to `sizes` (-1 keeps a dimension): new or size-1 dimensions get stride 0."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    lead = len(sizes) - len(layout.shape)
    if lead < 0:
        raise TensorError(f"expand: {len(sizes)} sizes for a tensor of {len(layout.shape)} dimensions")
    shape, strides = [], []
    for d, size in enumerate(sizes):
        if d < lead:
            if size < 0:
                raise TensorError(f"expand: size -1 is not allowed for a new leading dimension {d}")
            shape.append(size)
            strides.append(0)
            continue
        n, stride = layout.shape[d - lead], layout.strides[d - lead]
        if size == -1 or size == n:
            shape.append(n)
            strides.append(stride)
        elif n == 1:
            shape.append(size)
            strides.append(0)
        else:
            raise TensorError(f"expand: the size of dimension {d} ({n}) must match {size} or be 1")
    return Layout(tuple(shape), tuple(strides), layout.offset)


def narrow(layout: Layout, dim: int, start: int, length: int) -> Layout:
    dim = wrap_dim(dim, len(layout.shape), "narrow")
    n = layout.shape[dim]
    start = start + n if start < 0 else start
    if not (0 <= start <= n and 0 <= length <= n - start):
        raise TensorError(f"narrow: start {start} and length {length} exceed dimension {dim} of size {n}")
    shape = layout.shape[:dim] + (length,) + layout.shape[dim + 1:]
    return Layout(shape, layout.strides, layout.offset + start * layout.strides[dim])


def select(layout: Layout, dim: int, index: int) -> Layout:
    dim = wrap_dim(dim, len(layout.shape), "select")
    n = layout.shape[dim]
    if not -n <= index < n:
        raise DimensionError(f"index {index} is out of bounds for dimension {dim} with size {n}")
    index %= n
    return Layout(layout.shape[:dim] + layout.shape[dim + 1:], layout.strides[:dim] + layout.strides[dim + 1:],
                  layout.offset + index * layout.strides[dim])


def squeeze(layout: Layout, dim=None) -> Layout:
    if dim is None:
        keep = [d for d, n in enumerate(layout.shape) if n != 1]
    else:
        dims = {wrap_dim(d, len(layout.shape), "squeeze") for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        keep = [d for d, n in enumerate(layout.shape) if not (d in dims and n == 1)]
    return Layout(tuple(layout.shape[d] for d in keep), tuple(layout.strides[d] for d in keep), layout.offset)


def unsqueeze(layout: Layout, dim: int) -> Layout:
    dim = wrap_dim(dim, len(layout.shape) + 1, "unsqueeze")
    stride = layout.strides[dim] * layout.shape[dim] if dim < len(layout.shape) else 1
    return Layout(layout.shape[:dim] + (1,) + layout.shape[dim:], layout.strides[:dim] + (stride,) + layout.strides[dim:],
                  layout.offset)


def split_sizes(n: int, split_size_or_sections, call: str) -> list[int]:
    """torch.split's sizes: an int is the size of each piece (the last may be smaller); a list is exact."""
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [operator.index(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise TensorError(f"{call}: sizes {sizes} do not add up to the dimension's size {n}")
        return sizes
    size = operator.index(split_size_or_sections)
    if size <= 0:
        raise TensorError(f"{call}: split size must be positive, got {size}")
    return [min(size, n - start) for start in range(0, n, size)] or [0]


def chunk_sizes(n: int, chunks: int) -> list[int]:
    """torch.chunk: pieces of ceil(n / chunks), so there may be fewer than `chunks`."""
    if chunks <= 0:
        raise TensorError(f"chunk: chunks must be positive, got {chunks}")
    return split_sizes(n, max(1, -(-n // chunks)), "chunk")


def basic_index(layout: Layout, key) -> Layout | None:
    """The view `tensor[key]` for ints, slices (step > 0), None and Ellipsis; None when `key` is advanced."""
    items = key if isinstance(key, tuple) else (key,)
    if any(not (isinstance(k, (slice, type(None), type(Ellipsis))) or _is_int(k)) for k in items):
        return None
    specified = sum(1 for k in items if k is not None and k is not Ellipsis)
    if specified > len(layout.shape):
        raise TensorError(f"too many indices for tensor of dimension {len(layout.shape)}")
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise TensorError("an index can only have a single ellipsis ('...')")
    rest = [slice(None)] * (len(layout.shape) - specified)
    expanded = []
    for k in items:
        expanded.extend(rest if k is Ellipsis else [k])
    if not any(k is Ellipsis for k in items):
        expanded.extend(rest)
    shape, strides, offset, dim = [], [], layout.offset, 0
    for k in expanded:
        if k is None:  # torch gives the new dimension unsqueeze's stride at this point of the source
            shape.append(1)
            strides.append(layout.strides[dim] * layout.shape[dim] if dim < len(layout.shape) else 1)
            continue
        n, stride = layout.shape[dim], layout.strides[dim]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step <= 0:
                raise TensorError("step must be greater than zero (torch has no negative-step slices)")
            shape.append(len(range(start, stop, step)))
            strides.append(stride * step)
            offset += start * stride if shape[-1] else 0
        else:
            index = operator.index(k)
            if not -n <= index < n:
                raise DimensionError(f"index {index} is out of bounds for dimension {dim} with size {n}")
            offset += (index % n) * stride
        dim += 1
    return Layout(tuple(shape), tuple(strides), offset)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

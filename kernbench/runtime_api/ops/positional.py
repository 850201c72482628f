"""Device values that are a function of each element's position: the classes of a one-hot (an iota, torch.arange
made on the device) and the triangle masks of `tril`, `triu` and causal attention.

Each is a device fill as `device_ops.generate`'s: one vector pass and a
store per tile, no load. The values of a tile are worked out from the flat
positions it covers, so they do not depend on the order the tiles run in.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import DType, bool_, int64
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.layout.copies import as_called
from kernbench.runtime_api.ops.device_ops import run_tiles, storage_indices, tile_elements
from kernbench.runtime_api.ops.elementwise import masked_fill, result_maker


def positional_fill(name: str, shape: tuple, dtype: DType, like, values_at):
    """A new tensor of `shape` on `like`'s device whose element at flat position i is `values_at(i)` (vectorized
    over an array of positions)."""
    out = result_maker((like,))(tuple(shape), dtype, like.device, name)
    numel = out.numel()
    if out.device.is_host:
        out._host_array[...] = np.asarray(values_at(np.arange(numel))).reshape(out.shape)
        return out
    if numel == 0:
        return out
    result, out = out, as_called(out)  # the programs run later, on the tensor as it is now
    per_tile = tile_elements(out._ctx, dtype.itemsize)

    def program(p) -> None:
        first, last = p.number * per_tile, min(numel, (p.number + 1) * per_tile)
        p.vector(name, last - first, dtype)
        tile = values_at(np.arange(first, last)) if p.data else np.empty(last - first, dtype=dtype.numpy)
        p.store(out, storage_indices(out._layout, out.shape, first, last), np.asarray(tile))

    run_tiles(out._ctx, [], out, -(-numel // per_tile), name, program)
    return result


def iota(like, count: int, dtype: DType = int64):
    """0, 1, …, count − 1 on `like`'s device (what torch.arange is on a GPU: a kernel writing its positions)."""
    return positional_fill("iota", (count,), dtype, like, lambda positions: positions.astype(dtype.numpy))


def triangle(like, rows: int, cols: int, diagonal: int, lower: bool, name: str):
    """The (rows, cols) bool mask of the lower (`lower`) or upper triangle from `diagonal` on, on `like`'s device."""
    def values_at(positions):
        above = positions % cols - positions // cols  # column − row: 0 on the main diagonal
        return above <= diagonal if lower else above >= diagonal
    return positional_fill(name, (rows, cols), bool_, like, values_at)


def tril(x, diagonal: int = 0):
    """The lower triangle of the last two dims from `diagonal` down, zeros above: a triangle mask, then a
    masked fill (two vector passes)."""
    return _keep_triangle(x, diagonal, lower=True, name="tril")


def triu(x, diagonal: int = 0):
    """The upper triangle of the last two dims from `diagonal` up, zeros below: a triangle mask, then a masked
    fill."""
    return _keep_triangle(x, diagonal, lower=False, name="triu")


def _keep_triangle(x, diagonal: int, lower: bool, name: str):
    if x.ndim < 2:
        raise TensorError(f"{name}: input tensor must have at least 2 dimensions")
    outside = triangle(x, x.shape[-2], x.shape[-1], diagonal + 1 if lower else diagonal - 1, not lower, name)
    return masked_fill(x, outside, 0)


def one_hot(tensor, num_classes: int = -1):
    """int64 of `tensor`'s shape plus a last dim of `num_classes`: 1 at each value's class, compared with an iota
    of the classes (`num_classes=-1` reads the largest value to the host, as torch's does)."""
    if tensor.dtype.is_floating_point:
        raise TensorError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes < 0:
        num_classes = int(tensor.amax().item()) + 1 if tensor.numel() else 0
    return (tensor.unsqueeze(-1) == iota(tensor, num_classes, tensor.dtype)).to_dtype(int64)

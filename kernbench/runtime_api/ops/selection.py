"""Ops that read whole rows along one dimension and write a few values per row: `topk` and `multinomial`.

Each program takes a group of rows (or one row, in TCM-sized chunks when a
row is longer than a tile), loads them, runs one vector pass per chunk and
stores its results, as a selection kernel does; the values are numpy's
selection over what the loads saw. Neither op has a derivative here.
"""

from __future__ import annotations

from math import prod

import numpy as np

from kernbench.dtypes import int64
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.launch.kernel_launch import launch_programs
from kernbench.runtime_api.layout.views import wrap_dim
from kernbench.runtime_api.ops.device_ops import Program, storage_indices, tile_elements
from kernbench.runtime_api.ops.elementwise import result_maker
from kernbench.runtime_api.ops.reductions import ValuesIndices


def row_op(name: str, x, dim: int, width: int, dtypes, pick):
    """Outputs of `dtypes`, each `x`'s shape with `dim` of size `width`: `pick(rows)` maps an (r, n) array of
    rows along `dim` to one (r, width) array per output."""
    moved = x.detach().movedim(dim, -1)
    n, lead = moved.shape[-1], moved.shape[:-1]
    rows = prod(lead)
    outs = [result_maker((x,))(lead + (width,), dtype, x.device, name) for dtype in dtypes]
    if x.device.is_host:
        for out, values in zip(outs, pick(moved._host_array.reshape(rows, n))):
            out._host_array[...] = values.reshape(out.shape)
        return [out.movedim(-1, dim) for out in outs]
    ctx = x._ctx
    per_tile = tile_elements(ctx, x.dtype.itemsize)
    chunk, per_program = min(n, per_tile), max(1, per_tile // max(1, n))

    def program(p: Program) -> None:
        first, last = p.number * per_program, min(rows, (p.number + 1) * per_program)
        loaded = []
        for lo in range(0, n, chunk):
            start, stop = first * n + lo, (last - 1) * n + min(n, lo + chunk)
            loaded.append(p.load(moved, storage_indices(moved._layout, moved.shape, start, stop)))
            p.vector(name, stop - start, x.dtype)
        results = pick(np.concatenate(loaded).reshape(last - first, n)) if p.data else \
            [np.empty((last - first, width), dtype=out.dtype.numpy) for out in outs]
        for out, values in zip(outs, results):
            p.store(out, storage_indices(out._layout, out.shape, first * width, last * width), values.reshape(-1))

    if rows and width:
        launch_programs(ctx, [moved, *outs], outs, -(-rows // per_program), name, name,
                        lambda pe, number: program(Program(ctx, pe, name, number)))
    return [out.movedim(-1, dim) for out in outs]


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(values, indices) of the k largest (or smallest) elements along `dim`, in order (ties: the earlier index)."""
    n = input.shape[wrap_dim(dim, input.ndim, "topk")] if input.ndim else 1
    if not 0 <= k <= n:
        raise TensorError(f"selected index k out of range: k={k} for a dimension of size {n}")

    def pick(rows):
        order = np.argsort(-rows if largest else rows, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(rows, order, 1), order
    values, indices = row_op("topk", input, dim, k, (input.dtype, int64), pick)
    return ValuesIndices((values, indices))


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """`num_samples` indices per row of `input` (1-D or 2-D, non-negative weights), drawn with the row's weights
    as probabilities from the device's generator, with or without replacement."""
    if input.ndim not in (1, 2):
        raise TensorError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}")
    if not replacement and num_samples > input.shape[-1]:
        raise TensorError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    rng = input._ctx.rng_for(generator, input.device)

    def pick(rows):
        weights = rows.astype(np.float64)
        return (np.stack([rng.choice(row.size, num_samples, replace=replacement, p=row / row.sum())
                          for row in weights]),)
    rows = input if input.ndim == 2 else input.unsqueeze(0)
    (samples,) = row_op("multinomial", rows, -1, num_samples, (int64,), pick)
    return samples if input.ndim == 2 else samples.squeeze(0)

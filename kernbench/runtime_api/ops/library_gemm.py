"""A device-op matmul as a GPU's GEMM library runs it (adr/0016-device-ops.md, "Matmul").

cuBLAS on Hopper runs `a @ b` as one kernel of large output tiles over every
SM in waves, each tile's A and B panels streamed through a pipeline of K
stages that overlap its MMAs; where the tiles are too few to fill the SMs
and K is long, it splits K over more programs and sums their partial tiles
in a second kernel. Which tile and which split it takes is its heuristic's
choice; `library_plan` makes that choice by the machine's own numbers, and
`matmul` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from kernbench.dtypes import DType
from kernbench.kernels.kept_values import KeptValues, MemoBudget
from kernbench.machine.placed_dma import kept_dmas, load_elements
from kernbench.machine.strided_runs import runs_or_slice
from kernbench.numerics import device_arithmetic
from kernbench.runtime_api.layout.copies import as_called
from kernbench.runtime_api.ops.device_ops import Program, accumulator_type, run_tiles, storage_indices, tile_elements

# The output tiles of the library's kernels (cuBLAS's Hopper GEMMs: 256 x 128 cooperative, 128 x 256, 128 x 128,
# 128 x 64, 64 x 128, 64 x 64), largest first, and the K of one pipeline stage: what such a kernel loads before
# its first MMA.
LIBRARY_TILES = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))
PIPELINE_K = 64
# How much longer than the least estimate a larger tile's may be and still be taken: the estimate does not see a
# larger tile's reuse of each load (in registers and shared memory) nor its fewer programs to schedule, so a
# library's heuristic keeps the larger tile where a smaller one gains only a wave's quantization (cuBLAS's
# 256 x 128 for a float32 8192^3, where 64 x 64 tiles would be 2.4% shorter by the estimate).
PLAN_TOLERANCE = 1 / 32


@dataclass(frozen=True)
class GemmPlan:
    """A GEMM's output tile and the parts its K is split into (1: not split)."""

    block_m: int
    block_n: int
    splits: int = 1


def library_plan(ctx, batches: int, m: int, n: int, k: int, dtype: DType) -> GemmPlan:
    """The tile and split of K a GEMM library's heuristic picks for `batches` (m, k) @ (k, n) products in `dtype`:
    of those whose estimated time is within `PLAN_TOLERANCE` of the least, the largest tile, then the fewest
    splits, then the least time.

    The estimate is a closed form in the machine's numbers: the programs
    (tiles × splits) run in waves over the SIP's PEs, each taking the
    longer of its MMAs (2·bm·bn·K/s flops at one matrix unit's rate) and its
    panel loads ((bm + bn)·K/s elements through one PE's DMA engines); never
    less than the operands and the result once over the SIP's sustained HBM
    rate, nor than every program's panels over its L2's rate; a split adds
    its fp32 partials written and read back over HBM and the second launch
    that sums them. Splits go only as far as filling the
    PEs: a library splits K to give idle SMs work, not to shrink a full grid.
    """
    topology = ctx.topology
    pes, mma = topology.pes_per_sip, topology.pe_peak_flops(dtype.name)
    dma = topology.pe.dma.bandwidth_bytes_per_s * topology.pe.dma.engines
    hbm = topology.cube.hbm.sustained_bytes_per_s * topology.cubes_per_sip
    l2 = topology.sip.l2.bandwidth_bytes_per_s if topology.sip.l2 is not None else None
    size = dtype.itemsize
    once = batches * (m * k + k * n + m * n) * size / hbm
    candidates = []
    for block_m, block_n in LIBRARY_TILES:
        tiles = batches * -(-m // block_m) * -(-n // block_n)
        rows, cols = min(block_m, m), min(block_n, n)  # a tile wider than the matrix computes only what is there
        for splits in range(1, max(1, -(-pes // tiles)) + 1):
            part = -(-k // splits)
            if splits > 1 and part < PIPELINE_K:
                break
            program = max(2 * rows * cols * part / mma, (rows + cols) * part * size / dma)
            panels = tiles * splits * (rows + cols) * part * size  # what every program loads, through an L2
            time = max(-(-tiles * splits // pes) * program, once, panels / l2 if l2 else 0)
            if splits > 1:
                partials = batches * m * n * accumulator_type(dtype).itemsize * splits
                time += 2 * partials / hbm + topology.sip.kernel_start_ps / 1e12
            candidates.append((round(time * 1e12), GemmPlan(block_m, block_n, splits)))
    least = min(time for time, _ in candidates)
    near = [(-plan.block_m * plan.block_n, plan.splits, time, order) for order, (time, plan) in enumerate(candidates)
            if time <= least * (1 + PLAN_TOLERANCE)]
    return candidates[min(near)[3]][1]


def matmul(a, b, out, name: str = "matmul", bias=None) -> None:
    """`out[..., M, N] = a[..., M, K] @ b[..., K, N]` (+ `bias[N]`; batch dims already broadcast), as
    `library_plan` says: one program per output tile and part of K, placed over every PE of the SIP in waves.

    A program loads the first stage of its A and B panels (K up to
    `PIPELINE_K`), then runs one matrix-unit op of 2·m·n·K flops over its
    whole part of K while the rest of both panels streams in beside it, as a
    pipelined kernel's stages land while its MMAs run; it stores its C tile
    when both are done. So a tile takes the first stage's load, then the
    longer of its MMAs and the rest of its loads, then the store:
    compute-bound or memory-bound by the machine's numbers. The rest of a
    panel is one DMA per cube holding it, named as strided runs (never an
    index array), so a program costs a handful of events whatever K is. The
    programs of a wave that share a panel read it in step, so an L2 holds
    one stage of it at a time (`l2_window`), not the whole panel. It
    accumulates in fp32 (int32 for integers), as the library does. A bias is
    added in the epilogue, as cuBLASLt's bias epilogue adds it (each program
    loads its columns' slice; no pass of its own). Split, each program
    stores its partial tile to a workspace, and a second launch sums each
    output's partials in split order (and the bias) into `out`.
    """
    batch, (m_size, k_size), n_size = out.shape[:-2], a.shape[-2:], out.shape[-1]
    batches = prod(batch)
    wide = accumulator_type(a.dtype)
    accumulator = wide.numpy
    if out.device.is_host:
        with device_arithmetic():
            product = np.matmul(a._host_array.astype(accumulator), b._host_array.astype(accumulator))
            if bias is not None:
                product += bias._host_array.astype(accumulator)
            out._host_array[...] = product.astype(out.dtype.numpy)
        return
    a, b, out = as_called(a), as_called(b), as_called(out)  # the programs run later, on these as they are now
    bias = None if bias is None else as_called(bias)
    ctx = out._ctx
    plan = library_plan(ctx, batches, m_size, n_size, k_size, a.dtype)
    block_m, block_n, splits = plan.block_m, plan.block_n, plan.splits
    tiles_m, tiles_n = -(-m_size // block_m), -(-n_size // block_n)
    tiles = batches * tiles_m * tiles_n
    if not tiles:
        return
    part = -(-k_size // splits)
    stage_k = max(PIPELINE_K, tile_elements(ctx, a.dtype.itemsize) // max(block_m, block_n))
    # The programs of a tile row load the same A panel, those of a tile column the same B panel.
    plans = KeptValues(MemoBudget(ctx.access_plan_pool))
    target = out
    if splits > 1:
        target = out._make(ctx, (splits, *out.shape), wide, out.device, ctx.next_tensor_name(f"{name}.partials"))

    def program(p: Program) -> None:
        index, rest = divmod(p.number, tiles_m * tiles_n * splits)
        tile, split = divmod(rest, splits)
        tm, tn = divmod(tile, tiles_n)
        rows = range(tm * block_m, min(m_size, (tm + 1) * block_m))
        cols = range(tn * block_n, min(n_size, (tn + 1) * block_n))
        k0, k1 = split * part, min(k_size, (split + 1) * part)
        stages = (range(k0, min(k1, k0 + PIPELINE_K)), range(min(k1, k0 + PIPELINE_K), k1))
        coords = np.unravel_index(index, batch) if batch else ()
        shape = (len(rows), len(cols))  # the tile's accumulator; a placeholder holding no memory without values
        values = np.zeros(shape, dtype=accumulator) if p.data else np.broadcast_to(np.zeros((), accumulator), shape)

        def load(stage: int) -> None:
            ks = stages[stage]
            window = None if stage == 0 else stage_k * a.dtype.itemsize
            block_a = load_block(p, plans, a, ("a", index, tm, split, stage), coords, rows, ks,
                                  window and len(rows) * window)
            block_b = load_block(p, plans, b, ("b", index, split, stage, tn), coords, ks, cols,
                                  window and len(cols) * window)
            if p.data:
                values[...] += np.matmul(block_a.astype(accumulator), block_b.astype(accumulator))

        load(0)
        loader = None
        if len(stages[1]):
            loader = ctx.engine.spawn(lambda: load(1), name=f"{name} program {p.number} loads")
        p.gemm(len(rows), len(cols), k1 - k0, a.dtype)
        if loader is not None:
            ctx.engine.wait(loader)
        if bias is not None and splits == 1:
            columns = p.load(bias, slice(bias.storage_offset() + cols.start, bias.storage_offset() + cols.stop))
            if p.data:
                values += columns.astype(accumulator)
        where = (split, *coords) if splits > 1 else coords
        p.store(target, block_selector(target, where, rows, cols)[0], values.reshape(-1))

    operands = [a, b] if bias is None else [a, b, bias]
    if splits == 1:
        run_tiles(ctx, operands, out, tiles * splits, name, program, finished=plans.release)
        return
    run_tiles(ctx, [a, b], target, tiles * splits, name, program, finished=plans.release)
    sum_partials(ctx, target, out, name, bias)


def sum_partials(ctx, partials, out, name: str, bias) -> None:
    """`out` = the sum over the first axis of `partials` (a split GEMM's, one plane per part of K), in plane order,
    plus `bias` (None: none) along the rows: the library's second kernel, one program per tile of output elements
    loading that tile of every plane."""
    splits, numel = partials.shape[0], out.numel()
    per_tile = max(1, tile_elements(ctx, partials.dtype.itemsize) // splits)

    def program(p: Program) -> None:
        start, stop = p.number * per_tile, min(numel, (p.number + 1) * per_tile)
        planes = [p.load(partials, slice(s * numel + start, s * numel + stop)) for s in range(splits)]
        if bias is not None:
            planes.append(p.load(bias, storage_indices(bias._layout, out.shape, start, stop)))
        p.vector("sum_partials", len(planes) * (stop - start), out.dtype)
        result = np.empty(stop - start, dtype=out.dtype.numpy)
        if p.data:
            total = planes[0].copy()
            for plane in planes[1:]:
                total += plane.astype(total.dtype, copy=False)
            result = total.astype(out.dtype.numpy)
        p.store(out, storage_indices(out._layout, out.shape, start, stop), result)

    run_tiles(ctx, [partials] if bias is None else [partials, bias], out, -(-numel // per_tile), name, program)


def load_block(p: Program, plans: KeptValues, tensor, key: tuple, batch_coords, rows: range, cols: range,
                l2_window: int | None) -> np.ndarray:
    """tensor[*batch, rows, cols] loaded by `p`, as a (rows, cols) array; its selector and DMAs from the PE's
    replica worked out once per block for the op's programs (`plans`, kept under `key`)."""
    known = plans.get(key)
    if known is None:
        known = (*block_selector(tensor, batch_coords, rows, cols), {})
        plans.keep(key, known, getattr(known[0], "nbytes", 0))
    selector, transposed, by_replica = known
    pieces = kept_dmas(p.ctx.machine, p.pe, tensor.allocation, selector, tensor.dtype.itemsize, by_replica)
    values = load_elements(p.ctx.machine, p.pe, tensor.allocation, tensor.dtype.numpy, selector, label=p.label,
                           program=p.number, data=p.data, pieces=pieces, l2_window=l2_window)
    return values.reshape(len(cols), len(rows)).T if transposed else values.reshape(len(rows), len(cols))


def block_selector(tensor, batch_coords, rows: range, cols: range) -> tuple[object, bool]:
    """The storage elements of tensor[*batch, rows, cols] (batch dims of size 1 broadcast) and whether they come
    column by column: strided runs along the rows, or along the columns of a transposed operand (`w.t()`),
    else an index array."""
    strides = tensor.stride()
    lead = len(batch_coords) - (tensor.ndim - 2)
    base = tensor.storage_offset() + sum(
        int(c) * s for c, n, s in zip(batch_coords[lead:], tensor.shape[:-2], strides[:-2]) if n != 1)
    base += rows.start * strides[-2] + cols.start * strides[-1]
    if strides[-1] == 1 and (len(rows) == 1 or strides[-2] >= len(cols)):
        return runs_or_slice(base, strides[-2], len(rows), len(cols)), False
    if strides[-2] == 1 and (len(cols) == 1 or strides[-1] >= len(rows)):
        return runs_or_slice(base, strides[-1], len(cols), len(rows)), True
    return (base + np.arange(len(rows), dtype=np.int64)[:, None] * strides[-2]
            + np.arange(len(cols), dtype=np.int64)[None, :] * strides[-1]).reshape(-1), False

"""Device ops: torch's elementwise ops, reductions and matmul as built-in PE programs (adr/0016-device-ops.md).

An op on device tensors is device work like a kernel: enqueued on the
current stream, its output cut into tiles, each tile one program placed on
the PEs that hold the data (`kernel_launch.launch_programs`, the launch path
kernels use), and each program the PE ops a hand-written kernel would issue:
DMAs of its operands' elements from HBM into TCM, the vector or matrix unit,
a DMA of its result back. The values are computed by numpy on what the DMAs
loaded, so they are exactly what the loads saw at their simulated time; in a
timing-only run nothing is computed and every op is timed the same.

Host tensors (`device='cpu'`) are computed directly by numpy: the host is
not simulated.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable

import numpy as np

from kernbench.dtypes import DType, as_real_pairs, float32, float64, int32, int64
from kernbench.machine.l2 import UNCACHED
from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.machine.placed_dma import load_elements, store_elements
from kernbench.numerics import device_arithmetic
from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.launch.kernel_launch import launch_programs
from kernbench.runtime_api.layout.copies import as_called
from kernbench.runtime_api.ops.promotion import is_tensor
from kernbench.runtime_api.layout.views import Layout

# Operand and result tiles of one program share a PE's TCM with the other resident programs.
_TCM_SHARE = 4


@dataclass(frozen=True)
class Program:
    """One tile's context: the PE it runs on, and the PE ops it may issue (each one op-log entry)."""

    ctx: object
    pe: object
    label: str
    number: int

    @property
    def data(self) -> bool:
        return not self.ctx.timing_only

    def load(self, tensor, indices, pieces: tuple | None = None) -> np.ndarray:
        """HBM → TCM: `tensor`'s storage elements `indices` (a slice or an array), in order (`pieces`: their
        `placed_dma.plan_dmas` from this PE, if the caller kept it)."""
        return load_elements(self.ctx.machine, self.pe, tensor.allocation, tensor.dtype.numpy, indices,
                             label=self.label, program=self.number, data=self.data, pieces=pieces)

    def reread(self, tensor, indices) -> None:
        """The elements of an earlier `load` read from HBM again, for the time it takes: `UNCACHED` (the L2
        neither serves nor holds it), no values moved (the program has them from the first read)."""
        load_elements(self.ctx.machine, self.pe, tensor.allocation, tensor.dtype.numpy, indices, label=self.label,
                      program=self.number, data=False, l2_window=UNCACHED)

    def store(self, tensor, indices, values: np.ndarray) -> None:
        """TCM → HBM: `values` into `tensor`'s storage elements `indices`. A timing-only run's DMAs take only the
        dtype, so its placeholder values are not converted (a copy of every stored element, for nothing)."""
        values = values.astype(tensor.dtype.numpy) if self.data else np.empty(0, dtype=tensor.dtype.numpy)
        store_elements(self.ctx.machine, self.pe, tensor.allocation, indices, values, label=self.label,
                       program=self.number, data=self.data)

    def add_now(self, tensor, indices: slice, values: np.ndarray) -> None:
        """`tensor`'s storage elements `indices` (a slice) += `values`, at once and not hazard-tracked: the data
        effect of atomic adds, which programs adding into one accumulator race on by design (their time is the
        caller's to charge)."""
        if self.data:
            tensor.allocation.storage.typed(tensor.dtype.numpy, indices)[indices] += values.astype(tensor.dtype.numpy)

    def vector(self, op: str, n_elements: int, dtype: DType, unit=None) -> None:
        """One vector-unit op over `n_elements` (the cost rule of every elementwise op and reduction step); complex
        elements as their real pairs. `unit`: the PE's unit it holds, when not its vector unit (a fused
        attention's softmax holds its matrix unit: adr/0016-device-ops.md, "Attention")."""
        dtype, n_elements = as_real_pairs(dtype, n_elements)
        self.ctx.machine.compute(unit or self.pe.vector, vector_ps(self.ctx.topology, n_elements), kind="vector",
                                 label=self.label, program=self.number,
                                 args={"op": op, "elements": n_elements, "dtype": dtype.name})

    def gemm(self, m: int, n: int, k: int, dtype: DType) -> None:
        flops = 2 * m * n * k
        self.ctx.machine.compute(self.pe.matrix, gemm_ps(self.ctx.topology, dtype.name, flops), kind="gemm",
                                 label=self.label, program=self.number, flops=flops,
                                 args={"m": m, "n": n, "k": k, "dtype": dtype.name})


def tile_elements(ctx, bytes_per_element: int) -> int:
    """Elements per tile: the largest power of two whose operands and result fit a PE's share of TCM."""
    budget = ctx.topology.pe.tcm.capacity_bytes // _TCM_SHARE
    count = max(1, budget // max(1, bytes_per_element))
    return 1 << (count.bit_length() - 1)


def streamed(ctx, count: int, per_tile: int) -> int:
    """Units (elements, rows) per program of an op over `count` of them whose tile holds `per_tile`: one tile, or
    as many tiles as spread the op over four programs per program slot of the SIP (its PEs'
    `resident_programs` each), no more.

    A GPU library's elementwise, fill and row kernels stream a large
    tensor through every SM; a program here streams its run through TCM
    tile by tile, timed as one load per operand (one DMA per cube holding
    it), one vector pass and one store. That keeps an op's cost O(slots)
    simulated events whatever its size, where a program per tile was
    O(tiles) (a 2^28-element add was 65 536 programs). Four programs a slot
    rather than one keep the loads of some beside the stores of others and
    the last wave's tail short, as finer tiles do.
    """
    slots = STREAMED_PER_SLOT * ctx.topology.pes_per_sip * ctx.topology.pe.resident_programs
    tiles = -(-count // per_tile)
    return per_tile * max(1, -(-tiles // slots))


STREAMED_PER_SLOT = 4


def elementwise_block(ctx, n_elements: int, bytes_per_element: int, smallest: int) -> int:
    """BLOCK_SIZE of a library's elementwise Triton kernel over `n_elements`: `smallest`, or a larger power of
    two, as a library picks for a large tensor (`gemm_tile`'s rule in one dimension, adr/0016-device-ops.md,
    "Matmul tiles"): the largest that fits a PE's TCM share as a device op's tile does (`tile_elements`) and
    still gives every PE of the SIP a program."""
    largest, pes = tile_elements(ctx, bytes_per_element), ctx.topology.pes_per_sip
    block = smallest
    while 2 * block <= largest and -(-n_elements // (2 * block)) >= pes:
        block *= 2
    return block


def storage_indices(layout: Layout, shape: tuple[int, ...], start: int, stop: int):
    """Storage elements of `layout`, broadcast to `shape`, at row-major positions [start, stop) of `shape`.

    The positions are cut into rows of the longest run of trailing axes that
    is at most a quarter of them: each row's offsets are the trailing box's,
    made once by broadcasting one arange per axis, plus the row's own base,
    so only the few row numbers are unravelled, not every position.
    """
    if layout.shape == shape and layout.is_contiguous():
        return slice(layout.offset + start, layout.offset + stop)
    if stop <= start:  # no positions (a zero-size extent, reduced over): no rows to find
        return np.empty(0, dtype=np.int64)
    lead = len(shape) - len(layout.shape)
    strides = (0,) * lead + tuple(stride if n != 1 else 0 for n, stride in zip(layout.shape, layout.strides))
    split, row = len(shape), 1
    while split > 0 and row * shape[split - 1] <= max(1, (stop - start) // 4):
        split -= 1
        row *= shape[split]
    box = np.zeros((), dtype=np.int64)
    for n, stride in zip(shape[split:], strides[split:]):
        box = box[..., None] + np.arange(n, dtype=np.int64) * stride
    first_row, last_row = start // row, (stop - 1) // row
    rows = np.arange(first_row, last_row + 1, dtype=np.int64)
    bases = np.full(rows.size, layout.offset, dtype=np.int64)
    if split:
        for coordinate, stride in zip(np.unravel_index(rows, shape[:split]), strides[:split]):
            if stride:
                bases += coordinate * stride
    indices = (bases[:, None] + box.reshape(1, -1)).reshape(-1)
    return indices[start - first_row * row:stop - first_row * row]


def run_tiles(ctx, inputs, output, n_programs: int, label: str, run_program: Callable[[Program], None],
              finished: Callable[[], None] | None = None, also_written=(), host_launch: bool = True) -> None:
    """Launch `n_programs` tile programs reading `inputs` and writing `output` (and `also_written`; all on one
    device); `finished()`, if given, is called when they have ended. `host_launch=False`: an op's further
    kernel, which the host enqueues within the op's one call (`launch_programs`)."""
    tensors = [*inputs, output]  # the output last: launch placement follows the largest, ties to the first

    def run(pe, number: int) -> None:
        run_program(Program(ctx, pe, label, number))

    launch_programs(ctx, tensors, [output, *also_written], n_programs, label, label, run, finished=finished,
                    host_launch=host_launch)


def check_same_device(tensors, call: str):
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        names = ", ".join(f"{t.name!r} on {t.device}" for t in tensors)
        raise TensorError(f"{call}: expected all tensors to be on the same device, got {names}")
    return tensors[0].device


def broadcast_shape(shapes, call: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise TensorError(f"{call}: shapes {', '.join(map(str, shapes))} cannot be broadcast together") from None


# ---- elementwise -----------------------------------------------------------------------------
def elementwise(name: str, fn: Callable, operands: list, result_dtype: DType, compute_dtype: DType,
                out=None, new_tensor=None, passes: int = 1):
    """`fn(*operands)` elementwise over broadcast tensors and numbers, into `out` (or a new tensor): each program
    one vector op of `passes` passes over its elements."""
    tensors = [op for op in operands if is_tensor(op)]
    shape = broadcast_shape([t.shape for t in tensors], name)
    if out is not None and shape != out.shape:
        if broadcast_shape([shape, out.shape], name) != out.shape:
            raise TensorError(f"{name}: the result of shape {shape} does not fit in {out.name!r} of shape {out.shape}")
        shape = out.shape
    device = check_same_device(tensors + ([out] if out is not None else []), name)
    if out is None:
        out = new_tensor(shape, result_dtype, device, name)
    if device.is_host:
        with device_arithmetic():
            values = fn(*[_host_operand(op, compute_dtype) for op in operands])
            out._host_array[...] = np.asarray(values).astype(out.dtype.numpy)
        return out
    numel = prod(shape)
    if numel == 0:
        return out
    result, out = out, as_called(out)  # the programs run later, on the tensors as they are now
    operands = [as_called(op) if is_tensor(op) else op for op in operands]
    tensors = [op for op in operands if is_tensor(op)]
    ctx = out._ctx
    widest = sum(t.dtype.itemsize for t in tensors) + out.dtype.itemsize
    per_tile = streamed(ctx, numel, tile_elements(ctx, widest))
    numbers = {i: np.asarray(op, dtype=compute_dtype.numpy) for i, op in enumerate(operands) if not is_tensor(op)}
    lanes = out.dtype if out.dtype.is_complex else compute_dtype  # complex results made of reals: their pairs' lanes

    def program(p: Program) -> None:
        start = p.number * per_tile
        stop = min(numel, start + per_tile)
        loaded = {i: p.load(op, storage_indices(op._layout, shape, start, stop))
                  for i, op in enumerate(operands) if is_tensor(op)}
        p.vector(name, passes * (stop - start), lanes)
        values = np.empty(stop - start, dtype=out.dtype.numpy)
        if p.data:
            args = [numbers[i] if i in numbers else loaded[i].astype(compute_dtype.numpy, copy=False)
                    for i in range(len(operands))]
            values = np.asarray(fn(*args)).astype(out.dtype.numpy)
            values = np.broadcast_to(values, (stop - start,))
        p.store(out, storage_indices(out._layout, shape, start, stop), values)

    run_tiles(ctx, tensors, out, -(-numel // per_tile), name, program)
    return result


def fused_rows(name: str, fn: Callable, x, row: int, passes: int, compute_dtype: DType, params=(),
               new_tensor=None, reads: int = 1):
    """`fn(rows, *params) -> rows` over `x` seen as rows of its last `row` elements, as one fused kernel runs a
    norm or a softmax: each program loads a group of whole rows `reads` times (and each parameter of `row`
    elements once), makes `passes` vector passes over them and stores its rows once, into a new tensor of x's
    shape and dtype.

    `rows` are the loaded rows in `compute_dtype`, shape (rows, row); a
    parameter is a tensor of `row` elements or None. A group is as many rows
    as fit a tile, at least one: a row wider than a tile is still one
    program's, streamed through as a fused kernel streams it. A kernel that
    reads its row again once the row's statistics are known (torch's layer
    norm) does so from HBM: on a GPU the thousands of rows in flight have
    pushed the row out of the L2 by then, so the read is `UNCACHED`.
    """
    out = new_tensor(x.shape, x.dtype, x.device, name)
    values_of = [param for param in params if param is not None]
    if x.device.is_host:
        loaded = [_host_operand(param, compute_dtype).reshape(-1) for param in values_of]
        with device_arithmetic():
            rows = x._host_array.astype(compute_dtype.numpy).reshape(-1, row)
            out._host_array[...] = np.asarray(fn(rows, *_with_nones(params, loaded))).reshape(x.shape)
        return out
    check_same_device([x, *values_of], name)
    n_rows = x.numel() // max(1, row)
    if x.numel() == 0:
        return out
    result, out, x = out, as_called(out), as_called(x)  # the programs run later, on the tensors as they are now
    values_of = [as_called(param) for param in values_of]
    ctx = out._ctx
    per_program = streamed(ctx, n_rows, max(1, tile_elements(ctx, 2 * x.dtype.itemsize) // max(1, row)))

    def program(p: Program) -> None:
        first, last = p.number * per_program, min(n_rows, (p.number + 1) * per_program)
        start, stop = first * row, last * row
        indices = storage_indices(x._layout, x.shape, start, stop)
        loaded_rows = p.load(x, indices)
        for _ in range(reads - 1):
            p.reread(x, indices)
        loaded = [p.load(param, storage_indices(param._layout, param.shape, 0, row)) for param in values_of]
        p.vector(name, passes * (stop - start), compute_dtype)
        values = np.empty(stop - start, dtype=out.dtype.numpy)
        if p.data:
            rows = loaded_rows.astype(compute_dtype.numpy, copy=False).reshape(last - first, row)
            extra = [values.astype(compute_dtype.numpy, copy=False) for values in loaded]
            values = np.asarray(fn(rows, *_with_nones(params, extra))).astype(out.dtype.numpy).reshape(-1)
        p.store(out, storage_indices(out._layout, out.shape, start, stop), values)

    run_tiles(ctx, [x, *values_of], out, -(-n_rows // per_program), name, program)
    return result


def _with_nones(params, loaded):
    """`loaded` put back where `params` has a tensor, None where it has None."""
    values = iter(loaded)
    return [None if param is None else next(values) for param in params]


def generate(name: str, make: Callable[[int], np.ndarray], out) -> None:
    """Values `make(count)` written over `out` tile by tile: one vector pass and a store per tile (no load).

    What a random fill is on a device (a counter-based generator on the vector
    unit); `make` is called in tile order, so a seeded generator gives the same
    values in every run.
    """
    if out.device.is_host:
        out._host_array[...] = make(out.numel()).reshape(out.shape)
        return
    numel = out.numel()
    if numel == 0:
        return
    out = as_called(out)  # the programs run later, on the tensor as it is now
    ctx = out._ctx
    per_tile = streamed(ctx, numel, tile_elements(ctx, out.dtype.itemsize))
    layout = out._layout

    def program(p: Program) -> None:
        start = p.number * per_tile
        stop = min(numel, start + per_tile)
        p.vector(name, stop - start, out.dtype)
        values = make(stop - start) if p.data else np.empty(stop - start, dtype=out.dtype.numpy)
        p.store(out, storage_indices(layout, out.shape, start, stop), np.asarray(values))

    run_tiles(ctx, [], out, -(-numel // per_tile), name, program)


def index_add(out, targets: np.ndarray, source) -> None:
    """`out`'s storage elements `targets` += `source`'s elements, repeated targets summed (torch's
    `index_put_(..., accumulate=True)`, what the backward of a gather with repeated indices needs).

    The targets are sorted on the host (the simulator knows them, as a GPU's
    embedding backward sorts its ids first) and cut into tiles of distinct
    target elements; a program loads its tile of `out`, gathers the source
    elements aimed at it, adds them in one vector pass (in source order, so
    the sums are the same in every run) and stores the tile. No two programs
    write one element, so there is no race and no atomic.
    """
    flat_targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    if flat_targets.size != source.numel():
        raise TensorError(f"index_add into {out.name!r}: {flat_targets.size} targets for {source.numel()} values")
    if flat_targets.size == 0:
        return
    out, source = as_called(out), as_called(source.contiguous())  # the programs run later, on these as they are now
    order = np.argsort(flat_targets, kind="stable")
    sorted_targets = flat_targets[order]
    unique, first_of = np.unique(sorted_targets, return_index=True)
    bounds = np.append(first_of, sorted_targets.size)  # occurrences of unique[i]: order[bounds[i]:bounds[i + 1]]
    source_base = source.storage_offset()
    ctx = out._ctx
    per_tile = tile_elements(ctx, out.dtype.itemsize)

    def program(p: Program) -> None:
        lo, hi = p.number * per_tile, min(unique.size, (p.number + 1) * per_tile)
        occurrences = order[bounds[lo]:bounds[hi]]
        current = p.load(out, unique[lo:hi])
        added = p.load(source, source_base + occurrences)
        p.vector("index_add", occurrences.size, out.dtype)
        if not p.data:
            current = np.empty(hi - lo, dtype=out.dtype.numpy)
        else:
            accumulator = current.astype(out.dtype.numpy, copy=True)
            np.add.at(accumulator, np.searchsorted(unique[lo:hi], sorted_targets[bounds[lo]:bounds[hi]]),
                      added.astype(out.dtype.numpy, copy=False))
            current = accumulator
        p.store(out, unique[lo:hi], np.asarray(current))

    run_tiles(ctx, [source], out, -(-unique.size // per_tile), "index_add", program)


def _host_operand(op, dtype: DType):
    if is_tensor(op):
        return op._host_array.astype(dtype.numpy, copy=False)
    return np.asarray(op, dtype=dtype.numpy)


# ---- reductions ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reduction:
    """A reduction: `chunk(values2d, first) -> partial` along axis 1 (`first`: the chunk's first reduced index),
    `merge(a, b)` of two partials, `finish(partial, count)` the result. A partial may be a tuple of arrays, one
    per dtype of `parts` (None: the compute dtype): argmax's (values, indices), var's (count, mean, sum of
    squared deviations). `passes`: vector passes over each element, one unless the chunk step's arithmetic
    takes an SM longer than its loads do (var's Welford update)."""

    chunk: Callable
    merge: Callable
    finish: Callable = staticmethod(lambda partial, count: partial)
    parts: tuple = (None,)  # the dtypes of a partial's arrays (None: the compute dtype); more than one: a tuple
    passes: int = 1


def reduction_splits(ctx, groups: int, reduced: int, chunk: int) -> int:
    """Parts the reduced extent is split into, as torch's reduce kernel splits it over thread blocks: one when the
    groups of outputs already give every PE of the SIP a program, else each part at least `PART_CHUNKS` chunks
    (a chunk: the loads one program keeps in flight, a TCM share), and no more parts than stream the extent as
    an elementwise op streams its tiles (`streamed`: four programs a program slot)."""
    topology = ctx.topology
    if groups >= topology.pes_per_sip:
        return 1
    slots = STREAMED_PER_SLOT * topology.pes_per_sip * topology.pe.resident_programs
    return max(1, min(-(-slots // groups), reduced // (PART_CHUNKS * chunk)))


# torch's reduce kernel (aten's Reduce.cuh) gives each thread of a block at least 16 vector loads, issued four at a
# time, before it splits the reduced extent over more blocks: a block's part is at least four rounds of the loads it
# keeps in flight, so a small reduction runs on few SMs (2^20 floats: 32 blocks of 32768).
PART_CHUNKS = 4


def reduce(name: str, reduction: Reduction, x, dims: tuple[int, ...], keepdim: bool, result_dtype: DType,
           compute_dtype: DType, new_tensor):
    """Reduce `x` over `dims`, as torch's reduce kernel runs it: each program reduces a group of outputs, or one
    part of one output's reduced extent, loaded at once and reduced in TCM-sized chunks with the reduction's
    `passes` vector passes over each element.

    The groups are streamed as an elementwise op's tiles are (`streamed`: at
    most four programs a program slot of the SIP), so a reduction costs
    O(slots) simulated events whatever its size. When the groups are too few
    to give every PE a program (a full reduction to one value, a few long
    rows), the reduced extent is split over the PEs (`reduction_splits`), as
    torch's kernel splits it over thread blocks: each program reduces one
    part of one output into a partial in a workspace in HBM, and the op's
    second kernel merges each output's partials in part order and finishes
    it. torch runs that second step in the same call (a memset of the
    blocks' semaphores, then the kernel whose last block merges), so it costs
    the device a kernel's start and the host no launch of its own.
    """
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(x.shape[d] if d in kept else 1 for d in range(x.ndim)) if keepdim else \
        tuple(x.shape[d] for d in kept)
    out = new_tensor(out_shape, result_dtype, x.device, name)
    reduced = prod(x.shape[d] for d in dims)
    outputs = prod(x.shape[d] for d in kept)
    if x.device.is_host:
        with device_arithmetic():
            values = x._host_array.astype(compute_dtype.numpy, copy=False)
            moved = np.moveaxis(values, dims, tuple(range(-len(dims), 0))).reshape(outputs, reduced)
            out._host_array[...] = np.asarray(reduction.finish(reduction.chunk(moved, 0), reduced)).reshape(out_shape)
        return out
    if outputs == 0:
        return out
    result, out, x = out, as_called(out), as_called(x)  # the programs run later, on the tensors as they are now
    ctx = x._ctx
    # Storage elements of x as (outputs, reduced): the kept dims, then the reduced dims.
    moved_shape = tuple(x.shape[d] for d in kept) + tuple(x.shape[d] for d in dims)
    moved = Layout(moved_shape, tuple(x.stride()[d] for d in kept) + tuple(x.stride()[d] for d in dims),
                   x.storage_offset())
    tile = tile_elements(ctx, x.dtype.itemsize)
    chunk = min(reduced, tile) if reduced else 1
    per_program = streamed(ctx, outputs, max(1, tile // max(1, reduced)))
    out_layout = Layout.contiguous(tuple(x.shape[d] for d in kept), out.storage_offset())
    groups = -(-outputs // per_program)
    splits = reduction_splits(ctx, groups, reduced, chunk)
    part = -(-reduced // splits)

    def reduce_part(p: Program, first: int, last: int, lo: int, hi: int):
        """Outputs [first, last) over reduced elements [lo, hi) (the whole extent, or one output's part: a split
        reduction's groups are one output each, as groups of several already give every PE a program): one load,
        one vector op; their partial, chunk by chunk (None when no values are computed)."""
        whole = lo == 0 and hi == reduced
        start, stop = (first * reduced, last * reduced) if whole else (first * reduced + lo, first * reduced + hi)
        values = p.load(x, storage_indices(moved, moved_shape, start, stop) if stop > start else
                        np.empty(0, dtype=np.int64))
        p.vector(name, reduction.passes * (stop - start), compute_dtype)
        if not p.data:
            return None
        values = values.astype(compute_dtype.numpy, copy=False).reshape(last - first, hi - lo)
        partial = None
        for begin in range(lo, max(hi, lo + 1), chunk):
            piece = reduction.chunk(values[:, begin - lo:min(hi, begin + chunk) - lo], begin)
            partial = piece if partial is None else reduction.merge(partial, piece)
        return partial

    def store_result(p: Program, first: int, last: int, partial) -> None:
        values = np.empty(last - first, dtype=out.dtype.numpy)
        if p.data:
            values = np.asarray(reduction.finish(partial, reduced)).astype(out.dtype.numpy)
        p.store(out, storage_indices(out_layout, out_layout.shape, first, last), values)

    if splits == 1:
        def program(p: Program) -> None:
            first = p.number * per_program
            last = min(outputs, first + per_program)
            store_result(p, first, last, reduce_part(p, first, last, 0, reduced))

        run_tiles(ctx, [x], out, groups, name, program)
        return result

    # The workspaces: partial s of output o at row s, column o, one workspace per array of a partial.
    workspaces = [new_tensor((splits, outputs), dtype or compute_dtype, x.device, f"{name}.partials{k or ''}")
                  for k, dtype in enumerate(reduction.parts)]
    whole = len(workspaces) > 1  # a partial is a tuple of arrays

    def split_program(p: Program) -> None:
        group, s = divmod(p.number, splits)
        first, last = group * per_program, min(outputs, (group + 1) * per_program)
        partial = reduce_part(p, first, last, s * part, min(reduced, (s + 1) * part))
        pieces = (partial if whole else (partial,)) if p.data else (None,) * len(workspaces)
        for workspace, piece in zip(workspaces, pieces):
            values = np.asarray(piece) if p.data else np.empty(last - first, dtype=workspace.dtype.numpy)
            p.store(workspace, slice(s * outputs + first, s * outputs + last), values)

    run_tiles(ctx, [x], workspaces[0], groups * splits, name, split_program)
    merge_per_program = max(1, tile_elements(ctx, compute_dtype.itemsize) // splits)

    def merge_program(p: Program) -> None:
        first = p.number * merge_per_program
        last = min(outputs, first + merge_per_program)
        columns = np.arange(first, last, dtype=np.int64)
        indices = (np.arange(splits, dtype=np.int64)[:, None] * outputs + columns[None, :]).reshape(-1)
        loaded = [p.load(workspace, indices) for workspace in workspaces]
        p.vector(name, reduction.passes * indices.size, compute_dtype)
        partial = None
        if p.data:
            loaded = [values.reshape(splits, last - first) for values in loaded]
            for s in range(splits):
                piece = tuple(rows[s] for rows in loaded) if whole else loaded[0][s]
                partial = piece if partial is None else reduction.merge(partial, piece)
        store_result(p, first, last, partial)

    run_tiles(ctx, workspaces, out, -(-outputs // merge_per_program), name, merge_program, host_launch=False)
    return result


# ---- matmul ----------------------------------------------------------------------------------
SMALLEST_TILE = (64, 64, 32)


def gemm_tile(ctx, batches: int, m: int, n: int, dtype: DType, smallest: tuple[int, int, int] = SMALLEST_TILE,
              ) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K) of a GEMM of `batches` (m, n) outputs in `dtype`: `smallest`, or a larger
    square tile, BLOCK_K half its side, as a GEMM library picks one for a large problem (adr/0016-device-ops.md,
    "Matmul tiles").

    A tile is taken only if its A and B blocks, accumulator and result fit a
    PE's share of TCM (the rule of every device op's tile) and its grid still
    gives each PE of the SIP a program; the largest such side wins. A larger
    tile reloads each operand block fewer times and issues fewer, larger ops.
    """
    budget = ctx.topology.pe.tcm.capacity_bytes // _TCM_SHARE
    pes = ctx.topology.pes_per_sip
    # Per output element: its share of the A and B blocks (side x side/2 each), the accumulator and the result.
    per_element = 2 * dtype.itemsize + accumulator_type(dtype).itemsize
    best, side = smallest, max(smallest[:2])
    if side * side <= smallest[0] * smallest[1]:
        side *= 2
    while side * side * per_element <= budget and batches * -(-m // side) * -(-n // side) >= pes:
        best, side = (side, side, side // 2), side * 2
    return best


def accumulator_type(dtype: DType) -> DType:
    """The type a GEMM accumulates `dtype` operands in: float32 (float64 for f64, int32 for integers), as a GPU
    library does."""
    return int32 if not dtype.is_floating_point else float64 if dtype.name == "f64" else float32


def wide_type(dtype: DType) -> DType:
    """The type a reduction or a fused row kernel accumulates `dtype` in: half types in float32, as torch's do."""
    return float32 if dtype.name in ("f16", "bf16") else dtype


def float_type(dtype: DType) -> DType:
    """The floating type an op on `dtype` computes in (torch: integers and bool become float32; complex stays)."""
    return dtype if dtype.is_differentiable else float32

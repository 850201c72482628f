"""Copies and fills of device tensors and their views: host→device, device→device, constants, as DMAs on a stream.

A tensor that is its whole storage moves shard by shard: one DMA per pair
of overlapping shards, so a tensor spread over cubes moves over every HBM
stack and mesh link it touches, and a copy between two placements moves only
the bytes each destination shard needs. Any other view, and any set of
elements picked by advanced indexing, moves as one DMA per (source cube,
destination cube) pair holding some of its elements. Host values are
captured when the copy is enqueued (the host may reuse its array at once); a
device→device copy first waits for writes still in flight to its source,
whichever stream they are on. The DMAs themselves, and the element indices
a view's copy needs (8 bytes per element), are made when the copy runs, from
views of the tensors as they were at the call: a host that enqueues far
ahead of the device holds no index array per queued copy. Each DMA names the elements it reads and
writes, so the data executor reports a copy racing a kernel or another copy
on another stream (adr/0009).
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.machine import Transfer, hbm, host
from kernbench.machine.data_executor import Region
from kernbench.machine.placed_dma import lanes_per_cube
from kernbench.numerics import device_arithmetic
from kernbench.runtime_api.layout.boxes import box_span, row_major_strides
from kernbench.runtime_api.errors import TensorError


def copy_into(dst, src, *, non_blocking: bool) -> None:
    """Copy `src` (a Tensor, numpy array or number) into `dst`, broadcasting and converting dtype as torch does."""
    copy_elements(dst, None, src, None, non_blocking=non_blocking)


def copy_elements(dst, dst_elements: np.ndarray | None, src, src_elements: np.ndarray | None, *,
                  non_blocking: bool) -> None:
    """Copy into the storage elements `dst_elements` of device tensor `dst` (None: the view `dst` itself).

    `src` is a device tensor (its elements `src_elements`, or its own view
    when None), a host tensor, a numpy array or a number, broadcast to the
    destination's shape.
    """
    shape = dst.shape if dst_elements is None else dst_elements.shape
    if isinstance(src, (int, float, bool, np.number)):
        fill_into(dst, src, dst_elements)
        return
    on_device = getattr(src, "is_ahbm", False)
    if dst.device.is_host or not on_device:
        values = _host_values(src, src_elements, shape, dst)
        if dst.device.is_host:
            _host_target(dst, dst_elements, values)
            return
        transfers = functools.partial(_host_to_device, as_called(dst), dst_elements, values)
        waits, what = [], "host"
    else:
        if src_elements is None:
            _check_broadcast(src, shape)
        transfers = functools.partial(_device_to_device, as_called(dst), dst_elements, as_called(src),
                                      src_elements, shape)
        waits, what = list(src._pending_writes), src.name
    _enqueue(dst._ctx, dst, f"copy {what} -> {dst.name}", transfers, waits, non_blocking)


def fill_into(dst, value, dst_elements: np.ndarray | None = None) -> None:
    """`value` into every element of `dst` (or its storage elements `dst_elements`): an HBM fill, enqueued.

    A whole-storage fill is one fill per shard, kept as a constant by the
    storage (adr/0013); a view's fill writes only its own elements.
    """
    if dst.device.is_host:
        _host_target(dst, dst_elements, value)
        return
    constant = np.asarray(value, dtype=dst.dtype.numpy)
    fills = functools.partial(_fills, as_called(dst), dst_elements, constant)
    _enqueue(dst._ctx, dst, f"fill {dst.name}", fills, [], non_blocking=True)


def _fills(dst, dst_elements, constant: np.ndarray) -> list[Transfer]:
    sip, itemsize = dst.device.index, dst.dtype.itemsize
    if dst_elements is None and dst._is_whole_storage():
        return [Transfer(src=None, dst=hbm(sip, shard.cube), nbytes=shard.numel() * itemsize,
                         read=functools.partial(_the, constant), write=functools.partial(dst._device_fill, shard.index))
                for shard in dst.placement.shards]
    indices = (dst._layout.indices() if dst_elements is None else dst_elements).reshape(-1)
    return [Transfer(src=None, dst=hbm(sip, cube), nbytes=count * itemsize,
                     read=functools.partial(_the, constant),
                     write=functools.partial(dst._device_scatter, indices[lanes]),
                     dst_region=Region(dst.allocation, indices[lanes], itemsize))
            for cube, lanes, count in _every_replica(dst, indices)]


def _enqueue(ctx, dst, label: str, transfers, waits: list, non_blocking: bool) -> None:
    """Run the DMAs `transfers()` makes on `dst`'s current stream, after `waits`."""
    stream = ctx.current_stream(dst.device.index)
    data = not ctx.timing_only

    def copy() -> None:
        if waits:
            ctx.engine.wait_all(waits)
        ctx.machine.run_transfers(transfers(), label=label, data=data)

    handle = stream.enqueue(label, copy, spmd=("copy", dst, transfers, waits))
    dst._pending_writes.append(handle)
    if not non_blocking:
        ctx.block_on([handle])


def _host_target(dst, dst_elements, values) -> None:
    """Write into a host tensor's view, or into the storage elements `dst_elements` of it."""
    if dst_elements is None:
        dst._host_array[...] = values
    else:
        dst._host_storage[dst_elements] = values


def _host_values(src, src_elements, shape, dst) -> np.ndarray:
    """`src` (a tensor's view or storage elements, an array, a list) on the host, broadcast to `shape` in dst's dtype."""
    if src_elements is not None:
        values = src._host_storage[src_elements] if src.device.is_host else src._read_to_host("copy_()")
    else:
        values = src._read_to_host("copy_()") if hasattr(src, "_read_to_host") else src
    try:
        with device_arithmetic():
            return np.broadcast_to(np.asarray(values), shape).astype(dst.dtype.numpy, copy=True)
    except ValueError:
        raise TensorError(f"copy_: cannot copy shape {np.shape(values)} into {dst.name!r} of shape {shape}") from None


def _host_to_device(dst, dst_elements, values: np.ndarray) -> list[Transfer]:
    sip, itemsize = dst.device.index, dst.dtype.itemsize
    if dst_elements is None and dst._is_whole_storage():
        values = values.reshape(dst.placement.shape)
        return [Transfer(src=host(), dst=hbm(sip, shard.cube), nbytes=shard.numel() * itemsize,
                         read=functools.partial(slice_of, values, shard.index),
                         write=functools.partial(dst._device_write, shard.index),
                         dst_region=box_region(dst, shard.index))
                for shard in dst.placement.shards]
    indices = (dst._layout.indices() if dst_elements is None else dst_elements).reshape(-1)
    flat = values.reshape(-1)
    return [Transfer(src=host(), dst=hbm(sip, cube), nbytes=count * itemsize,
                     read=functools.partial(slice_of, flat, lanes),
                     write=functools.partial(dst._device_scatter, indices[lanes]),
                     dst_region=Region(dst.allocation, indices[lanes], itemsize))
            for cube, lanes, count in _every_replica(dst, indices)]


def _device_to_device(dst, dst_elements, src, src_elements, shape) -> list[Transfer]:
    if (dst_elements is None and src_elements is None and dst._is_whole_storage() and src._is_whole_storage()
            and dst.placement.shape == src.placement.shape):
        return _shard_to_shard(dst, src)
    if src_elements is None:
        src_indices = _broadcast_indices(src, shape)
    else:
        src_indices = np.broadcast_to(src_elements, shape)
    src_indices = src_indices.reshape(-1)
    dst_indices = (dst._layout.indices() if dst_elements is None else dst_elements).reshape(-1)
    itemsize = dst.dtype.itemsize
    transfers = []
    for dst_cube, dst_lanes, _ in _every_replica(dst, dst_indices):
        targets, sources = dst_indices[dst_lanes], src_indices[dst_lanes]
        for src_cube, src_lanes, count in src.element_groups(sources, near_cube=dst_cube):
            picked_targets, picked_sources = targets[src_lanes], sources[src_lanes]
            transfers.append(Transfer(
                src=hbm(src.device.index, src_cube), dst=hbm(dst.device.index, dst_cube), nbytes=count * itemsize,
                read=functools.partial(_converted_gather, src, picked_sources, dst.dtype.numpy),
                write=functools.partial(dst._device_scatter, picked_targets),
                src_region=Region(src.allocation, picked_sources, src.dtype.itemsize),
                dst_region=Region(dst.allocation, picked_targets, itemsize)))
    return transfers


def as_called(tensor):
    """A view of `tensor` as it is now, for work that runs later: `x.data = y` (or a module's `.to(dtype)`) in
    between does not redirect it, as a kernel keeps the pointer it was launched with."""
    return tensor._viewed(tensor._layout, "copy")


def _check_broadcast(src, shape) -> None:
    """A copy of `src` into `shape` is refused at the call where it does not broadcast."""
    try:
        if np.broadcast_shapes(tuple(src.shape), tuple(shape)) == tuple(shape):
            return
    except ValueError:
        pass
    raise TensorError(f"copy_: cannot copy {src.name!r} of shape {src.shape} into shape {shape}")


def _broadcast_indices(src, shape) -> np.ndarray:
    return np.broadcast_to(src._layout.indices(), shape)


def _every_replica(dst, indices: np.ndarray):
    """(cube, lanes, count) for every replica of `dst`'s placement: a write reaches each copy of the data."""
    placement = dst.placement
    groups = []
    for replica in range(placement.replicas):
        groups.extend(lanes_per_cube(placement, indices, replica))
    return groups




def _shard_to_shard(dst, src) -> list[Transfer]:
    transfers = []
    for dst_shard in dst.placement.shards:
        for src_shard in src._nearest_replica(dst_shard.cube):
            overlap = _overlap(dst_shard.index, src_shard.index)
            if overlap is None:
                continue
            count = int(np.prod([s.stop - s.start for s in overlap]))
            transfers.append(Transfer(
                src=hbm(src.device.index, src_shard.cube), dst=hbm(dst.device.index, dst_shard.cube),
                nbytes=count * dst.dtype.itemsize,
                read=functools.partial(_converted_read, src, overlap, dst.dtype.numpy),
                write=functools.partial(dst._device_write, overlap),
                src_region=box_region(src, overlap), dst_region=box_region(dst, overlap)))
    return transfers


def box_region(tensor, index: tuple[slice, ...]) -> Region:
    """The elements of `tensor`'s storage inside the box `index`, for hazard detection: one slice when contiguous."""
    shape = tensor.placement.shape
    first, stop, contiguous = box_span(shape, index)
    if contiguous:
        return Region(tensor.allocation, slice(first, stop), tensor.dtype.itemsize)
    strides = row_major_strides(shape)
    offsets = np.zeros((), dtype=np.int64)
    for s, stride in zip(index, strides):
        offsets = offsets[..., None] + np.arange(s.start, s.stop, dtype=np.int64) * stride
    return Region(tensor.allocation, offsets.reshape(-1), tensor.dtype.itemsize)


def slice_of(values: np.ndarray, index) -> np.ndarray:
    return values[index]


def _the(value):
    return value


def _converted_read(src, index, dtype) -> np.ndarray:
    with device_arithmetic():
        return src._device_read(index).astype(dtype, copy=False)


def _converted_gather(src, indices, dtype) -> np.ndarray:
    with device_arithmetic():
        return src._device_gather(indices).astype(dtype, copy=False)


def _overlap(a: tuple[slice, ...], b: tuple[slice, ...]) -> tuple[slice, ...] | None:
    parts = []
    for x, y in zip(a, b):
        start, stop = max(x.start, y.start), min(x.stop, y.stop)
        if start >= stop:
            return None
        parts.append(slice(start, stop))
    return tuple(parts)

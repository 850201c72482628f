"""Copies into device tensors: host→device and device→device, as DMAs on a stream.

Each copy becomes one DMA per pair of overlapping shards, so a tensor spread
over cubes moves over every HBM stack and mesh link it touches, and a copy
between two placements moves only the bytes each destination shard needs.
Host values are captured when the copy is enqueued (the host may reuse its
array at once); a device→device copy first waits for writes still in flight
to its source, whichever stream they are on. Each DMA names the tensor
elements it reads and writes, so the data executor reports a copy racing a
kernel or another copy on another stream (adr/0009).
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.machine import Transfer, hbm, host
from kernbench.machine.data_executor import Region
from kernbench.runtime_api.boxes import box_span, row_major_strides
from kernbench.runtime_api.errors import TensorError


def copy_into(dst, src, *, non_blocking: bool) -> None:
    """Copy `src` (a Tensor or numpy array) into `dst`, converting dtype and broadcasting as torch does."""
    if dst.device.is_host:
        dst._host_array[...] = _host_values(src, dst)
        return
    ctx = dst._ctx
    if isinstance(src, np.ndarray) or src.device.is_host:
        transfers = _host_to_device(dst, _host_values(src, dst))
        waits = []
        what = "host"
    else:
        _check_same_shape(dst, src)
        transfers = _device_to_device(dst, src)
        waits = list(src._pending_writes)
        what = src.name
    stream = ctx.current_stream(dst.device.index)
    data = not ctx.timing_only

    def copy() -> None:
        if waits:
            ctx.engine.wait_all(waits)
        ctx.machine.run_transfers(transfers, label=f"copy {what} -> {dst.name}", data=data)

    handle = stream.enqueue(f"copy {what} -> {dst.name}", copy)
    dst._pending_writes.append(handle)
    if not non_blocking:
        ctx.block_on([handle])


def _host_values(src, dst) -> np.ndarray:
    values = src if isinstance(src, np.ndarray) else src.numpy()
    try:
        return np.broadcast_to(np.asarray(values), dst.shape).astype(dst.dtype.numpy, copy=True)
    except ValueError:
        raise TensorError(f"copy_: cannot copy shape {np.shape(values)} into {dst.name!r} of shape {dst.shape}") from None


def _check_same_shape(dst, src) -> None:
    if dst.shape != src.shape:
        raise TensorError(f"copy_: {src.name!r} has shape {src.shape} but {dst.name!r} has shape {dst.shape}")


def _host_to_device(dst, values: np.ndarray) -> list[Transfer]:
    sip = dst.device.index
    return [Transfer(src=host(), dst=hbm(sip, shard.cube), nbytes=shard.numel() * dst.dtype.itemsize,
                     read=functools.partial(slice_of, values, shard.index),
                     write=functools.partial(dst._device_write, shard.index),
                     dst_region=box_region(dst, shard.index))
            for shard in dst.placement.shards]


def _device_to_device(dst, src) -> list[Transfer]:
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
    """The elements of `tensor` inside the box `index`, for hazard detection: one slice when they are contiguous."""
    first, stop, contiguous = box_span(tensor.shape, index)
    if contiguous:
        return Region(tensor.allocation, slice(first, stop), tensor.dtype.itemsize)
    strides = row_major_strides(tensor.shape)
    offsets = np.zeros((), dtype=np.int64)
    for s, stride in zip(index, strides):
        offsets = offsets[..., None] + np.arange(s.start, s.stop, dtype=np.int64) * stride
    return Region(tensor.allocation, offsets.reshape(-1), tensor.dtype.itemsize)


def slice_of(values: np.ndarray, index) -> np.ndarray:
    return values[index]


def _converted_read(src, index, dtype) -> np.ndarray:
    return src._device_read(index).astype(dtype, copy=False)


def _overlap(a: tuple[slice, ...], b: tuple[slice, ...]) -> tuple[slice, ...] | None:
    parts = []
    for x, y in zip(a, b):
        start, stop = max(x.start, y.start), min(x.stop, y.stop)
        if start >= stop:
            return None
        parts.append(slice(start, stop))
    return tuple(parts)

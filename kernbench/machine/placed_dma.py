"""DMAs of any set of a placed tensor's elements between its HBM and one PE's TCM.

A tensor spread over cubes by a `DPPolicy` is read or written with one DMA
per cube that holds some of the touched elements (from the replica nearest
the PE), all issued together through the PE's least busy DMA engine — the
rule a Triton program's loads and stores follow (runtime_api/kernel_port.py),
kept here so the collectives' PE programs move region elements the same way.
Values are read at each DMA's start and written at its end (`run_transfers`).
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.machine.data_executor import Region
from kernbench.machine.endpoints import hbm, tcm
from kernbench.machine.machine import Machine, Transfer
from kernbench.machine.memory import Allocation
from kernbench.machine.pe import PeUnits


def load_elements(machine: Machine, pe: PeUnits, allocation: Allocation, dtype: np.dtype, indices: np.ndarray, *,
                  label: str, program: int | None, data: bool) -> np.ndarray:
    """HBM → TCM: the elements `indices` of `allocation` (viewed as `dtype`), in order.

    Without `data` (timing-only runs) the DMAs are timed identically and the
    returned array is uninitialized.
    """
    out = np.empty(indices.size, dtype=dtype)
    if indices.size:
        storage = allocation.storage

        def read(lanes, selector):
            # A slice is a view of memory: copy it now, or a store landing before this DMA's end would show.
            values = storage.typed(dtype, selector)[selector]
            return values.copy() if isinstance(selector, slice) else values

        def write(lanes, selector, values):
            out[lanes] = values

        _dma(machine, pe, allocation, indices, dtype.itemsize, to_tcm=True, read=read, write=write,
             label=label, program=program, data=data)
    return out


def store_elements(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray, values: np.ndarray, *,
                   label: str, program: int | None, data: bool) -> None:
    """TCM → HBM: `values` into the elements `indices` of `allocation` (viewed as `values.dtype`)."""
    if not indices.size:
        return
    storage = allocation.storage

    def read(lanes, selector):
        return values[lanes]

    def write(lanes, selector, stored):
        storage.typed(values.dtype, selector)[selector] = stored

    _dma(machine, pe, allocation, indices, values.dtype.itemsize, to_tcm=False, read=read, write=write,
         label=label, program=program, data=data)


def _dma(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray, itemsize: int, *, to_tcm: bool,
         read, write, label: str, program: int | None, data: bool) -> None:
    here = tcm(pe.sip, pe.cube, pe.pe)
    replica = machine.nearest_replica(allocation.placement, pe.sip, pe.cube)
    transfers = []
    for cube, lanes, count in lanes_per_cube(allocation.placement, indices, replica):
        memory = hbm(pe.sip, cube)
        selector = _selector(indices[lanes])
        region = Region(allocation, selector, itemsize)
        transfers.append(Transfer(
            src=memory if to_tcm else here, dst=here if to_tcm else memory, nbytes=count * itemsize,
            read=functools.partial(read, lanes, selector), write=functools.partial(write, lanes, selector),
            src_region=region if to_tcm else None, dst_region=None if to_tcm else region))
    machine.run_transfers(transfers, label=label, data=data, device=f"sip{pe.sip}", unit=f"{pe.name}.dma",
                          program=program, dma_engine=pe.free_dma_engine())


def lanes_per_cube(placement, indices: np.ndarray, replica: int) -> list[tuple[int, slice | np.ndarray, int]]:
    """(cube, lanes, lane count) for each cube of `replica` holding some of `indices`, in cube order.

    Each cube's shards tile a box of the tensor (the cube-level split), so
    membership is tested against a handful of boxes, not every PE shard; a
    block that lies in one box — the usual case, a program near its data —
    is one DMA with every lane.
    """
    if len(placement.shards) == 1:
        return [(placement.shards[0].cube, slice(None), indices.size)]
    boxes = _cube_boxes(placement, replica)
    if len(boxes) == 1:
        return [(boxes[0][0], slice(None), indices.size)]
    coords = np.unravel_index(indices, placement.shape) if len(placement.shape) > 1 else (indices,)
    low = [int(axis.min()) for axis in coords]
    high = [int(axis.max()) for axis in coords]
    for cube, starts, stops in boxes:
        if all(start <= lo and hi < stop for start, stop, lo, hi in zip(starts, stops, low, high)):
            return [(cube, slice(None), indices.size)]
    groups = []
    for cube, starts, stops in boxes:
        inside = np.ones(indices.shape, dtype=bool)
        for axis, start, stop in zip(coords, starts, stops):
            inside &= (axis >= start) & (axis < stop)
        lanes = np.flatnonzero(inside)
        if lanes.size:
            groups.append((cube, lanes, lanes.size))
    return groups


_BOXES_KEPT = 1024
_boxes: dict[tuple[int, int], tuple[object, list]] = {}


def _cube_boxes(placement, replica: int) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(cube, box starts, box stops) of each cube of `replica`, in cube order: the bounds of its shards.

    Remembered per placement (by identity, holding it so the id stays its
    own; a placement's slices make it unhashable), since every DMA of a
    kernel asks again.
    """
    key = (id(placement), replica)
    kept = _boxes.get(key)
    if kept is not None:
        return kept[1]
    if len(_boxes) >= _BOXES_KEPT:
        _boxes.clear()
    boxes = _boxes_of(placement, replica)
    _boxes[key] = (placement, boxes)
    return boxes


def _boxes_of(placement, replica: int) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    bounds: dict[int, tuple[list[int], list[int]]] = {}
    for shard in placement.shards:
        if shard.replica != replica:
            continue
        entry = bounds.get(shard.cube)
        if entry is None:
            bounds[shard.cube] = ([s.start for s in shard.index], [s.stop for s in shard.index])
        else:
            for axis, s in enumerate(shard.index):
                entry[0][axis] = min(entry[0][axis], s.start)
                entry[1][axis] = max(entry[1][axis], s.stop)
    return [(cube, tuple(starts), tuple(stops)) for cube, (starts, stops) in sorted(bounds.items())]


def _selector(indices: np.ndarray) -> slice | np.ndarray:
    """A slice when `indices` is one ascending run (a view, no gather), else the indices themselves."""
    first = int(indices[0])
    if indices.size == 1 or (int(indices[-1]) - first == indices.size - 1 and bool((np.diff(indices) == 1).all())):
        return slice(first, first + indices.size)
    return indices

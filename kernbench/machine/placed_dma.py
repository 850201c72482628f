"""DMAs of any set of a placed tensor's elements between its HBM and one PE's TCM.

A tensor spread over cubes by a `DPPolicy` is read or written with one DMA
per cube that holds some of the touched elements (from the replica nearest
the PE), all issued together through the PE's least busy DMA engine — the
rule a Triton program's loads and stores follow (runtime_api/launch/kernel_port.py),
kept here so the collectives' PE programs move region elements the same way.
Values are read at each DMA's start and written at its end (`run_transfers`).
`issue_load` / `issue_store` are the same DMAs for work that does not block
(a collective's started loads and stores run as engine tasks). A contiguous
run of elements is a slice throughout: it is placed by its bounds and named
to the hazard detector by the slice, never expanded to an index array.
`RunDmas` serves a caller that moves many runs of one region held by one
cube (a collective's pieces): the same DMAs, with what does not change
between them worked out once.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from kernbench.machine.data_executor import Region
from kernbench.machine.endpoints import hbm, tcm
from kernbench.machine.machine import Machine, landing_time
from kernbench.machine.memory import Allocation
from kernbench.machine.pe import PeUnits
from kernbench.machine.strided_runs import StridedRuns, gather, scatter


def load_elements(machine: Machine, pe: PeUnits, allocation: Allocation, dtype: np.dtype,
                  indices: np.ndarray | slice | StridedRuns, *, label: str, program: int | None, data: bool,
                  pieces: tuple[DmaPiece, ...] | None = None, l2_window: int | None = None) -> np.ndarray:
    """HBM → TCM: the elements `indices` of `allocation` (viewed as `dtype`), in order.

    `indices` is an index array, or a slice (step 1) for a contiguous run, which
    then never becomes an array. Without `data` (timing-only runs) the DMAs are
    timed identically, storage is never touched and the returned array is
    uninitialized. `pieces`, if given, is `plan_dmas` of these elements, kept by the caller; `l2_window` is
    `Machine.issue_dma`'s.
    """
    out, landing = issue_load(machine, pe, allocation, dtype, indices, label=label, program=program, data=data,
                              owner=machine.engine.current_process, pieces=pieces, l2_window=l2_window)
    _land_all(machine, landing)
    return out


def store_elements(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray | slice,
                   values: np.ndarray, *, label: str, program: int | None, data: bool,
                   pieces: tuple[DmaPiece, ...] | None = None) -> None:
    """TCM → HBM: `values` into the elements `indices` (an array, or a slice) of `allocation` (viewed as
    `values.dtype`); `pieces` as for `load_elements`."""
    _land_all(machine, issue_store(machine, pe, allocation, indices, values, label=label, program=program, data=data,
                                   owner=machine.engine.current_process, pieces=pieces))


def issue_load(machine: Machine, pe: PeUnits, allocation: Allocation, dtype: np.dtype, indices: np.ndarray | slice,
               *, label: str, program: int | None, data: bool, owner,
               pieces: tuple[DmaPiece, ...] | None = None, l2_window: int | None = None) -> tuple[np.ndarray, list]:
    """`load_elements` without blocking: reserve its DMAs now; return the array they fill and their
    `(end, effect)` landings, each to pass to `machine.land` at its end (`owner`: who issues them). Without
    `data` the array is a read-only placeholder of the right shape that holds no memory: a timing-only run's
    thousands of programs in flight would otherwise each hold a tile's worth of bytes nobody reads."""
    count = _count(indices)
    out = np.empty(count, dtype=dtype) if data else np.broadcast_to(np.zeros((), dtype=dtype), (count,))
    if not count:
        return out, []
    read = write = None
    if data:
        storage = allocation.storage

        def read(lanes, selector):
            return gather(storage.typed(dtype, selector), selector)

        def write(lanes, selector, values):
            out[lanes] = values

    if pieces is None:
        pieces = plan_dmas(machine, pe, allocation, indices, dtype.itemsize)
    return out, _issue(machine, pe, pieces, to_tcm=True, read=read, write=write, label=label, program=program,
                       data=data, owner=owner, l2_window=l2_window)


def issue_store(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray | slice,
                values: np.ndarray, *, label: str, program: int | None, data: bool, owner,
                pieces: tuple[DmaPiece, ...] | None = None) -> list:
    """`store_elements` without blocking: reserve its DMAs now; return their `(end, effect)` landings."""
    if not _count(indices):
        return []
    read = write = None
    if data:
        storage = allocation.storage

        def read(lanes, selector):
            return values[lanes]

        def write(lanes, selector, stored):
            scatter(storage.typed(values.dtype, selector), selector, stored)

    if pieces is None:
        pieces = plan_dmas(machine, pe, allocation, indices, values.dtype.itemsize)
    return _issue(machine, pe, pieces, to_tcm=False, read=read, write=write, label=label, program=program, data=data,
                  owner=owner)


def home_cube(machine: Machine, pe: PeUnits, allocation: Allocation, first: int, stop: int) -> int | None:
    """The cube whose HBM serves `pe` every element of [first, stop) of `allocation` (from the replica nearest
    the PE), or None when no one cube holds them all (or the range is empty)."""
    placement = allocation.placement
    if stop <= first:
        return None
    groups = _lanes(_layout(machine, placement), slice(first, stop), replica_for(machine, pe, placement))
    if len(groups) != 1 or groups[0][1] is not _ALL:
        return None
    return groups[0][0]


class RunDmas:
    """DMAs of contiguous runs of one allocation between HBM and one PE's TCM: for a caller that moves many runs
    of the same elements (a collective's pieces of a region).

    A run is served by the one cube that holds all of it (`of`) or, over a placement that stands for a GPU's
    address interleave (`Placement.address_interleaved`), by every cube of it alike (`spread`): one DMA per
    cube, the run's elements dealt in order into shares equal to within one element, the first cubes taking
    the odd ones, so a run costs the same wherever it starts. A collective's chunk sits at a rank-dependent
    offset of its buffer; on a GPU the address hash spreads it over every stack at any offset, where the
    placement's coarse runs (`policy.placement.default`) would put it on whichever cube that offset falls in.

    What `issue_load` and `issue_store` work out on every call — the PE's endpoints, the replica, the cubes,
    the paths — is worked out once, so a run is one `Machine.issue_path_dma` per cube serving it, with the
    fields theirs would have: reservation, op-log record, data effect and hazard tracking. `l2_window` is
    `Machine.issue_dma`'s, for every load.
    """

    __slots__ = ("_machine", "_pe", "_allocation", "_dtype", "_itemsize", "_to_tcm", "_to_hbm", "_device", "_unit",
                 "_label", "_program", "_data", "_l2_window")

    @classmethod
    def of(cls, machine: Machine, pe: PeUnits, allocation: Allocation, dtype: np.dtype, first: int, stop: int, *,
           label: str, program: int | None, data: bool, l2_window: int | None = None) -> "RunDmas | None":
        """DMAs of runs within elements [first, stop) of `allocation` from the one cube holding them all, or None
        when no one cube does."""
        cube = home_cube(machine, pe, allocation, first, stop)
        return None if cube is None else cls(machine, pe, allocation, dtype, (cube,), label, program, data,
                                             l2_window)

    @classmethod
    def spread(cls, machine: Machine, pe: PeUnits, allocation: Allocation, dtype: np.dtype, *, label: str,
               program: int | None, data: bool, l2_window: int | None = None) -> "RunDmas":
        """DMAs of any run of `allocation` (whose placement is address-interleaved) spread over its cubes."""
        return cls(machine, pe, allocation, dtype, allocation.placement.cubes(), label, program, data, l2_window)

    def __init__(self, machine, pe, allocation, dtype, cubes, label, program, data, l2_window):
        ends = _ends(machine, pe)
        self._machine = machine
        self._pe = pe
        self._allocation = allocation
        self._dtype = np.dtype(dtype)
        self._itemsize = self._dtype.itemsize
        memories = [ends.hbm(cube) for cube in cubes]
        self._to_tcm = [machine.dma_path(memory, ends.here) for memory in memories]
        self._to_hbm = [machine.dma_path(ends.here, memory) for memory in memories]
        self._device = ends.device
        self._unit = ends.unit
        self._label = label
        self._program = program
        self._data = data
        self._l2_window = l2_window

    def _cube_shares(self, count: int) -> list[tuple[int, int, int]]:
        """(cube's index among the serving cubes, offset, elements) of each DMA moving a run of `count`."""
        cubes = len(self._to_tcm)
        if cubes == 1:
            return [(0, 0, count)]
        each, odd = divmod(count, cubes)
        shares, offset = [], 0
        for index in range(min(cubes, count)):
            size = each + (index < odd)
            shares.append((index, offset, size))
            offset += size
        return shares

    def load(self, first: int, stop: int, owner) -> tuple[np.ndarray, list]:
        """`issue_load` of elements [first, stop) (not empty): `(out, landing)`, its DMAs' `(end, effect)` in
        landing order."""
        out = np.empty(stop - first, dtype=self._dtype)
        machine, engine, landing = self._machine, self._pe.free_dma_engine(), []
        for index, offset, count in self._cube_shares(stop - first):
            selector = slice(first + offset, first + offset + count)
            read = write = None
            if self._data:
                read = functools.partial(_read_run, self._allocation.storage, self._dtype, selector)
                write = functools.partial(out.__setitem__, slice(offset, offset + count))
            landing.append(machine.issue_path_dma(
                self._to_tcm[index], count * self._itemsize, read, write,
                Region(self._allocation, selector, self._itemsize), None, self._label, self._data, self._device,
                self._unit, self._program, engine, owner, self._l2_window))
        if len(landing) > 1:
            landing.sort(key=landing_time)  # stable: equal ends land in cube order, as issued
        return out, landing

    def store(self, first: int, stop: int, values: np.ndarray, owner) -> list:
        """`issue_store` of `values` into elements [first, stop) (not empty): its DMAs' `(end, effect)` in landing
        order."""
        machine, engine, landing = self._machine, self._pe.free_dma_engine(), []
        for index, offset, count in self._cube_shares(stop - first):
            selector = slice(first + offset, first + offset + count)
            read = write = None
            if self._data:
                read = functools.partial(values.__getitem__, slice(offset, offset + count))
                write = functools.partial(_write_run, self._allocation.storage, values.dtype, selector)
            landing.append(machine.issue_path_dma(
                self._to_hbm[index], count * self._itemsize, read, write, None,
                Region(self._allocation, selector, self._itemsize), self._label, self._data, self._device,
                self._unit, self._program, engine, owner))
        if len(landing) > 1:
            landing.sort(key=landing_time)
        return landing


def _read_run(storage, dtype, selector: slice) -> np.ndarray:
    # A slice is a view of memory: copy it now, or a store landing before this DMA's end would show.
    return storage.typed(dtype, selector)[selector].copy()


def _write_run(storage, dtype, selector: slice, values: np.ndarray) -> None:
    storage.typed(dtype, selector)[selector] = values


def _land_all(machine: Machine, landing: list) -> None:
    engine = machine.engine
    for end, effect in landing:
        engine.sleep_until(end)
        machine.land(effect)


class DmaPiece(NamedTuple):
    """One DMA of a placed access: the HBM endpoint of the cube holding its elements, which lanes of the access
    they are (`slice(None)`: all), how many, the elements as a slice or index array, and their `Region`."""

    memory: object
    lanes: slice | np.ndarray
    count: int
    selector: slice | np.ndarray
    region: Region


def replica_for(machine: Machine, pe: PeUnits, placement) -> int:
    """The replica of `placement` whose elements `pe` moves: the one nearest it (0 when there is one)."""
    return 0 if _layout(machine, placement).replicas == 1 else machine.nearest_replica(placement, pe.sip, pe.cube)


def plan_dmas(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray | slice, itemsize: int,
              replica: int | None = None) -> tuple[DmaPiece, ...]:
    """The DMAs that move elements `indices` of `allocation` between `pe`'s TCM and HBM, in cube order: one per
    cube of `replica` (default `replica_for` the PE) holding some of them. A function of its arguments, the PE's
    SIP and the allocation's placement only, so a caller that moves the same elements again may keep it
    (`issue_load`'s `pieces`)."""
    ends = _ends(machine, pe)
    placement = allocation.placement
    if replica is None:
        replica = replica_for(machine, pe, placement)
    pieces = []
    if isinstance(indices, StridedRuns):
        for cube, lanes, count, selector in _runs_pieces(_layout(machine, placement), indices, replica):
            pieces.append(DmaPiece(ends.hbm(cube), lanes, count, selector, Region(allocation, selector, itemsize)))
        return tuple(pieces)
    for cube, lanes, count in _lanes(_layout(machine, placement), indices, replica):
        if isinstance(indices, slice):
            selector = indices if lanes is _ALL else _selector(indices.start + lanes)
        else:
            selector = _selector(indices[lanes])
        pieces.append(DmaPiece(ends.hbm(cube), lanes, count, selector, Region(allocation, selector, itemsize)))
    return tuple(pieces)


def kept_dmas(machine: Machine, pe: PeUnits, allocation: Allocation, indices: np.ndarray | slice, itemsize: int,
              by_replica: dict[int, tuple[DmaPiece, ...]]) -> tuple[DmaPiece, ...]:
    """`plan_dmas` of these elements from `pe`, kept in `by_replica` (the caller's, for these elements only) under
    the replica the PE reads, so PEs reading the same replica work it out once."""
    replica = replica_for(machine, pe, allocation.placement)
    pieces = by_replica.get(replica)
    if pieces is None:
        pieces = by_replica[replica] = plan_dmas(machine, pe, allocation, indices, itemsize, replica)
    return pieces


def _issue(machine: Machine, pe: PeUnits, pieces: tuple[DmaPiece, ...], *, to_tcm: bool, read, write, label: str,
           program: int | None, data: bool, owner, l2_window: int | None = None) -> list:
    """The DMAs `pieces`, issued in cube order through the PE's least busy DMA engine (what
    `Machine.issue_transfers` would do with their `Transfer`s, without building them)."""
    ends = _ends(machine, pe)
    here = ends.here
    engine = pe.free_dma_engine()
    landing = []
    for memory, lanes, count, selector, region in pieces:
        landing.append(machine.issue_dma(
            memory if to_tcm else here, here if to_tcm else memory, count * region.itemsize,
            None if read is None else functools.partial(read, lanes, selector),
            None if write is None else functools.partial(write, lanes, selector),
            region if to_tcm else None, None if to_tcm else region,
            label, data, ends.device, ends.unit, program, engine, owner, l2_window))
    if len(landing) > 1:
        landing.sort(key=landing_time)  # stable: equal ends land in cube order, as issued
    return landing


class _Ends:
    """One PE's side of its DMAs: its TCM, the HBM of each cube, its op-log names.

    Kept per PE in the run's caches (`_ends`), so the endpoints are the same
    objects on every DMA, which makes `Machine.issue_dma` find their route by
    identity.
    """

    __slots__ = ("here", "device", "unit", "_hbm")

    def __init__(self, pe: PeUnits):
        self.here = tcm(pe.sip, pe.cube, pe.pe)
        self.device = f"sip{pe.sip}"
        self.unit = f"{pe.name}.dma"
        self._hbm: dict[int, object] = {}

    def hbm(self, cube: int):
        endpoint = self._hbm.get(cube)
        if endpoint is None:
            endpoint = self._hbm[cube] = hbm(self.here.sip, cube)
        return endpoint


def _ends(machine: Machine, pe: PeUnits) -> _Ends:
    kept = machine.caches["placed_dma.ends"]
    key = (pe.sip, pe.cube, pe.pe)
    ends = kept.get(key)
    if ends is None:
        ends = kept[key] = _Ends(pe)
    return ends


def _count(indices: np.ndarray | slice | StridedRuns) -> int:
    return indices.stop - indices.start if isinstance(indices, slice) else indices.size


def lanes_per_cube(placement, indices: np.ndarray | slice, replica: int) -> list[tuple[int, slice | np.ndarray, int]]:
    """(cube, lanes, lane count) for each cube of `replica` holding some of `indices`, in cube order.

    `indices` is an index array or a slice (step 1). Each cube's shards tile a
    box of the tensor (the cube-level split), so membership is tested against
    a handful of boxes, not every PE shard; a block that lies in one box — the
    usual case, a program near its data — is one DMA with every lane
    (`slice(None)`).
    """
    return _lanes(_Layout(placement), indices, replica)


def _lanes(layout: _Layout, indices: np.ndarray | slice, replica: int) -> list[tuple[int, slice | np.ndarray, int]]:
    """`lanes_per_cube` of the layout's placement (the placed DMAs' own calls find the layout in the run's
    caches: `_layout`)."""
    placement = layout.placement
    count = _count(indices)
    if len(placement.shards) == 1:
        return [(placement.shards[0].cube, _ALL, count)]
    boxes = layout.boxes(replica)
    if len(boxes) == 1:
        return [(boxes[0][0], _ALL, count)]
    if isinstance(indices, slice):
        bounds = _run_bounds(placement.shape, indices.start, indices.stop)
        if bounds is not None:
            cube = _box_holding(boxes, *bounds)
            if cube is not None:
                return [(cube, _ALL, count)]
        indices = np.arange(indices.start, indices.stop, dtype=np.int64)
    else:
        cube = layout.run_holding(replica, indices)
        if cube is not None:
            return [(cube, _ALL, count)]
    coords = np.unravel_index(indices, placement.shape) if len(placement.shape) > 1 else (indices,)
    cube = _box_holding(boxes, [int(axis.min()) for axis in coords], [int(axis.max()) for axis in coords])
    if cube is not None:
        return [(cube, _ALL, count)]
    groups = []
    for cube, starts, stops in boxes:
        inside = np.ones(indices.shape, dtype=bool)
        for axis, start, stop in zip(coords, starts, stops):
            inside &= (axis >= start) & (axis < stop)
        lanes = np.flatnonzero(inside)
        if lanes.size:
            groups.append((cube, lanes, lanes.size))
    return groups


_ALL = slice(None)


def _runs_pieces(layout: _Layout, runs: StridedRuns, replica: int) -> list[tuple[int, slice, int, object]]:
    """(cube, lanes, lane count, elements) of each DMA moving `runs`: a block in one cube's box is one DMA of
    every lane; over the flat runs of an interleaved placement, the part in each cube (whole rows, and the
    rows its bounds cut); across the boxes of a placement of more axes, the pieces of its index array."""
    boxes = layout.boxes(replica)
    if len(layout.placement.shards) == 1 or len(boxes) == 1:
        return [(boxes[0][0] if boxes else layout.placement.shards[0].cube, _ALL, runs.size, runs)]
    if len(layout.placement.shape) == 1:
        pieces = []
        for cube, (first,), (stop,) in boxes:
            if first < runs.stop and runs.start < stop:
                pieces.extend((cube, lanes, lanes.stop - lanes.start, selector)
                              for lanes, selector in runs.within(first, stop))
        return pieces
    cube = _matrix_box_holding(layout.placement.shape, boxes, runs)
    if cube is not None:
        return [(cube, _ALL, runs.size, runs)]
    indices = runs.indices()
    return [(cube, lanes, count, indices if lanes is _ALL else _selector(indices[lanes]))
            for cube, lanes, count in _lanes(layout, indices, replica)]


def _matrix_box_holding(shape, boxes, runs: StridedRuns) -> int | None:
    """The cube whose box holds all of `runs` when they are a box of a matrix's rows and columns (each run
    within one row, the runs whole rows apart), else None."""
    if len(shape) != 2 or runs.stride % shape[1] or runs.start % shape[1] + runs.width > shape[1]:
        return None
    row, column = divmod(runs.start, shape[1])
    last_row = row + (runs.count - 1) * (runs.stride // shape[1])
    return _box_holding(boxes, [row, column], [last_row, column + runs.width - 1])


def _box_holding(boxes, low, high) -> int | None:
    """The first cube whose box holds every coordinate from `low` to `high` (per axis), else None."""
    for cube, starts, stops in boxes:
        if all(start <= lo and hi < stop for start, stop, lo, hi in zip(starts, stops, low, high)):
            return cube
    return None


def _run_bounds(shape, first: int, stop: int):
    """Per-axis (low, high) coordinates of the flat run [first, stop) when it lies in one row of the last
    axis (so every other axis is constant), else None."""
    if len(shape) <= 1:
        return [first], [stop - 1]
    last = shape[-1]
    row, column = divmod(first, last)
    if row != (stop - 1) // last:
        return None
    low = [column]
    for extent in reversed(shape[:-1]):
        row, coordinate = divmod(row, extent)
        low.append(coordinate)
    low.reverse()
    return low, low[:-1] + [column + (stop - 1 - first)]


class _Layout:
    """What DMAs ask of one placement, worked out once: its replica count, each replica's cube boxes, and
    which of those boxes are one run of flat indices."""

    __slots__ = ("placement", "replicas", "_boxes", "_runs")

    def __init__(self, placement):
        self.placement = placement  # held, so the id it is kept under stays its own
        self.replicas = placement.replicas
        self._boxes: dict[int, list] = {}
        self._runs: dict[int, list] = {}

    def boxes(self, replica: int) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
        boxes = self._boxes.get(replica)
        if boxes is None:
            boxes = self._boxes[replica] = _boxes_of(self.placement, replica)
        return boxes

    def run_holding(self, replica: int, indices: np.ndarray) -> int | None:
        """The cube of `replica` whose box is one flat run holding every one of `indices`, else None: two
        reductions settle an index array inside a row-wise box, where unravelling it would take the array
        apart per axis. A replica's boxes are disjoint, so it is the cube `_box_holding` finds."""
        runs = self._runs.get(replica)
        if runs is None:
            shape = self.placement.shape
            runs = self._runs[replica] = [(cube, *run) for cube, starts, stops in self.boxes(replica)
                                          if (run := _flat_run(shape, starts, stops)) is not None]
        if not runs:  # no box is a run (a column-wise split): nothing to reduce for
            return None
        lowest, highest = int(indices.min()), int(indices.max())
        for cube, first, stop in runs:
            if first <= lowest and highest < stop:
                return cube
        return None


_LAYOUTS_KEPT = 1024


def _layout(machine: Machine, placement) -> _Layout:
    """The placement's `_Layout`, kept in the run's caches by identity (a placement's slices make it unhashable;
    the layout holds the placement, so its id stays its own while kept), since every DMA of a kernel or a
    collective asks again."""
    kept = machine.caches["placed_dma.layouts"]
    layout = kept.get(id(placement))
    if layout is None or layout.placement is not placement:
        if len(kept) >= _LAYOUTS_KEPT:
            kept.clear()
        layout = kept[id(placement)] = _Layout(placement)
    return layout


def _flat_run(shape, starts, stops) -> tuple[int, int] | None:
    """[first, stop) of the flat (row-major) indices of the box, when they are one run: every axis before
    the first one wider than 1 has extent 1 and every axis after it is whole. Else None."""
    axis = next((a for a, (start, stop) in enumerate(zip(starts, stops)) if stop - start > 1), len(shape) - 1)
    if any(starts[a] != 0 or stops[a] != shape[a] for a in range(axis + 1, len(shape))):
        return None
    first = 0
    for extent, start in zip(shape, starts):
        first = first * extent + start
    inner = 1
    for extent in shape[axis + 1:]:
        inner *= extent
    return first, first + (stops[axis] - starts[axis]) * inner


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

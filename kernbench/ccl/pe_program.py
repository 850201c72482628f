"""`PeProgram`: what a collective algorithm's code sees for one member, running on that member's PE.

Every method is one PE op (or a few of the same kind) charged to the
member's PE and logged under the collective's label with the member's rank
as program number: `load`/`store` are DMAs between the region's HBM and the
PE's TCM through a DMA engine (one per cube holding touched elements, as a
kernel's loads are), `reduce`/`finalize` run on the vector unit, `send`/
`recv` go through the collective's IPCQ queues. Values are real numpy arrays
in the region's dtype; in a timing-only collective they are uninitialized
placeholders of the right size and every op is timed exactly as with data.
"""

from __future__ import annotations

import functools

import numpy as np

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.queues import CollectiveQueues
from kernbench.dtypes import resolve_dtype
from kernbench.machine import Machine
from kernbench.machine.pe import vector_ps
from kernbench.machine.placed_dma import issue_load, issue_store, load_elements, store_elements

# Reductions are done in the data's dtype, one rounding per pairwise op, as NCCL does.
_REDUCERS = {"sum": np.add, "avg": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}
# A program's list of started work is swept of finished successes when it reaches this length, then at
# twice what survived: amortized O(1) per start, memory bounded by the work still running.
_PRUNE_FROM = 64


class PeProgram:
    """One member's context: `rank`, `size`, `config`, `member`, `request`, and the PE ops."""

    def __init__(self, machine: Machine, request, member, queues: CollectiveQueues):
        self.rank = member.rank
        self.size = len(request.members)
        self.config = request.config
        self.request = request
        self.member = member
        self.settings = queues.settings
        self.name = f"{request.label} rank {member.rank} on sip{member.sip}.cube{member.cube}.pe{member.pe}"
        self._machine = machine
        self._pe = machine.pe(member.sip, member.cube, member.pe)
        self._queues = queues
        self._label = request.label
        self._data = not request.timing_only
        # Started work not known to have succeeded yet. Finished successes are dropped as more is
        # started (their results can be large buffers); failures stay, so `join_started` re-raises them.
        self._started = []
        self._prune_at = _PRUNE_FROM
        self._part_names: dict[str, str] = {}  # what started work is called in reports, by function name
        self._vector_ps: dict[int, int] = {}  # vector-unit time by element count

    def slot_elements(self, dtype: np.dtype) -> int:
        """Elements of `dtype` in one IPCQ slot: the piece size that makes one piece one message."""
        return max(1, self.settings.slot_size // np.dtype(dtype).itemsize)

    # ---- memory ------------------------------------------------------------------------
    def load(self, region, start: int, stop: int) -> np.ndarray:
        """HBM → TCM: elements `region.indices[start:stop]`, in that order."""
        return load_elements(self._machine, self._pe, region.allocation, region.dtype, region.selector(start, stop),
                             label=self._label, program=self.rank, data=self._data)

    def store(self, region, start: int, stop: int, values: np.ndarray) -> None:
        """TCM → HBM: `values` into elements `region.indices[start:stop]`; visible when the DMA ends."""
        self._check_store(region, start, stop, values)
        store_elements(self._machine, self._pe, region.allocation, region.selector(start, stop), values,
                       label=self._label, program=self.rank, data=self._data)

    def _check_store(self, region, start: int, stop: int, values: np.ndarray) -> None:
        if values.size != stop - start or values.dtype != region.dtype:
            raise CollectiveError(f"{self.name}: store of {values.size} {values.dtype} values into elements "
                                  f"[{start}, {stop}) of a {region.dtype} region")

    # ---- compute -----------------------------------------------------------------------
    def reduce(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """`a op b` elementwise in their dtype on the vector unit (`avg` adds; `finalize` divides)."""
        if a.shape != b.shape:
            raise CollectiveError(f"{self.name}: reduce of {a.size} and {b.size} elements")
        self._vector(f"reduce_{op}", a)
        return _REDUCERS[op](a, b) if self._data else a

    def finalize(self, op: str, values: np.ndarray) -> np.ndarray:
        """The last step of a reduction: `avg` divides the sum by the group size (a vector op); others pass."""
        if op != "avg":
            return values
        self._vector("average", values)
        if not self._data:
            return values
        if values.dtype.kind in "iu":
            return values // values.dtype.type(self.size)
        return np.divide(values, values.dtype.type(self.size))

    def _vector(self, op: str, values: np.ndarray) -> None:
        size = values.size
        duration = self._vector_ps.get(size)
        if duration is None:  # pieces come in a few sizes; the rule's bigint arithmetic once per size
            duration = self._vector_ps[size] = vector_ps(self._machine.topology, size)
        self._machine.compute(self._pe.vector, duration, kind="vector", label=self._label, program=self.rank,
                              args={"op": op, "elements": size, "dtype": _dtype_name(values.dtype)})

    # ---- messages ----------------------------------------------------------------------
    def send(self, peer: int, values: np.ndarray) -> None:
        """Post `values` to group rank `peer`; returns once every chunk is on its way (waits for free slots)."""
        if values.ndim != 1 or not values.flags.c_contiguous:
            values = np.ascontiguousarray(values).reshape(-1)
        self._queues.between(self.rank, peer).send(values)

    def recv(self, peer: int) -> np.ndarray:
        """The next message from group rank `peer`, in TCM; waits until it has arrived."""
        return self._queues.between(peer, self.rank).recv()

    # ---- structure ---------------------------------------------------------------------
    def start(self, function, *args) -> "Pending":
        """Run `function(*args)` now as another program on this PE, sharing its engines; return its handle.

        What lets one member overlap independent work, as a PE's DMA
        engines, vector unit and IPCQ engine do: prefetch the next load
        while reducing (`start(ctx.load, ...)`), post a store and go on
        (`start(ctx.store, ...)`), or run a tree's up and down flows at once.
        Ordering between started work and the rest is the algorithm's to
        keep, as with asynchronous copies on a GPU; the member's part of the
        collective ends only when everything it started has.

        A started `load` or `store` of this program runs as an engine task
        (no greenlet): it only reserves DMAs and waits for them to land, so
        it runs exactly where a process would, at a fraction of the cost.
        """
        engine = self._machine.engine
        part = getattr(function, "__name__", "part")
        name = self._part_names.get(part)
        if name is None:
            name = self._part_names[part] = f"{self.name} / {part}"
        as_task = _AS_TASKS.get(getattr(function, "__func__", None))
        if as_task is not None and function.__self__ is self:
            work = engine.task(as_task, self, *args, name=name)
        else:
            work = engine.spawn(function, *args, name=name)
        started = self._started
        started.append(work)
        if len(started) >= self._prune_at:
            started[:] = [w for w in started if not (w.triggered and w.ok)]
            self._prune_at = max(_PRUNE_FROM, 2 * len(started))
        return Pending(engine, work)

    def join_started(self) -> None:
        """Wait for everything `start`ed (including what that started in turn)."""
        while self._started:
            started, self._started = self._started, []
            wait_for_programs(self._machine.engine, started)

    def stop_started(self) -> None:
        """Kill whatever `start`ed work is still running (the member's program failed)."""
        for process in self._started:
            if process.is_alive:
                process.kill()


def _load_task(task, program: PeProgram, region, start: int, stop: int):
    """`program.load` as an engine task: issue the DMAs, then land each at its end."""
    machine = program._machine
    out, landing = issue_load(machine, program._pe, region.allocation, region.dtype, region.selector(start, stop),
                              label=program._label, program=program.rank, data=program._data, owner=task)
    for end, effect in landing:
        yield end
        machine.land(effect)
    return out


def _store_task(task, program: PeProgram, region, start: int, stop: int, values: np.ndarray):
    """`program.store` as an engine task."""
    program._check_store(region, start, stop, values)
    machine = program._machine
    for end, effect in issue_store(machine, program._pe, region.allocation, region.selector(start, stop), values,
                                   label=program._label, program=program.rank, data=program._data, owner=task):
        yield end
        machine.land(effect)


_AS_TASKS = {PeProgram.load: _load_task, PeProgram.store: _store_task}


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    return resolve_dtype(dtype).name


class Pending:
    """Work a program `start`ed; `wait()` blocks until it is done and returns its result."""

    __slots__ = ("_engine", "_process")

    def __init__(self, engine, process):
        self._engine = engine
        self._process = process

    def wait(self):
        return self._engine.wait(self._process)


def wait_for_programs(engine, processes) -> list:
    """Wait for every process; on the first failure, stop the others and re-raise it."""
    try:
        return engine.wait_all(processes)
    except BaseException:
        for process in processes:
            if process.is_alive:
                process.kill()
        raise

"""`PeProgram`: what a collective algorithm's code sees for one member, running on that member's PE.

Every method is one PE op (or a few of the same kind) charged to the
member's PE and logged under the collective's label with the member's rank
as program number: `load`/`store` are DMAs between the region's HBM and the
PE's TCM through a DMA engine (one per cube holding touched elements, as a
kernel's loads are), `reduce`/`finalize` run on the vector unit, `send`/
`recv` go through the collective's IPCQ queues. Values are real numpy arrays
in the region's dtype; in a timing-only collective they are uninitialized
placeholders of the right size and every op is timed exactly as with data.

Each op also has a *step form* (`load_steps`, `recv_steps`, ...): the same
op as generator steps, for an algorithm written as a generator function
(`values = yield from ctx.recv_steps(peer)`), which `run_collective` runs
as an engine task instead of a greenlet process. The blocking form runs the
step form in the calling process (`Engine.drive`), so the two are one
implementation and block at the same points.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.queues import CollectiveQueues
from kernbench.dtypes import as_real_pairs, resolve_dtype
from kernbench.machine import Machine
from kernbench.machine.l2 import UNCACHED
from kernbench.machine.pe import vector_ps
from kernbench.machine.placed_dma import RunDmas, issue_load, issue_store
from kernbench.numerics import device_arithmetic

# Reductions are done in the data's dtype, one rounding per pairwise op, as NCCL does; the reduce ops
# `run_collective` accepts are these keys. `avg` and `premul_sum` add, and their `finalize` divides or scales.
REDUCERS = {"sum": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum, "avg": np.add,
            "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor, "premul_sum": np.add}
# A program's list of started work is swept of finished successes when it reaches this length, then at
# twice what survived: amortized O(1) per start, memory bounded by the work still running.
_PRUNE_FROM = 64
_UNKNOWN = object()


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
        self._engine = machine.engine
        self._pe = machine.pe(member.sip, member.cube, member.pe)
        self._queues = queues
        self._label = request.label
        self._data = not request.timing_only
        # Started work not known to have succeeded yet. Finished successes are dropped as more is
        # started (their results can be large buffers); failures stay, so `join_started` re-raises them.
        self._started = []
        self._prune_at = _PRUNE_FROM
        self._part_names: dict[str, str] = {}  # what started work is called in reports, by function name
        self._vector_ops: dict[tuple, tuple] = {}  # (op, elements, dtype) -> (duration, op-log args)
        self._run_dmas: dict = {}  # region -> its RunDmas, or None where it has none
        self._to: dict = {}  # peer -> the queue to it, once used
        self._from: dict = {}  # peer -> the queue from it, once used

    def slot_elements(self, dtype: np.dtype) -> int:
        """Elements of `dtype` in one IPCQ slot: the piece size that makes one piece one message."""
        return max(1, self.settings.slot_size // np.dtype(dtype).itemsize)

    def _owner(self):
        """Who issues an op now: the process calling it, or the task whose step calls it."""
        return self._engine._current or self._engine._task

    # ---- memory ------------------------------------------------------------------------
    def load(self, region, start: int, stop: int) -> np.ndarray:
        """HBM → TCM: elements `region.indices[start:stop]`, in that order."""
        return self._engine.drive(self._load_steps(region, start, stop, self._engine._current))

    def load_steps(self, region, start: int, stop: int):
        """`load` as generator steps."""
        return self._load_steps(region, start, stop, self._owner())

    def _load_steps(self, region, start: int, stop: int, owner):
        machine = self._machine
        runs = self._runs(region, start, stop)
        if runs is not None:
            dmas, selector = runs
            out, landing = dmas.load(selector.start, selector.stop, owner)
        else:
            out, landing = issue_load(machine, self._pe, region.allocation, region.dtype, region.selector(start, stop),
                                      label=self._label, program=self.rank, data=self._data, owner=owner,
                                      l2_window=UNCACHED)
        for end, effect in landing:
            yield end
            machine.land(effect)
        return out

    def store(self, region, start: int, stop: int, values: np.ndarray) -> None:
        """TCM → HBM: `values` into elements `region.indices[start:stop]`; visible when the DMA ends."""
        self._engine.drive(self._store_steps(region, start, stop, values, self._engine._current))

    def store_steps(self, region, start: int, stop: int, values: np.ndarray):
        """`store` as generator steps."""
        return self._store_steps(region, start, stop, values, self._owner())

    def _store_steps(self, region, start: int, stop: int, values: np.ndarray, owner):
        self._check_store(region, start, stop, values)
        machine = self._machine
        runs = self._runs(region, start, stop)
        if runs is not None:
            dmas, selector = runs
            landing = dmas.store(selector.start, selector.stop, values, owner)
        else:
            landing = issue_store(machine, self._pe, region.allocation, region.selector(start, stop), values,
                                  label=self._label, program=self.rank, data=self._data, owner=owner)
        for end, effect in landing:
            yield end
            machine.land(effect)

    def _runs(self, region, start: int, stop: int) -> tuple[RunDmas, slice] | None:
        """The region's `RunDmas` and the elements of positions [start, stop), where those are a non-empty run
        and the region's DMAs can be kept: over an address-interleaved placement (spread over its cubes, any
        run), or a contiguous region that one cube holds (a whole tensor on an accelerator, the usual case);
        else None (the general `issue_load` / `issue_store`)."""
        indices = region.indices
        if not 0 <= start < stop <= len(indices):
            return None
        runs = self._run_dmas.get(region, _UNKNOWN)
        if runs is _UNKNOWN:
            allocation, label, data = region.allocation, self._label, self._data
            if allocation.placement.address_interleaved:
                runs = RunDmas.spread(self._machine, self._pe, allocation, region.dtype, label=label,
                                      program=self.rank, data=data, l2_window=UNCACHED)
            elif indices.__class__ is range and indices.step == 1:
                runs = RunDmas.of(self._machine, self._pe, allocation, region.dtype, indices.start, indices.stop,
                                  label=label, program=self.rank, data=data, l2_window=UNCACHED)
            else:
                runs = None
            self._run_dmas[region] = runs
        if runs is None:
            return None
        selector = region.selector(start, stop)
        return (runs, selector) if selector.__class__ is slice else None

    def _check_store(self, region, start: int, stop: int, values: np.ndarray) -> None:
        if values.size != stop - start or values.dtype != region.dtype:
            raise CollectiveError(f"{self.name}: store of {values.size} {values.dtype} values into elements "
                                  f"[{start}, {stop}) of a {region.dtype} region")

    # ---- compute -----------------------------------------------------------------------
    def reduce(self, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """`a op b` elementwise in their dtype on the vector unit (`avg`, `premul_sum` add; `finalize` ends them)."""
        self._engine.sleep_until(self._reduce_op(op, a, b))
        return _reduced(op, a, b) if self._data else a

    def reduce_steps(self, op: str, a: np.ndarray, b: np.ndarray):
        """`reduce` as generator steps."""
        yield self._reduce_op(op, a, b)
        return _reduced(op, a, b) if self._data else a

    def _reduce_op(self, op: str, a: np.ndarray, b: np.ndarray) -> int:
        if a.shape != b.shape:
            raise CollectiveError(f"{self.name}: reduce of {a.size} and {b.size} elements")
        return self._vector(_REDUCE_NAMES.get(op) or f"reduce_{op}", a)

    def finalize(self, op: str, values: np.ndarray) -> np.ndarray:
        """The last step of a reduction, one vector op where the op has one: `avg` divides the sum by the group
        size, `premul_sum` multiplies it by the request's `premul_factor`; other ops pass the values through."""
        finalizer = _FINALIZERS.get(op)
        if finalizer is None:
            return values
        name, apply = finalizer
        self._engine.sleep_until(self._vector(name, values))
        return self._finalized(apply, values)

    def finalize_steps(self, op: str, values: np.ndarray):
        """`finalize` as generator steps."""
        finalizer = _FINALIZERS.get(op)
        if finalizer is None:
            return values
        name, apply = finalizer
        yield self._vector(name, values)
        return self._finalized(apply, values)

    def _finalized(self, apply, values: np.ndarray) -> np.ndarray:
        if not self._data:
            return values
        with device_arithmetic():
            return apply(self, values)

    def _averaged(self, values: np.ndarray) -> np.ndarray:
        if values.dtype.kind in "iu":
            return values // values.dtype.type(self.size)
        return np.divide(values, values.dtype.type(self.size))

    def _scaled(self, values: np.ndarray) -> np.ndarray:
        """The sum times the factor, the factor in the data's dtype (NCCL's premul scalar has the data's type).

        NCCL multiplies each input before summing; scaling the sum once agrees up to rounding, in one op."""
        return np.multiply(values, values.dtype.type(self.request.premul_factor))

    def _vector(self, op: str, values: np.ndarray) -> int:
        """Reserve the vector unit for `op` over `values` now and log it; return its end.

        Complex values are worked on as their real pairs (PyTorch hands NCCL `view_as_real`): twice the elements
        of the real type."""
        key = (op, values.size, values.dtype)
        known = self._vector_ops.get(key)
        if known is None:  # pieces come in a few sizes: the rule's bigint arithmetic and the args once each
            dtype, size = as_real_pairs(resolve_dtype(values.dtype), values.size)
            known = self._vector_ops[key] = (vector_ps(self._machine.topology, size),
                                             (("op", op), ("elements", size), ("dtype", dtype.name)))
        return self._machine.issue_compute(self._pe.vector, known[0], kind="vector", label=self._label,
                                           program=self.rank, pairs=known[1])

    # ---- messages ----------------------------------------------------------------------
    def send(self, peer: int, values: np.ndarray) -> None:
        """Post `values` to group rank `peer`; returns once every chunk is on its way (waits for free slots)."""
        self._engine.drive(self.send_steps(peer, values))

    def send_steps(self, peer: int, values: np.ndarray):
        """`send` as generator steps."""
        if values.ndim != 1 or not values.flags.c_contiguous:
            values = np.ascontiguousarray(values).reshape(-1)
        queue = self._to.get(peer)
        if queue is None:
            queue = self._to[peer] = self._queues.between(self.rank, peer)
        return queue.send_steps(values)

    def recv(self, peer: int) -> np.ndarray:
        """The next message from group rank `peer`, in TCM; waits until it has arrived."""
        return self._engine.drive(self.recv_steps(peer))

    def recv_steps(self, peer: int):
        """`recv` as generator steps."""
        queue = self._from.get(peer)
        if queue is None:
            queue = self._from[peer] = self._queues.between(peer, self.rank)
        return queue.recv_steps()

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
        it runs exactly where a process would, at a fraction of the cost. So
        does a generator function (a flow written with the step forms).
        """
        engine = self._engine
        part = getattr(function, "__name__", "part")
        name = self._part_names.get(part)
        if name is None:
            name = self._part_names[part] = f"{self.name} / {part}"
        as_task = _AS_TASKS.get(getattr(function, "__func__", None))
        if as_task is not None and function.__self__ is self:
            work = engine.task(as_task, self, *args, name=name)
        elif inspect.isgeneratorfunction(function):
            if _STEPS_AS_TASKS:
                work = engine.task(_steps_task, function, args, name=name)
            else:
                work = engine.spawn(_driven, engine, function, args, name=name)
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
            wait_for_programs(self._engine, started)

    def join_steps(self):
        """`join_started` as generator steps."""
        while self._started:
            started, self._started = self._started, []
            try:
                yield self._engine.all_of(started)
            except BaseException:
                _stop(started)
                raise

    def stop_started(self) -> None:
        """Kill whatever `start`ed work is still running (the member's program failed)."""
        _stop(self._started)


def algorithm_steps(steps):
    """Mark `steps(ctx, request)`, an algorithm written as a generator over the ops' step forms, as one
    `run_collective` runs as an engine task.

    What it returns is the same algorithm as a plain function too: called from a process — a user's
    algorithm composing a shipped one, `direct.all_reduce(ctx, request)` — it blocks at the same points.
    """
    @functools.wraps(steps)
    def blocking(ctx, request):
        return ctx._engine.drive(steps(ctx, request))

    blocking.ccl_steps = steps
    return blocking


def _stop(work) -> None:
    for process in work:
        if process.is_alive:
            process.kill()


def _load_task(task, program: PeProgram, region, start: int, stop: int):
    """`program.load` as an engine task's generator: issue the DMAs, then land each at its end."""
    return program._load_steps(region, start, stop, task)


def _store_task(task, program: PeProgram, region, start: int, stop: int, values: np.ndarray):
    """`program.store` as an engine task's generator."""
    return program._store_steps(region, start, stop, values, task)


def _steps_task(task, function, args):
    """A started generator function (a flow written with the ops' step forms) as an engine task's generator."""
    return function(*args)


def _driven(engine, function, args):
    """A started generator function run in a process of its own (the reference tasks are compared with)."""
    return engine.drive(function(*args))


# How started work runs: loads, stores and generator functions as tasks. Tests empty the table and clear the
# flag to run the same work as greenlet processes, the reference the tasks must match op for op.
_AS_TASKS = {PeProgram.load: _load_task, PeProgram.store: _store_task}
# The last step of the reductions that have one: its op-log name, and what it does to the values.
_FINALIZERS = {"avg": ("average", PeProgram._averaged), "premul_sum": ("premultiply", PeProgram._scaled)}
_STEPS_AS_TASKS = True
_REDUCE_NAMES = {op: f"reduce_{op}" for op in REDUCERS}


def _reduced(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a op b` as the vector unit computes it: an overflow is inf, as on the device, with no numpy warning."""
    with device_arithmetic():
        return REDUCERS[op](a, b)


class Pending:
    """Work a program `start`ed; `wait()` blocks until it is done and returns its result."""

    __slots__ = ("_engine", "_process")

    def __init__(self, engine, process):
        self._engine = engine
        self._process = process

    def wait(self):
        return self._engine.wait(self._process)

    def wait_steps(self):
        """`wait` as generator steps (`value = yield from pending.wait_steps()`)."""
        return (yield self._process)


def wait_for_programs(engine, processes) -> list:
    """Wait for every process; on the first failure, stop the others and re-raise it."""
    try:
        return engine.wait_all(processes)
    except BaseException:
        for process in processes:
            if process.is_alive:
                process.kill()
        raise

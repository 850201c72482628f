"""Program tapes: one program's builder calls, recorded by a dry run and replayed for other programs.

Interpreting a program runs the kernel's Python and Triton's language layer
for every op; the simulated machine only ever sees the builder's calls and,
through them, the port's. A program's builder calls are a function of what
its Python code can see: the launch's arguments and constexprs (the same for
every program), the types of the values it holds (decided by those), and
the scalars it converts to Python numbers (`bool`/`int`: branches and loop
bounds). So `dry_run` runs one program *dry* — through the whole
interpreter, with a builder in timing-only mode whose port moves nothing —
and records its builder calls as a tape: each call with its arguments, the
values it made numbered as slots, and every scalar conversion as a guard.
Each slot is CONST (made from arguments and constants only: the same in
every program), PID (depends on the program id, never on memory) or MEM
(derived from a load, atomic or dot).

Replaying the tape for a program is two phases on a fresh builder:

1. the PID calls are run again for this program with a port that only
   notes vector charges, and every PID guard is checked against the new value
   (a call whose inputs another program already had is looked up, not
   run: see `Tape`). Nothing has reached the program's port yet, so a
   failed guard or an error costs nothing: another tape is tried, or the
   program is interpreted as before;
2. the port calls are issued in recorded order: charges of CONST calls as
   recorded, those of PID calls as phase 1 noted them, and memory ops,
   dots and prints (and, with values, every MEM call) by calling the
   builder again with this program's slots.

The port therefore sees exactly the calls, in the order and with the
arguments, that interpreting the program would make (ADR 0007, "Replayed
programs", gives the argument). What the tape cannot follow makes the dry
run give up, and the launch is interpreted program by program as before:
a value the kernel's Python converts that derives from memory (only a
timing-only builder can prove that cheaply, by refusing it), block
pointers, reductions with a custom combine function, and values that bridge
code made outside the builder.

A dry run's calls are also kept for the kernel's later launches
(`kept_shapes`); `trace.ProgramTraces` holds one launch's tapes.
"""

from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.language.semantic import TritonSemantic

from kernbench.kernels.kept_values import KeptValues, MemoBudget
from kernbench.kernels.triton_bridge.blocks import StridedBlock
from kernbench.kernels.triton_bridge.builder import BridgeBuilder
from kernbench.kernels.triton_bridge.context import RunningProgram
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype_of
from kernbench.kernels.triton_bridge.patches import running_program
from kernbench.kernels.triton_bridge.values import Value, placeholder

CONST, PID, MEM = 0, 1, 2

# Objects that carry program data; a builder call may take them only as slots of the tape.
_DATA = (Value, StridedBlock, np.ndarray, np.generic, tl.tensor, tl.core.tensor_descriptor_base)
# Builder calls with an effect outside the program that reaches no port.
HOST_EFFECTS = frozenset({"create_print"})
_SOURCES = {"create_get_program_id": PID}

_CHARGES, _PID_CHARGES, _CALL, _PID_CALL = 0, 1, 2, 3


class _Untraceable(Exception):
    """Ends a dry run whose program the tape cannot follow."""


class _Slot:
    __slots__ = ("slot",)

    def __init__(self, slot: int) -> None:
        self.slot = slot


class _Sequence:
    """A list or tuple argument holding slots."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list) -> None:
        self.kind = kind
        self.items = items


def _resolve(template, values: list):
    if template.__class__ is _Slot:
        return values[template.slot]
    if template.__class__ is _Sequence:
        return template.kind(_resolve(item, values) for item in template.items)
    return template


class _Call:
    """One recorded builder call: `fn(builder, *args, **kwargs)` with slots filled in, results to slots."""

    __slots__ = ("fn", "args", "slot_args", "nested_args", "kwargs", "inputs", "results", "charges", "kind",
                 "effect")

    def __call__(self, builder: BridgeBuilder, values: list):
        args = list(self.args)
        for position, slot in self.slot_args:
            args[position] = values[slot]
        for position, template in self.nested_args:
            args[position] = _resolve(template, values)
        if self.kwargs is None:
            result = self.fn(builder, *args)
        else:
            result = self.fn(builder, *args, **{k: _resolve(t, values) for k, t in self.kwargs.items()})
        self.bind(result, values)

    def bind(self, result, values: list) -> None:
        results = self.results
        if results.__class__ is int:
            values[results] = result
        elif results is not None:
            for slot, item in zip(results, result):
                values[slot] = item

    def made(self, values: list):
        """What the call put in its result slots, as it returned them."""
        results = self.results
        if results.__class__ is int:
            return values[results]
        return None if results is None else tuple(values[slot] for slot in results)


class Guard:
    """A scalar the kernel's Python converted (`bool` or `int`) and the value it saw."""

    __slots__ = ("slot", "convert", "expected")

    def __init__(self, slot: int, convert: type, expected) -> None:
        self.slot = slot
        self.convert = convert
        self.expected = expected


class Recorder:
    """What a dry run records: slots, their kinds, the builder calls and guards in order."""

    def __init__(self, arguments: dict) -> None:
        self.slot_of: dict[int, int] = {}
        self.values: list = []
        self.kinds: list[int] = []
        self.steps: list[_Call | Guard] = []
        self.depth = 0
        self.charges: list[tuple] = []
        self.touched = False
        self._kind = CONST
        for handle in argument_values(arguments.values()):
            self._add(handle, CONST)

    def _add(self, value, kind: int) -> int:
        slot = len(self.values)
        self.values.append(value)  # kept, so no other object can take its id while the tape is made
        self.kinds.append(kind)
        self.slot_of[id(value)] = slot
        return slot

    def _template(self, value):
        if isinstance(value, _DATA):
            slot = self.slot_of.get(id(value))
            if slot is None:
                raise _Untraceable("a value made outside the builder")
            if self.kinds[slot] > self._kind:
                self._kind = self.kinds[slot]
            return _Slot(slot)
        if type(value) in (list, tuple):
            items = [self._template(item) for item in value]
            if any(item.__class__ in (_Slot, _Sequence) for item in items):
                return _Sequence(type(value), items)
        return value

    def begin(self, name: str, args: tuple, kwargs: dict) -> _Call:
        call = _Call()
        self._kind = _SOURCES.get(name, CONST)
        templates = [self._template(arg) for arg in args]
        call.slot_args = tuple((i, t.slot) for i, t in enumerate(templates) if t.__class__ is _Slot)
        call.nested_args = tuple((i, t) for i, t in enumerate(templates) if t.__class__ is _Sequence)
        call.args = tuple(None if t.__class__ in (_Slot, _Sequence) else t for t in templates)
        call.kwargs = {k: self._template(v) for k, v in kwargs.items()} if kwargs else None
        self.depth = 1
        self.charges = []
        self.touched = False
        return call

    def end(self, call: _Call, name: str, result) -> None:
        self.depth = 0
        templates = [t for _, t in call.nested_args] + list((call.kwargs or {}).values())
        call.inputs = tuple(slot for _, slot in call.slot_args) + tuple(_slots_in(templates))
        call.fn = getattr(BridgeBuilder, name)
        call.charges = tuple(self.charges)
        call.effect = self.touched or name in HOST_EFFECTS
        call.kind = MEM if call.effect else self._kind
        if result is None:
            call.results = None
        elif type(result) is tuple:
            call.results = tuple(self._add(item, call.kind) for item in result)
        else:
            call.results = self._add(result, call.kind)
        self.steps.append(call)

    def guard(self, value, converted) -> None:
        if self.depth:
            return
        slot = self.slot_of.get(id(value))
        if slot is None:
            raise _Untraceable("a value made outside the builder decides control flow")
        if self.kinds[slot] == MEM:
            raise _Untraceable("a value read from memory decides control flow")
        # A CONST guard holds in every program of the launch (a tape checks PID guards only); a later launch
        # with other arguments checks it (`kept_shapes.Shape`).
        self.steps.append(Guard(slot, type(converted), converted))


def _slots_in(templates):
    for template in templates:
        if template.__class__ is _Slot:
            yield template.slot
        elif template.__class__ is _Sequence:
            yield from _slots_in(template.items)


def argument_values(arguments):
    """The data objects a kernel's arguments hold (pointers, scalars, descriptors), recursively."""
    for value in arguments:
        if isinstance(value, tl.tensor):
            yield value.handle
        elif isinstance(value, tl.core.tensor_descriptor_base):
            yield value.handle
            yield from argument_values(getattr(value, "shape", ()))
            yield from argument_values(getattr(value, "strides", ()))
        elif isinstance(value, (tuple, list)):
            yield from argument_values(value)


class DryPort:
    """The dry run's port: moves nothing, takes no time, returns stand-ins, notes charges for the recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def _effect(self) -> None:
        if not self._recorder.depth:
            raise _Untraceable("memory accessed outside a builder call")
        self._recorder.touched = True

    def load(self, addresses, mask, dtype_name):
        self._effect()
        return placeholder(addresses.shape, numpy_dtype_of(dtype_name))

    def store(self, addresses, values, mask):
        self._effect()

    def atomic_rmw(self, op, addresses, values, mask, dtype_name):
        self._effect()
        return placeholder(addresses.shape, numpy_dtype_of(dtype_name))

    def atomic_cas(self, addresses, compare, values, dtype_name):
        self._effect()
        return placeholder(addresses.shape, numpy_dtype_of(dtype_name))

    def dot(self, a, b, acc, out_dtype_name):
        self._effect()
        return placeholder(a.shape[:-1] + b.shape[-1:], numpy_dtype_of(out_dtype_name))

    def vector(self, op, n_elements, dtype_name):
        if not self._recorder.depth:
            raise _Untraceable("a vector op charged outside a builder call")
        self._recorder.charges.append((op, n_elements, dtype_name))


class _TracingBuilder(BridgeBuilder):
    """A timing-only builder over a `DryPort` that records every call the language layer makes."""

    def __init__(self, recorder: Recorder, kernel_name: str, program_id, grid) -> None:
        super().__init__(DryPort(recorder), kernel_name, program_id, grid, timing_only=True, memcheck=False)
        self.recorder = recorder

    def observe(self, value, converted) -> None:
        self.recorder.guard(value, converted)

    def untraceable(self, reason: str) -> None:
        if not self.recorder.depth:
            raise _Untraceable(reason)


def _traced(name: str, method):
    def call(self, *args, **kwargs):
        recorder = self.recorder
        if recorder.depth:
            return method(self, *args, **kwargs)
        record = recorder.begin(name, args, kwargs)
        try:
            # A print is replayed with every program's values; the dry run's would show stand-ins.
            result = None if name in HOST_EFFECTS else method(self, *args, **kwargs)
        finally:
            recorder.depth = 0
        recorder.end(record, name, result)
        return result

    call.__name__ = name
    return call


def _trace_every_builder_call() -> None:
    """Wrap each builder method `semantic` calls for a value (types and cache hints make none)."""
    for name in dir(BridgeBuilder):
        if (name.startswith(("create_", "get_")) and not name.endswith("_ty") and name != "get_cache_policy"
                and callable(getattr(BridgeBuilder, name))):
            setattr(_TracingBuilder, name, _traced(name, getattr(BridgeBuilder, name)))


_trace_every_builder_call()


class _NotedCharges:
    """Phase 1's port: PID calls only charge vector ops, which are noted for phase 2."""

    __slots__ = ("charges",)

    def __init__(self) -> None:
        self.charges: list[tuple] = []

    def vector(self, op, n_elements, dtype_name):
        self.charges.append((op, n_elements, dtype_name))


# A PID input this small is known by its contents; a larger one only as an object the tape keeps.
_SMALL = 16


class Tape:
    """One program shape: the guards and what they read (phase 1), then the port calls (phase 2).

    Phase 1 makes only the PID calls a guard depends on; every other PID
    call is made in phase 2 at its place in the tape, so a program holds the
    addresses of one step of its loop at a time, not of every step, and each
    slot is dropped after its last use (a K loop of 384 steps over 128x64
    tiles would otherwise hold hundreds of MB per running program).
    Either phase remembers what a PID call made for given inputs: programs
    that share a block row compute the same pointers, and a builder call is a
    deterministic function of its inputs. An input is known by its contents
    when it is a small value (a program id, the scalars derived from it:
    equal contents, whichever program made them), else by identity when it
    is an object the tape keeps alive (a CONST slot or a remembered result),
    so an identity is never reused; a call with any other input is computed
    afresh. A call without inputs (`program_id`) is never
    remembered.
    """

    def __init__(self, steps: list, kinds: list[int], values: list, memo_budget: MemoBudget) -> None:
        early = _guarded_steps(steps, kinds)
        self._phase1: list[_Call | Guard] = []
        timing: list[tuple] = []
        with_values: list[tuple] = []
        pid_charges = 0
        for index, step in enumerate(steps):
            if step.__class__ is Guard:
                if kinds[step.slot] == PID:
                    self._phase1.append(step)
                continue
            if step.effect:
                actions = ((_CALL, step),)
            elif step.kind == PID:
                if index not in early:
                    actions = ((_PID_CALL, step),)
                else:
                    self._phase1.append(step)
                    first, pid_charges = pid_charges, pid_charges + len(step.charges)
                    actions = ((_PID_CHARGES, (first, pid_charges)),) if step.charges else ()
            elif step.kind == MEM:
                # Timing only, arithmetic on values from memory makes a stand-in whose shape alone is
                # charged: recorded. Uncharged calls (layout views, bitcasts) pass on whatever data the
                # port returned, so they are made again, as with values.
                timing.append((_CHARGES, step.charges) if step.charges else (_CALL, step))
                with_values.append((_CALL, step))
                continue
            else:
                actions = ((_CHARGES, step.charges),)
            timing += actions
            with_values += actions
        self._timing = _with_releases(_merged(timing))
        self._with_values = _with_releases(_merged(with_values))
        self._pid_charges = pid_charges
        # PID slots are made again for each program; they need not be kept.
        self._values = [None if kind == PID else value for value, kind in zip(values, kinds)]
        self._constants = frozenset(id(value) for value in self._values if value is not None)
        self._kept = set(self._constants)
        # What PID calls made, under (id(step), key of its inputs): (made, charges, inputs, items). The budget is
        # shared by the launch's tapes; a dropped result leaves `_kept`.
        self._results = KeptValues(memo_budget, dropped=self._forget_items)

    def prepare(self, builder: BridgeBuilder) -> tuple[list, list] | None:
        """Phase 1 for `builder`'s program: its slots and PID charges, or None if a guard or a call fails."""
        values = self._values.copy()
        port = builder.port
        noted = _NotedCharges()
        builder.port = noted
        try:
            for step in self._phase1:
                if step.__class__ is Guard:
                    if not holds(step, values):
                        return None
                    continue
                self._make(step, builder, values, noted)
        except Exception:
            return None  # interpreting the program meets the same error where it belongs
        finally:
            builder.port = port
        if len(noted.charges) != self._pid_charges:
            return None
        return values, noted.charges

    def forget(self) -> None:
        """Drop the remembered results (the launch has ended: no program will look them up)."""
        self._results.release()
        self._kept = set(self._constants)

    def _make(self, step: _Call, builder: BridgeBuilder, values: list, noted: _NotedCharges) -> None:
        """Make PID call `step` (or look it up) on `builder`, whose port is `noted`: its charges are noted there."""
        key = self._key(step.inputs, values) if step.inputs else None
        if key is None:
            step(builder, values)
            return
        key = (id(step), key)
        known = self._results.get(key)
        if known is not None:
            step.bind(known[0], values)
            noted.charges += known[1]
            return
        first = len(noted.charges)
        step(builder, values)
        self._remember(key, step.made(values), noted.charges[first:], tuple(values[slot] for slot in step.inputs))

    def _key(self, inputs: tuple[int, ...], values: list) -> tuple | None:
        kept = self._kept
        key = []
        for slot in inputs:
            value = values[slot]
            if value.__class__ is Value and value.data.size <= _SMALL:
                data = value.data
                key.append((data.tobytes(), data.dtype.str, data.shape, value.dtype.name, value.poisoned,
                            value.origin))
            elif id(value) in kept:
                key.append(id(value))
            else:
                return None
        return tuple(key)

    def _remember(self, key: tuple, made, charges: list, inputs: tuple) -> None:
        """Keep what a call made for later programs (`KeptValues`: this tape's oldest results make room).

        The entry holds the call's inputs: its key may name one by identity,
        and a dropped result that is another entry's input must stay alive
        (so its id is not reused) while that entry is kept. A dropped result
        leaves `_kept`, so calls with it as an input are computed afresh.
        """
        items = made if type(made) is tuple else (made,)
        size = sum(getattr(getattr(item, "data", None), "nbytes", 0) for item in items)
        if self._results.keep(key, (made, tuple(charges), inputs, items), size):
            self._kept.update(id(item) for item in items)

    def _forget_items(self, result: tuple) -> None:
        for item in result[3]:
            if id(item) not in self._constants:
                self._kept.discard(id(item))

    def finish(self, builder: BridgeBuilder, prepared: tuple[list, list]) -> None:
        """Phase 2: every port call of the program, in order (the port may switch greenlets in any).

        A PID call made here raises what it raises: the guards have passed, so
        interpreting the program would have made the same port calls before it
        and then this call, with these inputs.
        """
        values, pid_charges = prepared
        port = builder.port
        vector = port.vector
        for code, payload, released in self._timing if builder.timing_only else self._with_values:
            if code == _CHARGES:
                for charge in payload:
                    vector(*charge)
            elif code == _PID_CHARGES:
                for charge in pid_charges[payload[0]:payload[1]]:
                    vector(*charge)
            elif code == _PID_CALL:
                noted = _NotedCharges()
                builder.port = noted
                try:
                    self._make(payload, builder, values, noted)
                finally:
                    builder.port = port
                for charge in noted.charges:
                    vector(*charge)
            else:
                payload(builder, values)
            for slot in released:
                values[slot] = None


def _guarded_steps(steps: list, kinds: list[int]) -> set[int]:
    """Indices of the PID calls a guard reads, directly or through other PID calls."""
    needed: set[int] = set()
    early: set[int] = set()
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.__class__ is Guard:
            if kinds[step.slot] == PID:
                needed.add(step.slot)
        elif step.kind == PID and not needed.isdisjoint(_results_of(step)):
            early.add(index)
            needed.update(slot for slot in step.inputs if kinds[slot] == PID)
    return early


def _results_of(step: _Call) -> tuple[int, ...]:
    results = step.results
    if results is None:
        return ()
    return (results,) if results.__class__ is int else results


def _with_releases(actions: list[tuple]) -> list[tuple]:
    """Each action with the slots whose last use it is, dropped after it so a program holds what it still needs."""
    last_use: dict[int, int] = {}
    for position, (code, payload) in enumerate(actions):
        step = payload if code in (_CALL, _PID_CALL) else None
        if step is not None:
            for slot in step.inputs + _results_of(step):
                last_use[slot] = position
    released: list[list[int]] = [[] for _ in actions]
    for slot, position in last_use.items():
        released[position].append(slot)
    return [(code, payload, tuple(slots)) for (code, payload), slots in zip(actions, released)]


def _merged(actions: list[tuple]) -> list[tuple]:
    """Runs of recorded charges joined into one action; actions with nothing to do dropped."""
    merged: list[tuple] = []
    for code, payload in actions:
        if code == _CHARGES:
            if not payload:
                continue
            if merged and merged[-1][0] == _CHARGES:
                merged[-1] = (_CHARGES, merged[-1][1] + payload)
                continue
        merged.append((code, payload))
    return merged


def holds(guard: Guard, values: list) -> bool:
    """Whether the scalar in the guard's slot converts to the value the guard saw."""
    return guard.convert(values[guard.slot].data.reshape(-1)[0]) == guard.expected


def dry_run(kernel_name: str, body, arguments: dict, program_id: tuple[int, int, int], grid) -> Recorder:
    """Run program `program_id` of a launch dry (`body`: the kernel rewritten, `rewriter.rewritten`) and return
    what it recorded; raises what the program raises (`_Untraceable` where the tape cannot follow it)."""
    recorder = Recorder(arguments)
    builder = _TracingBuilder(recorder, kernel_name, program_id, grid)
    program = RunningProgram(kernel_name, program_id, builder, TritonSemantic(builder))
    with running_program(program):
        body(**arguments)
    return recorder

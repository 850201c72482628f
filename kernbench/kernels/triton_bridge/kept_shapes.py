"""Shapes kept across launches: a kernel's dry-run tapes, for its later launches with the same signature.

A launch's builder calls follow from its arguments' types and constexprs,
the globals its kernel reads (its signature: `launch_signature`), the
scalars its Python converts (the guards) and what earlier calls made. So a
tape a dry run recorded serves the kernel's later launches of that
signature: a later launch remakes its calls with its own arguments, checking
every guard, before it dry-runs anything (`Shape.values_for`; ADR 0007,
"Shapes kept across launches"). Triton reuses a compiled kernel the same
way: it compiles once per signature.

The shapes are kept per kernel function in a slot of the run's caches
(`KeptShapes`, over `kernbench.run_caches`): a launch outside a run keeps
its own.
"""

from __future__ import annotations

import triton.language as tl
from triton.language.semantic import TritonSemantic
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernbench.kernels.triton_bridge.builder import BridgeBuilder
from kernbench.kernels.triton_bridge.context import RunningProgram
from kernbench.kernels.triton_bridge.patches import running_program
from kernbench.kernels.triton_bridge.tape import HOST_EFFECTS, DryPort, Guard, Recorder, argument_values, holds
from kernbench.kernels.triton_bridge.values import Value
from kernbench.run_caches import RunCaches

#: Shapes kept: by a launch, as its tapes (programs whose control flow matches none of them are interpreted), and
#: by a run, per kernel across its launches.
MAX_SHAPES = 16


class KeptShapes:
    """Per kernel function, its shapes kept for later launches with their signatures, the most recently used last:
    at most `MAX_SHAPES` for all its signatures together, as a launch keeps at most that many tapes. Kept in a
    slot of `caches` (the run's; None: a store of this launch's own)."""

    def __init__(self, caches: RunCaches | None = None) -> None:
        self._kept = (RunCaches() if caches is None else caches)["triton_bridge.kept_shapes"]

    def find(self, fn, signature: tuple, taken: set, kernel_name: str, arguments: dict, program_id,
             grid) -> tuple[Shape, list] | None:
        """A kept shape of `fn` and `signature` but not in `taken`, with its slots for `program_id` of a launch
        with `arguments` (the newest first), made the most recently used; None where no kept shape's guards hold."""
        kept = self._kept.get(fn, ())
        for index in range(len(kept) - 1, -1, -1):  # the newest first: the last launches' shapes
            kept_signature, shape = kept[index]
            if kept_signature == signature and shape not in taken:
                values = shape.values_for(kernel_name, arguments, program_id, grid)
                if values is not None:
                    kept.append(kept.pop(index))
                    return shape, values
        return None

    def keep(self, fn, signature: tuple, shape: Shape) -> None:
        """Keep `shape` as `fn`'s most recently used, dropping its least recently used past `MAX_SHAPES`."""
        kept = self._kept.setdefault(fn, [])
        if len(kept) >= MAX_SHAPES:
            del kept[0]  # the least recently used
        kept.append((signature, shape))


class Shape:
    """A dry run's calls, slot kinds and guards, for the kernel's later launches with the same `launch_signature`.

    For a later launch of that signature, remaking every call of the shape
    in order on a dry builder of its program — its own argument handles in
    the argument slots — gives the slots its own dry run would record when
    every guard (CONST ones too: scalar arguments may differ) sees the
    recorded value; the tape is then built from them as from a dry run.
    """

    __slots__ = ("steps", "kinds")

    def __init__(self, recorder: Recorder) -> None:
        self.steps = recorder.steps
        self.kinds = recorder.kinds

    def values_for(self, kernel_name: str, arguments: dict, program_id, grid) -> list | None:
        """Every slot's value for `program_id` of a launch with `arguments`, or None where a guard fails or a
        call raises (a dry run then meets it where it belongs)."""
        values = list(argument_values(arguments.values()))
        values += [None] * (len(self.kinds) - len(values))
        remade = _Remade()
        builder = BridgeBuilder(DryPort(remade), kernel_name, program_id, grid, timing_only=True, memcheck=False)
        program = RunningProgram(kernel_name, program_id, builder, TritonSemantic(builder))
        try:
            with running_program(program):
                for step in self.steps:
                    if step.__class__ is Guard:
                        if not holds(step, values):
                            return None
                    elif step.fn.__name__ not in HOST_EFFECTS:  # a print runs in phase 2, per program
                        step(builder, values)
        except Exception:
            return None
        return values


class _Remade:
    """What `DryPort` tells while a `Shape` is remade: every call is a top-level builder call. The charges it
    notes are the recorded ones (they follow from shapes and dtypes, which the signature and guards fix)."""

    __slots__ = ("depth", "touched", "charges")

    def __init__(self) -> None:
        self.depth = 1
        self.touched = False
        self.charges: list[tuple] = []


_PLAIN = (type(None), bool, int, str)


def launch_signature(fn, arguments: dict) -> tuple | None:
    """The launch's `_signature`, with the globals its kernel reads (`_globals_read`); None as for `_signature`."""
    signature = _signature(arguments.values())
    return None if signature is None else (*signature, _globals_read(fn, set()))


def _globals_read(fn, seen: set) -> tuple:
    """(name, `_plain` key) of every plain or constexpr global the function's code names (its comprehensions'
    too: Triton compiles tuple comprehensions), and those of the jit functions it names, recursively. The
    kernel's Python reads them live on every dry run; Triton refuses a launch after one of them has changed, and
    here that launch has another signature."""
    seen.add(fn)
    namespace, found = fn.__globals__, []
    for name in dict.fromkeys(_names(fn.__code__)):
        value = namespace.get(name, _ABSENT)
        if isinstance(value, (JITFunction, InterpretedFunction)):
            if value.fn not in seen:
                found.append((name, _globals_read(value.fn, seen)))
            continue
        key = _plain(value)
        if key is not None:
            found.append((name, key))
    return tuple(found)


def _names(code):
    """The names a code object and the code objects nested in it look up (before Python 3.12 a comprehension
    is a code object of its own)."""
    yield from code.co_names
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            yield from _names(constant)


_ABSENT = object()


def _signature(arguments) -> tuple | None:
    """What a launch's builder calls depend on besides its argument handles' values: each argument's kind and
    type (a pointer's element type, a scalar's width), each constexpr and plain value (a float by its `repr`,
    which tells -0.0 from 0.0); None where an argument is something else (a descriptor, an object, a constexpr
    holding one), whose launches share no shapes."""
    signature = []
    for value in arguments:
        if isinstance(value, tl.tensor) and value.handle.__class__ is Value:
            signature.append(("tensor", str(value.type)))
        elif type(value) is tuple:
            item = _signature(value)
            if item is None:
                return None
            signature.append(item)
        else:
            item = _plain(value)
            if item is None:
                return None
            signature.append((isinstance(value, tl.constexpr), item))
    return tuple(signature)


def _plain(value) -> tuple | None:
    """A key telling `value` (a constexpr's value where it is one) from every value that could make other builder
    calls, or None for anything but None, bools, ints, floats, strings and dtypes."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if type(value) in _PLAIN:
        return type(value), value
    if type(value) is float:
        return float, repr(value)
    if isinstance(value, tl.dtype):
        return tl.dtype, str(value)
    return None

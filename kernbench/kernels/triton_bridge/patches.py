"""Pointing `triton.language` at the running program's builder.

A `@triton.jit` body calls language builtins (`tl.load`, `tensor.__add__`,
...) that expect a `_semantic=` argument the compiler would supply. While
any bridge program is running, every builtin of `triton.language`,
`triton.language.core` and `triton.language.math` (and the tensor methods)
is replaced by a dispatcher that looks up the program running in the
calling greenlet (`context.current_program`) and passes that program's
semantic. Called outside a bridge program, a dispatcher calls the original
unchanged, so interleaved programs of different kernels and launches each
reach their own builder, and code that is not ours sees stock Triton.
Tensor-descriptor methods are dispatched the same way. Block pointers are
the bridge's own on every Triton version (`blocks`): `make_block_ptr`,
`advance`, `load` and `store` dispatch to wrappers that handle block
pointers and hand everything else to Triton's builtin.

Further entries change no result and exist for speed, since a kernel runs
Triton's language layer for every op: `tl.block_type(...)` and
`tl.tensor(...)` rebuild the same shape objects each time (a block type
validates and formats its shape, a tensor wraps each dimension in a
constexpr), so while the bridge runs both copy the attributes computed for
an equal type the first time; `block_type.with_element_ty` hands out one
type per (shape, element type); and `to_ir` of block and pointer types
returns the type itself, as for scalar dtypes, instead of having the
builder build an equal one.

The patch is applied when the first program starts and restored when the
last one ends (a reference count, `running_programs`), never left behind
while no program runs. Replacing `tl.range` with a function is the one
change stock code could notice (the compiler tests `isinstance(x,
tl.range)`): compiling a kernel for a GPU while a bridge program is
suspended mid-kernel is not supported.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernbench.kernels.errors import TimingOnlyRefusal, UnsupportedKernelError
from kernbench.kernels.triton_bridge import blocks, reductions
from kernbench.kernels.triton_bridge.context import RunningProgram, current_program, enter_program, leave_program
from kernbench.kernels.triton_bridge.rewriter import rewritten
from kernbench.kernels.triton_bridge.values import Value

_MISSING = object()


def _identity_hint(input, *values, **_ignored):
    """Divisibility and contiguity hints steer code generation; values are unchanged."""
    return input


def _static_assert(condition, message="", **_ignored):
    assert condition, message


def _static_print(*values, **_ignored):
    print(*values)


def _unsupported_scan(*args, **kwargs):
    program = current_program()
    raise UnsupportedKernelError(
        f"kernel '{program.kernel_name}' uses tl.associative_scan (cumsum/cumprod), "
        "which the kernbench Triton bridge does not simulate"
    )


def _python_range(start, stop=None, step=None, **_ignored):
    """`tl.range`/`tl.static_range` run as Python loops; pipelining hints are moot."""
    if stop is None:
        start, stop = 0, start
    return range(start, stop, 1 if step is None else step)


# Builtins whose compiled meaning has no counterpart in a numpy run.
_REPLACED_BUILTINS = {
    "multiple_of": _identity_hint,
    "max_contiguous": _identity_hint,
    "max_constancy": _identity_hint,
    "static_assert": _static_assert,
    "static_print": _static_print,
    "reduce": reductions.reduce,
    "associative_scan": _unsupported_scan,
}


# Builtins the bridge implements itself on top of Triton's: each is called as
# `fn(triton_builtin, *args, _semantic=..., **kwargs)` and hands what is not
# its own (a load through ordinary pointers) to the builtin it was given.
_WRAPPED_BUILTINS = {
    "make_block_ptr": blocks.make_block_ptr,
    "advance": blocks.advance,
    "load": blocks.load,
    "store": blocks.store,
}


# The body of Triton's `@builtin` wrapper: it only checks that `_semantic` was passed.
_BUILTIN_WRAPPER_CODE = tl.core.builtin(lambda _semantic=None: None).__code__


def _dispatch_builtin(original, replacement=None, wrapper=None):
    # Calling the function inside Triton's `@builtin` check directly saves a frame per op;
    # the dispatcher always passes `_semantic`, which is all that check enforces.
    checked = original.__wrapped__ if getattr(original, "__code__", None) is _BUILTIN_WRAPPER_CODE else original
    if wrapper is not None:
        checked = functools.partial(wrapper, checked)

    @functools.wraps(original)
    def dispatch(*args, **kwargs):
        program = current_program()
        if program is None:
            return original(*args, **kwargs)
        if replacement is not None:
            return replacement(*args, **kwargs)
        kwargs["_semantic"] = program.semantic
        return checked(*args, **kwargs)

    return dispatch


def _dispatch_plain(original, replacement):
    @functools.wraps(original)
    def dispatch(*args, **kwargs):
        if current_program() is None:
            return original(*args, **kwargs)
        return replacement(*args, **kwargs)

    return dispatch


def _call_jit_function(self, *args, **kwargs):
    """A jit function called from a kernel body runs inline, like a device function."""
    return rewritten(self.fn, self)(*args, **kwargs)


def _dtype_to_ir(self, builder):
    """The bridge's builder takes Triton dtypes as its types."""
    return self


def _type_key(ty) -> tuple | None:
    """What makes two element types equal (`dtype.__eq__`), hashable; None for other kinds of type."""
    kind = type(ty)
    if kind is tl.dtype:
        return (ty.name,)
    if kind is tl.pointer_type:
        return (ty.name, ty.address_space, ty.const)
    return None


def _shape_key(shape) -> tuple | None:
    try:
        return tuple(d.value if isinstance(d, tl.constexpr) else d for d in shape)
    except TypeError:
        return None


def _memoized_block_type_init(original):
    """`block_type.__init__` that computes each (element type, shape)'s attributes once.

    Equal block types then share their (never mutated) shape tuple; the
    element type is always the caller's own object. A shape the original
    rejects raises each time and is not remembered.
    """
    known: dict[tuple, dict] = {}

    def __init__(self, element_ty, shape):
        element_key = _type_key(element_ty)
        shape_key = _shape_key(shape) if element_key is not None else None
        key = None if shape_key is None else (element_key, shape_key)
        attributes = None if key is None else known.get(key)
        if attributes is None:
            original(self, element_ty, shape)
            if key is not None:
                known[key] = dict(vars(self))
            return
        self.__dict__.update(attributes)
        self.element_ty = element_ty

    return __init__


def _memoized_with_element_ty(original):
    """`block_type.with_element_ty` that builds each (shape, element type) once and hands out that type.

    Types are values nobody mutates, so tensors of equal types may share one.
    """
    known: dict[tuple, tl.block_type] = {}

    def with_element_ty(self, scalar_ty):
        element_key = _type_key(scalar_ty)
        if element_key is None:
            return original(self, scalar_ty)
        key = (self.name, element_key)
        ty = known.get(key)
        if ty is None:
            ty = known[key] = original(self, scalar_ty)
        return ty

    return with_element_ty


_TENSOR_TYPES = (tl.dtype, tl.pointer_type, tl.block_type)


def _memoized_tensor_init(original):
    """`tensor.__init__` that builds each type's shape constexprs once.

    Everything a tensor holds besides its handle and type (and the scalar
    type it derives from the latter) depends only on the type's shape, which
    its name spells out.
    """
    known: dict[str, tuple[type, dict]] = {}
    own = ("handle", "type", "dtype")

    def __init__(self, handle, type):
        entry = known.get(type.name)
        if entry is None or entry[0] is not type.__class__:
            original(self, handle, type)
            if type.__class__ in _TENSOR_TYPES:
                known[type.name] = (type.__class__, {k: v for k, v in vars(self).items() if k not in own})
            return
        self.__dict__.update(entry[1])
        self.handle = handle
        self.type = type
        self.dtype = type.scalar

    return __init__


def _scalar_of(tensor: tl.tensor, use: str):
    value = tensor.handle
    if value.poisoned:
        program = current_program()
        raise TimingOnlyRefusal(program.kernel_name, program.program_id, use)
    if value.data.size != 1:
        program = current_program()
        raise UnsupportedKernelError(
            f"kernel '{program.kernel_name}' uses a block of shape {list(value.data.shape)} as a {use}; "
            "only scalars convert to Python values"
        )
    return value.data.reshape(-1)[0]


def _tensor_bool(self):
    """Scalars convert by value. Blocks are truthy: `semantic` itself tests
    `other.handle if other else None` on block operands, as Triton's
    interpreter also allows. The builder is told every value the kernel's
    Python code sees (a program trace's guards)."""
    if self.handle.data.size != 1:
        return True
    converted = bool(_scalar_of(self, "branch or loop condition"))
    _observed(self.handle, converted)
    return converted


def _tensor_index(self):
    converted = int(_scalar_of(self, "loop bound or Python integer"))
    _observed(self.handle, converted)
    return converted


def _observed(value: Value, converted) -> None:
    program = current_program()
    if program is not None:
        program.builder.observe(value, converted)


def _tensor_transpose(self):
    return tl.trans(self)


def _stock_truth(self):
    return True


def _stock_index(self):
    raise TypeError("'tensor' object cannot be interpreted as an integer")


def _data_method(original, replacement):
    """A tensor method that acts on bridge `Value`s and leaves compiler tensors alone."""

    def method(self):
        if isinstance(self.handle, Value):
            return replacement(self)
        return original(self)

    return method


def _unpatched(member):
    """`member` itself, or the builtin inside a wrapper Triton's interpreter left behind.

    `InterpretedFunction.__call__` (a jit helper called from a kernel under
    TRITON_INTERPRET) patches the language without restoring it, so after a
    stock interpreter run a builtin may be a lambda holding the builtin as
    its `member` default.
    """
    return (getattr(member, "__kwdefaults__", None) or {}).get("member", member)


def _patch_table() -> list[tuple[object, str, object]]:
    """(owner, name, replacement) for every attribute the bridge swaps in."""
    table = []
    for module in (tl, tl.core, tl.math):
        for name, member in vars(module).items():
            member = _unpatched(member)
            if tl.core.is_builtin(member):
                table.append((module, name, _dispatch_builtin(
                    member, _REPLACED_BUILTINS.get(name), _WRAPPED_BUILTINS.get(name))))
        if module is tl:
            # Triton 3.9 dropped `tl.advance` from the namespace (block pointers are the bridge's there).
            for name in ("make_block_ptr", "advance"):
                if name not in vars(tl) and hasattr(tl.core, name):
                    member = _unpatched(getattr(tl.core, name))
                    table.append((tl, name, _dispatch_builtin(member, wrapper=_WRAPPED_BUILTINS[name])))
        for name in ("range", "static_range"):
            if hasattr(module, name):
                table.append((module, name, _dispatch_plain(getattr(module, name), _python_range)))
    for module in (tl, tl.core):
        for name in ("reduce", "associative_scan"):
            member = getattr(module, name)
            if not tl.core.is_builtin(member):
                table.append((module, name, _dispatch_plain(member, _REPLACED_BUILTINS[name])))
    for name, member in vars(tl.tensor).items():
        member = _unpatched(member)
        if tl.core.is_builtin(member):
            table.append((tl.tensor, name, _dispatch_builtin(member, wrapper=_WRAPPED_BUILTINS.get(name))))
    for name, member in vars(tl.core.tensor_descriptor_base).items():
        member = _unpatched(member)
        if tl.core.is_builtin(member):
            table.append((tl.core.tensor_descriptor_base, name, _dispatch_builtin(member)))
    tensor_attrs = vars(tl.tensor)
    for name, replacement, stock in (("__bool__", _tensor_bool, _stock_truth), ("__index__", _tensor_index, _stock_index)):
        table.append((tl.tensor, name, _data_method(tensor_attrs.get(name, stock), replacement)))
    transpose = tensor_attrs["T"]
    table.append((tl.tensor, "T", property(_data_method(transpose.fget, _tensor_transpose))))
    for type_class in (tl.dtype, tl.block_type, tl.pointer_type):
        table.append((type_class, "to_ir", _dispatch_plain(vars(type_class)["to_ir"], _dtype_to_ir)))
    block_type_attrs = vars(tl.block_type)
    table.append((tl.block_type, "__init__", _memoized_block_type_init(block_type_attrs["__init__"])))
    table.append((tl.block_type, "with_element_ty", _memoized_with_element_ty(block_type_attrs["with_element_ty"])))
    table.append((tl.tensor, "__init__", _memoized_tensor_init(tensor_attrs["__init__"])))
    for jit_class in (JITFunction, InterpretedFunction):
        table.append((jit_class, "__call__", _dispatch_plain(jit_class.__call__, _call_jit_function)))
    return table


class _LanguagePatch:
    """Applies the patch table while at least one program is running."""

    def __init__(self) -> None:
        # Re-entrant: a program interrupted mid-run releases in its `finally` when its greenlet is collected,
        # which can happen inside another program's acquire on the same thread.
        self._lock = threading.RLock()
        self._running = 0
        self._table: list[tuple[object, str, object]] | None = None
        self._saved: list[tuple[object, str, object]] = []

    def acquire(self) -> None:
        with self._lock:
            if self._running == 0:
                if self._table is None:
                    self._table = _patch_table()
                for owner, name, replacement in self._table:
                    self._saved.append((owner, name, vars(owner).get(name, _MISSING)))
                    setattr(owner, name, replacement)
            self._running += 1

    def release(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                while self._saved:
                    owner, name, original = self._saved.pop()
                    if original is _MISSING:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, original)


_PATCH = _LanguagePatch()


@contextmanager
def running_program(program: RunningProgram):
    """Run `program` (the one `current_program` gives in this greenlet), with `triton.language` patched."""
    _PATCH.acquire()
    token = enter_program(program)
    try:
        yield
    finally:
        leave_program(token)
        _PATCH.release()

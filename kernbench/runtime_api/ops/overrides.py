"""PyTorch's `__torch_function__` protocol: a torch function given an object of an overriding type defers to it.

A tensor subclass that lays its value out over several ranks (DTensor)
cannot run a torch op as one local op: its type registers here, and every
`torch.X`, `F.X`, `Tensor` operator and in-place form of the op table
(binding.py), and the functions modules call directly, call its
`__torch_function__(func, types, args, kwargs)` instead when an argument (or
an element of a list argument) is of such a type. Without one registered the
check is a set lookup per argument. The same wrapper refuses a tensor whose
storage was resized to 0 (released.py).
"""

from __future__ import annotations

import functools

from kernbench.machine.memory import RELEASED
from kernbench.runtime_api.ops.released import check_storages

_OVERRIDING: set = set()


def register(cls) -> None:
    """Make `cls` (with a `__torch_function__` classmethod) take over the torch functions given one of it."""
    _OVERRIDING.add(cls)


def _overriding(args, kwargs):
    for value in (*args, *kwargs.values()):
        if type(value) in _OVERRIDING:
            return type(value)
        if type(value) in (list, tuple):
            for item in value:
                if type(item) in _OVERRIDING:
                    return type(item)
    return None


def overridable(fn):
    """`fn` deferring to `__torch_function__` of an overriding argument's type (once: wrapping twice is the same)."""
    if getattr(fn, "__overridable__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if RELEASED:
            check_storages((*args, *kwargs.values()), fn.__name__.lstrip("_"))
        if _OVERRIDING:
            cls = _overriding(args, kwargs)
            if cls is not None:
                return cls.__torch_function__(fn, (cls,), args, kwargs)
        return fn(*args, **kwargs)
    wrapper.__overridable__ = True
    return wrapper

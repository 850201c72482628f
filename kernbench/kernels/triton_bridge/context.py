"""The program a greenlet is running, found through a context variable.

The runtime runs each program in its own greenlet and switches between them
in the middle of kernels. Every greenlet has its own `contextvars` context
(greenlet >= 1.0), so the patched language builtins find the builder of the
program that called them here, never in a global that another program may
have changed in between.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import triton.language as tl
from triton.language.semantic import TritonSemantic

from kernbench.kernels.triton_bridge.values import Origin, Value


class ProgramBuilder(Protocol):
    """What the patched language (`blocks`, `reductions`, `patches`) asks of a running program's builder
    (`builder.BridgeBuilder`) beyond Triton's own builder calls. Named here, so that the program's type does not
    depend on the builder's module, which imports the language patches."""

    def charge(self, op: str, n_elements: int, dtype: tl.dtype) -> None: ...

    def load_block(self, addresses: np.ndarray, active: np.ndarray | None, fill, element: tl.dtype,
                   origin: Origin | None = None) -> Value: ...

    def store_block(self, addresses: np.ndarray, value: Value, active: np.ndarray | None,
                    origin: Origin | None = None) -> None: ...

    def create_reduce(self, combine_fn, inputs, axis, keep_dims): ...

    def observe(self, value: Value, converted) -> None: ...

    def untraceable(self, reason: str) -> None: ...


@dataclass(frozen=True)
class RunningProgram:
    """One program instance: its identity and the semantic layer over its builder."""

    kernel_name: str
    program_id: tuple[int, int, int]
    builder: ProgramBuilder
    semantic: TritonSemantic


_CURRENT: contextvars.ContextVar[RunningProgram | None] = contextvars.ContextVar(
    "kernbench_triton_program", default=None
)


def current_program() -> RunningProgram | None:
    """The program running in this greenlet, or None outside the bridge."""
    return _CURRENT.get()


def enter_program(program: RunningProgram) -> contextvars.Token:
    """Make `program` current in this greenlet; pass the token to `leave_program`."""
    return _CURRENT.set(program)


def leave_program(token: contextvars.Token) -> None:
    """Restore what was current in this greenlet before `enter_program`."""
    _CURRENT.reset(token)

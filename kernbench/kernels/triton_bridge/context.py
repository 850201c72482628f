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
from typing import TYPE_CHECKING

from triton.language.semantic import TritonSemantic

if TYPE_CHECKING:
    from kernbench.kernels.triton_bridge.builder import BridgeBuilder


@dataclass(frozen=True)
class RunningProgram:
    """One program instance: its identity and the semantic layer over its builder."""

    kernel_name: str
    program_id: tuple[int, int, int]
    builder: BridgeBuilder
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

"""The sharding-rule registry: one rule per op, as PyTorch's `_ops/` registers a strategy per aten op.

A rule reads the op's arguments (DTensors among them) and returns a
`Sharding`: the layout each DTensor input must have (the dispatcher
redistributes it), the output's layout and global shape, the layout of the
gradient each input receives where it is not the input's own (a
column-parallel linear sends its replicated input a Partial gradient), and,
where the op's arguments name global sizes (a view's shape), the local
computation to run instead of the op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Replicate

RULES: dict[str, Callable] = {}


@dataclass
class Sharding:
    """What one op on DTensors does: `inputs` (id of a DTensor argument → placements it must have), `output`
    (placements, a list of them for a tuple result, None for a result that is not a tensor), `shape` (the
    output's global shape, or a list), `grads` (id → the gradient layout this use sends back, FOLLOW entries
    meaning "as the output's"), `call` (the local computation, when not the op itself)."""

    inputs: dict
    output: object
    shape: object
    grads: dict = field(default_factory=dict)
    call: Callable | None = None


def register(*names: str):
    """Register the decorated rule for each op name (a torch function's, a Tensor method's or operator's)."""
    def decorate(rule):
        for name in names:
            if name in RULES:
                raise ValueError(f"two DTensor sharding rules for {name!r}")
            RULES[name] = rule
        return rule
    return decorate


def dtensors_of(args, kwargs) -> list:
    """The DTensor arguments (and list elements), in order, each once."""
    found, seen = [], set()
    for value in (*args, *kwargs.values()):
        for item in (value if type(value) in (list, tuple) else (value,)):
            if hasattr(item, "_placements") and id(item) not in seen:
                seen.add(id(item))
                found.append(item)
    return found


def replicate(n: int) -> tuple:
    return (Replicate(),) * n


def wrap_dim(dim: int, ndim: int) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise DTensorError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return dim % max(ndim, 1)


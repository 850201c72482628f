"""Simulated time: an `int` of picoseconds, never a float.

Floats would make sums order-dependent and runs irreproducible, so every time
or duration entering the engine passes through `as_ps`, which accepts Python
ints and integer-like objects (numpy integers, via `__index__`) and refuses
everything else.
"""

from __future__ import annotations

import operator

from kernbench.sim_engine.errors import EngineUsageError

PS_PER_S = 10**12
PS_PER_US = 10**6


def as_ps(value, what: str = "time") -> int:
    """Return `value` as an int of picoseconds; raise `EngineUsageError` for floats, bools, negatives.

    `what` names the quantity in the message ("duration", "until", ...).
    """
    if value.__class__ is not int:
        if isinstance(value, bool):
            raise EngineUsageError(f"{what} must be an int of picoseconds, got the bool {value!r}")
        try:
            value = operator.index(value)
        except TypeError:
            raise EngineUsageError(
                f"{what} must be an int of picoseconds, got {type(value).__name__} {value!r}"
            ) from None
    if value < 0:
        raise EngineUsageError(f"{what} must be >= 0 ps, got {value}")
    return value


def ceil_div(numerator: int, denominator: int) -> int:
    """Exact ceil(numerator / denominator) for non-negative ints, without floats."""
    return -(-numerator // denominator)

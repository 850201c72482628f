"""Which group sizes a schedule runs at, declared on the function itself.

Some schedules exist only for some group sizes (recursive halving pairs
ranks r and r XOR 2^k, so it needs a power-of-two group). A function marked
`@runs_for(predicate)` is one `run_collective` skips for a group whose size
fails the predicate, running the kind's fallback instead (as it does for a
kind the module has no function for), rather than the module failing
half-way through a collective.
"""

from __future__ import annotations

from typing import Callable


def runs_for(predicate: Callable[[int], bool]):
    """Mark a collective function as running only for group sizes `predicate(size)` accepts."""
    def mark(function):
        function.ccl_runs_for = predicate
        return function
    return mark


def runs_at(function, size: int) -> bool:
    """Whether `function` (a module's collective function) runs for a group of `size` members."""
    predicate = getattr(function, "ccl_runs_for", None)
    return predicate is None or predicate(size)


def runnable(module, kind: str, size: int) -> Callable | None:
    """The module's function for `kind` if it has one that runs for a group of `size`, else None."""
    function = getattr(module, kind, None)
    return function if callable(function) and runs_at(function, size) else None


def power_of_two(size: int) -> bool:
    return size > 0 and size & (size - 1) == 0

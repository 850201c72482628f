"""Which group sizes a schedule runs at, declared on the function itself.

Some schedules exist only for some group sizes (recursive halving pairs
ranks r and r XOR 2^k, so it needs a power-of-two group) or layouts (a
hierarchical one needs several ranks on each of several SIPs). A function
marked `@runs_for(predicate)` is one `run_collective` skips for a group
whose size fails the predicate (`@runs_on(predicate)`: whose members' SIPs
fail it), running the kind's fallback instead (as it does for a kind the
module has no function for), rather than the module failing half-way
through a collective.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable


def runs_for(predicate: Callable[[int], bool]):
    """Mark a collective function as running only for group sizes `predicate(size)` accepts."""
    def mark(function):
        function.ccl_runs_for = predicate
        return function
    return mark


def runs_on(predicate: Callable[[tuple[int, ...]], bool]):
    """Mark a collective function as running only where `predicate(sips)` accepts the members' layout: the SIP
    of each group rank, in rank order (a hierarchical schedule needs several ranks on each of several SIPs)."""
    def mark(function):
        function.ccl_runs_on = predicate
        return function
    return mark


def rotates(condition: Callable[[int, int], bool]):
    """Mark a collective function whose rank r runs rank 0's program with every rank shifted by r (mod p) —
    it sends to r + d where rank 0 sends to d, takes chunk q + r where rank 0 takes chunk q, in the same order —
    for a call where `condition(count, p)` holds (count: each member's input elements). Such a call, timing-only
    on an idle machine whose routes rotate too, simulates rank 0 alone (adr/0010, "Symmetric collectives")."""
    def mark(function):
        function.ccl_rotates = condition
        return function
    return mark


def runs_at(function, sips: tuple[int, ...]) -> bool:
    """Whether `function` (a module's collective function) runs for members on `sips` (one per group rank)."""
    size_rule = getattr(function, "ccl_runs_for", None)
    layout_rule = getattr(function, "ccl_runs_on", None)
    return (size_rule is None or size_rule(len(sips))) and (layout_rule is None or layout_rule(sips))


def runnable(module, kind: str, sips: tuple[int, ...]) -> Callable | None:
    """The module's function for `kind` if it has one that runs for members on `sips`, else None."""
    function = getattr(module, kind, None)
    return function if callable(function) and runs_at(function, sips) else None


def power_of_two(size: int) -> bool:
    return size > 0 and size & (size - 1) == 0


def nested(sips: tuple[int, ...]) -> bool:
    """Whether members on `sips` (one per group rank) are k ≥ 2 ranks on each of P ≥ 2 SIPs."""
    counts = set(Counter(sips).values())
    return len(set(sips)) >= 2 and len(counts) == 1 and counts.pop() >= 2

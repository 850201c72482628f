"""Wirings: which member may send to which over IPCQ, by name.

A hardware PE has queues only towards the neighbours its wiring connects,
so a collective installs exactly the queues of its wiring (`ccl.yaml`'s
`wiring` key) and a send or receive between members it does not connect is
an error naming the wiring, instead of a queue the machine would not have.
A wiring is a function of the group size returning directed (sender,
receiver) rank pairs; one marked `@by_layout` is given the members' SIPs
instead (one per group rank, in rank order), for a shape that follows the
machine (rings inside each SIP and across them). An algorithm module may
define its own in a module-level `WIRINGS = {"name": function}`, looked up
before these.

Collectives whose shape does not depend on the algorithm (the rooted ones in
`rooted.py`) declare the wiring they need with `@uses_wiring`, which wins
over the configured one, so every algorithm module can re-export them.
"""

from __future__ import annotations

from typing import Callable

Edges = frozenset[tuple[int, int]]


def ring_1d(size: int) -> Edges:
    """Each rank to its two ring neighbours, r ± 1 modulo the size."""
    return frozenset((r, (r + step) % size) for r in range(size) for step in (1, -1) if (r + step) % size != r)


def tree_parent(rank: int) -> int | None:
    """The parent of `rank` in the binary tree laid out like a heap (rank 0 is the root)."""
    return None if rank == 0 else (rank - 1) // 2


def tree_children(rank: int, size: int) -> list[int]:
    """The children of `rank` in the heap-ordered binary tree of `size` ranks, ascending."""
    return [child for child in (2 * rank + 1, 2 * rank + 2) if child < size]


def binary_tree(size: int) -> Edges:
    """Each rank to its parent and its children in the heap-ordered binary tree."""
    return frozenset(pair for r in range(1, size) for pair in ((r, tree_parent(r)), (tree_parent(r), r)))


def largest_power_of_two(size: int) -> int:
    return 1 << (size.bit_length() - 1)


def hypercube(size: int) -> Edges:
    """Partners r XOR 2^k among the first 2^⌊log2 size⌋ ranks, and each rank beyond them to r − 2^⌊log2 size⌋."""
    core = largest_power_of_two(size)
    pairs = {(r, r ^ bit) for r in range(core) for bit in (1 << k for k in range(core.bit_length() - 1))}
    pairs |= {pair for r in range(core, size) for pair in ((r, r - core), (r - core, r))}
    return frozenset(pairs)


def full(size: int) -> Edges:
    """Every rank to every other rank."""
    return frozenset((a, b) for a in range(size) for b in range(size) if a != b)


WIRINGS: dict[str, Callable[[int], Edges]] = {
    "ring_1d": ring_1d, "binary_tree": binary_tree, "hypercube": hypercube, "full": full,
}


def by_layout(wiring: Callable[[tuple[int, ...]], Edges]):
    """Mark a wiring as built from the members' SIPs (a tuple, one per group rank) rather than the group size."""
    wiring.ccl_by_layout = True
    return wiring


def uses_wiring(name: str):
    """Mark a collective function as needing wiring `name` whatever the configured wiring is."""
    def mark(function):
        function.ccl_wiring = name
        return function
    return mark


def lookup_wiring(name: str, module) -> Callable[[int], Edges] | None:
    """The wiring function called `name`: the module's own `WIRINGS` first, then the shipped ones."""
    own = getattr(module, "WIRINGS", {})
    return own.get(name) or WIRINGS.get(name)


def known_wirings(module) -> list[str]:
    return sorted({*getattr(module, "WIRINGS", {}), *WIRINGS})

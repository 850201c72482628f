"""What a launch keeps for its later programs, within a budget its run's launches share.

A launch's programs repeat work: replayed programs compute the same pointers
(ADR 0007, "Replayed programs"), kernels and device ops access the same
blocks (their access plans). What is kept is bounded per run, not per
launch, since a run's ranks and streams run many launches at once. No
Triton here: device ops keep their blocks in runs that load no kernel.
"""

from __future__ import annotations

#: Bytes of PID results kept for later programs by all the launches that run at once, their tapes together (a
#: run's launches share one pool: `MemoBudget`); past it, a launch drops its oldest results for new ones.
MEMO_BYTES = 128 << 20


class MemoBudget:
    """The bytes one launch keeps for its later programs (its tapes' remembered results, or its access plans),
    drawn from a pool shared with the other launches of its run (a list of the bytes left), and given back when
    the launch ends (`release`) or drops something it kept (`give`).

    A run's ranks and streams run many launches at once; each with a budget of
    its own, a timing-only transformer layer on eight ranks held a budget's
    worth per running launch, and its memory grew with the launches in flight.
    """

    def __init__(self, pool: list[int] | None = None) -> None:
        self.pool = [MEMO_BYTES] if pool is None else pool  # the launch's own until a run shares its pool (`share`)
        self.held = 0

    def share(self, pool: list[int]) -> None:
        """Draw from `pool` from now on (before anything is held)."""
        self.pool = pool

    def take(self, size: int) -> bool:
        """Hold `size` more bytes if the pool has them."""
        if size > self.pool[0]:
            return False
        self.pool[0] -= size
        self.held += size
        return True

    def give(self, size: int) -> None:
        """Give back `size` of the bytes held."""
        self.pool[0] += size
        self.held -= size

    def release(self) -> None:
        self.pool[0] += self.held
        self.held = 0


class KeptValues:
    """Values kept under keys for a launch's later programs, their bytes drawn through a `MemoBudget` (which
    other stores of the launch may share): when the pool lacks the bytes of a new value, this store's oldest
    values are dropped first (`dropped(value)` is told of each), and a value that would not fit even then is not
    kept, nothing dropped for it. `release` drops everything and gives its bytes back."""

    __slots__ = ("_kept", "_budget", "_bytes", "_dropped")

    def __init__(self, budget: MemoBudget, dropped=None) -> None:
        self._kept: dict = {}  # key -> (value, bytes), oldest first
        self._budget = budget
        self._bytes = 0  # this store's share of what the budget holds
        self._dropped = dropped

    def get(self, key):
        """What is kept under `key`, or None."""
        known = self._kept.get(key)
        return None if known is None else known[0]

    def items(self):
        """(key, value) of everything kept, oldest first."""
        return ((key, known[0]) for key, known in self._kept.items())

    def keep(self, key, value, nbytes: int) -> bool:
        """Keep `value` under `key` (replacing what was kept there); whether it was kept."""
        kept = self._kept
        budget = self._budget
        previous = kept.pop(key, None)
        if previous is not None:
            self._give(previous[1])
        if nbytes > budget.pool[0] + self._bytes:
            return False
        while not budget.take(nbytes):
            oldest, size = kept.pop(next(iter(kept)))
            self._give(size)
            if self._dropped is not None:
                self._dropped(oldest)
        kept[key] = (value, nbytes)
        self._bytes += nbytes
        return True

    def release(self) -> None:
        self._kept.clear()
        self._give(self._bytes)

    def _give(self, size: int) -> None:
        self._bytes -= size
        self._budget.give(size)

"""Where the ranks of one collective call meet: host-side registration, stream-side arrival.

Each rank's call registers an `Entry` at once (host time), so a rank whose
call does not match its peers' — another collective, size, dtype, op or
root — fails right there, naming both ranks. The device part runs later, in
each rank's stream order: every rank's stream operation `arrive`s; the last
to arrive runs the collective and wakes the others. Until then they wait on
one engine event whose name says which ranks have not joined, so a rank that
never calls ends in the engine's `Deadlock` report naming it and the
collective — never a hang.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernbench.ccl.errors import CollectiveError
from kernbench.sim_engine import Event


@dataclass(frozen=True)
class Entry:
    """One rank's side of a call: what it asked for and the tensors it passed."""

    group_rank: int
    global_rank: int
    kind: str
    reduce_op: str | None
    root: int | None
    dtype: str
    input_count: int
    output_count: int
    input: object
    output: object
    premul_factor: float | None = None  # PREMUL_SUM's factor
    splits: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # all_to_all: elements sent to / received from each
    members: tuple = ()  # PE ranks: the `Member`s of the ranks the worker drives

    def describe(self) -> str:
        extras = [f"op={self.reduce_op}"] if self.reduce_op else []
        extras += [f"factor={self.premul_factor}"] if self.premul_factor is not None else []
        extras += [f"root={self.root}"] if self.root is not None else []
        return (f"{self.kind}({', '.join([f'{self.input_count} {self.dtype} elements', *extras])}"
                + (f" into {self.output_count}" if self.output_count != self.input_count else "") + ")")


class Rendezvous:
    """One collective call of one group (its `seq`-th), joined by `size` ranks."""

    def __init__(self, engine, label: str, size: int, ranks: tuple[int, ...], compare: Callable):
        """`compare(a, b)` says how two calls differ ('' when they match); it must be an equivalence (every
        call is compared with the first only)."""
        self.label = label
        self.size = size
        self.ranks = ranks
        self.entries: dict[int, Entry] = {}
        self._arrived: set[int] = set()
        self._compare = compare
        self.done = _Joined(engine, self)
        self._engine = engine

    def register(self, entry: Entry) -> None:
        """Add a rank's call; a call that does not match an earlier rank's is a `CollectiveError` naming both."""
        if entry.group_rank in self.entries:
            raise CollectiveError(f"{self.label}: rank {entry.global_rank} joined twice")
        # Every earlier call matched the first, so the first is the one a mismatch is named against.
        first = next(iter(self.entries.values()), None)
        if first is not None:
            problem = self._compare(first, entry)
            if problem:
                raise CollectiveError(
                    f"{self.label}: ranks disagree: rank {first.global_rank} called {first.describe()}, "
                    f"rank {entry.global_rank} called {entry.describe()} ({problem})")
        self.entries[entry.group_rank] = entry

    def arrive(self, group_rank: int, run: Callable[["Rendezvous"], None]) -> None:
        """Called in a rank's stream order: the last arrival runs `run(self)`; the others wait until it is done."""
        self._arrived.add(group_rank)
        if len(self._arrived) < self.size:
            self._engine.wait(self.done)
            return
        try:
            run(self)
        except BaseException as error:
            self.done.fail(error)
            raise
        self.done.succeed()

    def missing(self) -> list[int]:
        return [self.ranks[r] for r in range(self.size) if r not in self._arrived]

    def describe_wait(self) -> str:
        """What waiting on `done` means now: the ranks that have not joined, or that the collective runs."""
        missing = self.missing()
        waiting_for = ", ".join(map(str, missing))
        return (f"{self.label} over ranks {list(self.ranks)}: rank(s) {waiting_for} have not joined"
                if missing else f"{self.label}: running")


class _Joined(Event):
    """`Rendezvous.done`, described from the rendezvous' state when a `Deadlock` report asks (rather than
    renamed at every arrival, O(p) each)."""

    __slots__ = ("_rendezvous",)

    def __init__(self, engine, rendezvous: Rendezvous):
        super().__init__(engine)
        self._rendezvous = rendezvous

    def describe(self) -> str:
        return repr(self._rendezvous.describe_wait())

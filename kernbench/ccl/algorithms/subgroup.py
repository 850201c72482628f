"""A member's program seen as a rank of a part of its group, so a shipped schedule runs on that part.

A hierarchical collective runs ring schedules on sub-groups — the ranks of
one SIP, the ranks at one position on every SIP — each over its own data
(the whole buffer, then one shard of it). `Subgroup` gives those schedules
what they read (`rank`, `size`, `member`) for the part and maps the peers
they name back to group ranks; every op (loads, reductions, queues) is the
member's own `PeProgram`'s, so it is timed, logged and finalized (an `avg`
divides by the whole group's size) as the member's.
"""

from __future__ import annotations

from kernbench.ccl.collective import Member


class Subgroup:
    """`program` as rank `ranks.index(program.rank)` of the sub-group `ranks` (group ranks, in the schedule's
    rank order), working on `member`'s regions.

    `started`, when given, collects the handle of everything the schedule
    starts (its posted stores): a later phase that reads what this one
    stored waits for exactly those.
    """

    def __init__(self, program, ranks: list[int], member: Member, started: list | None = None):
        self._program = program
        self.ranks = ranks
        self._started = started
        self.rank = ranks.index(program.rank)
        self.size = len(ranks)
        self.member = member

    def start(self, function, *args):
        pending = self._program.start(function, *args)
        if self._started is not None:
            self._started.append(pending)
        return pending

    def send_steps(self, peer: int, values):
        return self._program.send_steps(self.ranks[peer], values)

    def recv_steps(self, peer: int):
        return self._program.recv_steps(self.ranks[peer])

    def __getattr__(self, name: str):
        return getattr(self._program, name)

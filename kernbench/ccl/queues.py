"""The IPCQ queues of one collective: one per directed edge of its wiring, built on first use.

Queues belong to one collective, so two collectives in flight between the
same PEs never read each other's messages; they still share every memory
and link channel, which is where they contend.
"""

from __future__ import annotations

from kernbench.ccl.errors import CollectiveError
from kernbench.machine import Machine, tcm
from kernbench.machine.ipcq import IpcQueue, IpcqSettings


class CollectiveQueues:
    """Queues between the members of one request, restricted to the edges of its wiring."""

    def __init__(self, machine: Machine, request, settings: IpcqSettings, wiring: str, edges: frozenset):
        self._machine = machine
        self._request = request
        self.settings = settings
        self._wiring = wiring
        self._edges = edges
        self._queues: dict[tuple[int, int], IpcQueue] = {}

    def between(self, sender: int, receiver: int) -> IpcQueue:
        """The queue from group rank `sender` to group rank `receiver`; outside the wiring, a `CollectiveError`."""
        key = (sender, receiver)
        queue = self._queues.get(key)
        if queue is None:
            if key not in self._edges:
                raise CollectiveError(
                    f"{self._request.label}: rank {sender} has no IPCQ to rank {receiver} under wiring "
                    f"{self._wiring!r} (group of {len(self._request.members)}); use a wiring that connects them")
            members = self._request.members
            queue = self._queues[key] = IpcQueue(
                self._machine, _tcm_of(members[sender]), _tcm_of(members[receiver]), self.settings,
                label=self._request.label, programs=key, data=not self._request.timing_only)
        return queue

    def check_drained(self) -> None:
        """After every program returned: a message nobody received is an algorithm bug, named here."""
        left = [f"rank {s} -> rank {r}: {q.undelivered} chunk(s)" for (s, r), q in sorted(self._queues.items())
                if q.undelivered]
        if left:
            raise CollectiveError(f"{self._request.label}: messages were sent but never received ({'; '.join(left)})")


def _tcm_of(member):
    return tcm(member.sip, member.cube, member.pe)

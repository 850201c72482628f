"""The rank backend where each worker is one rank on a SIP of its own (ADR 0012's ranks per SIP).

Spawned workers up to the SIP count, and the worker of a bench whose world
is as large as the SIP count, drive SIP ranks: rank r works on `ahbm:r`, and
a rank's buffer is its whole (contiguous) tensor. Every rank makes its own
calls, so a collective's rendezvous is joined by each rank of the group,
and point-to-point messages (a rank per worker) are possible here only.
"""

from __future__ import annotations

import functools

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.list_forms import FlatLists
from kernbench.ccl.members import member, whole
from kernbench.ccl.rank_backends.backend import RankBackend, joined_entries
from kernbench.ccl.rank_backends.matching import (check_splits, collectives_differ, element_splits, nominal_counts,
                                                  p2p_differ)
from kernbench.ccl.rendezvous import Entry, Rendezvous
from kernbench.runtime_api.streams import EVERYWHERE


class SipRanks(RankBackend):
    """A worker driving one rank, on its own SIP."""

    def __init__(self, ctx, world, communicators):
        super().__init__(ctx, world, communicators, ranks_per_worker=1)

    def my_rank(self) -> int:
        spawned = self._ctx.spawned_rank()
        rank = 0 if spawned is None else spawned
        if rank >= self.world.size:
            raise CollectiveError(f"spawned rank {rank} is outside the world of {self.world.size} ranks")
        return rank

    def collective(self, group, kind: str, call: str, reduce_op, root, input, output, label: str, splits,
                   async_op: bool):
        me = self._member_rank(group, call)
        self._check_on_own_device(me, call, input, output)
        group_rank = group.ranks.index(me)
        meeting = group.rendezvous(self._ctx.engine, "collective", me, label, group.size(), group.ranks,
                                   collectives_differ)
        counts = nominal_counts(kind, input, output)
        op, factor = reduce_op
        meeting.register(Entry(group_rank, me, call, op, root, input.dtype.name, *counts, input, output, factor,
                               splits))
        if splits is not None and len(meeting.entries) == meeting.size:
            check_splits(meeting)
        run = functools.partial(self._run_ranks, kind, reduce_op, root)
        return self._enqueue_arrival(meeting, group_rank, run, group, input, output, async_op)

    def all_to_all_splits(self, input, output, input_split_sizes, output_split_sizes, n: int):
        return (element_splits(input, input_split_sizes, n, "all_to_all_single", "input"),
                element_splits(output, output_split_sizes, n, "all_to_all_single", "output"))

    def list_forms(self, group, call: str) -> FlatLists:
        return FlatLists(self._ctx, group.size())

    def barrier_token(self, group):
        return self._synchronized_token(self._member_rank(group, "barrier"), 1)

    def p2p(self, role: str, tensor, peer, group_peer, group, tag, async_op: bool):
        me = self._member_rank(group, role)
        if group_peer is not None:
            peer = group.ranks[group.group_rank_of(None, group_peer, role, "dst" if role == "send" else "src")]
        if peer is None or peer not in group.ranks or peer == me:
            raise CollectiveError(f"{role} on rank {me}: peer rank {peer!r} is not another rank of group {group.name} "
                                  f"(ranks {list(group.ranks)}); receiving from any source is not supported")
        self._check_on_own_device(me, role, tensor)
        sender, receiver = (me, peer) if role == "send" else (peer, me)
        label = f"send#{{seq}}[{sender}->{receiver}" + (f", tag {tag}]" if tag else "]")
        meeting = group.rendezvous(self._ctx.engine, ("p2p", sender, receiver, tag), me, label, 2, (sender, receiver),
                                   p2p_differ)
        side = 0 if role == "send" else 1
        meeting.register(Entry(side, me, role, None, None, tensor.dtype.name, tensor.numel(), tensor.numel(),
                               tensor, tensor))
        run = functools.partial(self._run_ranks, "send", (None, None), None, communicator_size=group.size())
        device = tensor.device.index
        current = self._ctx.current_stream(device)
        stream = self._communicators.p2p_stream(device, sender, receiver)
        stream.wait_stream(current)  # what the current stream wrote (or still reads) is ordered before the message
        handle = stream.enqueue(meeting.label, functools.partial(meeting.arrive, side, run),
                                spmd=(EVERYWHERE, meeting.done))
        if role == "recv":
            tensor._pending_writes.append(handle)
        if not async_op:
            current.enqueue(f"wait {meeting.label}", functools.partial(self._ctx.engine.wait, handle),
                            spmd=("wait", handle))
        return handle, meeting.label, peer

    def _member_rank(self, group, call: str) -> int:
        me = self.my_rank()
        if me not in group.ranks:
            raise CollectiveError(f"{call}: rank {me} is not in group {group.name} (ranks {list(group.ranks)})")
        return me

    def _check_on_own_device(self, me: int, call: str, *tensors) -> None:
        for tensor in tensors:
            if tensor.device.index != me:
                raise CollectiveError(
                    f"{call} on rank {me}: tensor {tensor.name!r} is on {tensor.device}, but with world_size "
                    f"{self.world.size} rank {me} works on ahbm:{me}; call torch.ahbm.set_device(rank) in the worker")

    def _run_ranks(self, kind: str, reduce_op, root, meeting: Rendezvous,
                   communicator_size: int | None = None) -> None:
        """Every rank's whole tensors as one collective (in group-rank order; a message's sender first), on a
        communicator of `communicator_size` ranks (a send's group; None: its members)."""
        entries = joined_entries(meeting)
        if entries is None:
            return
        members = []
        for group_rank, entry in enumerate(entries):
            source = whole(entry.input)
            target = source if entry.output is entry.input else whole(entry.output)
            members.append(member(group_rank, entry.input, source, target))
        splits = tuple(entry.splits[0] for entry in entries) if entries[0].splits else None
        self._run(kind, reduce_op, root, members, meeting.label, meeting.ranks, entries[0], splits,
                  communicator_size)

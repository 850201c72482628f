"""The rank backend where a worker drives several ranks, each a PE of the worker's SIP (ADR 0012's PE ranks).

The worker of a bench that does not spawn, in a world of another size than
the SIP count, drives every rank as a PE of one SIP; above the SIP count
spawned workers split the ranks, worker w driving world/nprocs consecutive
ranks on its own SIP. Either way the worker holds each collective's tensor
spread over PEs: a group's ranks that it drives read the tensor's last
dimension as equal chunks, chunk j being its j-th rank's buffer, moved and
reduced by the PE that holds it. The workers holding a group's ranks meet
(one rendezvous entry each), and the last to arrive runs the collective for
every rank. A worker stands for several ranks, so there are no
point-to-point messages here.
"""

from __future__ import annotations

import functools

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.members import check_own_pes, chunks, member
from kernbench.ccl.pe_list_forms import PeFlatLists
from kernbench.ccl.rank_backends.backend import RankBackend, joined_entries
from kernbench.ccl.rank_backends.matching import collectives_differ, element_splits, equal_chunk_splits, nominal_counts
from kernbench.ccl.rendezvous import Entry, Rendezvous


class PeRanks(RankBackend):
    """A worker driving `ranks_per_worker` consecutive ranks, PEs of its SIP."""

    def my_rank(self) -> int:
        spawned = self._ctx.spawned_rank()
        if spawned not in (None, 0) and self._ctx.spawned_count() is None:
            raise CollectiveError(
                f"rank {spawned} called torch.distributed, but world_size {self.world.size} exceeds the "
                f"{self._ctx.topology.n_sips} SIPs: ranks are PEs, driven by the single worker rank 0 or by "
                "spawned workers that split the world between them")
        return (spawned or 0) * self.ranks_per_worker

    def collective(self, group, kind: str, call: str, reduce_op, root, input, output, label: str, splits,
                   async_op: bool):
        """This worker's PE ranks of the group: the j-th rank it drives has chunk j of the last dimension of each
        tensor. The workers holding the group's ranks meet (one rendezvous entry each, named by the first rank
        it drives); the last to arrive runs the collective for every rank."""
        if input.device != output.device:
            raise CollectiveError(f"{call}: input is on {input.device} but output on {output.device}")
        share, first, k = self.share(group, call), self.my_rank(), self.ranks_per_worker
        workers = sorted({r // k * k for r in group.ranks})  # each worker named by the first rank it drives
        if len(workers) > 1 and input.device.index != first // k:
            raise CollectiveError(
                f"{call} on ranks {group.ranks[share[0]]}..{group.ranks[share[-1]]}: tensor {input.name!r} is on "
                f"{input.device}, but with world_size {self.world.size} over {self.world.size // k} workers this "
                f"worker's ranks are PEs of ahbm:{first // k}; call torch.ahbm.set_device(rank) in the worker")
        inputs = chunks(input, len(share), call)
        outputs = inputs if output is input else chunks(output, len(share), call)
        members = tuple(member(g, input, inputs[j], outputs[j]) for j, g in enumerate(share))
        check_own_pes(list(members), input, call)
        if kind == "all_to_all":
            splits = equal_chunk_splits(inputs[0].count, group.size(), call)
        counts = (count // len(share) for count in nominal_counts(kind, input, output))
        meeting = group.rendezvous(self._ctx.engine, "collective", first, label, len(workers), tuple(workers),
                                   collectives_differ)
        index = workers.index(first)
        op, factor = reduce_op
        meeting.register(Entry(index, first, call, op, root, input.dtype.name, *counts, input, output, factor,
                               members=members))
        run = functools.partial(self._run_ranks, kind, reduce_op, root, group.ranks, splits)
        return self._enqueue_arrival(meeting, index, run, group, input, output, async_op)

    def all_to_all_splits(self, input, output, input_split_sizes, output_split_sizes, n: int):
        """None: `collective` cuts each PE rank's chunk in n equal parts, the only splits every rank agrees on
        when one call gives them all the same sizes."""
        for tensor, sizes, what in ((input, input_split_sizes, "input"), (output, output_split_sizes, "output")):
            if sizes is not None and len(set(element_splits(tensor, sizes, n, "all_to_all_single", what))) > 1:
                raise CollectiveError(
                    f"all_to_all_single: {what}_split_sizes={list(sizes)} are unequal, but with PE ranks one "
                    "call gives every rank the same split sizes, and rank k would then get "
                    "input_split_sizes[k] rows from each rank: only equal splits agree; spawn a worker per "
                    "rank for uneven ones")
        return None

    def list_forms(self, group, call: str) -> PeFlatLists:
        """Every rank the worker drives at once (`pe_list_forms`)."""
        share = self.share(group, call)
        return PeFlatLists(self._ctx, group.size(), share, self.share_policy(len(share)))

    def barrier_token(self, group):
        """One element per rank the worker drives, on the ranks' PEs; None when it drives the whole group (only
        its current device to wait for, which this does)."""
        ranks = len(self.share(group, "barrier"))
        if ranks == group.size():
            self._ctx.synchronize(self._ctx.current_device())
            return None
        return self._synchronized_token(self.my_rank() // self.ranks_per_worker, ranks)

    def p2p(self, role: str, tensor, peer, group_peer, group, tag, async_op: bool):
        raise CollectiveError(f"{role}: with PE ranks (world_size {self.world.size} above the SIP count, a bench "
                              "that does not spawn, or fewer workers than ranks) a worker drives several ranks; "
                              "point-to-point calls need a rank per worker")

    def _run_ranks(self, kind: str, reduce_op, root, ranks, splits, meeting: Rendezvous) -> None:
        """Every worker's PE ranks as one collective (in group-rank order)."""
        entries = joined_entries(meeting)
        if entries is None:
            return
        members = sorted((m for entry in entries for m in entry.members), key=lambda m: m.rank)
        self._run(kind, reduce_op, root, members, meeting.label, ranks, entries[0], splits)

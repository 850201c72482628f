"""What the two rank backends share: which ranks a worker drives, where its part of a call runs, and running a
collective once the ranks have met.

`torch.distributed` (`ccl/distributed.py`) checks a call's arguments and
hands it to the backend driving the calling worker's ranks (ADR 0012): one
rank on a SIP of its own (`sip_ranks.py`), or several PE ranks of one SIP
(`pe_ranks.py`). Both enqueue a call the same way, on the same streams, and
run and record the same collective request; they differ in which ranks a
worker stands for and which part of a tensor is a rank's buffer. What they
share is written here once.
"""

from __future__ import annotations

import abc
import functools

import numpy as np

from kernbench.ccl.collective import CollectiveRequest, run_collective
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.records import collective_record, record_count
from kernbench.ccl.rendezvous import Entry, Rendezvous
from kernbench.policy import DPPolicy
from kernbench.runtime_api.streams import EVERYWHERE, Stream


class RankBackend(abc.ABC):
    """How one kind of worker drives its ranks of one world: `ranks_per_worker` consecutive ranks, the first
    of them `my_rank()`."""

    def __init__(self, ctx, world, communicators, ranks_per_worker: int):
        self._ctx = ctx
        self.world = world
        self._communicators = communicators
        self.ranks_per_worker = ranks_per_worker

    # ---- the calls ---------------------------------------------------------------------------
    @abc.abstractmethod
    def my_rank(self) -> int:
        """The calling worker's rank (the first of those it drives)."""

    @abc.abstractmethod
    def collective(self, group, kind: str, call: str, reduce_op, root, input, output, label: str, splits,
                   async_op: bool):
        """Register the worker's part of a checked collective with its peers' and enqueue it; (handle, label).

        `reduce_op` is (op name, PREMUL_SUM factor); `label` may hold
        `{seq}`; `async_op` runs it on the group's stream (`_stream_for`)."""

    @abc.abstractmethod
    def all_to_all_splits(self, input, output, input_split_sizes, output_split_sizes, n: int):
        """all_to_all_single's split sizes as the collective takes them (elements sent, received per rank)."""

    @abc.abstractmethod
    def list_forms(self, group, call: str):
        """How the list forms' tensors become one flat buffer per worker (`list_forms.FlatLists`)."""

    @abc.abstractmethod
    def barrier_token(self, group):
        """The tensor the worker's barrier all-reduces, once its device's work is done; None when the
        worker has no peer to wait for."""

    @abc.abstractmethod
    def p2p(self, role: str, tensor, peer, group_peer, group, tag, async_op: bool):
        """Enqueue one side of a send/recv; (handle, label, the peer's global rank). Without `async_op` the
        current stream waits for it."""

    # ---- which ranks the worker drives -------------------------------------------------------------
    def share(self, group, call: str) -> list[int]:
        """The group ranks (positions in `group.ranks`) this worker drives, ascending; at least one."""
        first, k = self.my_rank(), self.ranks_per_worker
        share = [i for i, r in enumerate(group.ranks) if first <= r < first + k]
        if not share:
            mine = f"rank {first}" if k == 1 else f"ranks {first}..{first + k - 1}"
            raise CollectiveError(f"{call}: {mine} of this worker {'is' if k == 1 else 'are'} not in group "
                                  f"{group.name} (ranks {list(group.ranks)})")
        return share

    def acts_as(self, group, group_rank: int) -> bool:
        """Whether this worker makes the call of the group's rank `group_rank` (with PE ranks, of each rank it
        drives)."""
        first = self.my_rank()
        return first <= group.ranks[group_rank] < first + self.ranks_per_worker

    def pe_rank_policy(self, group) -> DPPolicy:
        """A placement putting chunk j of a tensor's last dimension on its own PE, for each rank j of the group
        that this worker drives."""
        return self.share_policy(len(self.share(group, "pe_rank_policy")))

    def share_policy(self, ranks: int) -> DPPolicy:
        """A placement giving each of `ranks` equal chunks of a tensor's last dimension a PE of its own."""
        topology = self._ctx.topology
        return DPPolicy.over_pes(ranks, topology.cubes_per_sip, topology.pes_per_cube)

    # ---- the host's side of a call ------------------------------------------------------------
    def host_call_ps(self) -> int:
        """The host's time to issue one call of this world's (adr/0010, "Host cost of a call"): the topology's
        one-GPU cost, grown for the job's processes (the spawn's workers, else the world's)."""
        system = self._ctx.topology.system
        workers = self._ctx.spawned_count() or self.world.size // self.ranks_per_worker
        return system.host_call_ps(system.collective_call_ps, workers)

    def spend_host_call(self) -> None:
        """The calling worker's host spends `host_call_ps` before the call is enqueued, as PyTorch and NCCL
        spend it; work already on the device runs on meanwhile. A call from outside any process has no host
        timeline to spend it on."""
        cost, engine = self.host_call_ps(), self._ctx.engine
        if cost and engine.current_process is not None:
            engine.sleep(cost)

    # ---- machinery ---------------------------------------------------------------------------
    def _stream_for(self, device: int, group, async_op: bool) -> Stream:
        """Where a collective runs: the current stream, or for `async_op` the group's own stream on the device,
        ordered after what the current stream has enqueued (NCCL's internal stream per communicator)."""
        current = self._ctx.current_stream(device)
        if not async_op:
            return current
        stream = self._communicators.group_stream(device, group.name)
        stream.wait_stream(current)
        return stream

    def _enqueue_arrival(self, meeting: Rendezvous, index: int, run, group, input, output, async_op: bool):
        """The worker's arrival at `meeting`, enqueued where the collective runs; the output waits for it.
        (handle, label)."""
        stream = self._stream_for(input.device.index, group, async_op)
        handle = stream.enqueue(meeting.label, functools.partial(meeting.arrive, index, run), spmd=(EVERYWHERE, meeting.done))
        output._pending_writes.append(handle)
        return handle, meeting.label

    def _synchronized_token(self, device: int, ranks: int):
        """The barrier token of `ranks` ranks on `device`, once the device's work so far is done."""
        self._ctx.synchronize(device)
        return self._communicators.barrier_token(device, ranks, self.share_policy)

    def _run(self, kind, reduce_op, root, members, label, ranks, entry: Entry, splits,
             communicator_size: int | None = None) -> None:
        """Run the collective of the met ranks' `members` (on a process group of `communicator_size` ranks where
        that is more than the members: a send) and record its row."""
        op, factor = reduce_op
        request = CollectiveRequest(kind, op, tuple(members), root, self.world.config, label, self._ctx.timing_only,
                                    splits=splits, premul_factor=factor, timeout_s=self.world.timeout_s,
                                    communicator_size=communicator_size)
        engine = self._ctx.engine
        start = engine.now
        ran = run_collective(self._ctx.machine, request)
        itemsize = np.dtype(members[0].input.dtype).itemsize
        count = record_count(kind, entry.input_count, entry.output_count, len(members))
        reported = "barrier" if entry.kind == "barrier" else kind  # a barrier's all-reduce is reported as itself
        self._ctx.collectives.append(collective_record(
            label=label, kind=kind, collective=reported, algorithm=ran.algorithm, channels=ran.channels,
            symmetric=ran.symmetric, protocol=ran.protocol,
            configured=self.world.config["algorithm"],
            reduce_op=op, dtype=entry.dtype, count=count, nbytes=count * itemsize, ranks=tuple(ranks),
            start_ps=start, end_ps=engine.now, host_ps=self.host_call_ps()))


def joined_entries(meeting: Rendezvous) -> list[Entry] | None:
    """Every joined call of `meeting` in order; None when all their buffers are empty: a no-op, as in PyTorch
    (the calls still matched)."""
    entries = [meeting.entries[i] for i in range(meeting.size)]
    if not any(entry.input.numel() or entry.output.numel() for entry in entries):
        return None
    return entries

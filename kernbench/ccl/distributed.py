"""`torch.distributed` for the simulated machine: process groups, collectives and point-to-point calls with
PyTorch's signatures.

**Ranks.** The world's size follows one rule (`process_group.world_size_rule`,
ADR 0012): ccl.yaml's `world_size`, else `init_process_group(world_size=)`,
else the number of workers `spawn` started, else the topology's SIP count.
Up to the SIP count spawned workers are ranks on SIPs 0..k−1: each works
on `ahbm:r`. The single worker of a bench that does not spawn, with a world
size other than the SIP count, drives PE ranks of one SIP: it holds each
collective's tensor spread over PEs, and a group of n ranks reads the
tensor's last dimension as n equal chunks, chunk r being rank r's buffer,
moved and reduced by the PE that holds it. Above the SIP count spawned
workers share the PE ranks out, worker w driving world/nprocs consecutive
ranks on its own SIP the same way, and the workers' calls meet as ranks'
do: a world of several ranks on each of several SIPs.

**Asynchrony, as with NCCL.** A collective returns at once. Without
`async_op` it is enqueued on the calling rank's current stream, so what
follows on that stream waits for it. With `async_op=True` a one-tensor collective runs on the
process group's own stream on that device (as PyTorch's NCCL backend runs
each communicator's work on an internal stream, after what the current
stream has enqueued so far), so device work enqueued next on the current
stream overlaps it — Megatron's asynchronous gradient all-reduce relies on
this — and the returned `Work`'s `wait()` blocks the host until it is done.
(The list forms copy through a flat buffer on the current stream, so they
stay ordered on it.) Either way the output tensors record the pending write, so a host read, a
copy or a kernel reading them waits.
Sends and receives run on a stream of their own per peer and direction, as
PyTorch's NCCL backend gives each peer pair its own communicator, so a send
to the right never waits behind a receive from the left.

**Choosing the algorithm.** ccl.yaml's `defaults.algorithm` (the run's file,
`kernbench run --ccl`). `init_process_group(pg_options={...})` overrides any
`defaults` key for that process group — the backend-specific options slot
PyTorch gives NCCL — which is how a sweep compares algorithms in one run. A
collective the algorithm has no schedule for runs its fallback (ADR 0010),
and the report row names what ran.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from kernbench import dtypes
from kernbench.ccl.collective import CollectiveRequest, run_collective
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.install import CclConfigError, explicit_world_size, resolve_algorithm_config, with_overrides
from kernbench.ccl.list_forms import FlatLists
from kernbench.ccl.members import check_device_tensor, check_own_pes, chunks, member, whole
from kernbench.ccl.pe_list_forms import PeFlatLists
from kernbench.ccl.process_group import (P2POp, PremulSum, ProcessGroup, ReduceOp, Work, World, reduce_op_of,
                                         world_size_rule)
from kernbench.ccl.records import collective_record, record_count
from kernbench.ccl.tuner import AUTO, slots_within
from kernbench.ccl.rendezvous import Entry, Rendezvous
from kernbench.machine.ipcq import IpcqSettings
from kernbench.policy import DPPolicy
from kernbench.runtime_api.namespace.factories import Factories
from kernbench.runtime_api.streams import Stream
from kernbench.runtime_api.unsupported import missing_attribute

BACKEND = "ahbm"
# A script written for GPUs names these; on the simulated device they can only mean its own backend.
_GPU_BACKENDS = ("nccl", "gloo", "cpu:gloo,cuda:nccl")
_REDUCING = ("all_reduce", "reduce_scatter", "reduce")
_IPCQ_KEYS = ("buffer_kind", "backpressure", "n_slots", "slot_size", "poll_interval_ns")


class Backend(str):
    """`dist.Backend`: the backend names a script may compare with (`dist.Backend.NCCL`)."""

    NCCL = "nccl"
    GLOO = "gloo"
    AHBM = BACKEND


class Distributed:
    """The `torch.distributed` module bound to one run and its ccl configuration."""

    ReduceOp = ReduceOp
    reduce_op = ReduceOp  # PyTorch's deprecated alias
    Backend = Backend
    Work = Work
    ProcessGroup = ProcessGroup
    P2POp = P2POp
    CollectiveError = CollectiveError

    def __init__(self, ctx, ccl_config):
        self._ctx = ctx
        self.ccl_config = ccl_config  # the run's (what `load_ccl_config()` returns during it)
        self._world: World | None = None
        self._last_world: World | None = None  # rejoined by a rank that initializes it again, options unchanged
        self._p2p_streams: dict = {}  # (device, sender, receiver) -> Stream
        self._group_streams: dict = {}  # (device, group name) -> Stream of the group's async collectives
        self._barrier_tokens: dict = {}  # (device, ranks it drives) -> the tensor barriers all-reduce

    def __getattr__(self, attr: str):
        return missing_attribute(self, attr, "torch.distributed")

    # ---- setup ---------------------------------------------------------------------------
    def is_available(self) -> bool:
        """True: the simulated device always has `torch.distributed`."""
        return True

    def is_nccl_available(self) -> bool:
        """True: a GPU script's `nccl` means the simulated device's backend."""
        return True

    def is_gloo_available(self) -> bool:
        """True: a CPU script's `gloo` means the simulated device's backend."""
        return True

    def is_mpi_available(self) -> bool:
        """False: there is no MPI backend."""
        return False

    def is_ucc_available(self) -> bool:
        """False: there is no UCC backend."""
        return False

    def is_torchelastic_launched(self) -> bool:
        """False: workers are started by `spawn` or `Process`, never by torchrun."""
        return False

    def is_initialized(self) -> bool:
        return self._world is not None and self._ctx.engine.current_process not in self._world.left

    def _make_nccl_premul_sum(self, factor) -> PremulSum:
        """The PREMUL_SUM op with its factor (a number, or a one-element tensor)."""
        if hasattr(factor, "item"):
            factor = factor.item()
        if isinstance(factor, bool) or not isinstance(factor, (int, float, np.number)):
            raise CollectiveError(f"_make_nccl_premul_sum({factor!r}): expected a number or a one-element tensor")
        return PremulSum(float(factor))

    def init_process_group(self, backend: str | None = BACKEND, init_method=None, timeout=None, world_size: int = -1,
                           rank: int = -1, store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
        """Set up the world (once per run: every rank may call it, as each PyTorch process does).

        The world size follows ADR 0012's rule (module docstring); `rank`,
        when given, must be the calling worker's. `pg_options` is a mapping
        of `defaults` keys overriding ccl.yaml for this process group (e.g.
        `{"algorithm": "tree"}`).
        """
        if backend not in (None, BACKEND, *_GPU_BACKENDS):
            raise CollectiveError(f"init_process_group(backend={backend!r}): the simulated device's backend is "
                                  f"{BACKEND!r} (a GPU script's {' or '.join(map(repr, _GPU_BACKENDS))} means it too)")
        cfg = self.ccl_config if not pg_options else with_overrides(self.ccl_config, pg_options,
                                                                    "init_process_group(pg_options)")
        topology = self._ctx.topology
        size, source = world_size_rule(explicit_world_size(cfg), world_size, self._ctx.spawned_count(),
                                       topology.n_sips)
        problem = _split_over_workers(size, self._ctx.spawned_count(), topology)
        if problem:
            raise CclConfigError(f"{source}: {problem}")
        if self._world is not None and not self._world.held():
            self._world = None  # everyone who joined it has finished: an exited process's group is gone
        if self._world is not None:
            if pg_options and resolve_algorithm_config(cfg) != self._world.config:
                raise CollectiveError("init_process_group: already initialized with other options; call "
                                      "destroy_process_group() first")
            if world_size not in (-1, None) and world_size != self._world.size:
                raise CollectiveError(f"init_process_group(world_size={world_size}): the process group is already "
                                      f"initialized with world size {self._world.size} ({self._world.source})")
        else:
            config = resolve_algorithm_config(cfg)
            last = self._last_world
            if last is not None and (last.size, last.config) == (size, config):
                self._world = last
            else:
                _check_config(config, cfg, topology)
                self._world = self._last_world = World(size, source, config)
                self._world.group = self._group(tuple(range(size)), "WORLD")
        process = self._ctx.engine.current_process
        self._world.left.discard(process)
        if rank not in (-1, None) and self._ctx.spawned_count() is None and self._ctx.spawned_rank() is not None:
            self._ctx.set_spawned_rank(rank)  # a worker started as a Process is the rank it says it is
        if rank not in (-1, None) and rank != self.get_rank():
            raise CollectiveError(f"init_process_group(rank={rank}) called by rank {self.get_rank()} (a spawned "
                                  "worker's rank is its spawn rank)")
        self._world.holders.add(process)

    def destroy_process_group(self, group: ProcessGroup | None = None) -> None:
        """This worker leaves the world (or, given a group, that group), as a PyTorch process destroys its own.

        Ranks share one world here, so a rank that finishes first must not
        take it away from ranks still using it: the world ends when every
        greenlet that initialized it has left or finished. A worker that
        left cannot call collectives until it initializes again, and then it
        rejoins (its calls still match its peers' by number).
        """
        world = self._world
        process = self._ctx.engine.current_process
        if world is None or process in world.left:
            raise CollectiveError("destroy_process_group: the default process group is not initialized in this "
                                  "worker (never initialized, or already destroyed)")
        if group is not None and group is not world.group:
            group.left.add(process)
            return
        world.holders.discard(process)
        world.left.add(process)
        if not world.held():
            self._world = None

    def new_group(self, ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
                  group_desc=None) -> ProcessGroup:
        """The group of `ranks` (all ranks when None); every rank that asks for the same ranks gets the same group."""
        world = self._require("new_group")
        chosen = tuple(sorted(set(range(world.size) if ranks is None else ranks)))
        bad = [r for r in chosen if not (isinstance(r, (int, np.integer)) and 0 <= r < world.size)]
        if bad or not chosen:
            raise CollectiveError(f"new_group(ranks={ranks!r}): ranks must be a non-empty subset of 0..{world.size - 1}")
        return self._group(tuple(int(r) for r in chosen), group_desc or f"group{list(chosen)}")

    def new_subgroups(self, group_size: int | None = None, group=None, timeout=None, backend=None, pg_options=None,
                      group_desc=None):
        """Consecutive groups of `group_size` ranks (default: the SIP count); (the caller's, all of them)."""
        world = self._require("new_subgroups")
        ranks = (group or world.group).ranks
        size = self._ctx.topology.n_sips if group_size is None else group_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1 or len(ranks) % size:
            raise CollectiveError(f"new_subgroups(group_size={group_size!r}): the {len(ranks)} ranks do not split "
                                  "into groups of that many")
        return self.new_subgroups_by_enumeration([ranks[i:i + size] for i in range(0, len(ranks), size)])

    def new_subgroups_by_enumeration(self, ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                     group_desc=None):
        """One group per list of ranks (disjoint); (the caller's group or None, all of them)."""
        self._require("new_subgroups_by_enumeration")
        seen: set[int] = set()
        for ranks in ranks_per_subgroup_list:
            if seen & set(ranks):
                raise CollectiveError(f"new_subgroups_by_enumeration: rank(s) {sorted(seen & set(ranks))} are in "
                                      "more than one subgroup")
            seen |= set(ranks)
        groups = [self.new_group(ranks) for ranks in ranks_per_subgroup_list]
        me = self.get_rank()
        return next((g for g in groups if me in g.ranks), None), groups

    @property
    def group(self):
        """`dist.group.WORLD`."""
        return _GroupNamespace(self._world.group if self._world else None)

    def _check_spawn(self, nprocs: int) -> None:
        """`spawn(nprocs)` must split a world size that is set already (ccl.yaml's `world_size`, or an
        initialized process group) into equal shares, a worker per SIP: anything else would hang at the first
        collective."""
        world = self._world if self._world is not None and self._world.held() else None
        setting = (world.size, world.source) if world else explicit_world_size(self.ccl_config)
        if setting is None:
            return
        size, source = setting
        problem = _split_over_workers(size, nprocs, self._ctx.topology)
        if problem:
            raise CollectiveError(f"spawn(nprocs={nprocs}): the world size is {size} ({source}); {problem}")

    # ---- lookups -------------------------------------------------------------------------
    def get_backend(self, group=None) -> str:
        self._require("get_backend")
        return BACKEND

    def get_world_size(self, group: ProcessGroup | None = None) -> int:
        world = self._require("get_world_size")
        return (group or world.group).size()

    def get_rank(self, group: ProcessGroup | None = None) -> int:
        world = self._require("get_rank")
        me = self._my_rank(world)
        return me if group is None else group.rank()

    def get_process_group_ranks(self, group: ProcessGroup) -> list[int]:
        return list(group.ranks)

    def get_global_rank(self, group: ProcessGroup, group_rank: int) -> int:
        return group.ranks[group_rank]

    def get_group_rank(self, group: ProcessGroup, global_rank: int) -> int:
        return group.ranks.index(global_rank)

    def pe_rank_policy(self, group: ProcessGroup | None = None) -> DPPolicy:
        """kernbench's own: a placement putting chunk j of a tensor's last dimension on its own PE, for each
        rank j of the group that the calling worker drives — the layout a PE-rank collective works on."""
        world = self._require("pe_rank_policy")
        return self._share_policy(len(self._share(world, group or world.group, "pe_rank_policy")))

    def _share_policy(self, ranks: int) -> DPPolicy:
        topology = self._ctx.topology
        return DPPolicy.over_pes(ranks, topology.cubes_per_sip, topology.pes_per_cube)

    # ---- collectives ---------------------------------------------------------------------
    def all_reduce(self, tensor, op=ReduceOp.SUM, group=None, async_op=False):
        return self._single("all_reduce", group, tensor, tensor, async_op, op=op)

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        return self._single("all_gather", group, input_tensor, output_tensor, async_op)

    _all_gather_base = all_gather_into_tensor

    def reduce_scatter_tensor(self, output, input, op=ReduceOp.SUM, group=None, async_op=False):
        return self._single("reduce_scatter", group, input, output, async_op, op=op)

    _reduce_scatter_base = reduce_scatter_tensor

    def broadcast(self, tensor, src=None, group=None, async_op=False, group_src=None):
        return self._single("broadcast", group, tensor, tensor, async_op, root=(src, group_src, "src"))

    def reduce(self, tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
        return self._single("reduce", group, tensor, tensor, async_op, op=op, root=(dst, group_dst, "dst"))

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                          async_op=False):
        """Rank r's input rows, split by `input_split_sizes` (equal parts if None), go to each rank in turn;
        its output holds what every rank sent it, in rank order, split by `output_split_sizes`."""
        world, group = self._world_and_group("all_to_all_single", group)
        n = group.size()
        if self._pe_ranks(world):
            for tensor, sizes, what in ((input, input_split_sizes, "input"), (output, output_split_sizes, "output")):
                if sizes is not None and len(set(_element_splits(tensor, sizes, n, "all_to_all_single", what))) > 1:
                    raise CollectiveError(
                        f"all_to_all_single: {what}_split_sizes={list(sizes)} are unequal, but with PE ranks one "
                        "call gives every rank the same split sizes, and rank k would then get "
                        "input_split_sizes[k] rows from each rank: only equal splits agree; spawn a worker per "
                        "rank for uneven ones")
            splits = None  # each PE rank's chunk in n equal parts (_pe_rank_collective)
        else:
            splits = (_element_splits(input, input_split_sizes, n, "all_to_all_single", "input"),
                      _element_splits(output, output_split_sizes, n, "all_to_all_single", "output"))
        return self._single("all_to_all", group, input, output, async_op, splits=splits, call="all_to_all_single")

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        """Every rank's `tensor` into `tensor_list[r]`, through one flat buffer (as PyTorch's NCCL group does)."""
        world, group, forms = self._list_forms("all_gather", group)
        outputs = forms.check(tensor_list, tensor, "all_gather", "tensor_list")
        flat = forms.scratch(tensor, tensor.numel() * group.size(), "all_gather")
        handle, label = self._collective("all_gather", group, tensor, flat)
        return self._finish([handle, *forms.unpack(flat, outputs)], label, async_op)

    def reduce_scatter(self, output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
        """The reduction of every rank's `input_list[r]` into rank r's `output`, through one flat buffer."""
        world, group, forms = self._list_forms("reduce_scatter", group)
        inputs = forms.check(input_list, output, "reduce_scatter", "input_list")
        flat = forms.scratch(output, output.numel() * group.size(), "reduce_scatter")
        forms.pack(flat, inputs)
        return self._finish(*self._collective("reduce_scatter", group, flat, output, op=op), async_op)

    def all_to_all(self, output_tensor_list, input_tensor_list, group=None, async_op=False):
        """`input_tensor_list[k]` to rank k, which finds it in its `output_tensor_list[r]`; sizes may differ."""
        world, group, forms = self._list_forms("all_to_all", group)
        n = group.size()
        first = input_tensor_list[0] if isinstance(input_tensor_list, (list, tuple)) and input_tensor_list else None
        if first is None:
            raise CollectiveError(f"all_to_all: input_tensor_list must be a list of {n} tensors, one per rank")
        inputs = forms.check(input_tensor_list, first, "all_to_all", "input_tensor_list", equal=False)
        outputs = forms.check(output_tensor_list, first, "all_to_all", "output_tensor_list", equal=False)
        splits = tuple(t.numel() for t in inputs), tuple(t.numel() for t in outputs)
        flat_in = forms.scratch(first, sum(splits[0]), "all_to_all")
        flat_out = forms.scratch(first, sum(splits[1]), "all_to_all")
        forms.pack(flat_in, inputs)
        handle, label = self._collective("all_to_all", group, flat_in, flat_out, splits=splits)
        return self._finish([handle, *forms.unpack(flat_out, outputs)], label, async_op)

    def scatter(self, tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
        """The root's `scatter_list[r]` into rank r's `tensor`."""
        world, group, forms = self._list_forms("scatter", group)
        root = group.group_rank_of(src, group_src, "scatter", "src")
        source = tensor
        if self._acts_as(world, group, root):
            inputs = forms.check(scatter_list, tensor, "scatter", "scatter_list")
            source = forms.scratch(tensor, tensor.numel() * group.size(), "scatter")
            forms.pack(source, inputs, root)
        elif scatter_list:
            raise CollectiveError(f"scatter: rank {self._my_rank(world)} is not the source; only rank "
                                  f"{group.ranks[root]} passes scatter_list")
        return self._finish(*self._collective("scatter", group, source, tensor, root=root), async_op)

    def gather(self, tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
        """Every rank's `tensor` into the root's `gather_list[r]`."""
        world, group, forms = self._list_forms("gather", group)
        root = group.group_rank_of(dst, group_dst, "gather", "dst")
        if not self._acts_as(world, group, root):
            if gather_list:
                raise CollectiveError(f"gather: rank {self._my_rank(world)} is not the destination; only rank "
                                      f"{group.ranks[root]} passes gather_list")
            return self._finish(*self._collective("gather", group, tensor, tensor, root=root), async_op)
        outputs = forms.check(gather_list, tensor, "gather", "gather_list")
        flat = forms.scratch(tensor, tensor.numel() * group.size(), "gather")
        handle, label = self._collective("gather", group, tensor, flat, root=root)
        return self._finish([handle, *forms.unpack(flat, outputs, root)], label, async_op)

    def barrier(self, group=None, async_op=False, device_ids=None):
        """A one-element all-reduce among the group's ranks, as NCCL's barrier is; the host waits for it.

        It runs on the rank's own device (rank r's is ahbm:r, whatever the
        current device) after all of that device's work, and is timed like
        any collective (its row is `barrier`). Spawned workers driving PE
        ranks all-reduce one element per rank, on the ranks' PEs; the worker
        that drives every rank only synchronizes its device.
        """
        world, group = self._world_and_group("barrier", group)
        if not self._pe_ranks(world):
            device, ranks = self._member_rank(world, group, "barrier"), 1
        else:
            ranks = len(self._share(world, group, "barrier"))
            if ranks == group.size():  # this worker drives the whole group: only its device to wait for
                self._ctx.synchronize(self._ctx.current_device())
                return Work(self._ctx, [], "barrier") if async_op else None
            device = self._my_rank(world) // self._ranks_per_worker(world)
        self._ctx.synchronize(device)
        token = self._barrier_tokens.get((device, ranks))
        if token is None:
            token = self._barrier_tokens[device, ranks] = Factories(self._ctx).zeros(
                ranks, dtype=dtypes.float32, device=f"ahbm:{device}", name=f"barrier token of ahbm:{device}",
                **({"dp": self._share_policy(ranks)} if ranks > 1 else {}))
        handle, label = self._collective("all_reduce", group, token, token, op=ReduceOp.SUM, call="barrier")
        work = Work(self._ctx, [handle], label)
        if async_op:
            return work
        work.wait()
        return None

    def monitored_barrier(self, group=None, timeout=None, wait_all_ranks: bool = False):
        """`barrier`: a rank that never arrives is already named, in the engine's deadlock report."""
        return self.barrier(group)

    # ---- point to point ------------------------------------------------------------------
    def send(self, tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> None:
        self._p2p("send", tensor, dst, group_dst, group, tag, async_op=False)

    def recv(self, tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> int:
        """Stream-ordered like every collective: `tensor` holds the message once its pending write is done.
        Returns the sender's global rank."""
        return self._p2p("recv", tensor, src, group_src, group, tag, async_op=False)

    def isend(self, tensor, dst: int | None = None, group=None, tag: int = 0, group_dst: int | None = None) -> Work:
        return self._p2p("send", tensor, dst, group_dst, group, tag, async_op=True)

    def irecv(self, tensor, src: int | None = None, group=None, tag: int = 0, group_src: int | None = None) -> Work:
        return self._p2p("recv", tensor, src, group_src, group, tag, async_op=True)

    def batch_isend_irecv(self, p2p_op_list) -> list[Work]:
        """Every send and receive of the list under way at once (NCCL's group call); one `Work` each."""
        if not isinstance(p2p_op_list, (list, tuple)) or not p2p_op_list or not all(
                isinstance(op, P2POp) for op in p2p_op_list):
            raise CollectiveError(f"batch_isend_irecv: expected a non-empty list of dist.P2POp, got {p2p_op_list!r}")
        if len({id(op.group) for op in p2p_op_list}) > 1:
            raise CollectiveError("batch_isend_irecv: every P2POp of a batch must use the same group")
        return [self._p2p(op.role, op.tensor, op.peer, op.group_peer, op.group, op.tag, async_op=True)
                for op in p2p_op_list]

    # ---- machinery -----------------------------------------------------------------------
    def _require(self, call: str) -> World:
        world = self._world
        if world is None or self._ctx.engine.current_process in world.left:
            raise CollectiveError(f"{call}: the default process group is not initialized in this worker; call "
                                  f"torch.distributed.init_process_group(backend={BACKEND!r}) first")
        return world

    def _world_and_group(self, call: str, group) -> tuple[World, ProcessGroup]:
        world = self._require(call)
        group = group or world.group
        if self._ctx.engine.current_process in group.left:
            raise CollectiveError(f"{call}: group {group.name} was destroyed by this worker "
                                  "(destroy_process_group(group))")
        return world, group

    def _list_forms(self, call: str, group) -> tuple[World, ProcessGroup, FlatLists]:
        """The world, the group and how the call's lists become flat buffers: per rank, or for every PE rank
        at once (`pe_list_forms`)."""
        world, group = self._world_and_group(call, group)
        if self._pe_ranks(world):
            share = self._share(world, group, call)
            return world, group, PeFlatLists(self._ctx, group.size(), share, self._share_policy(len(share)))
        return world, group, FlatLists(self._ctx, group.size())

    def _acts_as(self, world: World, group: ProcessGroup, group_rank: int) -> bool:
        """Whether this worker makes the call of the group's rank `group_rank` (with PE ranks, of each rank it
        drives)."""
        first = self._my_rank(world)
        return first <= group.ranks[group_rank] < first + self._ranks_per_worker(world)

    def _pe_ranks(self, world: World) -> bool:
        """Whether the caller drives PE ranks (ADR 0012): above the SIP count (spawned workers then split the
        ranks between them), or the single worker of a bench that does not spawn, in a world of another size
        than the SIP count (the seed bench's contract)."""
        n_sips = self._ctx.topology.n_sips
        return world.size > n_sips or (self._ctx.spawned_rank() is None and world.size != n_sips)

    def _ranks_per_worker(self, world: World) -> int:
        """How many consecutive ranks each worker drives: one on SIP ranks; with PE ranks world/nprocs for
        spawned workers (PE ranks of the worker's own SIP), every rank for the worker that did not spawn."""
        if not self._pe_ranks(world):
            return 1
        return world.size // (self._ctx.spawned_count() or 1)

    def _share(self, world: World, group: ProcessGroup, call: str) -> list[int]:
        """The group ranks (positions in `group.ranks`) this worker drives, ascending; at least one."""
        first, k = self._my_rank(world), self._ranks_per_worker(world)
        share = [i for i, r in enumerate(group.ranks) if first <= r < first + k]
        if not share:
            mine = f"rank {first}" if k == 1 else f"ranks {first}..{first + k - 1}"
            raise CollectiveError(f"{call}: {mine} of this worker {'is' if k == 1 else 'are'} not in group "
                                  f"{group.name} (ranks {list(group.ranks)})")
        return share

    def _group(self, ranks: tuple[int, ...], name: str) -> ProcessGroup:
        groups = self._world.groups
        if ranks not in groups:
            groups[ranks] = ProcessGroup(ranks, name, self)
        return groups[ranks]

    def _my_rank(self, world: World) -> int:
        """The caller's rank: with PE ranks the first of those it drives."""
        spawned = self._ctx.spawned_rank()
        if self._pe_ranks(world):
            if spawned not in (None, 0) and self._ctx.spawned_count() is None:
                raise CollectiveError(
                    f"rank {spawned} called torch.distributed, but world_size {world.size} exceeds the "
                    f"{self._ctx.topology.n_sips} SIPs: ranks are PEs, driven by the single worker rank 0 or by "
                    "spawned workers that split the world between them")
            return (spawned or 0) * self._ranks_per_worker(world)
        rank = 0 if spawned is None else spawned
        if rank >= world.size:
            raise CollectiveError(f"spawned rank {rank} is outside the world of {world.size} ranks")
        return rank

    def _member_rank(self, world: World, group: ProcessGroup, call: str) -> int:
        me = self._my_rank(world)
        if me not in group.ranks:
            raise CollectiveError(f"{call}: rank {me} is not in group {group.name} (ranks {list(group.ranks)})")
        return me

    def _single(self, kind, group, input, output, async_op, *, op=None, root=None, splits=None, call=None):
        """A collective on one tensor per rank (no list to pack): check, enqueue, return a Work or None."""
        call = call or kind
        world, group = self._world_and_group(call, group)
        if root is not None:
            global_root, group_root, which = root
            root = group.group_rank_of(global_root, group_root, call, which)
        return self._finish(*self._collective(kind, group, input, output, op=op, root=root, splits=splits, call=call,
                                              async_op=async_op), async_op)

    def _finish(self, handles, label: str, async_op: bool):
        return Work(self._ctx, handles if isinstance(handles, list) else [handles], label) if async_op else None

    def _collective(self, kind, group, input, output, *, op=None, root=None, splits=None, call=None,
                    async_op=False):
        """Check one rank's call, register it with its peers' and enqueue its part; (handle, label).

        `async_op`: on the group's stream of the device (`_stream_for`), else on the current stream.
        """
        call = call or kind
        world = self._world
        reduce_op, factor = reduce_op_of(op, call) if kind in _REDUCING else (None, None)
        for tensor in (input, output):
            check_device_tensor(tensor, call)
        if input.dtype != output.dtype:
            raise CollectiveError(f"{call}: input is {input.dtype.name} but output is {output.dtype.name}")
        label = f"{call}#{{seq}}" + ("" if group is world.group else f"[{group.name}]")
        if self._pe_ranks(world):
            return self._pe_rank_collective(world, group, kind, call, (reduce_op, factor), root, input, output, label,
                                            splits, async_op)
        me = self._member_rank(world, group, call)
        self._check_on_own_device(world, me, call, input, output)
        group_rank = group.ranks.index(me)
        meeting = group.rendezvous(self._ctx.engine, "collective", me, label, group.size(), group.ranks,
                                   _collectives_differ)
        counts = _nominal_counts(kind, input, output)
        meeting.register(Entry(group_rank, me, call, reduce_op, root, input.dtype.name, *counts, input, output,
                               factor, splits))
        if splits is not None and len(meeting.entries) == meeting.size:
            _check_splits(meeting)
        run = functools.partial(self._run_sip_ranks, world, kind, (reduce_op, factor), root)
        handle = self._enqueue(self._stream_for(input.device.index, group, async_op), meeting.label,
                               functools.partial(meeting.arrive, group_rank, run), output)
        return handle, meeting.label

    def _p2p(self, role: str, tensor, peer, group_peer, group, tag, *, async_op: bool):
        world, group = self._world_and_group(role, group)
        check_device_tensor(tensor, role)
        if self._pe_ranks(world):
            raise CollectiveError(f"{role}: with PE ranks (world_size {world.size} above the SIP count, a bench "
                                  "that does not spawn, or fewer workers than ranks) a worker drives several ranks; "
                                  "point-to-point calls need a rank per worker")
        me = self._member_rank(world, group, role)
        if group_peer is not None:
            peer = group.ranks[group.group_rank_of(None, group_peer, role, "dst" if role == "send" else "src")]
        if peer is None or peer not in group.ranks or peer == me:
            raise CollectiveError(f"{role} on rank {me}: peer rank {peer!r} is not another rank of group {group.name} "
                                  f"(ranks {list(group.ranks)}); receiving from any source is not supported")
        self._check_on_own_device(world, me, role, tensor)
        sender, receiver = (me, peer) if role == "send" else (peer, me)
        label = f"send#{{seq}}[{sender}->{receiver}" + (f", tag {tag}]" if tag else "]")
        meeting = group.rendezvous(self._ctx.engine, ("p2p", sender, receiver, tag), me, label, 2, (sender, receiver),
                                   _p2p_differ)
        side = 0 if role == "send" else 1
        meeting.register(Entry(side, me, role, None, None, tensor.dtype.name, tensor.numel(), tensor.numel(),
                               tensor, tensor))
        run = functools.partial(self._run_sip_ranks, world, "send", (None, None), None)
        device = tensor.device.index
        current = self._ctx.current_stream(device)
        stream = self._p2p_stream(device, sender, receiver)
        stream.wait_stream(current)  # what the current stream wrote (or still reads) is ordered before the message
        handle = stream.enqueue(meeting.label, functools.partial(meeting.arrive, side, run))
        if role == "recv":
            tensor._pending_writes.append(handle)
        if async_op:
            return Work(self._ctx, [handle], meeting.label)
        current.enqueue(f"wait {meeting.label}", functools.partial(self._ctx.engine.wait, handle))
        return peer if role == "recv" else None

    def _p2p_stream(self, device: int, sender: int, receiver: int) -> Stream:
        """The stream of one direction between two ranks, on one of them: NCCL's per-peer-pair stream."""
        key = (device, sender, receiver)
        if key not in self._p2p_streams:
            self._p2p_streams[key] = Stream(self._ctx, device, name=f"ahbm:{device}.p2p[{sender}->{receiver}]")
        return self._p2p_streams[key]

    def _stream_for(self, device: int, group, async_op: bool) -> Stream:
        """Where a collective runs: the current stream, or for `async_op` the group's own stream on the device,
        ordered after what the current stream has enqueued (NCCL's internal stream per communicator)."""
        current = self._ctx.current_stream(device)
        if not async_op:
            return current
        key = (device, group.name)
        stream = self._group_streams.get(key)
        if stream is None:
            stream = self._group_streams[key] = Stream(self._ctx, device, name=f"ahbm:{device}.{group.name}")
        stream.wait_stream(current)
        return stream

    def _enqueue(self, stream: Stream, label: str, operation, written):
        """Run `operation` on `stream`; `written` (if any) waits for it."""
        handle = stream.enqueue(label, operation)
        if written is not None:
            written._pending_writes.append(handle)
        return handle

    def _check_on_own_device(self, world: World, me: int, call: str, *tensors) -> None:
        for tensor in tensors:
            if tensor.device.index != me:
                raise CollectiveError(
                    f"{call} on rank {me}: tensor {tensor.name!r} is on {tensor.device}, but with world_size "
                    f"{world.size} rank {me} works on ahbm:{me}; call torch.ahbm.set_device(rank) in the worker")

    def _run_sip_ranks(self, world: World, kind: str, reduce_op, root, meeting: Rendezvous) -> None:
        entries = [meeting.entries[r] for r in range(meeting.size)]
        if not any(entry.input.numel() or entry.output.numel() for entry in entries):
            return  # every buffer is empty: a no-op, as in PyTorch (the calls still matched)
        members = []
        for group_rank, entry in enumerate(entries):
            source = whole(entry.input)
            target = source if entry.output is entry.input else whole(entry.output)
            members.append(member(group_rank, entry.input, source, target))
        splits = tuple(entry.splits[0] for entry in entries) if entries[0].splits else None
        self._run(world, kind, reduce_op, root, members, meeting.label, meeting.ranks, entries[0], splits)

    def _pe_rank_collective(self, world, group, kind, call, reduce_op, root, input, output, label, splits,
                            async_op=False):
        """This worker's PE ranks of the group: the j-th rank it drives has chunk j of the last dimension of each
        tensor. The workers holding the group's ranks meet (one rendezvous entry each, named by the first rank
        it drives); the last to arrive runs the collective for every rank."""
        if input.device != output.device:
            raise CollectiveError(f"{call}: input is on {input.device} but output on {output.device}")
        share, first, k = self._share(world, group, call), self._my_rank(world), self._ranks_per_worker(world)
        workers = sorted({r // k * k for r in group.ranks})  # each worker named by the first rank it drives
        if len(workers) > 1 and input.device.index != first // k:
            raise CollectiveError(
                f"{call} on ranks {group.ranks[share[0]]}..{group.ranks[share[-1]]}: tensor {input.name!r} is on "
                f"{input.device}, but with world_size {world.size} over {world.size // k} workers this worker's "
                f"ranks are PEs of ahbm:{first // k}; call torch.ahbm.set_device(rank) in the worker")
        inputs = chunks(input, len(share), call)
        outputs = inputs if output is input else chunks(output, len(share), call)
        members = tuple(member(g, input, inputs[j], outputs[j]) for j, g in enumerate(share))
        check_own_pes(list(members), input, call)
        if kind == "all_to_all":
            splits = _equal_chunk_splits(inputs[0].count, group.size(), call)
        counts = (count // len(share) for count in _nominal_counts(kind, input, output))
        meeting = group.rendezvous(self._ctx.engine, "collective", first, label, len(workers), tuple(workers),
                                   _collectives_differ)
        index = workers.index(first)
        meeting.register(Entry(index, first, call, reduce_op[0], root, input.dtype.name, *counts, input, output,
                               reduce_op[1], members=members))
        run = functools.partial(self._run_pe_ranks, world, kind, reduce_op, root, group.ranks, splits)
        handle = self._enqueue(self._stream_for(input.device.index, group, async_op), meeting.label,
                               functools.partial(meeting.arrive, index, run), output)
        return handle, meeting.label

    def _run_pe_ranks(self, world: World, kind: str, reduce_op, root, ranks, splits, meeting: Rendezvous) -> None:
        """Every worker's PE ranks as one collective (in group-rank order)."""
        entries = [meeting.entries[w] for w in range(meeting.size)]
        if not any(entry.input.numel() or entry.output.numel() for entry in entries):
            return  # every buffer is empty: a no-op, as in PyTorch (the calls still matched)
        members = sorted((m for entry in entries for m in entry.members), key=lambda m: m.rank)
        self._run(world, kind, reduce_op, root, members, meeting.label, ranks, entries[0], splits)

    def _run(self, world: World, kind, reduce_op, root, members, label, ranks, entry: Entry, splits) -> None:
        op, factor = reduce_op
        request = CollectiveRequest(kind, op, tuple(members), root, world.config, label, self._ctx.timing_only,
                                    splits=splits, premul_factor=factor)
        engine = self._ctx.engine
        start = engine.now
        ran = run_collective(self._ctx.machine, request)
        itemsize = np.dtype(members[0].input.dtype).itemsize
        count = record_count(kind, entry.input_count, entry.output_count, len(members))
        reported = "barrier" if entry.kind == "barrier" else kind  # a barrier's all-reduce is reported as itself
        self._ctx.collectives.append(collective_record(
            label=label, kind=kind, collective=reported, algorithm=ran.algorithm, channels=ran.channels,
            symmetric=ran.symmetric,
            configured=world.config["algorithm"],
            reduce_op=op, dtype=entry.dtype, count=count, nbytes=count * itemsize, ranks=tuple(ranks),
            start_ps=start, end_ps=engine.now))


class _GroupNamespace:
    """`dist.group`: holds `WORLD`."""

    def __init__(self, world):
        self.WORLD = world


def _split_over_workers(size: int, nprocs: int | None, topology) -> str:
    """Why a world of `size` ranks cannot run on `nprocs` spawned workers ('' when it can; None: not spawned).

    Up to the SIP count a spawned worker is one rank (its SIP). Above it,
    spawned workers split the world into equal shares of consecutive ranks, a
    worker per SIP, each driving size/nprocs PE ranks of its SIP. The worker of
    a bench that does not spawn drives SIP ranks or the PE ranks of one SIP.
    """
    n_sips, pes = topology.n_sips, topology.pes_per_sip
    if nprocs is None:
        fits = size <= max(n_sips, pes)
        return "" if fits else f"a world of {size} ranks exceeds both the {n_sips} SIPs and the {pes} PEs of one SIP"
    if size <= n_sips:
        return "" if nprocs == size else "spawn one worker per rank"
    if nprocs > n_sips:
        return f"{nprocs} workers on {n_sips} SIPs; each worker runs on a SIP of its own"
    if size % nprocs:
        return (f"{size} ranks do not split over {nprocs} workers; above the SIP count spawn a number of workers "
                "that divides the world size (each then drives world_size/nprocs PE ranks of its SIP)")
    if size // nprocs > pes:
        return (f"{nprocs} workers would drive {size // nprocs} PE ranks each, more than the {pes} PEs of a SIP")
    return ""


def _nominal_counts(kind: str, input, output) -> tuple[int, int]:
    """What a rank's call is matched on: scatter and gather by the one rank's share (the root's list was
    checked against it), every other collective by its tensors."""
    if kind == "scatter":
        return output.numel(), output.numel()
    if kind == "gather":
        return input.numel(), input.numel()
    return input.numel(), output.numel()


def _element_splits(tensor, split_sizes, n: int, call: str, what: str) -> tuple[int, ...]:
    """all_to_all_single's row split sizes (equal when None) as element counts."""
    rows = tensor.shape[0] if tensor.shape else 1
    per_row = tensor.numel() // rows if rows else 0
    if split_sizes is None:
        if rows % n:
            raise CollectiveError(f"{call}: the {what} has {rows} rows, which do not split into {n} equal parts; "
                                  f"pass {what}_split_sizes")
        return (rows // n * per_row,) * n
    sizes = list(split_sizes)
    if len(sizes) != n or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in sizes) \
            or sum(sizes) != rows:
        raise CollectiveError(f"{call}: {what}_split_sizes={sizes} must be {n} non-negative row counts summing to the "
                              f"{what}'s {rows} rows")
    return tuple(int(s) * per_row for s in sizes)


def _equal_chunk_splits(count: int, n: int, call: str) -> tuple[tuple[int, ...], ...]:
    """all_to_all splits of PE ranks: each rank's chunk in n equal parts."""
    if count % n:
        raise CollectiveError(f"{call}: each PE rank's chunk of {count} elements does not split into {n} equal parts")
    return ((count // n,) * n,) * n


def _check_splits(meeting: Rendezvous) -> None:
    """What rank r sends rank k is what rank k expects from r, for every pair (once every rank has called)."""
    entries = meeting.entries
    for r, sender in entries.items():
        for k, receiver in entries.items():
            sent, expected = sender.splits[0][k], receiver.splits[1][r]
            if sent != expected:
                raise CollectiveError(
                    f"{meeting.label}: rank {sender.global_rank} sends {sent} elements to rank "
                    f"{receiver.global_rank}, which expects {expected} from it (their split sizes disagree)")


def _check_config(config: dict, cfg, topology) -> None:
    """What only the machine can tell: the IPCQ settings fit its queues, the algorithm's module imports."""
    missing = [key for key in _IPCQ_KEYS if key not in config]
    if missing:
        raise CclConfigError(f"{cfg.source}: {', '.join(f'defaults.{key}' for key in missing)}: not set (nor in "
                             f"algorithms.{config['algorithm']}); every collective's queues need "
                             f"{', '.join(_IPCQ_KEYS)}")
    n_slots, slot_size = config.get("n_slots"), config.get("slot_size")
    if config["algorithm"] == AUTO:  # upper bounds: the tuner keeps within the topology's queues
        n_slots, slot_size = slots_within(topology, config)
    IpcqSettings.checked(topology, buffer_kind=config.get("buffer_kind"), backpressure=config.get("backpressure"),
                         n_slots=n_slots, slot_size=slot_size, poll_interval_ps=config.get("poll_interval_ps"),
                         source=f"{cfg.source}")
    entries = config["candidates"] if config["algorithm"] == AUTO else {config["algorithm"]: config}
    for name, entry in entries.items():
        try:
            importlib.import_module(entry["module"])
        except ImportError as error:
            raise CclConfigError(f"{cfg.source}: algorithms.{name}.module: cannot import {entry['module']!r} "
                                 f"({error})") from None


def _collectives_differ(a: Entry, b: Entry) -> str:
    sizes = () if a.splits is not None else (("input_count", "different sizes"), ("output_count", "different sizes"))
    return _first_difference(a, b, ("kind", "a different collective"), ("dtype", "different dtypes"), *sizes,
                             ("reduce_op", "different reduce ops"), ("premul_factor", "different factors"),
                             ("root", "different roots"))


def _p2p_differ(a: Entry, b: Entry) -> str:
    if a.kind == b.kind:
        return f"both sides called {a.kind}"
    return _first_difference(a, b, ("dtype", "different dtypes"), ("input_count", "different sizes"))


def _first_difference(a: Entry, b: Entry, *checks: tuple[str, str]) -> str:
    """The message of the first field on which two ranks' calls differ, or '' when they match."""
    return next((problem for name, problem in checks if getattr(a, name) != getattr(b, name)), "")

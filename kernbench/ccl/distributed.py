"""`torch.distributed` for the simulated machine: process groups, collectives and point-to-point calls with
PyTorch's signatures.

**A façade over rank backends.** This module is the API: PyTorch's
signatures, the checks of a call's arguments, and the world and its groups.
How a worker's ranks carry a call out — as one rank on a SIP of its own, or
as several PE ranks of one SIP — is its rank backend's (`rank_backends/`),
chosen once per world and way of starting a worker, as Megatron leaves all
communication to its process group; the streams and tokens that outlive a
call are the run's `Communicators`.

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

import os

import datetime

import numpy as np

from kernbench.ccl.communicators import Communicators
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.install import CclConfigError, explicit_world_size, resolve_algorithm_config, with_overrides
from kernbench.ccl.list_forms import FlatLists
from kernbench.ccl.members import check_device_tensor
from kernbench.ccl.process_group import (P2POp, PremulSum, ProcessGroup, ReduceOp, Work, World, reduce_op_of,
                                         world_size_rule)
from kernbench.ccl.rank_backends import RankBackend, rank_backend
from kernbench.ccl.world_checks import check_config_on_machine, split_over_workers
from kernbench.policy import DPPolicy
from kernbench.runtime_api.unsupported import missing_attribute

BACKEND = "ahbm"
# A script written for GPUs names these; on the simulated device they can only mean its own backend.
_GPU_BACKENDS = ("nccl", "gloo", "cpu:gloo,cuda:nccl")
_REDUCING = ("all_reduce", "reduce_scatter", "reduce")


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

    def __init__(self, ctx, ccl_config, above: dict | None = None):
        """`above`: the names built above this façade (`tensor`, `device_mesh`, `DeviceMesh`, ...), as attributes."""
        self.__dict__.update(above or {})
        self._ctx = ctx
        self.ccl_config = ccl_config  # the run's (what `load_ccl_config()` returns during it)
        self._world: World | None = None
        self._last_world: World | None = None  # rejoined by a rank that initializes it again, options unchanged
        self._communicators = Communicators(ctx)  # the run's communication streams and barrier tokens

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
        """Whether torchrun's agent started this rank, by the variable it sets, as PyTorch checks: a script run
        with `kernbench run --nproc-per-node` (`cli/scripts.py`) is; a bench's own workers are not."""
        return os.environ.get("TORCHELASTIC_RUN_ID") is not None

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
        `{"algorithm": "tree"}`). `timeout` (a `datetime.timedelta`, as in
        PyTorch) is how long one collective may run in host time before the
        watchdog stops it (`watchdog.py`; NCCL's ten minutes by default).
        """
        if backend not in (None, BACKEND, *_GPU_BACKENDS):
            raise CollectiveError(f"init_process_group(backend={backend!r}): the simulated device's backend is "
                                  f"{BACKEND!r} (a GPU script's {' or '.join(map(repr, _GPU_BACKENDS))} means it too)")
        cfg = self.ccl_config if not pg_options else with_overrides(self.ccl_config, pg_options,
                                                                    "init_process_group(pg_options)")
        topology = self._ctx.topology
        size, source = world_size_rule(explicit_world_size(cfg), world_size, self._ctx.spawned_count(),
                                       topology.n_sips)
        problem = split_over_workers(size, self._ctx.spawned_count(), topology)
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
                check_config_on_machine(config, cfg, topology)
                self._world = self._last_world = World(size, source, config)
                self._world.group = self._group(tuple(range(size)), "WORLD")
        if timeout is not None:
            self._world.timeout_s = _seconds(timeout)
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
        """The group of `ranks` (all ranks when None). A worker's n-th call for the same ranks is the n-th group of
        them, the same for every worker that asks: a new communicator each time, as PyTorch's `new_group` makes
        one per call (Megatron's all-gather groups have the ranks of its data-parallel groups)."""
        world = self._require("new_group")
        chosen = tuple(sorted(set(range(world.size) if ranks is None else ranks)))
        bad = [r for r in chosen if not (isinstance(r, (int, np.integer)) and 0 <= r < world.size)]
        if bad or not chosen:
            raise CollectiveError(f"new_group(ranks={ranks!r}): ranks must be a non-empty subset of "
                                  f"0..{world.size - 1}")
        chosen = tuple(int(r) for r in chosen)
        asking = (self._ctx.engine.current_process, chosen)
        calls = world.asked[asking] = world.asked.get(asking, 0) + 1
        name = group_desc or f"group{list(chosen)}"
        return self._group(chosen, name) if calls == 1 else self._group(chosen, f"{name}#{calls}", calls)

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
        problem = split_over_workers(size, nprocs, self._ctx.topology)
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
        me = self._backend(world).my_rank()
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
        return self._backend(world).pe_rank_policy(group or world.group)

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
        backend, group = self._backend_and_group("all_to_all_single", group)
        splits = backend.all_to_all_splits(input, output, input_split_sizes, output_split_sizes, group.size())
        return self._single("all_to_all", group, input, output, async_op, splits=splits, call="all_to_all_single")

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        """Every rank's `tensor` into `tensor_list[r]`, through one flat buffer (as PyTorch's NCCL group does)."""
        backend, group, forms = self._list_forms("all_gather", group)
        outputs = forms.check(tensor_list, tensor, "all_gather", "tensor_list")
        flat = forms.scratch(tensor, tensor.numel() * group.size(), "all_gather")
        handle, label = self._collective("all_gather", group, tensor, flat)
        return self._finish([handle, *forms.unpack(flat, outputs)], label, async_op)

    def reduce_scatter(self, output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
        """The reduction of every rank's `input_list[r]` into rank r's `output`, through one flat buffer."""
        backend, group, forms = self._list_forms("reduce_scatter", group)
        inputs = forms.check(input_list, output, "reduce_scatter", "input_list")
        flat = forms.scratch(output, output.numel() * group.size(), "reduce_scatter")
        forms.pack(flat, inputs)
        return self._finish(*self._collective("reduce_scatter", group, flat, output, op=op), async_op)

    def all_to_all(self, output_tensor_list, input_tensor_list, group=None, async_op=False):
        """`input_tensor_list[k]` to rank k, which finds it in its `output_tensor_list[r]`; sizes may differ."""
        backend, group, forms = self._list_forms("all_to_all", group)
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
        backend, group, forms = self._list_forms("scatter", group)
        root = group.group_rank_of(src, group_src, "scatter", "src")
        source = tensor
        if backend.acts_as(group, root):
            inputs = forms.check(scatter_list, tensor, "scatter", "scatter_list")
            source = forms.scratch(tensor, tensor.numel() * group.size(), "scatter")
            forms.pack(source, inputs, root)
        elif scatter_list:
            raise CollectiveError(f"scatter: rank {backend.my_rank()} is not the source; only rank "
                                  f"{group.ranks[root]} passes scatter_list")
        return self._finish(*self._collective("scatter", group, source, tensor, root=root), async_op)

    def gather(self, tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
        """Every rank's `tensor` into the root's `gather_list[r]`."""
        backend, group, forms = self._list_forms("gather", group)
        root = group.group_rank_of(dst, group_dst, "gather", "dst")
        if not backend.acts_as(group, root):
            if gather_list:
                raise CollectiveError(f"gather: rank {backend.my_rank()} is not the destination; only rank "
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
        backend, group = self._backend_and_group("barrier", group)
        token = backend.barrier_token(group)
        if token is None:
            return Work(self._ctx, [], "barrier") if async_op else None
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
        return [self._p2p(op.role, op.tensor, op.peer, op.group_peer, op.group, op.tag, async_op=True,
                          issued=i > 0) for i, op in enumerate(p2p_op_list)]

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

    def _backend(self, world: World) -> RankBackend:
        """The backend driving the calling worker's ranks of `world` (ADR 0012; `rank_backends.choice`)."""
        return rank_backend(world, self._ctx, self._communicators)

    def _backend_and_group(self, call: str, group) -> tuple[RankBackend, ProcessGroup]:
        world, group = self._world_and_group(call, group)
        return self._backend(world), group

    def _list_forms(self, call: str, group) -> tuple[RankBackend, ProcessGroup, FlatLists]:
        """The backend, the group and how the call's lists become flat buffers: per rank, or for every PE rank
        the worker drives at once (`pe_list_forms`)."""
        backend, group = self._backend_and_group(call, group)
        return backend, group, backend.list_forms(group, call)

    def _group(self, ranks: tuple[int, ...], name: str, nth: int = 1) -> ProcessGroup:
        """The `nth` group of `ranks`, made by the first worker that asks for it."""
        groups, key = self._world.groups, ranks if nth == 1 else (ranks, nth)
        if key not in groups:
            groups[key] = ProcessGroup(ranks, name, self)
        return groups[key]

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

        `async_op`: on the group's stream of the device, else on the current stream.
        """
        call = call or kind
        world = self._world
        reduce_op, factor = reduce_op_of(op, call) if kind in _REDUCING else (None, None)
        for tensor in (input, output):
            check_device_tensor(tensor, call)
        if input.dtype != output.dtype:
            raise CollectiveError(f"{call}: input is {input.dtype.name} but output is {output.dtype.name}")
        label = f"{call}#{{seq}}" + ("" if group is world.group else f"[{group.name}]")
        backend = self._backend(world)
        backend.spend_host_call()
        return backend.collective(group, kind, call, (reduce_op, factor), root, input, output, label, splits,
                                  async_op)

    def _p2p(self, role: str, tensor, peer, group_peer, group, tag, *, async_op: bool, issued: bool = False):
        """One side of a send/recv; `issued`: the host already spent the call's cost (a later op of a batch,
        which NCCL's group call issues with the first)."""
        backend, group = self._backend_and_group(role, group)
        check_device_tensor(tensor, role)
        if not issued:
            backend.spend_host_call()
        handle, label, peer = backend.p2p(role, tensor, peer, group_peer, group, tag, async_op)
        if async_op:
            return Work(self._ctx, [handle], label)
        return peer if role == "recv" else None


def _seconds(timeout) -> float:
    """`init_process_group`'s `timeout` in seconds: a positive `datetime.timedelta`, as PyTorch takes it."""
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 0
    if not seconds > 0:
        raise CollectiveError(f"init_process_group(timeout={timeout!r}): expected a positive datetime.timedelta")
    return seconds


class _GroupNamespace:
    """`dist.group`: holds `WORLD`."""

    def __init__(self, world):
        self.WORLD = world

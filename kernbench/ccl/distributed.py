"""`torch.distributed` for the simulated machine: process groups and collectives with PyTorch's signatures.

**Ranks.** The world size is ccl.yaml's `world_size`, else its
`defaults.world_size`, else the topology's SIP count. Up to the SIP count,
rank r is SIP r: a bench spawns one worker per rank and each works on
`ahbm:r` (its tensors must live there). Beyond it, ranks are PEs of one SIP:
a single worker (rank 0) holds each collective's tensor spread over PEs,
and a group of n ranks reads the tensor's last dimension as n equal chunks,
chunk r being rank r's buffer, moved and reduced by the PE that holds it.

**Asynchrony, as with NCCL.** A collective is enqueued on the calling rank's
current stream and returns at once; with `async_op=True` it returns a
`Work` whose `wait()` blocks the host until the collective is done. Either
way the output tensor records the pending write, so a host read of it waits.
Send and receive are the same two-rank rendezvous.

**Choosing the algorithm.** ccl.yaml's `defaults.algorithm` (the run's file,
`kernbench run --ccl`). `init_process_group(pg_options={...})` overrides any
`defaults` key for that process group — the backend-specific options slot
PyTorch gives NCCL — which is how a sweep compares algorithms in one run.
"""

from __future__ import annotations

import enum
import functools
import importlib
from dataclasses import dataclass, field
from math import prod

import numpy as np

from kernbench.ccl.collective import CollectiveRequest, Member, Region, run_collective
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.install import CclConfigError, resolve_algorithm_config, with_overrides, world_size_of
from kernbench.ccl.records import collective_record
from kernbench.ccl.rendezvous import Entry, Rendezvous
from kernbench.machine.ipcq import IpcqSettings
from kernbench.policy import DPPolicy

BACKEND = "ahbm"
# A script written for GPUs names these; on the simulated device they can only mean its own backend.
_GPU_BACKENDS = ("nccl", "gloo", "cpu:gloo,cuda:nccl")
_REDUCING = ("all_reduce", "reduce_scatter", "reduce")
_IPCQ_KEYS = ("buffer_kind", "backpressure", "n_slots", "slot_size", "poll_interval_ns")


class ReduceOp(str, enum.Enum):
    """`dist.ReduceOp.SUM` and friends; the plain strings ("sum", "avg", ...) are accepted too."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


class Work:
    """What an `async_op=True` call returns: `wait()` blocks until the operation is done."""

    def __init__(self, ctx, handle, label: str):
        self._ctx = ctx
        self._handle = handle
        self.label = label

    def __repr__(self) -> str:
        return f"<Work {self.label} {'completed' if self.is_completed() else 'pending'}>"

    def wait(self, timeout=None) -> bool:
        self._ctx.block_on([self._handle])
        return True

    def is_completed(self) -> bool:
        return self._handle.triggered

    def is_success(self) -> bool:
        return self._handle.triggered and self._handle.ok


@dataclass(eq=False)
class ProcessGroup:
    """A set of global ranks (sorted, as `new_group` sorts them); group rank i is `ranks[i]`."""

    ranks: tuple[int, ...]
    name: str
    _dist: "Distributed" = field(repr=False)
    _calls: dict = field(default_factory=dict, repr=False)  # (channel, rank) -> calls made so far
    _open: dict = field(default_factory=dict, repr=False)  # (channel, seq) -> Rendezvous

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        """The calling rank's rank in this group (-1 if it is not a member, as PyTorch answers)."""
        me = self._dist.get_rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def next_seq(self, channel, rank: int) -> int:
        """How many calls `rank` made on `channel` before this one: calls match up by this number."""
        seq = self._calls.get((channel, rank), 0)
        self._calls[(channel, rank)] = seq + 1
        return seq

    def rendezvous(self, channel, rank: int, label: str, size: int, ranks: tuple[int, ...], compare) -> Rendezvous:
        """The calling rank's next call on `channel` (the group's collectives, or one send/recv pair).

        `label` may hold `{seq}`, replaced by the call's number on the channel.
        """
        seq = self.next_seq(channel, rank)
        meeting = self._open.get((channel, seq))
        if meeting is None:
            meeting = self._open[(channel, seq)] = Rendezvous(
                self._dist._ctx.engine, label.replace("{seq}", str(seq)), size, ranks, compare)
        if len(meeting.entries) == size - 1:
            del self._open[(channel, seq)]  # the last rank is joining: nobody else looks it up
        return meeting


@dataclass
class _World:
    size: int
    pe_ranks: bool  # ranks are PEs of one SIP (world size above the SIP count)
    config: dict  # the resolved ccl config collectives run with
    group: ProcessGroup | None = None
    groups: dict = field(default_factory=dict)  # sorted ranks -> ProcessGroup
    holders: set = field(default_factory=set)  # greenlets that called init_process_group and not yet destroy

    def held(self) -> bool:
        """Whether a greenlet that joined is still running and has not left (a finished worker has left)."""
        self.holders = {p for p in self.holders if p is None or p.is_alive}
        return bool(self.holders)


class Distributed:
    """The `torch.distributed` module bound to one run and its ccl configuration."""

    ReduceOp = ReduceOp
    Work = Work
    ProcessGroup = ProcessGroup
    CollectiveError = CollectiveError

    def __init__(self, ctx, ccl_config):
        self._ctx = ctx
        self.ccl_config = ccl_config  # the run's (what `load_ccl_config()` returns during it)
        self._world: _World | None = None
        self._last_world: _World | None = None  # rejoined by a rank that initializes it again, options unchanged

    # ---- setup ---------------------------------------------------------------------------
    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self._world is not None

    def init_process_group(self, backend: str | None = BACKEND, init_method=None, timeout=None, world_size: int = -1,
                           rank: int = -1, store=None, group_name: str = "", pg_options=None, device_id=None) -> None:
        """Set up the world (once per run: every rank may call it, as each PyTorch process does).

        `world_size`/`rank`, when given, must agree with ccl.yaml and the
        calling rank; `pg_options` is a mapping of `defaults` keys overriding
        ccl.yaml for this process group (e.g. `{"algorithm": "tree"}`).
        """
        if backend not in (None, BACKEND, *_GPU_BACKENDS):
            raise CollectiveError(f"init_process_group(backend={backend!r}): the simulated device's backend is "
                                  f"{BACKEND!r} (a GPU script's {' or '.join(map(repr, _GPU_BACKENDS))} means it too)")
        cfg = self.ccl_config if not pg_options else with_overrides(self.ccl_config, pg_options,
                                                                    "init_process_group(pg_options)")
        topology = self._ctx.topology
        size = world_size_of(cfg, topology.n_sips)
        if self._world is not None and not self._world.held():
            self._world = None  # everyone who joined it has finished: an exited process's group is gone
        if self._world is not None:
            if pg_options and resolve_algorithm_config(cfg) != self._world.config:
                raise CollectiveError("init_process_group: already initialized with other options; call "
                                      "destroy_process_group() first")
        else:
            config = resolve_algorithm_config(cfg)
            last = self._last_world
            if last is not None and (last.size, last.config) == (size, config):
                self._world = last
            else:
                _check_config(config, cfg, topology)
                if size > max(topology.n_sips, topology.pes_per_sip):
                    raise CclConfigError(f"{cfg.source}: world_size {size} exceeds both the {topology.n_sips} SIPs "
                                         f"and the {topology.pes_per_sip} PEs of one SIP")
                self._world = self._last_world = _World(size, size > topology.n_sips, config)
                self._world.group = self._group(tuple(range(size)), "WORLD")
        if world_size not in (-1, None) and world_size != size:
            raise CollectiveError(f"init_process_group(world_size={world_size}): {cfg.source} gives a world size of "
                                  f"{size}")
        if rank not in (-1, None) and rank != self.get_rank():
            raise CollectiveError(f"init_process_group(rank={rank}) called by rank {self.get_rank()}")
        self._world.holders.add(self._ctx.engine.current_process)

    def destroy_process_group(self, group: ProcessGroup | None = None) -> None:
        """Leave the world; it ends once every greenlet that initialized it has left or finished (or, given
        a group, nothing: groups live as long as the world).

        Each PyTorch process destroys its own process group when it is done
        (or exits); here ranks share one world, so a rank that finishes first
        must not take it away from ranks still using it. A rank that
        initializes after the world ended with the same options rejoins it
        (its calls still match its peers' by number); other options start a
        new world.
        """
        if group is not None or self._world is None:
            return
        self._world.holders.discard(self._ctx.engine.current_process)
        if not self._world.held():
            self._world = None

    def new_group(self, ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
                  group_desc=None) -> ProcessGroup:
        """The group of `ranks` (all ranks when None); every rank that asks for the same ranks gets the same group."""
        world = self._require("new_group")
        chosen = tuple(sorted(set(range(world.size) if ranks is None else ranks)))
        bad = [r for r in chosen if not (isinstance(r, (int, np.integer)) and 0 <= r < world.size)]
        if bad or not chosen:
            raise CollectiveError(f"new_group(ranks={ranks!r}): ranks must be a non-empty subset of 0..{world.size - 1}")
        return self._group(chosen, group_desc or f"group{list(chosen)}")

    @property
    def group(self):
        """`dist.group.WORLD`."""
        return _GroupNamespace(self._world.group if self._world else None)

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
        """kernbench's own: a placement putting chunk r of a tensor's last dimension on its own PE, for each
        rank r of the group — the layout a PE-rank collective (world size above the SIP count) works on."""
        world = self._require("pe_rank_policy")
        topology = self._ctx.topology
        return DPPolicy.over_pes((group or world.group).size(), topology.cubes_per_sip, topology.pes_per_cube)

    # ---- collectives ---------------------------------------------------------------------
    def all_reduce(self, tensor, op=ReduceOp.SUM, group=None, async_op=False):
        return self._collective("all_reduce", group, tensor, tensor, op=op, async_op=async_op)

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        return self._collective("all_gather", group, input_tensor, output_tensor, async_op=async_op)

    def reduce_scatter_tensor(self, output, input, op=ReduceOp.SUM, group=None, async_op=False):
        return self._collective("reduce_scatter", group, input, output, op=op, async_op=async_op)

    def broadcast(self, tensor, src=None, group=None, async_op=False, group_src=None):
        return self._collective("broadcast", group, tensor, tensor, root=(src, group_src), async_op=async_op)

    def reduce(self, tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
        return self._collective("reduce", group, tensor, tensor, op=op, root=(dst, group_dst), async_op=async_op)

    def barrier(self, group=None, async_op=False, device_ids=None):
        """Wait for this rank's device work, then for every rank of the group to reach the barrier."""
        world = self._require("barrier")
        group = group or world.group
        self._ctx.synchronize(self._ctx.current_device())
        if world.pe_ranks:
            return None
        me = self._member_rank(world, group, "barrier")
        meeting = group.rendezvous("barrier", me, "barrier#{seq}", group.size(), group.ranks, _never_differ)
        meeting.register(Entry(group.ranks.index(me), me, "barrier", None, None, "-", 0, 0, None, None))
        meeting.arrive(group.ranks.index(me), _nothing)
        return None

    # ---- point to point ------------------------------------------------------------------
    def send(self, tensor, dst: int, group=None, tag: int = 0) -> None:
        self._p2p("send", tensor, dst, group, tag, async_op=False)

    def recv(self, tensor, src: int | None = None, group=None, tag: int = 0) -> int:
        """Stream-ordered like every collective: `tensor` holds the message once its pending write is done."""
        self._p2p("recv", tensor, src, group, tag, async_op=False)
        return src

    def isend(self, tensor, dst: int, group=None, tag: int = 0) -> Work:
        return self._p2p("send", tensor, dst, group, tag, async_op=True)

    def irecv(self, tensor, src: int | None = None, group=None, tag: int = 0) -> Work:
        return self._p2p("recv", tensor, src, group, tag, async_op=True)

    # ---- machinery -----------------------------------------------------------------------
    def _require(self, call: str) -> _World:
        if self._world is None:
            raise CollectiveError(f"{call}: the default process group is not initialized; call "
                                  f"torch.distributed.init_process_group(backend={BACKEND!r}) first")
        return self._world

    def _group(self, ranks: tuple[int, ...], name: str) -> ProcessGroup:
        groups = self._world.groups
        if ranks not in groups:
            groups[ranks] = ProcessGroup(ranks, name, self)
        return groups[ranks]

    def _my_rank(self, world: _World) -> int:
        spawned = self._ctx.spawned_rank()
        if world.pe_ranks:
            if spawned not in (None, 0):
                raise CollectiveError(
                    f"rank {spawned} called torch.distributed, but world_size {world.size} exceeds the "
                    f"{self._ctx.topology.n_sips} SIPs: ranks are PEs of one SIP, driven by the single worker rank 0")
            return 0
        rank = 0 if spawned is None else spawned
        if rank >= world.size:
            raise CollectiveError(f"spawned rank {rank} is outside the world of {world.size} ranks")
        return rank

    def _member_rank(self, world: _World, group: ProcessGroup, call: str) -> int:
        me = self._my_rank(world)
        if me not in group.ranks:
            raise CollectiveError(f"{call}: rank {me} is not in group {group.name} (ranks {list(group.ranks)})")
        return me

    def _collective(self, kind, group, input, output, *, op=None, root=(None, None), async_op=False):
        world = self._require(kind)
        group = group or world.group
        reduce_op = _reduce_op(op, kind) if kind in _REDUCING else None
        root = _root(root, group, kind)
        for tensor in (input, output):
            _check_device_tensor(tensor, kind)
        if input.dtype != output.dtype:
            raise CollectiveError(f"{kind}: input is {input.dtype.name} but output is {output.dtype.name}")
        label = f"{kind}#{{seq}}" + ("" if group is world.group else f"[{group.name}]")
        if world.pe_ranks:
            return self._pe_rank_collective(world, group, kind, reduce_op, root, input, output, label, async_op)
        me = self._member_rank(world, group, kind)
        self._check_on_own_device(world, me, kind, input, output)
        group_rank = group.ranks.index(me)
        meeting = group.rendezvous("collective", me, label, group.size(), group.ranks, _collectives_differ)
        meeting.register(Entry(group_rank, me, kind, reduce_op, root, input.dtype.name, input.numel(),
                               output.numel(), input, output))
        run = functools.partial(self._run_sip_ranks, world, kind, reduce_op, root)
        return self._arrive_in_stream_order(meeting, group_rank, run, output, async_op)

    def _p2p(self, role: str, tensor, peer, group, tag, *, async_op: bool):
        world = self._require(role)
        group = group or world.group
        _check_device_tensor(tensor, role)
        if world.pe_ranks:
            raise CollectiveError(f"{role}: with PE ranks (world_size {world.size} above the SIP count) one worker "
                                  "drives every rank; point-to-point calls need a rank per worker")
        me = self._member_rank(world, group, role)
        if peer is None or peer not in group.ranks or peer == me:
            raise CollectiveError(f"{role} on rank {me}: peer rank {peer!r} is not another rank of group {group.name} "
                                  f"(ranks {list(group.ranks)}); receiving from any source is not supported")
        self._check_on_own_device(world, me, role, tensor)
        sender, receiver = (me, peer) if role == "send" else (peer, me)
        label = f"send#{{seq}}[{sender}->{receiver}" + (f", tag {tag}]" if tag else "]")
        meeting = group.rendezvous(("p2p", sender, receiver, tag), me, label, 2, (sender, receiver), _p2p_differ)
        side = 0 if role == "send" else 1
        meeting.register(Entry(side, me, role, None, None, tensor.dtype.name, tensor.numel(), tensor.numel(),
                               tensor, tensor))
        run = functools.partial(self._run_sip_ranks, world, "send", None, None)
        return self._arrive_in_stream_order(meeting, side, run, tensor if role == "recv" else None, async_op)

    def _arrive_in_stream_order(self, meeting: Rendezvous, group_rank: int, run, written, async_op: bool):
        operation = functools.partial(meeting.arrive, group_rank, run)
        return self._enqueue(meeting.entries[group_rank].output.device.index, meeting.label, operation, written,
                             async_op)

    def _enqueue(self, device_index: int, label: str, operation, written, async_op: bool):
        """Run `operation` on the calling rank's current stream of the device; `written` (if any) waits for it."""
        handle = self._ctx.current_stream(device_index).enqueue(label, operation)
        if written is not None:
            written._pending_writes.append(handle)
        return Work(self._ctx, handle, label) if async_op else None

    def _check_on_own_device(self, world: _World, me: int, call: str, *tensors) -> None:
        for tensor in tensors:
            if tensor.device.index != me:
                raise CollectiveError(
                    f"{call} on rank {me}: tensor {tensor.name!r} is on {tensor.device}, but with world_size "
                    f"{world.size} rank {me} works on ahbm:{me}; call torch.ahbm.set_device(rank) in the worker")

    def _run_sip_ranks(self, world: _World, kind: str, reduce_op, root, meeting: Rendezvous) -> None:
        entries = [meeting.entries[r] for r in range(meeting.size)]
        members = []
        for group_rank, entry in enumerate(entries):
            source = _whole(entry.input)
            target = source if entry.output is entry.input else _whole(entry.output)
            members.append(_member(group_rank, entry.input, source, target))
        self._run(world, kind, reduce_op, root, members, meeting.label, meeting.ranks, entries[0])

    def _pe_rank_collective(self, world, group, kind, reduce_op, root, input, output, label, async_op):
        """One call drives every PE rank: rank r's buffers are chunk r of the last dimension of each tensor."""
        if input.device != output.device:
            raise CollectiveError(f"{kind}: input is on {input.device} but output on {output.device}")
        n = group.size()
        label = label.replace("{seq}", str(group.next_seq("collective", 0)))
        inputs = _chunks(input, n, kind)
        outputs = inputs if output is input else _chunks(output, n, kind)
        members = [_member(r, input, inputs[r], outputs[r]) for r in range(n)]
        _check_own_pes(members, input, kind)
        entry = Entry(0, 0, kind, reduce_op, root, input.dtype.name, inputs[0].count, outputs[0].count, input, output)

        operation = functools.partial(self._run, world, kind, reduce_op, root, members, label, group.ranks, entry)
        return self._enqueue(input.device.index, label, operation, output, async_op)

    def _run(self, world: _World, kind, reduce_op, root, members, label, ranks, entry: Entry) -> None:
        request = CollectiveRequest(kind, reduce_op, tuple(members), root, world.config, label, self._ctx.timing_only)
        engine = self._ctx.engine
        start = engine.now
        run_collective(self._ctx.machine, request)
        count = {"all_gather": entry.output_count, "reduce_scatter": entry.input_count}.get(kind, entry.input_count)
        itemsize = np.dtype(members[0].input.dtype).itemsize
        self._ctx.collectives.append(collective_record(
            label=label, kind=kind, algorithm=world.config["algorithm"], reduce_op=reduce_op, dtype=entry.dtype,
            count=count, nbytes=count * itemsize, ranks=tuple(ranks), start_ps=start, end_ps=engine.now))


class _GroupNamespace:
    """`dist.group`: holds `WORLD`."""

    def __init__(self, world):
        self.WORLD = world


def _check_config(config: dict, cfg, topology) -> None:
    """What only the machine can tell: the IPCQ settings fit its queues, the algorithm's module imports."""
    missing = [key for key in _IPCQ_KEYS if key not in config]
    if missing:
        raise CclConfigError(f"{cfg.source}: {', '.join(f'defaults.{key}' for key in missing)}: not set (nor in "
                             f"algorithms.{config['algorithm']}); every collective's queues need "
                             f"{', '.join(_IPCQ_KEYS)}")
    IpcqSettings.checked(topology, buffer_kind=config.get("buffer_kind"), backpressure=config.get("backpressure"),
                         n_slots=config.get("n_slots"), slot_size=config.get("slot_size"),
                         poll_interval_ps=config.get("poll_interval_ps"), source=f"{cfg.source}")
    try:
        importlib.import_module(config["module"])
    except ImportError as error:
        raise CclConfigError(f"{cfg.source}: algorithms.{config['algorithm']}.module: cannot import "
                             f"{config['module']!r} ({error})") from None


def _reduce_op(op, kind: str) -> str:
    name = op.value if isinstance(op, ReduceOp) else op
    if isinstance(name, str) and name.lower() in ReduceOp._value2member_map_:
        return name.lower()
    valid = ", ".join(f"ReduceOp.{o.name} ({o.value!r})" for o in ReduceOp)
    raise CollectiveError(f"{kind}: unknown reduce op {op!r}; expected one of {valid}")


def _root(root, group: ProcessGroup, kind: str) -> int | None:
    """The root's group rank, from PyTorch's global `src`/`dst` or `group_src`/`group_dst`."""
    global_root, group_root = root
    if kind not in ("broadcast", "reduce"):
        return None
    which = "src" if kind == "broadcast" else "dst"
    if group_root is not None:
        if not (isinstance(group_root, int) and 0 <= group_root < group.size()):
            raise CollectiveError(f"{kind}: group_{which}={group_root!r} is not a rank of group {group.name} "
                                  f"(0..{group.size() - 1})")
        return group_root
    if global_root is None or global_root not in group.ranks:
        raise CollectiveError(f"{kind}: {which}={global_root!r} is not a rank of group {group.name} "
                              f"(ranks {list(group.ranks)})")
    return group.ranks.index(global_root)


def _check_device_tensor(tensor, call: str) -> None:
    if getattr(tensor, "allocation", None) is None:
        raise CollectiveError(f"{call}: expected a tensor on an ahbm device, got "
                              f"{getattr(tensor, 'name', type(tensor).__name__)!r} on {getattr(tensor, 'device', '?')}")
    if not tensor.is_contiguous():
        raise CollectiveError(f"{call}: tensor {tensor.name!r} is not contiguous (strides {tensor.stride()}); "
                              "collectives take contiguous tensors, as NCCL's do: pass tensor.contiguous()")


def _whole(tensor) -> Region:
    first = tensor.storage_offset()
    return Region(tensor.allocation, tensor.dtype.numpy, range(first, first + tensor.numel()))


def _chunks(tensor, n: int, kind: str) -> list[Region]:
    """Chunk r of the last dimension, for r in 0..n-1, as regions in logical order."""
    shape = tensor.shape or (1,)
    last = shape[-1]
    if last % n:
        raise CollectiveError(f"{kind}: tensor {tensor.name!r} of shape {tuple(tensor.shape)} has a last dimension "
                              f"of {last}, which does not split into {n} equal chunks (one per PE rank)")
    width = last // n
    rows = prod(shape) // last if last else 1
    first = tensor.storage_offset()
    if rows == 1:  # one row: each chunk is a contiguous run
        return [Region(tensor.allocation, tensor.dtype.numpy, range(first + r * width, first + (r + 1) * width))
                for r in range(n)]
    grid = np.arange(first, first + prod(shape), dtype=np.int64).reshape(rows, last)
    return [Region(tensor.allocation, tensor.dtype.numpy, np.ascontiguousarray(grid[:, r * width:(r + 1) * width])
                   .reshape(-1)) for r in range(n)]


def _member(group_rank: int, tensor, source: Region, target: Region) -> Member:
    """The member whose program runs on the PE holding the first element of its input."""
    placement = tensor.placement
    first = source.elements(0, 1) if source.count else np.zeros(1, dtype=np.int64)
    shard = placement.shards[int(placement.owners(first)[0])]
    return Member(group_rank, tensor.device.index, shard.cube, shard.pe, source, target)


def _check_own_pes(members: list[Member], tensor, kind: str) -> None:
    """Each PE rank needs a PE of its own: the queues of a collective join two different PEs."""
    holders = {}
    for m in members:
        if (m.cube, m.pe) in holders:
            raise CollectiveError(
                f"{kind}: chunks {holders[m.cube, m.pe]} and {m.rank} of tensor {tensor.name!r} (one per PE rank) both "
                f"start on cube {m.cube} PE {m.pe}, but each PE rank needs a PE of its own; place the tensor's last "
                f"dimension over {len(members)} PEs, e.g. dp=torch.distributed.pe_rank_policy()")
        holders[m.cube, m.pe] = m.rank


def _collectives_differ(a: Entry, b: Entry) -> str:
    return _first_difference(a, b, ("kind", "a different collective"), ("dtype", "different dtypes"),
                             ("input_count", "different sizes"), ("output_count", "different sizes"),
                             ("reduce_op", "different reduce ops"), ("root", "different roots"))


def _p2p_differ(a: Entry, b: Entry) -> str:
    if a.kind == b.kind:
        return f"both sides called {a.kind}"
    return _first_difference(a, b, ("dtype", "different dtypes"), ("input_count", "different sizes"))


def _first_difference(a: Entry, b: Entry, *checks: tuple[str, str]) -> str:
    """The message of the first field on which two ranks' calls differ, or '' when they match."""
    return next((problem for name, problem in checks if getattr(a, name) != getattr(b, name)), "")


def _never_differ(a: Entry, b: Entry) -> str:
    return ""


def _nothing(meeting: Rendezvous) -> None:
    pass


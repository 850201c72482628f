"""What a `torch.distributed` script holds: reduce ops, works, process groups, `P2POp`, and the world.

Kept apart from `distributed.py` (the module's calls) because these are the
values the calls pass around. The world's size follows one rule
(`world_size_rule`, ADR 0012 "World size"), written here once so that
`init_process_group` and `spawn` agree on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.rendezvous import Rendezvous
from kernbench.ccl.watchdog import DEFAULT_TIMEOUT_S


class ReduceOp(str, enum.Enum):
    """`dist.ReduceOp.SUM` and friends; the plain strings ("sum", "avg", ...) are accepted too.

    BAND, BOR and BXOR take integer or bool tensors. PREMUL_SUM is made with
    `dist._make_nccl_premul_sum(factor)`, as in PyTorch.
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"


@dataclass(frozen=True)
class PremulSum:
    """`dist._make_nccl_premul_sum(factor)`: the sum of every rank's input multiplied by `factor`."""

    factor: float


def reduce_op_of(op, call: str) -> tuple[str, float | None]:
    """The op's name and, for PREMUL_SUM, its factor; anything else is one line listing the valid ops."""
    if isinstance(op, PremulSum):
        return ReduceOp.PREMUL_SUM.value, op.factor
    name = op.value if isinstance(op, ReduceOp) else op
    if isinstance(name, str) and name.lower() in ReduceOp._value2member_map_:
        if name.lower() == ReduceOp.PREMUL_SUM.value:
            raise CollectiveError(f"{call}: ReduceOp.PREMUL_SUM needs its factor: pass "
                                  "dist._make_nccl_premul_sum(factor)")
        return name.lower(), None
    valid = ", ".join(f"ReduceOp.{o.name} ({o.value!r})" for o in ReduceOp)
    raise CollectiveError(f"{call}: unknown reduce op {op!r}; expected one of {valid}")


class Work:
    """What an `async_op=True` call returns: `wait()` blocks until the operation (and its copies) are done."""

    def __init__(self, ctx, handles, label: str):
        self._ctx = ctx
        self._handles = list(handles)
        self.label = label

    def __repr__(self) -> str:
        return f"<Work {self.label} {'completed' if self.is_completed() else 'pending'}>"

    def wait(self, timeout=None) -> bool:
        self._ctx.block_on(self._handles)
        return True

    def is_completed(self) -> bool:
        return all(handle.triggered for handle in self._handles)

    def is_success(self) -> bool:
        return all(handle.triggered and handle.ok for handle in self._handles)


class P2POp:
    """One send or receive of a `batch_isend_irecv`, with PyTorch's signature.

    `op` is `dist.isend` or `dist.irecv`; `peer` is a global rank, or
    `group_peer` a rank of `group`.
    """

    def __init__(self, op, tensor, peer: int | None = None, group=None, tag: int = 0, group_peer: int | None = None):
        role = {"isend": "send", "irecv": "recv"}.get(getattr(op, "__name__", ""))
        if role is None:
            raise CollectiveError(f"P2POp(op={op!r}): op must be torch.distributed.isend or torch.distributed.irecv")
        if (peer is None) == (group_peer is None):
            raise CollectiveError(f"P2POp({role}): give exactly one of peer= and group_peer=")
        self.op, self.role, self.tensor = op, role, tensor
        self.peer, self.group, self.tag, self.group_peer = peer, group, tag, group_peer

    def __repr__(self) -> str:
        return f"P2POp({self.role}, peer={self.peer if self.group_peer is None else self.group_peer})"


@dataclass(eq=False)
class ProcessGroup:
    """A set of global ranks (sorted, as `new_group` sorts them); group rank i is `ranks[i]`."""

    ranks: tuple[int, ...]
    name: str
    _dist: object = field(repr=False)
    _calls: dict = field(default_factory=dict, repr=False)  # (channel, rank) -> calls made so far
    _open: dict = field(default_factory=dict, repr=False)  # (channel, seq) -> Rendezvous
    left: set = field(default_factory=set, repr=False)  # greenlets that destroyed this group

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

    def rendezvous(self, engine, channel, rank: int, label: str, size: int, ranks: tuple[int, ...],
                   compare) -> Rendezvous:
        """The calling rank's next call on `channel` (the group's collectives, or one direction of send/recv).

        `label` may hold `{seq}`, replaced by the call's number on the channel.
        """
        seq = self.next_seq(channel, rank)
        meeting = self._open.get((channel, seq))
        if meeting is None:
            meeting = self._open[(channel, seq)] = Rendezvous(engine, label.replace("{seq}", str(seq)), size,
                                                              ranks, compare)
        if len(meeting.entries) == size - 1:
            del self._open[(channel, seq)]  # the last rank is joining: nobody else looks it up
        return meeting

    def group_rank_of(self, global_rank, group_rank, call: str, what: str) -> int:
        """A rank given as PyTorch's global `what` or `group_what`, as this group's rank."""
        if group_rank is not None:
            if not (isinstance(group_rank, (int, np.integer)) and 0 <= group_rank < self.size()):
                raise CollectiveError(f"{call}: group_{what}={group_rank!r} is not a rank of group {self.name} "
                                      f"(0..{self.size() - 1})")
            return int(group_rank)
        if global_rank is None or global_rank not in self.ranks:
            raise CollectiveError(f"{call}: {what}={global_rank!r} is not a rank of group {self.name} "
                                  f"(ranks {list(self.ranks)})")
        return self.ranks.index(global_rank)


@dataclass
class World:
    """The default process group's state: its size (and where it came from), config, groups and rank backends."""

    size: int
    source: str  # where the size came from, for messages
    config: dict  # the resolved ccl config collectives run with
    group: ProcessGroup | None = None
    groups: dict = field(default_factory=dict)  # sorted ranks (and, past the first, the call's number) -> group
    asked: dict = field(default_factory=dict)  # (worker, sorted ranks) -> its new_group calls for them so far
    holders: set = field(default_factory=set)  # greenlets that called init_process_group and not yet destroy
    left: set = field(default_factory=set)  # greenlets that called destroy_process_group and not init since
    backends: dict = field(default_factory=dict)  # how a worker was started -> the rank backend driving its ranks
    timeout_s: float = DEFAULT_TIMEOUT_S  # host seconds a collective may run (init_process_group(timeout=))

    def held(self) -> bool:
        """Whether a greenlet that joined is still running and has not left (a finished worker has left)."""
        self.holders = {p for p in self.holders if p is None or p.is_alive}
        return bool(self.holders)


def world_size_rule(explicit: tuple[int, str] | None, requested, spawned: int | None,
                    n_sips: int) -> tuple[int, str]:
    """The world's size and where it comes from, first that applies (ADR 0012 "World size"):

    ccl.yaml's `world_size` (an `init_process_group(world_size=)` must then
    agree); else `init_process_group(world_size=k)`; else the number of
    workers the caller's `spawn` started; else the topology's SIP count.
    """
    if requested in (-1, None):
        requested = None
    elif isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or requested < 1:
        raise CollectiveError(f"init_process_group(world_size={requested!r}): expected a positive integer")
    if explicit is not None:
        size, source = explicit
        if requested is not None and requested != size:
            raise CollectiveError(f"init_process_group(world_size={requested}): {source} gives a world size of {size}")
        return size, source
    if requested is not None:
        return int(requested), f"init_process_group(world_size={requested})"
    if spawned is not None:
        return spawned, f"spawn(nprocs={spawned})"
    return n_sips, f"the topology's {n_sips} SIPs"

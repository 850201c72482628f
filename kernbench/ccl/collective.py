"""A collective request, and `run_collective`: one PE program per member, talking over IPCQ.

The caller (`torch.distributed`) describes where each member's data lives
(`Region`s) and which PE runs its part (`Member`), and passes the resolved
`ccl.yaml` entry as `config`. `run_collective` imports `config["module"]`,
takes the function named by the request's kind, installs the IPCQ queues of
the wiring and runs `function(program, request)` on every member's PE as its
own engine process, `program` being that member's `PeProgram`. A user's own
algorithm module plugs in the same way, with no change here.

The shipped modules are listed in `SHIPPED_ALGORITHMS` so that a module
lacking a kind can say which ones have it.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

import numpy as np

from kernbench.ccl.algorithms.chunking import pieces
from kernbench.ccl.algorithms.wiring import known_wirings, lookup_wiring
from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.pe_program import PeProgram, wait_for_programs
from kernbench.ccl.queues import CollectiveQueues
from kernbench.machine import Allocation, Machine
from kernbench.machine.ipcq import IpcqSettings

__all__ = ["CollectiveError", "CollectiveRequest", "Member", "Region", "run_collective"]

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "send")
REDUCTIONS = ("all_reduce", "reduce_scatter", "reduce")
REDUCE_OPS = ("sum", "product", "min", "max", "avg")
SHIPPED_ALGORITHMS = {
    "ring": "kernbench.ccl.algorithms.ring",
    "tree": "kernbench.ccl.algorithms.tree",
    "direct": "kernbench.ccl.algorithms.direct",
    "halving_doubling": "kernbench.ccl.algorithms.halving_doubling",
}


@dataclass(frozen=True, eq=False)
class Region:
    """Where one member's data lives: elements `indices` (flat, logical order) of `allocation` viewed as `dtype`.

    `indices` is an array, or a `range` for a contiguous run (a whole tensor:
    no index array as large as the tensor is ever built). Compared by
    identity: an in-place collective passes the same object as input and output.
    """

    allocation: Allocation
    dtype: np.dtype
    indices: np.ndarray | range

    @property
    def count(self) -> int:
        return len(self.indices)

    def elements(self, start: int, stop: int) -> np.ndarray:
        """The flat element indices of positions [start, stop) of the region, as an array."""
        piece = self.indices[start:stop]
        return np.arange(piece.start, piece.stop, dtype=np.int64) if isinstance(piece, range) else piece

    def selector(self, start: int, stop: int) -> np.ndarray | slice:
        """The flat elements of positions [start, stop): a slice for a contiguous region, else their indices.

        What a DMA of a piece takes: a slice costs no array, however large the piece.
        """
        piece = self.indices[start:stop]
        return slice(piece.start, max(piece.start, piece.stop)) if isinstance(piece, range) else piece


@dataclass(frozen=True)
class Member:
    """Group rank `rank`, whose program runs on PE `pe` of cube `cube` of SIP `sip`."""

    rank: int
    sip: int
    cube: int
    pe: int
    input: Region
    output: Region


@dataclass(frozen=True)
class CollectiveRequest:
    """One collective call: what, over which members, with which algorithm configuration."""

    kind: str
    reduce_op: str | None
    members: tuple[Member, ...]
    root: int | None
    config: dict
    label: str
    timing_only: bool


def run_collective(machine: Machine, request: CollectiveRequest) -> None:
    """Run `request` from inside an engine process; return when every member's program has finished.

    A program's failure stops the others and is re-raised here. A group of
    one is a fast path: no queues, only the copy an out-of-place kind needs.
    """
    _check_request(machine, request)
    function, module, wiring = _algorithm(request)
    settings = IpcqSettings.checked(
        machine.topology, buffer_kind=request.config.get("buffer_kind"),
        backpressure=request.config.get("backpressure"), n_slots=request.config.get("n_slots"),
        slot_size=request.config.get("slot_size"), poll_interval_ps=request.config.get("poll_interval_ps"),
        source=f"{request.label}: ccl config")
    size = len(request.members)
    edges = frozenset() if size == 1 else _wiring_edges(request, wiring, module, size)
    queues = CollectiveQueues(machine, request, settings, wiring, edges)
    programs = [PeProgram(machine, request, member, queues) for member in request.members]
    body = _single_member if size == 1 else function
    engine = machine.engine
    steps = getattr(body, "ccl_steps", None) or (body if inspect.isgeneratorfunction(body) else None)
    if steps is not None:
        members = [engine.task(_member_steps, steps, program, request, name=program.name) for program in programs]
    else:
        members = [engine.spawn(_run_member, body, program, request, name=program.name) for program in programs]
    wait_for_programs(engine, members)
    queues.check_drained()


def _run_member(body, program: PeProgram, request: CollectiveRequest) -> None:
    try:
        body(program, request)
    except BaseException:
        program.stop_started()
        raise
    program.join_started()


def _member_steps(task, body, program: PeProgram, request: CollectiveRequest):
    """`_run_member` for an algorithm written as a generator: the member runs as an engine task."""
    try:
        yield from body(program, request)
    except BaseException:
        program.stop_started()
        raise
    yield from program.join_steps()


def _single_member(program: PeProgram, request: CollectiveRequest) -> None:
    """A group of one: the result is the input; copy it only when the output is another region."""
    member = program.member
    if request.kind == "send" or member.output is member.input:
        return
    step = program.slot_elements(member.input.dtype)
    for a, b in pieces(0, member.input.count, step):
        program.store(member.output, a, b, program.load(member.input, a, b))


def _algorithm(request: CollectiveRequest):
    config = request.config
    name = config.get("algorithm", "?")
    module_name = config.get("module")
    if not module_name:
        raise CollectiveError(f"{request.label}: ccl config of algorithm {name!r} names no module")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CollectiveError(f"{request.label}: algorithm {name!r}: cannot import module {module_name!r} "
                              f"({error})") from error
    function = getattr(module, request.kind, None)
    if not callable(function):
        having = [shipped for shipped, path in sorted(SHIPPED_ALGORITHMS.items())
                  if callable(getattr(importlib.import_module(path), request.kind, None))]
        raise CollectiveError(
            f"{request.label}: algorithm {name!r} ({module_name}) does not implement {request.kind}; "
            f"shipped algorithms that do: {', '.join(having) or 'none'}")
    wiring = getattr(function, "ccl_wiring", None) or config.get("wiring")
    return function, module, wiring


def _wiring_edges(request: CollectiveRequest, name: str | None, module, size: int) -> frozenset:
    build = lookup_wiring(name, module) if name else None
    if build is None:
        raise CollectiveError(f"{request.label}: unknown wiring {name!r}; known: {', '.join(known_wirings(module))}")
    return frozenset(build(size))


def _check_request(machine: Machine, request: CollectiveRequest) -> None:
    label, kind, members = request.label, request.kind, request.members
    if kind not in KINDS:
        raise CollectiveError(f"{label}: unknown collective kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not members or [m.rank for m in members] != list(range(len(members))):
        raise CollectiveError(f"{label}: members must be given in group-rank order 0..n-1")
    if kind in REDUCTIONS and request.reduce_op not in REDUCE_OPS:
        raise CollectiveError(f"{label}: reduce op {request.reduce_op!r} is not one of {', '.join(REDUCE_OPS)}")
    if kind in ("broadcast", "reduce") and not (isinstance(request.root, int) and 0 <= request.root < len(members)):
        raise CollectiveError(f"{label}: root {request.root!r} is not a group rank (0..{len(members) - 1})")
    if kind == "send" and len(members) != 2:
        raise CollectiveError(f"{label}: send joins exactly two members (sender, receiver), got {len(members)}")
    dtypes = {np.dtype(region.dtype) for m in members for region in (m.input, m.output)}
    if len(dtypes) != 1:
        raise CollectiveError(f"{label}: members' regions mix dtypes {sorted(map(str, dtypes))}")
    for member in members:
        for region in (member.input, member.output):
            if region.allocation.sip != member.sip:
                raise CollectiveError(f"{label}: rank {member.rank} runs on sip{member.sip} but its tensor "
                                      f"{region.allocation.name!r} lives on sip{region.allocation.sip}")
    _check_counts(request)


def _check_counts(request: CollectiveRequest) -> None:
    members, n = request.members, len(request.members)
    inputs = {m.input.count for m in members}
    expected = {
        "all_reduce": lambda c: c, "broadcast": lambda c: c, "reduce": lambda c: c,
        "all_gather": lambda c: c * n, "reduce_scatter": lambda c: c // n,
    }
    if request.kind == "send":
        if members[0].input.count != members[1].output.count:
            raise CollectiveError(f"{request.label}: send of {members[0].input.count} elements into "
                                  f"{members[1].output.count}")
        return
    if len(inputs) != 1:
        raise CollectiveError(f"{request.label}: members' inputs differ in size ({sorted(inputs)} elements)")
    count = inputs.pop()
    if request.kind == "reduce_scatter" and count % n:
        raise CollectiveError(f"{request.label}: reduce_scatter input of {count} elements does not split over {n}")
    want = expected[request.kind](count)
    checked = [members[request.root]] if request.kind == "reduce" else members
    for member in checked:
        if member.output.count != want:
            raise CollectiveError(f"{request.label}: {request.kind} of {count} input elements needs an output of "
                                  f"{want} on rank {member.rank}, got {member.output.count}")

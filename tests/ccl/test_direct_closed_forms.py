"""ADR 0010: direct's all_gather, reduce_scatter and all_to_all beyond two ranks, its star broadcast and reduce
at any root, and every module's send take their closed forms on an idle machine, to the picosecond.

`test_algorithms_closed_forms.py` pins the first three for two ranks
(T61): beyond two, every member both sends and takes, so its posted stores,
its copies out of the slots, its own loads and sends and the messages
landing in its slots (on its TCM port or HBM stack, with `tcm` and `hbm`
buffers) queue on the same channels. The forms in `closed_forms`
(`direct_all_gather`, `direct_reduce_scatter`, `direct_all_to_all`,
`star_broadcast`, `star_reduce`) apply ADR 0003's reservation law — a
transfer starts when each hop is free as its first byte reaches it, first
come, first served — to each member's channels in the order the schedule
(`kernbench/ccl/algorithms/direct.py`, `rooted.py`) makes its transfers, a
message booking its receiver's buffer as its first byte lands. They are
derived from the topology alone; nothing is read off a run. Where the order
of two reservations on one member's channels at one instant would be set by
the engine's event sequence rather than by the schedule, a form raises
`Underivable` instead of guessing; the sizes here leave no such tie.

As in `test_algorithms_fidelity.py`: members are PE 0 of each SIP's I/O
cube, each piece is one IPCQ slot (64 KiB slots, so one message per piece),
on default.yaml's four SIPs with a full mesh of links (every pair its own
link each way). For two ranks the first three forms equal T61's
`direct_pair`.
"""

from __future__ import annotations

import pytest

from tests.ccl.closed_forms import (Costs, chain_broadcast, direct_all_gather, direct_all_to_all, direct_pair,
                                   direct_reduce_scatter, star_broadcast, star_reduce)
from tests.ccl.test_algorithms_closed_forms import collective_time
from tests.ccl.test_algorithms_fidelity import full_mesh  # noqa: F401  (a fixture)

BUFFER_KINDS = ["tcm", "sram", "hbm"]
# 1000 B: latency-bound, the copies and stores of a member overlap little; 64 KiB: a full slot, the link's
# occupancy 655 ns against a load's 361 ns.
SIZES = [1000, 4096, 16 * 1024, 64 * 1024]


def every_case(test):
    """`test` over every buffer kind, p = 2, 3, 4 and every size."""
    for mark in (pytest.mark.parametrize("buffer_kind", BUFFER_KINDS), pytest.mark.parametrize("p", [2, 3, 4]),
                 pytest.mark.parametrize("nbytes", SIZES)):
        test = mark(test)
    return test


def direct_time(topology, kind: str, p: int, nbytes: int, buffer_kind: str) -> int:
    """direct's `kind` over SIPs 0..p−1 with `nbytes` of f32 from each rank to each rank (all_gather: its
    piece to all; reduce_scatter: rank k's output piece from every rank)."""
    count = nbytes // 4
    sizes = {"all_gather": (count, p * count), "reduce_scatter": (p * count, count),
             "all_to_all": (p * count, p * count)}[kind]
    return collective_time(topology, "direct", kind, p, *sizes, buffer_kind,
                           op="sum" if kind == "reduce_scatter" else None)


def assert_direct_form(topology, kind: str, p: int, nbytes: int, buffer_kind: str, form) -> None:
    """direct's `kind` takes `form(costs)`; for two ranks that is T61's `direct_pair` too."""
    costs = Costs(topology, buffer_kind)
    expected = form(costs)
    if p == 2:
        assert expected == direct_pair(costs, kind, nbytes, nbytes // 4)
    assert direct_time(topology, kind, p, nbytes, buffer_kind) == expected


@every_case
def test_adr0010_t63_direct_all_gather_beyond_two_ranks_takes_its_closed_form(
        full_mesh, buffer_kind, p, nbytes):  # noqa: F811
    """Each member loads its piece and, once it is in, sends it to the others next rank first, each send
    one TCM read after the one before (rank 0, which takes its own piece first, posts that piece's store as
    the load ends: made after its first send, it pushes the second one TCM read later). A message is
    visible T_x after it leaves (its booking of the receiver's buffer never binds here). Each member then
    takes the p pieces in rank order, copying a peer's out of its slot once visible (T_copy) and posting
    each piece's store; a posted store is made after the member's next copy when that piece is already
    visible, else at once, each on the DMA engine that frees first, through the TCM port and the HBM stack
    the copies (and, with an `hbm` buffer, the slots) also use. The call ends with the last store."""
    assert_direct_form(full_mesh, "all_gather", p, nbytes, buffer_kind,
                       lambda costs: direct_all_gather(costs, p, nbytes, buffer_kind))


@every_case
def test_adr0010_t64_direct_reduce_scatter_beyond_two_ranks_takes_its_closed_form(
        full_mesh, buffer_kind, p, nbytes):  # noqa: F811
    """A member's own chunk loads from the start; its send program loads the next rank's chunk at the same
    instant (on the other DMA engine, max(TCM read, HBM occupancy) later), sends it once in, and loads each
    following peer's chunk as the send before starts — so its sends leave T_load apart, the first at
    T_load + that gap. From its own chunk's load the member takes the p chunks in rank order: a peer's at
    max(now, its arrival) + T_copy, then T_reduce from the second chunk on; then T_store of the sum. The call
    ends with the last member's store. With 64 KiB pieces and four ranks a member's third load is still
    running when its first messages land: the form orders those landings among its reservations the same
    way."""
    assert_direct_form(full_mesh, "reduce_scatter", p, nbytes, buffer_kind,
                       lambda costs: direct_reduce_scatter(costs, p, nbytes, nbytes // 4, buffer_kind))


@every_case
def test_adr0010_t65_direct_all_to_all_beyond_two_ranks_takes_its_closed_form(
        full_mesh, buffer_kind, p, nbytes):  # noqa: F811
    """A member's send program loads the piece for the next rank, sends it once in and loads the following
    peer's piece as each send starts (sends T_load apart). Rank 0 takes its own piece first: it loads it at
    once, so its send program's first load starts max(TCM read, HBM occupancy) later on the other engine,
    and it posts the own piece's store as that load ends. Each member takes the p pieces in rank order —
    its own loaded when its turn comes, a peer's copied out of its slot once visible — posting each store,
    made after the member's next load or copy at that instant, else at once. The call ends with the last
    store."""
    assert_direct_form(full_mesh, "all_to_all", p, nbytes, buffer_kind,
                       lambda costs: direct_all_to_all(costs, p, nbytes, buffer_kind))


@every_case
def test_adr0010_t66_directs_star_broadcast_takes_its_closed_form_at_any_root(
        full_mesh, buffer_kind, p, nbytes):  # noqa: F811
    """The root loads the piece and sends it to each peer in turn, one TCM read apart, then stores it (its
    store's TCM hop waits for the last send); the peer k-th in line has it visible T_load + k·(TCM read) + T_x,
    then T_copy + T_store. The call ends with the last store. The same for the first and the last rank as
    root."""
    costs = Costs(full_mesh, buffer_kind)
    expected = star_broadcast(costs, p, nbytes, buffer_kind)
    count = nbytes // 4
    for root in sorted({0, p - 1}):
        assert collective_time(full_mesh, "direct", "broadcast", p, count, count, buffer_kind,
                               op=None, root=root) == expected, root


@every_case
def test_adr0010_t67_directs_star_reduce_takes_its_closed_form_at_any_root(
        full_mesh, buffer_kind, p, nbytes):  # noqa: F811
    """Every other member loads its piece and sends it to the root, where the p−1 messages land at one
    instant (with an `sram` or `hbm` buffer, booking its stack one after another in rank order). The root
    takes the pieces in rank order — its own loaded when its turn comes, a peer's copied out once visible —
    adding each from the second on (T_reduce), then stores the sum; for the first and the last rank as
    root."""
    costs = Costs(full_mesh, buffer_kind)
    count = nbytes // 4
    for root in sorted({0, p - 1}):
        assert collective_time(full_mesh, "direct", "reduce", p, count, count, buffer_kind, op="sum",
                               root=root) == star_reduce(costs, p, nbytes, count, root, buffer_kind), root


@pytest.mark.parametrize("algorithm", ["ring", "tree", "direct", "halving_doubling"])
@pytest.mark.parametrize("buffer_kind", BUFFER_KINDS)
@pytest.mark.parametrize("nbytes", SIZES)
def test_adr0010_t72_send_is_one_load_message_copy_and_store_under_every_algorithm(
        full_mesh, algorithm, buffer_kind, nbytes):  # noqa: F811
    """`send` (every module's, `rooted.send`) of one piece: member 0 loads it and sends it, member 1 copies it
    out of its slot and stores it: T_load + T_x + T_copy + T_store, the two-rank chain of T40."""
    costs = Costs(full_mesh, buffer_kind)
    count = nbytes // 4
    assert collective_time(full_mesh, algorithm, "send", 2, count, count, buffer_kind, op=None) == \
        chain_broadcast(costs, 2, nbytes) == \
        costs.load(nbytes) + costs.message(nbytes) + costs.copy(nbytes) + costs.store(nbytes)

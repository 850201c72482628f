"""ADR 0010 "Hierarchical all-reduce": inside each SIP, across SIPs, inside again — numpy's values, the ring where
the members are not several ranks on each of several SIPs, and the closed form on an idle machine.

The members are PE ranks driven by spawned workers, a worker per SIP (ADR 0012 "Above it"): world_size = P·k
over P workers gives k PE ranks on each of P SIPs.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.ccl.algorithms import hierarchical, support
from kernbench.ccl.algorithms.wiring import ring_1d
from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import Costs, Hop, path_ps, ring_all_gather, ring_all_reduce, ring_reduce_scatter
from tests.ccl.test_distributed import (as_stored, assert_ranks_agree, ccl, rank_inputs,  # noqa: F401 (autouse)
                                        restore_current_ccl)
from tests.derived_topology import derived_topology

REFERENCE = {"sum": np.sum, "avg": np.mean, "max": np.max, "product": np.prod}


def spread_all_reduce(topology, sips: int, per_sip: int, shape: tuple[int, int], dtype: str, op: str = "sum",
                      algorithm: str = "hierarchical", **defaults):
    """All-reduce over `per_sip` PE ranks on each of `sips` SIPs (a spawned worker per SIP); (each rank's
    result, the inputs as stored, the report row)."""
    world = sips * per_sip
    session = Session(topology, ccl=ccl(algorithm, world_size=world, **defaults))
    torch = session.torch
    data = [as_stored(x, dtype) for x in rank_inputs(world, shape, dtype, "product" if op == "product" else "sum")]
    results = {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        first = dist.get_rank()
        x = torch.tensor(np.concatenate(data[first:first + per_sip], axis=-1), dtype=dtype,
                         dp=dist.pe_rank_policy())
        dist.all_reduce(x, op=op)
        results.update(zip(range(first, first + per_sip), np.split(x.numpy(), per_sip, axis=-1)))

    session.run(lambda torch: torch.multiprocessing.spawn(worker, nprocs=sips), torch)
    [row] = session.ctx.collectives
    return [results[r] for r in range(world)], data, row


# (SIPs, ranks per SIP, per-rank shape): one slot or less, several slots, a count no split of k divides evenly.
LAYOUTS = [(2, 3, (1, 1)), (4, 2, (3, 333)), (2, 4, (1, 1001)), (3, 3, (4, 10_000)), (4, 8, (1, 70_001)),
           (2, 3, (3, 150_001))]  # the last: 2 slabs in f16, 3 in f32 (phases pipelined across slabs)


@pytest.mark.parametrize("sips, per_sip, shape", LAYOUTS)
@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_adr0010_t73_hierarchical_all_reduce_matches_numpy_on_every_nested_layout(sips, per_sip, shape, dtype):
    outputs, data, row = spread_all_reduce("default", sips, per_sip, shape, dtype)
    assert row["algorithm"] == "hierarchical" and row["ranks"] == list(range(sips * per_sip))
    assert_ranks_agree(outputs, np.sum(data, axis=0), dtype)


@pytest.mark.parametrize("op", ["avg", "max", "product"])
def test_adr0010_t73_every_reduce_op_finalizes_once_over_the_whole_group(op):
    """Phase 1 only sums for avg: the average divides by all P·k ranks, once (not by k, then by P)."""
    outputs, data, _ = spread_all_reduce("default", 2, 3, (2, 700), "f32", op)
    assert_ranks_agree(outputs, REFERENCE[op](data, axis=0), "f32")


def test_adr0010_t73_premul_sum_scales_the_sum_once():
    session = Session("default", ccl=ccl("hierarchical", world_size=6))
    torch, results = session.torch, {}

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        x = torch.tensor(np.full((1, 3 * 5), float(rank + 1), dtype=np.float32), dp=dist.pe_rank_policy())
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
        results[rank] = x.numpy()

    session.run(lambda torch: torch.multiprocessing.spawn(worker, nprocs=2), torch)
    assert [row["algorithm"] for row in session.ctx.collectives] == ["hierarchical"]
    assert all(np.all(values == 0.5 * 3 * (1 + 2)) for values in results.values())


def test_adr0010_t74_where_the_members_are_not_nested_the_ring_runs_and_the_row_says_so():
    """One SIP's PE ranks (one worker) and one rank per SIP are not nested: ring runs. Other kinds run ring on
    nested members too."""
    session = Session("default", ccl=ccl("hierarchical", world_size=6))

    def one_sip(torch):
        dist = torch.distributed
        dist.init_process_group()
        x = torch.tensor(np.arange(12, dtype=np.float32).reshape(1, 12), dp=dist.pe_rank_policy())
        dist.all_reduce(x)
        return x.numpy()

    values = session.run(one_sip, session.torch)
    assert np.all(values.reshape(6, 2) == np.arange(12).reshape(6, 2).sum(axis=0))
    [row] = session.ctx.collectives
    assert (row["algorithm"], row["configured_algorithm"]) == ("ring", "hierarchical")

    session = Session("default", ccl=ccl("hierarchical"))  # 4 ranks, one per SIP
    torch = session.torch

    def per_sip(rank):
        torch.ahbm.set_device(rank)
        torch.distributed.init_process_group()
        torch.distributed.all_reduce(torch.ones(8))
        torch.distributed.all_gather_into_tensor(torch.empty(32), torch.ones(8))

    session.run(lambda torch: torch.multiprocessing.spawn(per_sip, nprocs=4), torch)
    assert [row["algorithm"] for row in session.ctx.collectives] == ["ring", "ring"]

    gathered = Session("default", ccl=ccl("hierarchical", world_size=6))
    torch = gathered.torch

    def gather(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        policy = dist.pe_rank_policy()
        dist.all_gather_into_tensor(torch.empty((1, 3 * 6 * 3), dp=policy), torch.ones((1, 3 * 3), dp=policy))

    gathered.run(lambda torch: torch.multiprocessing.spawn(gather, nprocs=2), torch)
    assert [row["algorithm"] for row in gathered.ctx.collectives] == ["ring"]


@pytest.mark.parametrize("sips", [(0, 0, 1, 1), (0, 0, 0, 1, 1, 1, 2, 2, 2), (3, 1, 3, 1)])
def test_adr0010_t75_sip_rings_connect_each_sips_ranks_and_each_local_index_across_sips(sips):
    edges = hierarchical.sip_rings(sips)
    local, across = hierarchical.levels(sips)
    assert sorted(map(sorted, local)) == sorted([[r for r, s in enumerate(sips) if s == sip] for sip in set(sips)])
    for ranks in across:  # one rank of each SIP, all at the same local index
        assert sorted(sips[r] for r in ranks) == sorted(set(sips))
        assert len({next(i for i, group in enumerate(local) if r in group) for r in ranks}) == len(ranks)
        assert len({local[[sips[g[0]] for g in local].index(sips[r])].index(r) for r in ranks}) == 1
    expected = set()
    for ranks in (*local, *across):
        n = len(ranks)
        expected |= {(ranks[i], ranks[(i + step) % n]) for i in range(n) for step in (1, -1) if n > 1}
    assert edges == expected
    assert all(sips[a] == sips[b] or local_index(local, a) == local_index(local, b) for a, b in edges)


def local_index(local, rank: int) -> int:
    return next(group.index(rank) for group in local if rank in group)


@pytest.mark.parametrize("sips, nested", [((0, 1, 2, 3), False), ((0, 0, 0), False), ((0, 0, 1), False),
                                          ((0, 1, 0, 1), True), ((5, 5, 2, 2, 7, 7), True)])
def test_adr0010_t75_the_schedule_runs_only_on_nested_layouts(sips, nested):
    assert support.nested(sips) is nested
    assert hierarchical.sip_rings(sips) == (hierarchical.sip_rings(sips) if nested else ring_1d(len(sips)))


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    """default.yaml cut to two SIPs of two cubes side by side, one PE each: two PE ranks per SIP, one NoC hop
    apart; the PE of cube 0 (the I/O cube) reaches the inter-SIP link directly, the other through one hop."""
    return derived_topology(tmp_path_factory.mktemp("topology"), "default",
                            [("sips: {count: 4}", "sips: {count: 2}"),
                             ("cube_mesh: {w: 2, h: 2}", "cube_mesh: {w: 2, h: 1}"),
                             ("corners: [nw, ne, sw, se], pe_per_corner: 2", "corners: [nw], pe_per_corner: 1")],
                            "two_by_two.yaml")


class _Across(Costs):
    """Costs of a member whose messages to the other SIP cross `hops` before and after the inter-SIP link."""

    def __init__(self, topology, buffer_kind: str, hops: list[Hop]):
        super().__init__(topology, buffer_kind)
        self.hops = hops

    def message(self, nbytes: int) -> int:
        route = [*self.engine, self.tcm, *self.hops, self.link, *self.hops, self.buffer]
        return path_ps(nbytes, route) + self.overhead


@pytest.mark.parametrize("count", [1000, 1600, 4000])
def test_adr0010_t76_hierarchical_all_reduce_takes_its_closed_form(two_by_two, count):
    """k = 2 PE ranks on each of P = 2 SIPs, `count` f16 elements per rank, each phase one message per step
    (`sram` slots keep messages off the TCM port and HBM the members' own DMAs use):

    t = t_rs(NoC, k, S/k) + t_ar(NoC·link·NoC, P, S/(kP)) + max(0, o − h) + t_ag(NoC, k, S/k)

    Phase 1 is symmetric (one NoC hop each way). In phase 2 the rings of local
    index 0 and 1 share the inter-SIP link: index 1's messages cross a NoC hop
    before and after it, so its ring binds, and its first message reaches the
    link h (a hop's latency) after index 0's: it waits for the rest of that
    one's occupancy o where o > h, and runs clear of it from then on. In
    phase 3 the index-0 rank, done first, has sent its shard ahead, so the
    call ends when the index-1 rank's shard reaches it: the all-gather's
    form from the end of phase 2.
    """
    topology = load_topology(two_by_two)
    noc = topology.sip.noc
    hop = Hop(noc.link_bandwidth_bytes_per_s, noc.hop_latency_ps)
    local = Costs(topology, "sram")
    local.link = hop
    across = _Across(topology, "sram", [hop])
    k = p = 2
    nbytes = 2 * count
    shard, piece = nbytes // k, nbytes // (k * p)
    assert piece <= ccl()["defaults"]["slot_size"]
    occupancy = across.link_occupancy(piece)
    expected = (local.launch + ring_reduce_scatter(local, k, shard, count // k)
                + ring_all_reduce(across, p, piece, count // (k * p)) + max(0, occupancy - hop.latency)
                + ring_all_gather(local, k, shard))
    outputs, data, row = spread_all_reduce(two_by_two, p, k, (1, count), "f16", buffer_kind="sram")
    assert_ranks_agree(outputs, np.sum(data, axis=0), "f16")
    assert row["time_ps"] == expected


def test_adr0010_t77_pipelined_phases_keep_the_inter_sip_link_busy_at_8_mib():
    """4 PE ranks on each of default.yaml's 4 SIPs, 8 MiB f16 per rank (8 slabs of 1 MiB): each inter-SIP link
    carries the k rings' 2(P−1)/P·S, so the call takes at least that over the link's payload rate — and, with phase 2
    of one slab beside phases 1 and 3 of its neighbours, at most 1/0.85 of it (phases run one after another
    would need about twice: the NoC phases on top of the link's)."""
    topology = load_topology("default")
    sips, per_sip, nbytes = 4, 4, 8 << 20
    ran, time_ps = timed_all_reduce("hierarchical", per_sip, nbytes, sips)
    assert ran == "hierarchical"
    wire = 2 * (sips - 1) * nbytes * 10**12 // (sips * topology.system.inter_sip.payload_bytes_per_s)
    assert wire <= time_ps <= wire / 0.85


def timed_all_reduce(algorithm: str, per_sip: int, nbytes: int, sips: int = 4) -> tuple[str, int]:
    """(what ran, its time in ps): one f16 all_reduce of `nbytes` per rank over `per_sip` PE ranks on each of
    default.yaml's SIPs, timing only."""
    session = Session("default", ccl=ccl(algorithm, world_size=sips * per_sip), timing_only=True)
    torch = session.torch

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        dist.all_reduce(torch.empty((1, per_sip * nbytes // 2), dtype="f16", dp=dist.pe_rank_policy()))

    session.run(lambda torch: torch.multiprocessing.spawn(worker, nprocs=sips), torch)
    [row] = session.ctx.collectives
    return row["algorithm"], row["time_ps"]


def two_level_model(algorithm: str, per_sip: int, nbytes: int, sips: int = 4) -> float:
    """The tuner's documented model (kernbench/ccl/tuner.py) from default.yaml's numbers: `pe_rank_policy` puts
    a SIP's k ≤ 8 ranks on cube 0, so a local hop is TCM to TCM inside the cube and an inter-SIP hop crosses
    one ring link; the k ranks share cube 0's HBM stack."""
    topology = load_topology("default")
    ipcq, tcm, link = topology.ipcq, topology.pe.tcm, topology.system.inter_sip
    hbm, dma = topology.cube.hbm, topology.pe.dma
    n, k, s = sips * per_sip, per_sip, nbytes
    local_alpha = (2 * tcm.latency_ps + ipcq.message_overhead_ps) / 1e12
    inter_alpha = (2 * tcm.latency_ps + link.latency_ps + ipcq.message_overhead_ps) / 1e12
    pe, inter_rate, local_rate = tcm.bandwidth_bytes_per_s, link.payload_bytes_per_s, tcm.bandwidth_bytes_per_s
    piece, local_piece = min(ipcq.max_slot_bytes, s // n), min(ipcq.max_slot_bytes, s // k)
    fence = 2 * (hbm.latency_ps / 1e12 + piece / min(dma.bandwidth_bytes_per_s, hbm.bandwidth_bytes_per_s))
    memory = k * 2 * s / hbm.bandwidth_bytes_per_s
    if algorithm == "ring":
        share = 2 * (n - 1) / n
        latency = share * ((n - sips) * (local_alpha + piece / pe) + sips * (inter_alpha + piece / pe))
        return fence + latency + max(share * s / min(pe, inter_rate), memory)
    latency = 2 * (k - 1) * (local_alpha + local_piece / pe) + 2 * (sips - 1) * (inter_alpha + piece / pe)
    inside = max(2 * (k - 1) / k * s / min(pe, local_rate), memory)
    return 3 * fence + latency + inside + 2 * (sips - 1) / sips * s / min(k * pe, inter_rate)


@pytest.mark.parametrize("per_sip, nbytes", [(2, 16 << 10), (2, 1 << 20), (8, 128 << 10), (8, 8 << 20)])
def test_adr0010_t78_auto_weighs_ring_and_hierarchical_by_the_two_level_model(per_sip, nbytes):
    """Several ranks on each SIP: `auto` (the shipped file) runs what the two-level model ranks first, and that
    is never more than 15% slower than the better of ring and hierarchical run by name — the one-level model
    picked the tree there, 7–10× slower, its edges piling onto the SIPs' links."""
    predicted = {name: two_level_model(name, per_sip, nbytes) for name in ("ring", "hierarchical")}
    session_pick, auto_ps = timed_all_reduce("auto", per_sip, nbytes)
    assert session_pick == min(predicted, key=predicted.get)
    best = min(timed_all_reduce(name, per_sip, nbytes)[1] for name in ("ring", "hierarchical"))
    assert auto_ps <= 1.15 * best

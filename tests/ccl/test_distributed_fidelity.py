"""ADR 0012: a collective called through `torch.distributed` costs what the algorithm's closed form says.

The API adds no simulated time of its own: a rank's tensor (default
placement: cube 0, PE 0 of its SIP, as `closed_forms.py` assumes) is the
member's region, and the run report's row times the algorithm alone, from
the last rank's arrival to the end. On default.yaml's 4-SIP ring every ring
neighbour is one link away. PE ranks (one worker, a world above the SIP
count) take the same forms with the on-package NoC hop as their link.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import (Costs, Hop, chain_broadcast, chain_reduce, direct_all_reduce, halving_doubling_step,
                                   ring_all_gather, ring_all_reduce, ring_reduce_scatter, tree_down, tree_ready)
from tests.ccl.test_distributed import ccl, restore_current_ccl, run_world  # noqa: F401 (autouse fixture)
from tests.derived_topology import derived_topology


def all_reduce_row(p: int, count: int, dtype: str, *, timing_only: bool, **defaults) -> dict:
    """The report row of one all_reduce of `count` elements per rank over p SIPs of default.yaml."""
    session = Session("default", ccl=ccl("ring", world_size=p, **defaults), timing_only=timing_only)

    def fn(torch, rank):
        x = torch.empty(count, dtype=dtype) if timing_only else torch.full((count,), float(rank + 1), dtype=dtype)
        torch.distributed.all_reduce(x)
        return None if timing_only else x.numpy()

    results = run_world(session, fn)
    if not timing_only:
        for values in results.values():
            assert np.all(values == p * (p + 1) / 2)
    [row] = session.ctx.collectives
    return row


@pytest.mark.parametrize("p, buffer_kind, timing_only", [(4, "tcm", True), (2, "sram", False), (4, "hbm", False)])
def test_adr0012_t39_a_ring_all_reduce_through_the_api_takes_its_closed_form(p, buffer_kind, timing_only):
    """t = T_load(c) + 2(p−1)·(α + c/B) + (p−1)·T_reduce(c) + T_store(c), c = S/p in one slot (ADR 0010 T18)."""
    topology = load_topology("default")
    costs = Costs(topology, buffer_kind)
    chunk_bytes = ccl()["defaults"]["slot_size"]
    chunk = chunk_bytes // 2  # f16 elements
    expected = ring_all_reduce(costs, p, chunk_bytes, chunk)
    assert expected == (costs.load(chunk_bytes) + 2 * (p - 1) * (costs.message(chunk_bytes) + costs.copy(chunk_bytes))
                        + (p - 1) * costs.reduce(chunk) + costs.store(chunk_bytes))  # the load hides behind the link
    row = all_reduce_row(p, p * chunk, "f16", timing_only=timing_only, buffer_kind=buffer_kind)
    assert row["time_ps"] == expected


def test_adr0012_t40_a_64_mib_ring_all_reduce_reaches_90_percent_of_the_inter_sip_link():
    topology = load_topology("default")
    p, size = topology.n_sips, 64 << 20
    link = topology.system.inter_sip.bandwidth_bytes_per_s
    row = all_reduce_row(p, size // 2, "f16", timing_only=True)
    assert row["bytes"] == size
    wire = 2 * (p - 1) * (size // p) * 10**12 // link  # each link carries 2(p−1) chunks of S/p
    assert row["time_ps"] >= wire
    assert 0.9 * link / 1e9 <= row["busbw_gb_per_s"] <= link / 1e9


def test_adr0012_t41_the_shipped_slots_are_the_machines_largest_and_small_slots_are_window_bound():
    """8 × 64 KiB (default.yaml's ipcq depth and largest slot) reach ≥ 90% of the link at 1 MiB; 4 KiB slots
    are held back by credits, not by the per-message overhead: doubling their number nearly doubles busbw."""
    topology = load_topology("default")
    defaults = ccl()["defaults"]
    assert (defaults["n_slots"], defaults["slot_size"]) == (topology.ipcq.depth, topology.ipcq.max_slot_bytes)
    link_gb = topology.system.inter_sip.bandwidth_bytes_per_s / 1e9
    count = (1 << 20) // 2

    def busbw(**slots) -> float:
        return all_reduce_row(topology.n_sips, count, "f16", timing_only=True, **slots)["busbw_gb_per_s"]

    shipped, four_small, eight_small = busbw(), busbw(n_slots=4, slot_size=4096), busbw(n_slots=8, slot_size=4096)
    assert shipped >= 0.9 * link_gb
    assert four_small < 0.15 * link_gb  # about an eighth: ADR 0010's old default of 4 × 4 KiB
    assert 1.7 < eight_small / four_small <= 2.0
    # Were the per-message overhead the limit, 4 KiB slots would reach wire / (wire + overhead) of the link (~51%).
    wire_ps = 4096 * 10**12 // topology.system.inter_sip.bandwidth_bytes_per_s
    overhead_bound = link_gb * wire_ps / (wire_ps + topology.ipcq.message_overhead_ps)
    assert eight_small < 0.6 * overhead_bound


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram"])
@pytest.mark.parametrize("collective", ["all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "reduce"])
def test_adr0012_t86_the_other_ring_collectives_through_the_api_take_their_closed_forms(collective, buffer_kind):
    """ADR 0010 T57 (ring reduce_scatter and all_gather) and T40, T41 (the chains of broadcast and reduce), one
    slot per rank's piece, through `torch.distributed` on four ranks: the API adds nothing."""
    p, root = 4, 2
    costs = Costs(load_topology("default"), buffer_kind)
    nbytes = ccl()["defaults"]["slot_size"]
    piece = nbytes // 2  # f16 elements
    expected = {"all_gather_into_tensor": ring_all_gather(costs, p, nbytes),
                "reduce_scatter_tensor": ring_reduce_scatter(costs, p, nbytes, piece),
                "broadcast": chain_broadcast(costs, p, nbytes),
                "reduce": chain_reduce(costs, p, nbytes, piece)}[collective]
    session = Session("default", ccl=ccl("ring", world_size=p, buffer_kind=buffer_kind))

    def fn(torch, rank):
        dist, ones = torch.distributed, (lambda n: torch.full((n,), 1.0, dtype="f16"))
        if collective == "all_gather_into_tensor":
            dist.all_gather_into_tensor(torch.empty(p * piece, dtype="f16"), ones(piece))
        elif collective == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(torch.empty(piece, dtype="f16"), ones(p * piece))
        else:
            getattr(dist, collective)(ones(piece), root)

    run_world(session, fn)
    [row] = session.ctx.collectives
    assert row["time_ps"] == expected


@pytest.fixture(scope="module")
def two_cubes(tmp_path_factory):
    """single_sip.yaml cut to two cubes side by side with one PE each: two PE ranks, each on its own cube's HBM,
    one NoC hop apart."""
    return derived_topology(tmp_path_factory.mktemp("topology"), "single_sip",
                            [("cube_mesh: {w: 2, h: 2}", "cube_mesh: {w: 2, h: 1}"),
                             ("corners: [nw, ne, sw, se], pe_per_corner: 2", "corners: [nw], pe_per_corner: 1")],
                            "two_cubes.yaml")


PE_RANK_CASES = [("all_reduce", algorithm) for algorithm in ["ring", "direct", "tree", "halving_doubling"]] + [
    (collective, "ring") for collective in ["all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "reduce"]]


@pytest.mark.parametrize("nbytes", [1000, 4096])
@pytest.mark.parametrize("collective, algorithm", PE_RANK_CASES)
def test_adr0012_t87_pe_ranks_take_the_closed_forms_with_the_noc_hop_as_their_link(two_cubes, collective, algorithm,
                                                                                    nbytes):
    """Two PE ranks, each rank's buffer `nbytes` per piece (all_reduce: two pieces, the ring's chunks), through
    `torch.distributed` from one worker: ADR 0010's forms (T18, T20, T21, T57, T59, T40, T41) with the NoC hop
    in place of the inter-SIP link. The `sram` buffer keeps the messages off the TCM port and HBM stack the
    members' own loads and stores use. The NoC (1024 GB/s) outpaces the DMA engine (256 GB/s), so a ring or
    halving step waits for the load of the half it keeps, which a link of 100 GB/s hides."""
    p, root = 2, 1
    costs = Costs(load_topology(two_cubes), "sram")
    noc = costs.topology.sip.noc
    costs.link = Hop(noc.link_bandwidth_bytes_per_s, noc.hop_latency_ps)
    assert costs.load(nbytes) > costs.message(nbytes)  # what makes these differ from the SIP path's forms
    piece = nbytes // 2  # f16 elements
    expected = {
        ("all_reduce", "ring"): lambda: ring_all_reduce(costs, p, nbytes, piece),
        ("all_reduce", "direct"): lambda: direct_all_reduce(costs, p, 2 * nbytes, 2 * piece),
        ("all_reduce", "tree"): lambda: tree_down(costs, p, 2 * nbytes, tree_ready(costs, p, 2 * nbytes, 2 * piece)),
        ("all_reduce", "halving_doubling"): lambda: (halving_doubling_step(costs, nbytes, piece)
                                                     + halving_doubling_step(costs, nbytes)),
        ("all_gather_into_tensor", "ring"): lambda: ring_all_gather(costs, p, nbytes),
        ("reduce_scatter_tensor", "ring"): lambda: ring_reduce_scatter(costs, p, nbytes, piece),
        ("broadcast", "ring"): lambda: chain_broadcast(costs, p, nbytes),
        ("reduce", "ring"): lambda: chain_reduce(costs, p, nbytes, piece),
    }[collective, algorithm]()
    session = Session(two_cubes, ccl=ccl(algorithm, world_size=p, buffer_kind="sram"))

    def fn(torch, rank):
        dist, policy = torch.distributed, torch.distributed.pe_rank_policy()

        def ones(elements):  # `elements` per rank: chunk r of the last dimension is PE rank r's buffer
            return torch.full((1, p * elements), 1.0, dtype="f16", dp=policy)

        if collective == "all_reduce":
            dist.all_reduce(ones(p * piece))
        elif collective == "all_gather_into_tensor":
            dist.all_gather_into_tensor(torch.empty(1, p * p * piece, dtype="f16", dp=policy), ones(piece))
        elif collective == "reduce_scatter_tensor":
            dist.reduce_scatter_tensor(torch.empty(1, p * piece, dtype="f16", dp=policy), ones(p * piece))
        else:
            getattr(dist, collective)(ones(piece), root)

    run_world(session, fn)
    [row] = session.ctx.collectives
    assert row["ranks"] == [0, 1] and row["algorithm"] == algorithm
    assert row["time_ps"] == expected

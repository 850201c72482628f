"""ADR 0012: a collective called through `torch.distributed` costs what the algorithm's closed form says.

The API adds no simulated time of its own: a rank's tensor (default
placement: cube 0, PE 0 of its SIP, as `closed_forms.py` assumes) is the
member's region, and the run report's row times the algorithm alone, from
the last rank's arrival to the end. On default.yaml's 4-SIP ring every ring
neighbour is one link away.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import Costs, chain_broadcast, chain_reduce, ring_all_gather, ring_reduce_scatter
from tests.ccl.test_distributed import ccl, restore_current_ccl, run_world  # noqa: F401 (autouse fixture)


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
    expected = (costs.load(chunk_bytes) + 2 * (p - 1) * (costs.message(chunk_bytes) + costs.copy(chunk_bytes))
                + (p - 1) * costs.reduce(chunk) + costs.store(chunk_bytes))
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

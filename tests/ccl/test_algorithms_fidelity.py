"""ADR 0010: collective times equal their closed forms on an idle machine (derived from the topology).

Members are PE 0 of each SIP's I/O cube, so messages cross no NoC hop (see
`closed_forms.py` for what each cost contains). On default.yaml's 4-SIP ring
every ring neighbour is one link away; the tree and halving-doubling forms
are checked on the same machine with a full mesh of links, so every pair
they join has a link of its own. Each chunk fits one IPCQ slot, the case the
closed forms describe exactly; the many-slot case is checked through the
ring's bus bandwidth.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.ccl.algorithms.wiring import tree_children
from kernbench.session import Session
from kernbench.topology import load_topology
from kernbench.topology.loader import resolve_topology_path
from tests.ccl.closed_forms import Costs
from tests.ccl.harness import config, device_tensor, member, region, run

BIG_SLOTS = {"slot_size": 64 * 1024, "n_slots": 8}


@pytest.fixture(scope="module")
def full_mesh(tmp_path_factory):
    text = resolve_topology_path("default").read_text()
    assert "shape: ring" in text
    path = tmp_path_factory.mktemp("topology") / "full_mesh.yaml"
    path.write_text(text.replace("shape: ring", "shape: full_mesh"))
    return load_topology(path)


def all_reduce_time(topology, algorithm: str, p: int, count: int, **cfg) -> int:
    session = Session(topology)
    tensors = [device_tensor(session, r, np.ones(count), "f32") for r in range(p)]
    return run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
               config(algorithm, **{**BIG_SLOTS, **cfg}))


@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm", "sram"])
@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("chunk_bytes", [1000, 4096, 64 * 1024])
def test_adr0010_t18_ring_all_reduce_takes_2_p_minus_1_steps_of_alpha_plus_chunk_over_bandwidth(
        buffer_kind, p, chunk_bytes):
    """t = T_load(c) + 2(p−1)·(α + c/B) + (p−1)·T_reduce(c) + T_store(c), c = S/p in one message.

    α = TCM + link + buffer latency + message overhead + the slot → TCM copy;
    c/B = the link's serialization time (the slowest hop of the send route).
    """
    topology = load_topology("default")
    costs = Costs(topology, buffer_kind)
    count = chunk_bytes // 4
    alpha_plus_c_over_b = costs.message(chunk_bytes) + costs.copy(chunk_bytes)
    alpha = alpha_plus_c_over_b - costs.link_occupancy(chunk_bytes)
    assert alpha == (costs.tcm.latency + costs.link.latency + costs.buffer.latency + costs.overhead
                     + costs.copy(chunk_bytes))
    # The next step's own chunk loads while the message is on the wire, so it stays off the critical path.
    assert costs.load(chunk_bytes) < costs.message(chunk_bytes)
    expected = (costs.load(chunk_bytes) + 2 * (p - 1) * alpha_plus_c_over_b + (p - 1) * costs.reduce(count)
                + costs.store(chunk_bytes))
    assert all_reduce_time(topology, "ring", p, p * count, buffer_kind=buffer_kind) == expected


def test_adr0010_t19_ring_bus_bandwidth_approaches_the_inter_sip_link_at_64_mib():
    topology = load_topology("default")
    p, size = topology.n_sips, 64 << 20
    link = topology.system.inter_sip.bandwidth_bytes_per_s
    session = Session(topology, timing_only=True)
    tensors = [session.torch.empty(size // 4, dtype="f32", device=f"ahbm:{r}") for r in range(p)]
    elapsed = run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
                  config("ring", buffer_kind="tcm", **BIG_SLOTS), timing_only=True)
    wire = 2 * (p - 1) * (size // p) * 10**12 // link  # each link carries 2(p−1) chunks of S/p
    assert elapsed >= wire
    bus_bandwidth = 2 * (p - 1) / p * size / (elapsed / 10**12)
    assert bus_bandwidth >= 0.9 * link


def tree_time(costs: Costs, p: int, nbytes: int, count: int) -> int:
    """Single-piece tree all-reduce, by recursion over the heap-ordered binary tree.

    Up: a member loads its piece, then for each child in rank order waits for
    its partial (ready + message), copies it out and adds it. Down: the root
    sends to its children one after another (each send holds its TCM port for
    `tcm_read`), each child copies and forwards the same way; every member
    stores after its sends.
    """
    def ready(rank: int) -> int:
        t = costs.load(nbytes)
        for child in tree_children(rank, p):
            t = max(t, ready(child) + costs.message(nbytes)) + costs.copy(nbytes) + costs.reduce(count)
        return t

    def finished(rank: int, t: int) -> int:
        children = tree_children(rank, p)
        ends = [finished(child, t + k * costs.tcm_read(nbytes) + costs.message(nbytes) + costs.copy(nbytes))
                for k, child in enumerate(children)]
        return max(ends + [t + len(children) * costs.tcm_read(nbytes) + costs.store(nbytes)])

    return finished(0, ready(0))


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("buffer_kind", ["tcm", "sram"])
def test_adr0010_t20_tree_all_reduce_matches_its_closed_form(full_mesh, p, buffer_kind):
    nbytes = 16 * 1024
    costs = Costs(full_mesh, buffer_kind)
    expected = tree_time(costs, p, nbytes, nbytes // 4)
    assert all_reduce_time(full_mesh, "tree", p, nbytes // 4, buffer_kind=buffer_kind) == expected


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm"])
def test_adr0010_t21_halving_doubling_matches_its_closed_form(full_mesh, p, buffer_kind):
    """log2 p halving steps of S/2, S/4, … then the same sizes doubling back, each one message per partner.

    A halving step: load the half to give, send it, load the half to keep
    (hidden behind the message), copy the partner's half out, reduce, store.
    A doubling step: load, send, copy out, store.
    """
    size = 32 * 1024
    costs = Costs(full_mesh, buffer_kind)
    expected = 0
    for step in range(p.bit_length() - 1):
        half = size >> (step + 1)
        moved = costs.load(half) + costs.message(half) + costs.copy(half) + costs.store(half)
        expected += moved + costs.reduce(half // 4) + moved
    assert all_reduce_time(full_mesh, "halving_doubling", p, size // 4, buffer_kind=buffer_kind) == expected

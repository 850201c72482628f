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

from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import Costs, chain_broadcast, chain_reduce, tree_down, tree_ready
from tests.ccl.harness import config, device_tensor, member, region, run
from tests.derived_topology import derived_topology

BIG_SLOTS = {"slot_size": 64 * 1024, "n_slots": 8}


@pytest.fixture(scope="module")
def full_mesh(tmp_path_factory):
    return load_topology(derived_topology(tmp_path_factory.mktemp("topology"), "default",
                                          [("shape: ring", "shape: full_mesh")], "full_mesh.yaml"))


def all_reduce_time(topology, algorithm: str, p: int, count: int, **cfg) -> int:
    session = Session(topology)
    tensors = [device_tensor(session, r, np.ones(count), "f32") for r in range(p)]
    return run(session, "all_reduce", [member(r, r, region(t)) for r, t in enumerate(tensors)],
               config(algorithm, **{**BIG_SLOTS, **cfg}))


@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm", "sram"])
@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("chunk_bytes", [1000, 4096, 64 * 1024])
@pytest.mark.quick
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


@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("buffer_kind", ["tcm", "sram"])
@pytest.mark.quick
def test_adr0010_t20_tree_all_reduce_matches_its_closed_form(full_mesh, p, buffer_kind):
    nbytes = 16 * 1024
    costs = Costs(full_mesh, buffer_kind)
    expected = tree_down(costs, p, nbytes, tree_ready(costs, p, nbytes, nbytes // 4))
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


def rooted_time(topology, algorithm: str, kind: str, p: int, count: int, root: int, **cfg) -> int:
    """A broadcast (in place) or reduce (sum into a tensor of the root's) of `count` f32 per rank on SIPs 0..p−1."""
    session = Session(topology)
    tensors = [device_tensor(session, r, np.ones(count), "f32") for r in range(p)]
    result = session.torch.empty(count, dtype="f32", device=f"ahbm:{root}")
    members = [member(r, r, region(t), region(result) if kind == "reduce" and r == root else None)
               for r, t in enumerate(tensors)]
    return run(session, kind, members, config(algorithm, **{**BIG_SLOTS, **cfg}), root=root,
               op="sum" if kind == "reduce" else None)


@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm", "sram"])
@pytest.mark.parametrize("p, root", [(2, 1), (4, 0), (4, 3)])
@pytest.mark.parametrize("nbytes", [1000, 64 * 1024])
def test_adr0010_t40_ring_broadcast_streams_down_a_chain_of_p_minus_1_hops(buffer_kind, p, root, nbytes):
    """t = T_load(c) + (p−1)·(T_x(c) + T_copy(c)) + T_store(c): on default.yaml's ring of SIPs each chain hop
    root+i → root+i+1 is one link, whichever rank is the root."""
    costs = Costs(load_topology("default"), buffer_kind)
    expected = chain_broadcast(costs, p, nbytes)
    assert rooted_time(load_topology("default"), "ring", "broadcast", p, nbytes // 4, root,
                       buffer_kind=buffer_kind) == expected


@pytest.mark.parametrize("buffer_kind", ["tcm", "hbm", "sram"])
@pytest.mark.parametrize("p, root", [(2, 0), (4, 2), (4, 3)])
@pytest.mark.parametrize("nbytes", [1000, 64 * 1024])
def test_adr0010_t41_ring_reduce_adds_along_a_chain_ending_at_the_root(buffer_kind, p, root, nbytes):
    """t = T_load(c) + (p−1)·(T_x(c) + T_copy(c) + T_reduce(c)) + T_store(c)."""
    costs = Costs(load_topology("default"), buffer_kind)
    assert costs.load(nbytes) < costs.message(nbytes)  # every rank's own piece is in TCM before the partial
    expected = chain_reduce(costs, p, nbytes, nbytes // 4)
    assert rooted_time(load_topology("default"), "ring", "reduce", p, nbytes // 4, root,
                       buffer_kind=buffer_kind) == expected


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram"])
@pytest.mark.parametrize("p, root", [(2, 1), (3, 2), (4, 0), (4, 3)])
def test_adr0010_t42_tree_broadcast_and_reduce_run_the_tree_rooted_at_the_root(full_mesh, buffer_kind, p, root):
    """The all-reduce's down flow from the root's load (no store at the root: in place), and its up flow
    ending in the root's store; rotating the ranks changes nothing on a full mesh."""
    nbytes = 16 * 1024
    costs = Costs(full_mesh, buffer_kind)
    assert rooted_time(full_mesh, "tree", "broadcast", p, nbytes // 4, root, buffer_kind=buffer_kind) == \
        tree_down(costs, p, nbytes, costs.load(nbytes), stores=False)
    assert rooted_time(full_mesh, "tree", "reduce", p, nbytes // 4, root, buffer_kind=buffer_kind) == \
        tree_ready(costs, p, nbytes, nbytes // 4) + costs.store(nbytes)


def busbw(kind: str, size: int) -> float:
    """nccl-tests' bus bandwidth of a timing-only ring `kind` of `size` bytes of f16 per rank on default.yaml's
    4 SIPs with the shipped ccl.yaml's IPCQ settings (TCM buffers, 8 × 64 KiB)."""
    topology = load_topology("default")
    p = topology.n_sips
    session = Session(topology, timing_only=True)
    tensors = [session.torch.empty(size // 2, dtype="f16", device=f"ahbm:{r}") for r in range(p)]
    elapsed = run(session, kind, [member(r, r, region(t)) for r, t in enumerate(tensors)],
                  config("ring", buffer_kind="tcm", **BIG_SLOTS), op=None if kind == "broadcast" else "sum",
                  root=0 if kind == "broadcast" else None, timing_only=True)
    factor = {"all_reduce": 2 * (p - 1) / p, "broadcast": 1}[kind]
    return factor * size / (elapsed / 10**12)


def test_adr0010_t43_ring_broadcast_bus_bandwidth_matches_all_reduce_at_64_mib():
    """The chain streams every link at once, so its bus bandwidth (S/t) is within 10% of the ring all-reduce's
    (2(p−1)/p·S/t), and never above the link's."""
    size = 64 << 20
    broadcast, all_reduce = busbw("broadcast", size), busbw("all_reduce", size)
    assert broadcast >= 0.9 * all_reduce
    assert broadcast <= load_topology("default").system.inter_sip.bandwidth_bytes_per_s

"""ADR 0010: the gathers and reduce-scatters of ring and halving-doubling, direct's all-reduce, gather and
scatter, and its all-gather, reduce-scatter and all-to-all between two ranks take their closed forms on an idle
machine, to the picosecond (derived from the topology, never read off a run).

As in `test_algorithms_fidelity.py`: members are PE 0 of each SIP's I/O
cube, each piece is one IPCQ slot (one message), the ring runs on
default.yaml's ring of four SIPs, and halving-doubling and direct on the same
machine with a full mesh of links. direct's all-gather, reduce-scatter and
all-to-all beyond two ranks, where every member's pieces queue on its TCM
port and HBM behind its own loads, posted stores and the messages landing
in its slots, are pinned in `test_direct_closed_forms.py`.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.session import Session
from kernbench.topology import load_topology
from tests.ccl.closed_forms import (Costs, direct_all_reduce, direct_gather, direct_pair, direct_scatter,
                                    halving_doubling_reduce_scatter, halving_doubling_step, ring_all_gather,
                                    ring_reduce_scatter)
from tests.ccl.harness import config, device_tensor, member, region, run
from tests.ccl.test_algorithms_fidelity import BIG_SLOTS, full_mesh  # noqa: F401  (a fixture)


def collective_time(topology, algorithm: str, kind: str, p: int, in_count: int, out_count: int,
                    buffer_kind: str, **request) -> int:
    """`kind` over SIPs 0..p−1, each member reading `in_count` f32 and writing `out_count`."""
    session = Session(topology)
    inputs = [device_tensor(session, r, np.ones(in_count), "f32") for r in range(p)]
    outputs = [session.torch.empty(out_count, dtype="f32", device=f"ahbm:{r}") for r in range(p)]
    return run(session, kind, [member(r, r, region(i), region(o)) for r, (i, o) in enumerate(zip(inputs, outputs))],
               config(algorithm, buffer_kind=buffer_kind, **BIG_SLOTS), **request)


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("chunk_bytes", [1000, 64 * 1024])
def test_adr0010_t57_ring_reduce_scatter_and_all_gather_take_p_minus_1_steps_of_their_closed_form(
        buffer_kind, p, chunk_bytes):
    """reduce_scatter: T_load(c) + (p−1)·(T_x(c) + T_copy(c) + T_reduce(c)) + T_store(c);
    all_gather: T_load(c) + (p−1)·(T_x(c) + T_copy(c)) + T_store(c); c = one rank's chunk."""
    topology = load_topology("default")
    costs = Costs(topology, buffer_kind)
    count = chunk_bytes // 4
    assert collective_time(topology, "ring", "reduce_scatter", p, p * count, count, buffer_kind) == \
        ring_reduce_scatter(costs, p, chunk_bytes, count)
    assert collective_time(topology, "ring", "all_gather", p, count, p * count, buffer_kind) == \
        ring_all_gather(costs, p, chunk_bytes)


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("p", [2, 4])
def test_adr0010_t58_halving_doubling_all_gather_doubles_one_message_per_step(full_mesh, buffer_kind, p):  # noqa: F811
    """Σ_{i<log2 p} [T_load + T_x + T_copy + T_store](c·2^i): step i trades the 2^i chunks gathered so far."""
    chunk = 4096
    costs = Costs(full_mesh, buffer_kind)
    expected = sum(halving_doubling_step(costs, chunk << step) for step in range(p.bit_length() - 1))
    assert collective_time(full_mesh, "halving_doubling", "all_gather", p, chunk // 4, p * chunk // 4,
                           buffer_kind) == expected


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("chunk_bytes", [4096, 8192])
def test_adr0010_t60_halving_doubling_reduce_scatter_takes_its_closed_form(full_mesh, buffer_kind, p,  # noqa: F811
                                                                           chunk_bytes):
    """`closed_forms.halving_doubling_reduce_scatter`: p/2 pieces loaded and sent in turn in the first step, the
    partials trading from TCM after it, then one store (two ranks: one halving step)."""
    costs = Costs(full_mesh, buffer_kind)
    count = chunk_bytes // 4
    expected = halving_doubling_reduce_scatter(costs, p, chunk_bytes, count)
    if p == 2:
        assert expected == halving_doubling_step(costs, chunk_bytes, count)
    assert collective_time(full_mesh, "halving_doubling", "reduce_scatter", p, p * count, count,
                           buffer_kind) == expected


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_adr0010_t59_direct_all_reduce_takes_every_piece_in_rank_order(full_mesh, buffer_kind, p):  # noqa: F811
    """max over r of the rank-order fold: a peer q's piece reaches r at T_load + place·c/B_TCM + T_x(c), place
    being r's position in q's sends (next rank first), then T_copy; a reduce from the second piece on; T_store."""
    nbytes = 16 * 1024
    costs = Costs(full_mesh, buffer_kind)
    assert collective_time(full_mesh, "direct", "all_reduce", p, nbytes // 4, nbytes // 4, buffer_kind) == \
        direct_all_reduce(costs, p, nbytes, nbytes // 4)


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter", "all_to_all"])
def test_adr0010_t61_directs_all_gather_reduce_scatter_and_all_to_all_of_two_ranks_take_their_closed_forms(
        full_mesh, buffer_kind, kind):  # noqa: F811
    """`closed_forms.direct_pair`: one message each way, where a member's two loads (or two stores) issued at
    one instant start max(TCM read, HBM occupancy) apart, on its two DMA engines."""
    assert full_mesh.pe.dma.engines >= 2
    nbytes = 16 * 1024
    count = nbytes // 4
    sizes = {"all_gather": (count, 2 * count), "reduce_scatter": (2 * count, count),
             "all_to_all": (2 * count, 2 * count)}[kind]
    request = {"op": "sum" if kind == "reduce_scatter" else None}
    costs = Costs(full_mesh, buffer_kind)
    assert collective_time(full_mesh, "direct", kind, 2, *sizes, buffer_kind, **request) == \
        direct_pair(costs, kind, nbytes, count)


@pytest.mark.parametrize("buffer_kind", ["tcm", "sram", "hbm"])
@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("kind", ["gather", "scatter"])
def test_adr0010_t62_directs_gather_and_scatter_take_their_closed_forms_at_any_root(
        full_mesh, buffer_kind, p, kind):  # noqa: F811
    """`closed_forms.direct_gather` / `direct_scatter`: ADR 0003's law applied to the root's channels in its
    schedule's order (a posted store after the program's next transfer at the same instant), for the first and
    the last rank as root."""
    nbytes = 16 * 1024
    count = nbytes // 4
    closed_form = {"gather": direct_gather, "scatter": direct_scatter}[kind]
    sizes = (count, p * count) if kind == "gather" else (p * count, count)
    for root in sorted({0, p - 1}):
        costs = Costs(full_mesh, buffer_kind)
        assert collective_time(full_mesh, "direct", kind, p, *sizes, buffer_kind, op=None, root=root) == \
            closed_form(costs, p, nbytes, root, buffer_kind), root

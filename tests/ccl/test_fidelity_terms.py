"""ADR 0010 T50-T56, "Fidelity": the model terms real links and runtimes have, channels, the tuner, and the
4 x H200 machine held against NCCL's measurement.

Closed forms come from the topology in each test (tests/ccl/closed_forms.py), never from a run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kernbench.ccl.install import CclConfigError, SHIPPED_CCL_PATH, load_ccl_config, with_overrides
from kernbench.ccl.tuner import SHAPES
from kernbench.session import Session
from kernbench.topology import load_topology
from kernbench.topology.loader import resolve_topology_path
from tests.ccl.closed_forms import PS_PER_S, Costs, chain_broadcast
from tests.ccl.harness import config, device_tensor, member, region, run
from tests.ccl.test_distributed import ccl, restore_current_ccl  # noqa: F401 (autouse)

ANCHOR = Path(__file__).resolve().parents[2] / "benchmarks" / "anchors" / "nccl_allreduce_h200x4_nv18.json"
BIG_SLOTS = {"slot_size": 64 * 1024, "n_slots": 8}


def default_with(tmp_path, *, inter_sip: str = "", ipcq: str = "", name: str = "terms.yaml"):
    """default.yaml with keys added to its inter_sip and ipcq mappings."""
    text = resolve_topology_path("default").read_text()
    text = text.replace("latency_ns: 500}", f"latency_ns: 500{inter_sip}}}", 1)
    text = text.replace("message_overhead_ns: 40}", f"message_overhead_ns: 40{ipcq}}}", 1)
    path = tmp_path / name
    path.write_text(text)
    return load_topology(path)


def broadcast_time(topology, p: int, count: int) -> int:
    session = Session(topology)
    tensors = [device_tensor(session, r, np.ones(count), "f32") for r in range(p)]
    members = [member(r, r, region(t)) for r, t in enumerate(tensors)]
    return run(session, "broadcast", members, config("ring", **BIG_SLOTS, buffer_kind="tcm"), root=0, op=None)


@pytest.mark.parametrize("nbytes", [1000, 64 * 1024])
def test_adr0010_t50_payload_efficiency_engine_rate_and_launch_latency_enter_the_closed_form(tmp_path, nbytes):
    """With a link carrying payload at half its raw rate, a PE's IPCQ engine at 20 GB/s and a 3 us launch, the
    chain broadcast's closed form holds with B = raw x efficiency, the engine a hop of every message, plus the
    launch once; without them (default.yaml) the same form gives the old time, to the picosecond."""
    plain = load_topology("default")
    costs = Costs(plain, "tcm")
    assert broadcast_time(plain, 4, nbytes // 4) == chain_broadcast(costs, 4, nbytes)
    termed = default_with(tmp_path, inter_sip=", payload_efficiency: 0.5",
                          ipcq=", engine_bandwidth_gb_per_s: 20, launch_latency_ns: 3000")
    assert termed.system.inter_sip.payload_bytes_per_s == plain.system.inter_sip.bandwidth_bytes_per_s // 2
    termed_costs = Costs(termed, "tcm")
    assert termed_costs.launch == 3_000_000 and termed_costs.engine
    assert broadcast_time(termed, 4, nbytes // 4) == termed_costs.launch + chain_broadcast(termed_costs, 4, nbytes)


def test_adr0010_t51_bad_model_terms_are_one_error_naming_the_key(tmp_path):
    from kernbench.topology.errors import TopologyError

    for inter_sip, needle in ((", payload_efficiency: 1.5", "payload_efficiency: found 1.5; expected a number "
                               "above 0 and at most 1"),
                              (", payload_efficiency: 0", "payload_efficiency: found 0;")):
        with pytest.raises(TopologyError, match=needle):
            default_with(tmp_path, inter_sip=inter_sip)
    with pytest.raises(TopologyError, match="engine_bandwidth_gb_per_s: found -1"):
        default_with(tmp_path, ipcq=", engine_bandwidth_gb_per_s: -1")


def all_reduce(topology, p: int, count: int, cfg: dict, *, timing_only: bool = False):
    """A ring-per-SIP all-reduce of `count` f32 per rank (rank r holds r + 1); (time ps, rank 0's result)."""
    session = Session(topology, timing_only=timing_only)
    tensors = [device_tensor(session, r, np.full(count, r + 1.0), "f32") if not timing_only else
               session.torch.empty(count, dtype="f32", device=f"ahbm:{r}") for r in range(p)]
    members = [member(r, r, region(t)) for r, t in enumerate(tensors)]
    took = run(session, "all_reduce", members, cfg, timing_only=timing_only)
    values = None if timing_only else tensors[0]._allocation.storage.typed(np.float32).copy()
    return took, values


@pytest.mark.parametrize("channels", [2, 3, 5])
def test_adr0010_t52_a_collective_on_several_channels_gives_the_same_numbers(channels):
    """Each channel (a slice of every member's data, on PEs of its own) runs the algorithm; the slices cover
    the data, uneven ones included."""
    for algorithm in ("ring", "tree", "direct"):
        _, values = all_reduce(load_topology("default"), 4, 1001, config(algorithm, **BIG_SLOTS, channels=channels))
        assert np.array_equal(values, np.full(1001, 10.0, np.float32)), algorithm


def test_adr0010_t53_multi_channel_ring_fills_the_link_and_beats_one_channel_on_small_sizes():
    """On default.yaml (ring of 100 GB/s links, a PE's queue one message at a time): at 64 MiB per rank four
    channels reach >= 90% of the link in bus bandwidth, and are no slower than one; at 256 KiB, where the
    closed form is p−1 steps of a chunk's load, message, copy, reduce and store, splitting the chunk over c
    PEs shortens every term but the link's share, which is the same bytes on the same link."""
    topology = load_topology("default")
    link = topology.system.inter_sip.payload_bytes_per_s
    p = 4
    big = 64 << 20
    one, _ = all_reduce(topology, p, big // 4, config("ring", **BIG_SLOTS), timing_only=True)
    four, _ = all_reduce(topology, p, big // 4, config("ring", **BIG_SLOTS, channels=4), timing_only=True)
    busbw = 2 * (p - 1) / p * big / (four / PS_PER_S)
    assert busbw >= 0.9 * link and four <= one
    small = 256 << 10
    one, _ = all_reduce(topology, p, small // 4, config("ring", **BIG_SLOTS), timing_only=True)
    four, _ = all_reduce(topology, p, small // 4, config("ring", **BIG_SLOTS, channels=4), timing_only=True)
    wire = math.ceil(2 * (p - 1) / p * small * PS_PER_S / link)
    assert wire < four < one


def tuner_prediction(topology, algorithm: str, kind: str, p: int, nbytes: int, channels: int) -> float:
    """ADR 0010's tuner model, from the topology: steps·(α + s/r_pe) + wire·S/min(c·r_pe, r_link), members on
    PE 0 of cube 0 (the I/O cube) of neighbouring SIPs of default.yaml's ring."""
    ipcq, link = topology.ipcq, topology.system.inter_sip
    alpha = (topology.pe.tcm.latency_ps + link.latency_ps + topology.pe.tcm.latency_ps
             + ipcq.message_overhead_ps) / PS_PER_S
    pe_rate = topology.pe.tcm.bandwidth_bytes_per_s
    piece = min(ipcq.max_slot_bytes, max(1, nbytes // (p * channels)))
    steps, wire = SHAPES[kind][algorithm](p)
    return steps * (alpha + piece / pe_rate) + wire * nbytes / min(channels * pe_rate, link.payload_bytes_per_s)


def _all_reduce_row(topology, world: int, nbytes: int, algorithm: str = "auto", **defaults) -> dict:
    """The report row of one timing-only f16 all-reduce of `nbytes` per rank over `world` SIPs of `topology`."""
    session = Session(topology, ccl=ccl(algorithm, world_size=world, **defaults), timing_only=True)

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")

        def worker(rank):
            torch.ahbm.set_device(rank)
            torch.distributed.all_reduce(torch.empty(nbytes // 2, dtype=torch.float16))
            # As a benchmark does: ranks still running when the call starts let a ring run one rank for all
            # (adr/0010, "Symmetric collectives"), to the same picosecond (T93), and the test in a fraction.
            torch.ahbm.synchronize()

        torch.multiprocessing.spawn(worker, nprocs=world)

    session.run(bench, session.torch)
    (row,) = session.ctx.collectives
    return row


@pytest.mark.parametrize("nbytes", [64, 64 << 10, 16 << 20])
def test_adr0010_t54_auto_runs_what_the_documented_model_ranks_cheapest_and_the_report_says_so(nbytes):
    """The shipped ccl.yaml says `algorithm: auto` among ring, tree and hierarchical: the run report names the
    algorithm the model (computed here from the topology) ranks first, marked (auto), with the channel rule's
    count. One rank per SIP: hierarchical does not run there, so only ring and tree are ranked."""
    topology = load_topology("default")
    p, shipped = 4, load_ccl_config(SHIPPED_CCL_PATH)
    defaults = shipped["defaults"]
    assert defaults["candidates"] == ["ring", "tree", "hierarchical"]
    channels = max(1, min(nbytes // (p * defaults["channel_min_kib"] * 1024), defaults["max_channels"],
                          topology.pes_per_sip))
    predicted = {name: tuner_prediction(topology, name, "all_reduce", p, nbytes, channels)
                 for name in ("ring", "tree")}
    expected = min(predicted, key=predicted.get)
    record = _all_reduce_row(topology, p, nbytes)
    assert (record["algorithm"], record["configured_algorithm"], record["channels"]) == (expected, "auto", channels)


def test_adr0010_t55_auto_and_its_candidates_are_checked_in_the_file(tmp_path):
    shipped = load_ccl_config(SHIPPED_CCL_PATH)
    with pytest.raises(CclConfigError, match="defaults.candidates: found 'bus', not an entry; expected a non-empty "
                                             "list of entries of `algorithms`"):
        with_overrides(shipped, {"candidates": ["ring", "bus"]}, "test")
    path = tmp_path / "ccl.yaml"
    path.write_text("algorithms:\n  auto: {module: kernbench.ccl.algorithms.ring}\n")
    with pytest.raises(CclConfigError, match="algorithms.auto: 'auto' is reserved"):
        load_ccl_config(path)


def test_adr0010_t56_the_h200x4_machine_predicts_nccls_all_reduce_within_15_percent_at_8_and_32_mib():
    """benchmarks/fidelity_nccl.py's method at two of the anchor's sizes: topology/h200x4.yaml with the shipped
    ccl.yaml against NCCL's time measured on 4 x H200 (the benchmark prints every size and the summary)."""
    from benchmarks.fidelity_nccl import simulate

    measured = {point["bytes"]: point["time_us"] for point in json.loads(ANCHOR.read_text())}
    for nbytes in (8 << 20, 32 << 20):
        record, ran = simulate(nbytes)
        simulated_ps = record["time_ps"]
        assert ran.startswith("ring x"), ran
        assert abs(simulated_ps / 1e6 - measured[nbytes]) <= 0.15 * measured[nbytes], (nbytes, simulated_ps)


@pytest.mark.parametrize("collective", ["all_gather", "reduce_scatter", "broadcast"])
def test_adr0010_t71_the_h200x4_machine_predicts_held_out_collectives_within_15_percent_at_32_mib(collective):
    """`fidelity_nccl.py --held-out` at one size: collectives no parameter was set from, measured on 4 x H100
    with the same NVLink fabric (benchmarks/anchors/README.md), against the unchanged h200x4.yaml and ccl.yaml."""
    from benchmarks.fidelity_nccl import HELD_OUT, simulate

    nbytes = 32 << 20
    [measured] = [point["time_us"] for point in json.loads(HELD_OUT.read_text())["rows"]
                  if point["collective"] == collective and point["bytes"] == nbytes]
    record, ran = simulate(nbytes, collective)
    simulated_ps = record["time_ps"]
    assert ran.startswith("ring x"), ran
    assert abs(simulated_ps / 1e6 - measured) <= 0.15 * measured, (collective, simulated_ps, measured)


@pytest.mark.parametrize("world, wire", [(3, 2), (4, 2), (5, 3), (8, 3)])
def test_adr0010_t97_the_tree_all_reduce_sends_the_heaps_port_load_through_a_switch(world, wire):
    """Each rank of the heap-ordered tree sends S to its parent and S to each child through its one switch port:
    the busiest sends 2S up to 4 ranks, 3S from 5 (a rank with a parent and two children). The tuner's wire factor
    says so, and at 32 MiB the simulated time is that many S over the port's rate, plus the pipeline's fill."""
    nbytes = 32 << 20
    link = load_topology("large").system.inter_sip.payload_bytes_per_s
    assert SHAPES["all_reduce"]["tree"](world)[1] == wire
    row = _all_reduce_row("large", world, nbytes, "tree", channels=4)
    assert 1.0 <= row["time_ps"] / (wire * nbytes * PS_PER_S / link) <= 1.15


@pytest.mark.parametrize("world, nbytes", [(world, nbytes) for world in (5, 8)
                                           for nbytes in (64 << 10, 1 << 20, 32 << 20)]
                         + [(32, 32 << 20)])  # 32 ranks: the tree's 2S wire made it look faster than the ring
def test_adr0010_t97_auto_on_a_switch_runs_within_15_percent_of_the_faster_of_ring_and_tree(world, nbytes):
    auto = _all_reduce_row("large", world, nbytes)
    others = [_all_reduce_row("large", world, nbytes, name, channels=auto["channels"]) for name in ("ring", "tree")]
    assert auto["time_ps"] <= 1.15 * min(row["time_ps"] for row in others)

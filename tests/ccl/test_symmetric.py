"""ADR 0010 "Symmetric collectives": a timing-only ring all-reduce whose ranks are rotations of each other
simulates rank 0 alone and logs the rest as its copies — and gives what the full run gives, to the picosecond,
in every record, every channel's and unit's bookings and the report; where a rank could differ, every rank runs.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.machine.memory import window_base
from kernbench.report.run_report import format_report, run_report
from kernbench.session import Session
from kernbench.sim_engine.op_log import BLOCK, Image, OpLog
from tests.ccl.test_distributed import ccl, restore_current_ccl  # noqa: F401 (autouse)
from tests.derived_topology import derived_topology


def all_reduce(topology, world: int, elements: int, symmetric: bool, *, timing_only: bool = True,
               algorithm: str = "ring", home=None, overlapped: bool = False, kind: str = "all_reduce",
               warm: int | None = None, **defaults) -> Session:
    """One f16 all-reduce of `elements` per rank over ranks 0..world-1, a worker per SIP; the finished session.

    `home(torch, rank)`: a placement for that rank's tensor (default: the default placement); `overlapped`:
    a second all-reduce starts while the first (async) one runs; `kind` all_gather or reduce_scatter: that
    collective instead, of `elements` per rank in and world times as many out (in and one world-th out); `warm`:
    every rank first reads a tensor as large, that rank its own and the others a second one, so each rank's units
    are as busy as the others' and, on a topology with an L2, that rank's L2 holds what no other's does."""
    session = Session(topology, ccl=ccl(algorithm, world_size=world, symmetric=symmetric, **defaults),
                      timing_only=timing_only)
    torch = session.torch

    def worker(rank):
        torch.ahbm.set_device(rank)
        dist = torch.distributed
        dist.init_process_group()
        placement = {} if home is None else {"dp": home(torch, rank)}
        x = torch.ones(elements, dtype=torch.float16, **placement)
        if warm is not None:
            other = torch.ones(elements, dtype=torch.float16, **placement)
            (x if rank == warm else other).sum()
        if kind == "all_gather":
            dist.all_gather_into_tensor(torch.empty(world * elements, dtype=torch.float16, **placement), x)
        elif kind == "reduce_scatter":
            dist.reduce_scatter_tensor(torch.empty(elements // world, dtype=torch.float16, **placement), x)
        elif overlapped:
            first = dist.all_reduce(torch.ones(elements, dtype=torch.float16), async_op=True)
            dist.all_reduce(x)
            first.wait()
        else:
            dist.all_reduce(x)
        torch.ahbm.synchronize()

    session.run(lambda torch: torch.multiprocessing.spawn(worker, nprocs=world), torch)
    return session


def outcome(session: Session) -> dict:
    """Everything a run leaves that a reader sees, flow ids aside (a copy's ids are fresh): with them, whether every
    flow id names exactly one ipcq_send and one ipcq_recv. One pass over the log."""
    machine = session.ctx.machine
    keys, flows = [], collections.defaultdict(list)
    for row in machine.oplog.rows():  # records as stored: (kind, ..., end, args pairs), no OpRecord or dict each
        fields, pairs = row[:9], row[9] or ()
        if row[0] in ("ipcq_send", "ipcq_recv"):
            flows[dict(pairs)["flow_id"]].append(row[0])
        keys.append((*fields, tuple(sorted(pair for pair in pairs if pair[0] != "flow_id"))))
    report = run_report(session.ctx)
    for row in report["collectives"]:
        row.pop("symmetric")
    return {"now": session.ctx.engine.now, "records": collections.Counter(keys), "report": report,
            "flows_pair": all(sorted(found) == ["ipcq_recv", "ipcq_send"] for found in flows.values()),
            "channels": {name: (c.busy_ps, c.ops, c.bytes_moved, c.free_at) for name, c in machine.channels.items()},
            "units": {(pe.sip, pe.cube, pe.pe): (pe.vector.busy_ps, pe.vector.ops, pe.vector.free_at,
                                                  pe.matrix.busy_ps) for pe in machine.pes()},
            "l2": [(tags.held(window_base(sip)), tags.hits, tags.misses) for sip in range(machine.topology.n_sips)
                   if (tags := machine.l2_tags(sip)) is not None]}


def assert_same_as_full(topology, world: int, elements: int, **defaults) -> None:
    full = all_reduce(topology, world, elements, False, **defaults)
    symmetric = all_reduce(topology, world, elements, True, **defaults)
    assert [row["symmetric"] for row in full.ctx.collectives] == [False]
    assert [row["symmetric"] for row in symmetric.ctx.collectives] == [True]
    symmetric_outcome = outcome(symmetric)
    assert symmetric_outcome == outcome(full) and symmetric_outcome["flows_pair"]


MIB = 1 << 19  # f16 elements in a MiB


def over_two_cubes(torch, rank):
    """Every rank's tensor split over cubes 0 and 1: where the data is, not an address interleave's stand-in."""
    return torch.DPPolicy(cube="row_wise", pe="row_wise", num_cubes=2, num_pes=2)


def on_one_cube(torch, rank):
    """Every rank's tensor whole on cube 0, PE 0, as a topology whose default rule interleaves would not put it."""
    return torch.DPPolicy(cube="row_wise", pe="row_wise", num_cubes=1, num_pes=1)


@pytest.mark.parametrize("topology, world, elements, defaults", [
    ("default", 4, MIB, {}),  # a ring of 4 SIPs, one slab
    ("default", 4, 16 * MIB, {}),  # several slabs
    ("default", 4, 3 * MIB, {"buffer_kind": "hbm"}),
    ("default", 4, MIB, {"buffer_kind": "sram", "backpressure": "poll"}),
    ("default", 4, MIB, {"n_slots": 4, "slot_size": 4096}),  # credits run out: senders wait
    ("default", 2, MIB, {}),  # the queue to rank 1 is the queue from rank 1
    ("default", 4, 4 * MIB, {"channels": 4}),  # four rings on four PEs of each SIP
    ("large", 32, MIB, {}),  # behind a switch
    ("large", 8, 4 * MIB, {}),  # 8 of the switch's 32 SIPs
    ("h200x4", 4, 8 * MIB, {"slot_size": 16384, "home": on_one_cube}),  # IPCQ engines with a rate of their own
    ("h200x4", 4, 8 * MIB, {"slot_size": 16384}),  # the interleaved default: chunks spread over every cube
])
def test_adr0010_t93_a_symmetric_all_reduce_leaves_what_the_full_run_leaves(topology, world, elements, defaults):
    assert_same_as_full(topology, world, elements, **defaults)


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("topology, world, elements, defaults", [
    ("default", 4, 4 * MIB, {}), ("large", 8, MIB, {"buffer_kind": "sram"}), ("default", 2, MIB, {"n_slots": 2}),
    ("large", 8, 8 * MIB, {"channels": 3}),  # a channel's output (input) is a strided run per rank
    ("h200x4", 4, 4 * MIB + 12, {"slot_size": 16384}),  # interleaved, chunks not a multiple of the cubes
])
def test_adr0010_t93_symmetric_ring_all_gather_and_reduce_scatter_leave_what_the_full_run_leaves(
        kind, topology, world, elements, defaults):
    assert_same_as_full(topology, world, elements, kind=kind, **defaults)


def test_adr0010_t93_the_report_marks_a_symmetric_collective():
    text = format_report(run_report(all_reduce("large", 8, MIB, True).ctx))
    assert "ring*" in text and "* rank 0 simulated, the others logged as its rotations" in text
    assert "ring*" not in format_report(run_report(all_reduce("large", 8, MIB, False).ctx))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=st.integers(2, 6), per_rank=st.integers(1, 40_000), n_slots=st.sampled_from([2, 4, 8]),
       slot_size=st.sampled_from([1024, 4096, 65536]), buffer_kind=st.sampled_from(["tcm", "hbm", "sram"]),
       backpressure=st.sampled_from(["sleep", "poll"]))
def test_adr0010_t94_symmetric_equals_full_for_any_sizes_slots_and_buffers(world, per_rank, n_slots, slot_size,
                                                                          buffer_kind, backpressure):
    assert_same_as_full("large", world, world * per_rank, n_slots=n_slots, slot_size=slot_size,
                        buffer_kind=buffer_kind, backpressure=backpressure)


@pytest.mark.parametrize("case, topology, world, elements, options", [
    ("values are computed", "default", 4, MIB, {"timing_only": False}),
    ("chunks of unequal sizes", "default", 4, MIB + 1, {}),
    ("ccl.yaml says symmetric: false", "default", 4, MIB, {}),
    ("a schedule not declared @rotates", "default", 4, MIB, {"algorithm": "tree"}),
    ("3 of a ring of 4 SIPs: routes do not rotate", "default", 3, 3 * MIB, {}),
    # A ring's step-s chunk sits at a rank-dependent position, so on several cubes it is on a rank-dependent cube.
    ("one channel's region over several cubes of a DPPolicy", "default", 4, MIB, {"home": over_two_cubes}),
])
def test_adr0010_t95_every_rank_runs_where_ranks_could_differ(case, topology, world, elements, options):
    symmetric = case != "ccl.yaml says symmetric: false"
    session = all_reduce(topology, world, elements, symmetric, **options)
    assert [row["symmetric"] for row in session.ctx.collectives] == [False], case


def test_adr0010_t95_collectives_in_flight_together_run_every_rank_to_the_same_picoseconds():
    full = all_reduce("default", 4, MIB, False, overlapped=True)
    symmetric = all_reduce("default", 4, MIB, True, overlapped=True)
    assert [row["symmetric"] for row in symmetric.ctx.collectives] == [False, False]
    assert outcome(symmetric) == outcome(full)


def test_adr0010_t95_a_rank_with_data_on_another_cube_runs_every_rank():
    from kernbench.policy import DPPolicy

    def elsewhere(torch, rank):  # rank 1's tensor spread over two cubes, the others' on one
        spread = 2 if rank == 1 else 1
        return DPPolicy(cube="row_wise", pe="row_wise", num_cubes=spread, num_pes=spread)

    session = all_reduce("default", 4, MIB, True, home=elsewhere)
    assert [row["symmetric"] for row in session.ctx.collectives] == [False]


def test_adr0010_t120_a_collective_reads_around_the_l2_so_a_rank_whose_l2_differs_still_rotates(tmp_path):
    """A collective's loads cross the L2 but are neither served by it nor held: a rank whose L2 holds what no other's
    does (it read its own tensor first, the others another) runs rank 0's loop, and every L2 is left as the full
    run leaves it, in order."""
    noc = "  noc: {hop_latency_ns: 10, link_bandwidth_gb_per_s: 1024}"
    with_l2 = derived_topology(tmp_path, "large", [(noc, noc + "\n  l2: {capacity_kib: 1024, bandwidth_gb_per_s: "
                                                          "2000, latency_ns: 100}")], "large_l2.yaml")
    full = all_reduce(with_l2, 4, MIB, False, warm=1)
    held = outcome(full)["l2"]
    assert held[1][0] != held[0][0] == held[2][0] == held[3][0], "each L2 holds its rank's read, none the collective's"
    assert_same_as_full(with_l2, 4, MIB, warm=1)


def test_adr0010_t96_op_log_copies_read_as_renamed_records():
    log = OpLog()
    log.append("ccl_launch", "sip0", "ccl", "x", None, 0, 0, 0, 5)
    first = log.seal()
    for k in range(3):
        log.append_pairs("ipcq_send", "sip0", "cube0.pe0.ipcq", "x", 0, 64, 0, 10 * k, 10 * k + 7,
                         (("flow_id", 5 + k), ("to", "sip1.cube0.pe0")))
        log.append("dma", "sip1", "cube0.pe0.dma", "x", 1, 32, 0, 10 * k, 10 * k + 3, {"src": "sip1.cube0.hbm"})
    log.seal()
    rename = {"sip0": "sip1", "sip1": "sip2", "sip2": "sip0"}

    def renamed(text):
        return text.replace("sip0", "@0").replace("sip1", "@1").replace("sip2", "@2").replace(
            "@0", rename["sip0"]).replace("@1", rename["sip1"]).replace("@2", rename["sip2"])

    originals = list(log)
    log.replicate(first, [Image(renamed, 1, 3, 100)])
    records = list(log)
    assert len(records) == 13 and records[:7] == originals
    copies = records[7:]
    assert [(r.device, r.program, r.args) for r in copies[:2]] == [
        ("sip1", 1, {"flow_id": 105, "to": "sip2.cube0.pe0"}), ("sip2", 2, {"src": "sip2.cube0.hbm"})]
    assert [(r.start, r.end, r.nbytes) for r in copies] == [(r.start, r.end, r.nbytes) for r in records[1:7]]
    assert log.device_spans() == {"sip0": (0, 27, 4), "sip1": (0, 27, 6), "sip2": (0, 23, 3)}
    with pytest.raises(Exception, match="sealed first"):
        log.append("dma", "sip0", "u", "x", 0, 1, 0, 0, 1)
        log.replicate(first, [])


def test_adr0010_t96_copies_hold_no_column_per_record():
    log = OpLog()
    first = log.seal()
    for k in range(BLOCK):
        log.append_pairs("dma", "sip0", "cube0.pe0.dma", "x", 0, 64, 0, k, k + 1, (("src", "sip0.cube0.hbm"),))
    log.seal()
    log.replicate(first, [Image(lambda text, s=s: text.replace("sip0", f"sip{s}"), s, 64, 0) for s in range(1, 64)])
    copies = log._blocks[1:]
    assert len(copies) == 63 and all(not any(isinstance(getattr(copy, slot), np.ndarray) and len(getattr(copy, slot))
                                             == BLOCK for slot in copy.__slots__) for copy in copies)
    spans = log.device_spans()
    assert len(spans) == 64 and spans["sip63"] == (0, BLOCK, BLOCK)

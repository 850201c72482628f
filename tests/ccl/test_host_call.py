"""The host's cost of a torch.distributed call: spent on the calling worker's timeline before the call is enqueued,
a base and a part per GPU of the job, and the record's time as a host loop measures it (adr/0010, "Host cost of a
call")."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config, with_overrides
from kernbench.session import Session
from kernbench.topology import load_topology
from kernbench.topology.loader import resolve_topology_path

CALLS = 10
SMALL, LARGE = 8 << 10, 16 << 20


def _h200(tmp_path, gpus: int):
    text = resolve_topology_path("h200x4").read_text().replace("sips: {count: 4}", f"sips: {{count: {gpus}}}")
    path = tmp_path / f"h200x{gpus}.yaml"
    path.write_text(text)
    return load_topology(path)


def _on_ranks(topology, gpus: int, worker, ccl=None, timing_only: bool = True):
    """`worker(torch, dist, rank)` on `gpus` spawned ranks of a process group; the session."""
    session = Session(topology, ccl=ccl, timing_only=timing_only)

    def bench(torch):
        torch.distributed.init_process_group(backend="ahbm")
        torch.multiprocessing.spawn(lambda rank: worker(torch, torch.distributed, rank), nprocs=gpus)
        torch.distributed.destroy_process_group()

    session.run(bench, session.torch)
    return session


def _loop(topology, gpus: int, nbytes: int, call: str, calls: int = CALLS) -> tuple[float, list[dict]]:
    """`calls` calls back to back on every rank, timed as measure_nccl.py times its host loop (CUDA events around
    the loop, over the calls): (ps per call on rank 0, the records)."""
    spans = {}

    def worker(torch, dist, rank):
        torch.ahbm.set_device(rank)
        x = torch.empty(nbytes // 2, dtype=torch.float16)
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        torch.ahbm.synchronize()
        works, received = [], torch.empty_like(x)
        start.record()
        for _ in range(calls):
            if call == "all_reduce":
                dist.all_reduce(x)
            elif call == "batch" and rank < 2:
                peer = 1 - rank
                works += dist.batch_isend_irecv([dist.P2POp(dist.isend, x, peer),
                                                 dist.P2POp(dist.irecv, received, peer)])
            elif call == "send" and rank < 2:
                (dist.send if rank == 0 else dist.recv)(x, 1 - rank)
        for work in works:
            work.wait()
        end.record()
        torch.ahbm.synchronize()
        spans[rank] = start.elapsed_time(end) * 1e9 / calls

    session = _on_ranks(topology, gpus, worker)
    return spans[0], session.ctx.collectives


@pytest.mark.parametrize("gpus", [2, 4])
def test_adr0010_t103_a_loop_of_small_calls_is_bound_by_the_hosts_cost_of_a_call_grown_per_gpu_of_the_job(tmp_path, gpus):
    topology = _h200(tmp_path, gpus)
    system = topology.system
    host = round(system.collective_call_ps * (1 + system.host_growth_per_gpu * (gpus - 1)))
    assert system.host_call_ps(system.collective_call_ps, gpus) == host > 0
    per_call, records = _loop(topology, gpus, SMALL, "all_reduce")
    assert all(r["host_ps"] == host and r["device_ps"] == r["end_ps"] - r["start_ps"] < host for r in records)
    assert all(r["time_ps"] == host for r in records)  # a host loop's time: the host's, the device idling
    assert host <= per_call <= host * 1.05
    # A send between two of the job's GPUs costs its host as much as the job's collective (the cost follows the
    # job); a batch of a send and a receive is issued once, as NCCL's group call is.
    send, _ = _loop(topology, gpus, SMALL, "send")
    batch, _ = _loop(topology, gpus, SMALL, "batch")
    assert host <= send <= host * 1.05 and host <= batch <= host * 1.05


def test_adr0010_t104_a_large_calls_time_is_its_device_span_which_the_host_hides(tmp_path):
    topology = _h200(tmp_path, 4)
    per_call, records = _loop(topology, 4, LARGE, "all_reduce", calls=3)
    device = records[-1]["device_ps"]
    assert all(r["time_ps"] == r["device_ps"] > r["host_ps"] for r in records)
    # Only the first call's host cost shows, spread over the loop.
    assert device <= per_call <= (device + records[0]["host_ps"] / 3) * 1.01


def test_adr0010_t105_a_machine_without_the_terms_spends_no_host_time_on_a_call():
    per_call, records = _loop(load_topology("default"), 4, SMALL, "all_reduce")
    assert all(r["host_ps"] == 0 and r["time_ps"] == r["device_ps"] for r in records)
    assert per_call == pytest.approx(records[-1]["device_ps"], rel=0.01)


def test_adr0010_t106_a_send_spreads_over_channels_as_a_collective_does(tmp_path):
    topology = _h200(tmp_path, 2)

    def send(ccl=None, values=False):
        got = {}

        def worker(torch, dist, rank):
            torch.ahbm.set_device(rank)
            x = torch.arange(2 << 20, dtype=torch.float32) if rank == 0 else torch.zeros(2 << 20)
            (dist.send if rank == 0 else dist.recv)(x, 1 - rank)
            torch.ahbm.synchronize()
            got[rank] = x.numpy() if values else None

        (record,) = _on_ranks(topology, 2, worker, ccl, timing_only=not values).ctx.collectives
        return record, got

    spread, _ = send()
    one, _ = send(ccl=with_overrides(load_ccl_config(SHIPPED_CCL_PATH), {"algorithm": "direct", "channels": 1, "slot_size": 16384},
                                      "T106"))
    assert spread["channels"] == 16 and one["channels"] == 1
    assert spread["device_ps"] * 6 < one["device_ps"]
    _, got = send(values=True)
    assert (got[1] == np.arange(2 << 20, dtype=np.float32)).all()

"""NCCL's protocols as topology terms, the tuner's choice among them, and one GPU description for any GPU count
(adr/0010, "Protocols")."""

from __future__ import annotations

import dataclasses
import re

import pytest

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.install import SHIPPED_CCL_PATH, CclConfigError, load_ccl_config
from kernbench.ccl.tuner import SHAPES
from kernbench.session import Session
from kernbench.topology import load_topology
from kernbench.topology.errors import TopologyError
from kernbench.topology.loader import resolve_topology_path


def _h200(tmp_path, gpus: int = 4, edit=lambda text: text):
    text = resolve_topology_path("h200x4").read_text().replace("sips: {count: 4}", f"sips: {{count: {gpus}}}")
    path = tmp_path / f"h200x{gpus}.yaml"
    path.write_text(edit(text))
    return load_topology(path)


def _all_reduce(topology, nbytes: int, ccl=None, gpus: int = 4) -> dict:
    session = Session(topology, ccl=ccl, timing_only=True)
    torch = session.torch

    def bench(torch):
        dist = torch.distributed
        dist.init_process_group(backend="ahbm")

        def worker(rank):
            torch.ahbm.set_device(rank)
            dist.all_reduce(torch.empty(nbytes // 2, dtype=torch.float16))
            torch.ahbm.synchronize()

        torch.multiprocessing.spawn(worker, nprocs=gpus)
        dist.destroy_process_group()

    session.run(bench, torch)
    (record,) = session.ctx.collectives
    launches = {r.end - r.start for r in session.ctx.machine.oplog.select(kind="ccl_launch")}
    return {**record, "launches": launches}


def test_adr0010_t98_a_bad_protocol_term_or_name_is_one_line_naming_the_key(tmp_path):
    with pytest.raises(TopologyError, match=r"ipcq.protocols.LL.channel_min_kib"):
        _h200(tmp_path, edit=lambda text: text.replace(" channel_min_kib: 16,", ""))
    with pytest.raises(TopologyError, match=r"ipcq.protocols.LL.slot_kib = 64 KiB is above ipcq.max_slot_kib"):
        _h200(tmp_path, edit=lambda text: text.replace("slot_kib: 4,", "slot_kib: 64,"))
    with pytest.raises(TopologyError, match=r"LL64.*did you mean"):
        _h200(tmp_path, edit=lambda text: text.replace("    LL: {", "    LL64: {"))
    shipped = load_ccl_config(SHIPPED_CCL_PATH)
    with pytest.raises(CclConfigError, match=r"protocol.*LL64.*expected one of: auto, LL, LL128, Simple"):
        load_ccl_config({**shipped, "defaults": {**shipped["defaults"], "protocol": "LL64"}})
    # A protocol the topology does not give: one line naming the key it lacks.
    without = _h200(tmp_path, edit=lambda text: re.sub(r"\n    LL128: \{[^}]*\}", "", text))
    with pytest.raises(Exception, match=r"ipcq.protocols.LL128") as raised:
        _all_reduce(without, 1 << 20, {**shipped, "defaults": {**shipped["defaults"], "protocol": "LL128"}})
    assert "\n" not in str(raised.value).strip()


def test_adr0010_t99_auto_picks_nccls_protocol_by_size_and_pays_its_launch(tmp_path):
    """Small calls run LL (least fixed cost), the largest Simple (full rate), as NCCL picks on NVLink; a named
    protocol is run as named; each pays its own launch latency and its step latency per step of the algorithm
    that ran (ring 2(p - 1), tree 2 log2 p) before any message."""
    topology = load_topology("h200x4")
    small, large = _all_reduce(topology, 64 << 10), _all_reduce(topology, 256 << 20)
    assert small["protocol"] == "LL" and large["protocol"] == "Simple", (small["protocol"], large["protocol"])
    shipped = load_ccl_config(SHIPPED_CCL_PATH)
    forced = _all_reduce(topology, 64 << 10, {**shipped, "defaults": {**shipped["defaults"], "protocol": "Simple"}})
    assert forced["protocol"] == "Simple"
    for row in (small, large, forced):
        spec, (steps, _) = topology.ipcq.protocol(row["protocol"]), SHAPES["all_reduce"][row["algorithm"]](4)
        assert row["launches"] == {spec.launch_latency_ps + steps * spec.step_latency_ps}
    assert forced["device_ps"] > small["device_ps"]  # what auto chose is the faster, as its model said


def test_adr0010_t100_one_gpu_description_serves_every_gpu_count(tmp_path):
    """The H200 files describe one GPU and its links: h200x4 cut to 2 or 8 GPUs is h200x8 but for the count,
    and a 2-GPU all-reduce on the cut file runs (the same terms price it); h100.yaml raised to 4 GPUs has the
    same links and queues."""
    four, eight = load_topology("h200x4"), load_topology("h200x8")
    for gpus in (2, 8):
        cut = _h200(tmp_path, gpus)
        assert cut.system.sip_count == gpus
        assert (cut.sip, cut.cube, cut.pe, cut.ipcq) == (four.sip, four.cube, four.pe, four.ipcq)
        assert dataclasses.replace(cut.system, sip_count=8) == dataclasses.replace(eight.system, sip_count=8)
        assert (cut.sip, cut.cube, cut.pe, cut.ipcq) == (eight.sip, eight.cube, eight.pe, eight.ipcq)
    row = _all_reduce(_h200(tmp_path, 2), 8 << 20, gpus=2)
    assert row["world_size"] == 2 and row["protocol"] in ("LL", "LL128", "Simple")
    # One H100 raised to 4 is 4 H100s behind the same NVLink 4 / NVSwitch fabric, with the same queues.
    text = resolve_topology_path("h100").read_text().replace("sips: {count: 1}", "sips: {count: 4}")
    (tmp_path / "h100x4.yaml").write_text(text)
    h100x4 = load_topology(tmp_path / "h100x4.yaml")
    assert (h100x4.system.inter_sip, h100x4.ipcq) == (four.system.inter_sip, four.ipcq)


TUNER = "tuner_latency_ns: 5000, tuner_efficiency: 0.5"
PROTOCOLS = (", protocols: {"
             "LL: {bandwidth_efficiency: 0.5, message_overhead_ns: 300, launch_latency_ns: 2000, "
             f"step_latency_ns: 400, channel_min_kib: 16, slot_kib: 64, {TUNER}}}, "
             "Simple: {bandwidth_efficiency: 1, message_overhead_ns: 900, launch_latency_ns: 7000, "
             f"step_latency_ns: 900, channel_min_kib: 32, slot_kib: 64, {TUNER}}}}}")


@pytest.mark.parametrize("protocol", ["LL", "Simple"])
@pytest.mark.parametrize("nbytes", [1000, 64 * 1024])
def test_adr0010_t101_a_protocols_terms_enter_the_chain_broadcasts_closed_form(tmp_path, protocol, nbytes):
    """Under a protocol the chain broadcast's closed form holds with the protocol's launch and one step latency
    (the chain streams, as NCCL's tuner counts it), its message overhead per message and its messages on the
    route as bytes / efficiency (the slot takes the payload); default.yaml without protocols keeps the old
    time."""
    import numpy as np

    from tests.ccl.closed_forms import Costs, chain_broadcast
    from tests.ccl.harness import config, device_tensor, member, region, run
    from tests.ccl.test_fidelity_terms import BIG_SLOTS, broadcast_time, default_with

    topology = default_with(tmp_path, ipcq=PROTOCOLS)
    session = Session(topology)
    tensors = [device_tensor(session, r, np.ones(nbytes // 4), "f32") for r in range(4)]
    members = [member(r, r, region(t)) for r, t in enumerate(tensors)]
    took = run(session, "broadcast", members, config("ring", **BIG_SLOTS, buffer_kind="tcm", protocol=protocol),
               root=0, op=None)
    costs = Costs(topology, "tcm", protocol=protocol)
    step = topology.ipcq.protocol(protocol).step_latency_ps
    assert took == costs.launch + step + chain_broadcast(costs, 4, nbytes)  # a chain pays one step's latency
    plain = load_topology("default")
    assert broadcast_time(plain, 4, nbytes // 4) == chain_broadcast(Costs(plain, "tcm"), 4, nbytes)


@pytest.mark.parametrize("protocol", ["LL", "Simple"])
def test_adr0010_t102_a_symmetric_collective_under_a_protocol_takes_the_full_runs_time(protocol):
    """The protocol's overhead and wire bytes are in every queue's settings, rank 0's loop queues too: the
    symmetric shortcut (adr/0010, "Symmetric collectives") keeps the full run's picoseconds."""
    shipped = load_ccl_config(SHIPPED_CCL_PATH)
    topology = load_topology("h200x4")
    rows = [_all_reduce(topology, 1 << 20, {**shipped, "defaults": {**shipped["defaults"], "protocol": protocol,
                                                                       "symmetric": symmetric, "candidates": ["ring"]}})
            for symmetric in (True, False)]
    assert [row["symmetric"] for row in rows] == [True, False]
    assert rows[0]["time_ps"] == rows[1]["time_ps"] and rows[0]["protocol"] == protocol

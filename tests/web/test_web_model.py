"""ADR 0019: what `kernbench web` draws — one element per PE, memory and directed link, painted from a run."""

from __future__ import annotations

import pytest
import yaml

from kernbench.ccl.install import SHIPPED_CCL_PATH
from kernbench.report import run_report
from kernbench.session import Session
from kernbench.topology import load_topology
from kernbench.web import machine_model, page_data
from kernbench.web.machine_model import MAX_SIPS_DRAWN
from kernbench.web.utilization_scale import IDLE, colour, legend


def expected_links(topology, sips: int) -> set[str]:
    """Every directed link among the first `sips` SIPs: NoC, host (each way) and inter-SIP (or via the switch)."""
    names = set()
    for sip in range(sips):
        names |= {link.name for link in topology.noc_links(sip)}
        names |= {topology.host_to_sip_link(sip).name, topology.sip_to_host_link(sip).name}
    shown = {f"sip{sip}" for sip in range(sips)} | {"switch"}
    names |= {link.name for link in topology.all_inter_sip_links()[:sips * 2 if topology.n_sips > sips else None]
              if link.src in shown and link.dst in shown}
    return names


@pytest.mark.parametrize("name", ["default", "single_sip", "large", "h100"])
@pytest.mark.quick
def test_adr0019_t11_the_drawing_has_one_element_per_pe_and_per_directed_link(name):
    topology = load_topology(name)
    model = machine_model(topology)
    sips = min(topology.n_sips, MAX_SIPS_DRAWN)
    assert [pe["name"] for pe in model["pes"]] == [f"sip{a.sip}.cube{a.cube}.pe{a.pe}"
                                                   for sip in range(sips) for a in topology.pe_addresses(sip)]
    names = [link["name"] for link in model["links"]]
    assert len(names) == len(set(names)) and set(names) == expected_links(topology, sips)
    assert [cube["resource"] for cube in model["cubes"]] == [f"sip{sip}.cube{cube}.hbm" for sip in range(sips)
                                                             for cube in range(topology.cubes_per_sip)]
    l2 = [f"sip{sip}.l2" for sip in range(sips)] if topology.sip.l2 else []
    assert sorted(memory["name"] for memory in model["memories"]) == sorted(
        l2 + [f"sip{sip}.cube{cube}.sram" for sip in range(sips) for cube in range(topology.cubes_per_sip)])
    ends = [point for link in model["links"] for point in (link["path"][0], link["path"][-1])]
    assert all(0 <= x <= model["width"] and 0 <= y <= model["height"] for x, y in ends)  # inside the drawing


@pytest.mark.quick
def test_adr0019_t12_a_runs_report_paints_links_and_pes_by_name_and_a_trace_gives_the_timeline():
    topology = load_topology("default")
    report = {"topology": str(topology.source), "total_time_ps": 1000, "devices": {},
              "resources": [{"resource": "sip0->sip1", "kind": "inter_sip", "busy_ps": 250, "bytes": 64,
                             "utilization": 0.25}],
              "pes": [{"pe": "sip1.cube2.pe3", "matrix_busy_ps": 500, "vector_busy_ps": 0, "dma_busy_ps": 100,
                       "tcm_busy_ps": 0, "utilization": 0.5}]}
    trace = {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "sip10"}},
        {"name": "process_name", "ph": "M", "pid": 2, "tid": 0, "args": {"name": "sip2"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "cube0.pe0.dma0"}},
        {"name": "thread_name", "ph": "M", "pid": 2, "tid": 1, "args": {"name": "cube0.pe0.dma0"}},
        {"name": "k", "ph": "X", "pid": 1, "tid": 1, "ts": 0.002, "dur": 0.001},
        {"name": "k", "ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 0.001},
        {"name": "j", "ph": "X", "pid": 2, "tid": 1, "ts": 0.0005, "dur": 0.0005}]}
    data = page_data(topology, report, trace)
    assert data["utilization"]["links"]["sip0->sip1"]["utilization"] == 0.25
    assert data["utilization"]["pes"]["sip1.cube2.pe3"]["utilization"] == 0.5
    timeline = data["timeline"]
    assert [row["name"] for row in timeline["rows"]] == ["sip2 cube0.pe0.dma0", "sip10 cube0.pe0.dma0"]
    assert timeline["rows"][1]["ops"] == [[0, 1000, 0], [2000, 3000, 0]]  # in ps, sorted by start
    assert timeline["labels"] == ["k", "j"] and timeline["end_ps"] == 3000


def _report_of(topology: str, bench, ccl: dict | None = None) -> dict:
    session = Session(topology, ccl=ccl)
    session.run(bench, session.torch)
    return run_report(session.ctx)


def _all_reduce_through_sram(torch):
    """Every rank all-reduces through IPCQ slots in SRAM (ccl below) and reads the sum back over the host link."""
    def rank(r, torch):
        torch.ahbm.set_device(r)
        torch.distributed.init_process_group(backend="ahbm")
        x = torch.ones(1 << 12, dtype=torch.float16)
        torch.distributed.all_reduce(x)
        x.cpu()
    torch.multiprocessing.spawn(rank, args=(torch,), nprocs=torch.ahbm.device_count())


def _add_on_cube0(torch):
    """A vector add on tensors the accelerator topologies place whole on cube 0 (README, placement)."""
    x = torch.ones(1 << 16, dtype=torch.float16)
    y = x + x
    torch.ahbm.synchronize()
    del y


def _drawn(machine: dict) -> dict[str, set[str]]:
    return {"memories": {cube["resource"] for cube in machine["cubes"]} | {m["name"] for m in machine["memories"]},
            "links": {link["name"] for link in machine["links"]}, "pes": {pe["name"] for pe in machine["pes"]}}


@pytest.mark.quick
def test_adr0019_t36_every_resource_a_report_measures_is_painted_on_its_element_with_its_utilization():
    ccl = yaml.safe_load(SHIPPED_CCL_PATH.read_text())
    ccl["defaults"].update(algorithm="ring", buffer_kind="sram", slot_size=16384, symmetric=False)
    runs = {"h200x4": _report_of("h200x4", _all_reduce_through_sram, ccl),  # SRAM, IPCQ engines, NVLink, host
            "h100": _report_of("h100", _add_on_cube0)}  # an L2
    kinds = set()
    for name, report in runs.items():
        data = page_data(load_topology(name), report)
        drawn, paint = _drawn(data["machine"]), data["utilization"]
        pe_rows = {row["pe"]: row for row in report["pes"]}
        for row in report["resources"]:
            kinds.add(row["kind"])
            resource, use = row["resource"], row["utilization"]
            if row["kind"] in ("tcm", "dma", "ipcq_engine"):  # a PE's own: the PE is painted as its busiest unit
                resource, use = resource.rsplit(".", 1)[0], pe_rows[resource.rsplit(".", 1)[0]]["utilization"]
            group = "memories" if row["kind"] in ("hbm", "sram", "l2") else "pes" if resource in pe_rows else "links"
            assert resource in drawn[group], f"{name}: {resource} is not drawn"
            assert paint[group][resource]["fill"] == colour(use) != IDLE
            assert f"busy {100 * use:.1f}%" in paint[group][resource]["tip"]
            if row["kind"] == "ipcq_engine":
                assert f"ipcq engine {100 * row['utilization']:.1f}%" in paint[group][resource]["tip"]
    assert kinds == {"hbm", "sram", "l2", "noc", "inter_sip", "host", "tcm", "dma", "ipcq_engine"}


@pytest.mark.quick
def test_adr0019_t37_a_busy_hbm_stack_is_filled_from_the_scale_and_idle_stacks_are_not_painted():
    topology = load_topology("single_sip")
    report = _report_of("single_sip", _add_on_cube0)
    hbm = {row["resource"]: row["utilization"] for row in report["resources"] if row["kind"] == "hbm"}
    assert list(hbm) == ["sip0.cube0.hbm"] and hbm["sip0.cube0.hbm"] > 0.2
    data = page_data(topology, report)
    cube0 = data["utilization"]["memories"]["sip0.cube0.hbm"]
    assert cube0["fill"] == colour(hbm["sip0.cube0.hbm"]) != IDLE
    assert cube0["tip"] == f"HBM busy {100 * hbm['sip0.cube0.hbm']:.1f}%, moved {report['resources'][0]['bytes']:,} B"
    assert not {"sip0.cube1.hbm", "sip0.cube2.hbm", "sip0.cube3.hbm"} & set(data["utilization"]["memories"])
    assert data["scale"] == legend() and data["scale"]["idle"] == IDLE  # what the page fills the idle ones with

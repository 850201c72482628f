"""ADR 0019: what `kernbench web` draws — one element per PE and per directed link, painted from a run."""

from __future__ import annotations

import pytest

from kernbench.topology import load_topology
from kernbench.web import machine_model, page_data
from kernbench.web.machine_model import MAX_SIPS_DRAWN


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


@pytest.mark.parametrize("name", ["default", "single_sip", "large"])
def test_adr0019_t11_the_drawing_has_one_element_per_pe_and_per_directed_link(name):
    topology = load_topology(name)
    model = machine_model(topology)
    sips = min(topology.n_sips, MAX_SIPS_DRAWN)
    assert [pe["name"] for pe in model["pes"]] == [f"sip{a.sip}.cube{a.cube}.pe{a.pe}"
                                                   for sip in range(sips) for a in topology.pe_addresses(sip)]
    names = [link["name"] for link in model["links"]]
    assert len(names) == len(set(names)) and set(names) == expected_links(topology, sips)
    assert len(model["cubes"]) == sips * topology.cubes_per_sip
    ends = [point for link in model["links"] for point in (link["path"][0], link["path"][-1])]
    assert all(0 <= x <= model["width"] and 0 <= y <= model["height"] for x, y in ends)  # inside the drawing


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

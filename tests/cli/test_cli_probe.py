"""ADR 0019: `kernbench probe SRC DST`: the route, and every simulated time beside its closed form.

Expected values are derived here from the topology's links — the route by
the machine's rules (host link into the I/O cube, XY over the NoC, the
PE's TCM) and the time as Σ latency + ceil(bytes / slowest bandwidth) — not
pasted from a run.
"""

from __future__ import annotations

import json

import pytest

from kernbench.topology import load_topology
from tests.cli import run_kernbench_in_process

PS_PER_S = 10**12


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@pytest.fixture(scope="module")
def host_to_pe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe")
    result = run_kernbench_in_process("probe", "host", "sip1.cube3.pe5", "--bytes", "0,64,3K,1M", "--concurrent", "3",
                                      "--json", cwd=folder)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.quick
def test_adr0019_t6_probe_prints_every_link_crossed_and_times_equal_to_the_closed_form(host_to_pe):
    topology = load_topology("default")
    pe, noc = topology.pe, topology.sip.noc
    expected_route = (["sip1.cube3.pe5.dma0", topology.host_to_sip_link(1).name]
                      + [link.name for link in topology.noc_route(0, 3, sip=1)] + ["sip1.cube3.pe5.tcm"])
    assert [hop["name"] for hop in host_to_pe["route"]] == expected_route
    host = topology.system.host_link
    latency = host.latency_ps + 2 * noc.hop_latency_ps + pe.tcm.latency_ps  # the DMA engine adds none
    slowest = min(host.bandwidth_bytes_per_s, noc.link_bandwidth_bytes_per_s, pe.tcm.bandwidth_bytes_per_s,
                  pe.dma.bandwidth_bytes_per_s)
    assert host_to_pe["latency_ps"] == host_to_pe["predicted_latency_ps"] == latency
    for row in host_to_pe["sizes"]:
        assert row["time_ps"] == row["predicted_ps"] == latency + ceil_div(row["bytes"] * PS_PER_S, slowest)


@pytest.mark.quick
def test_adr0019_t7_probe_contention_makespans_equal_their_closed_form(host_to_pe, tmp_path):
    topology = load_topology("default")
    host = topology.system.host_link
    for row in host_to_pe["contention"]:  # the host link is the slowest hop and carries all three
        occupancy = ceil_div(row["bytes"] * PS_PER_S, host.bandwidth_bytes_per_s)
        assert row["time_ps"] == row["predicted_ps"] == host_to_pe["latency_ps"] + 3 * occupancy
    # A PE driving two engines: transfers alternate between them, each engine slower than the shared hops.
    from kernbench.probe import parse_endpoint, probe

    pe_to_hbm = probe(topology, parse_endpoint("sip0.cube0.pe0", topology), parse_endpoint("sip0.cube3", topology),
                      [1 << 20], [1, 2, 3, 4, 5])
    dma = ceil_div((1 << 20) * PS_PER_S, topology.pe.dma.bandwidth_bytes_per_s)
    shared = ceil_div((1 << 20) * PS_PER_S, topology.cube.hbm.bandwidth_bytes_per_s)  # the slowest shared hop
    engines = topology.pe.dma.engines
    for row in pe_to_hbm.contention:
        q, r = divmod(row["transfers"] - 1, engines)
        start_of_last = max((row["transfers"] - 1) * shared, q * dma + r * shared)
        assert row["time_ps"] == row["predicted_ps"] == pe_to_hbm.latency_ps + dma + start_of_last


def test_adr0019_t8_probe_names_endpoints_it_cannot_use_in_one_line_and_plots(tmp_path, capsys):
    from kernbench.cli import main

    for args, says in ((("sip0.pe1", "host"), "endpoint 'sip0.pe1': expected one of host, sipN, sipN.hbm"),
                       (("host", "host"), "probe host host: a transfer needs a device end"),
                       (("host", "sip0", "--bytes", "1Q"), "--bytes '1Q': '1Q' is not a size")):
        assert main(["probe", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(f"kernbench: error: {says}") and err.count("\n") == 1
    outside = run_kernbench_in_process("probe", "sip0.cube9", "host", cwd=tmp_path)  # and as a user runs it
    assert outside.returncode == 2
    assert outside.stderr == ("kernbench: error: endpoint 'sip0.cube9': cube 9 is not in the machine, which has 4 "
                              "(0 to 3)\n")
    assert main(["probe", "sip0", "sip1.cube1.sram", "--bytes", "1K,1M", "--plot", str(tmp_path / "bw.png")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "bw.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "sip0->sip1" in out and "sip1.cube1.sram" in out


def test_adr0019_t31_a_probe_of_a_read_into_a_pe_on_a_sip_with_an_l2_crosses_the_l2_as_a_dma_does():
    """h100.yaml's SIP has an L2: a PE's read of HBM passes through it (ADR 0008), and the probe lists it and
    times it, alone and with contention; the reverse direction (a write) goes around it."""
    from kernbench.probe import parse_endpoint, probe

    topology = load_topology("h100")
    pe, hbm, l2 = topology.pe, topology.cube.hbm, topology.sip.l2
    read = probe(topology, parse_endpoint("sip0.cube0", topology), parse_endpoint("sip0.cube0.pe0", topology),
                 [1 << 16, 1 << 22], [2])
    assert [hop.kind for hop in read.route] == ["dma", "hbm", "l2", "tcm"]
    latency = hbm.latency_ps + l2.latency_ps + pe.tcm.latency_ps
    slowest = min(pe.dma.bandwidth_bytes_per_s, hbm.bandwidth_bytes_per_s, l2.bandwidth_bytes_per_s,
                  pe.tcm.bandwidth_bytes_per_s)
    assert read.latency_ps == read.predicted_latency_ps == latency
    for row in read.sizes:
        assert row["time_ps"] == row["predicted_ps"] == latency + ceil_div(row["bytes"] * PS_PER_S, slowest)
    assert all(row["time_ps"] == row["predicted_ps"] for row in read.contention)
    write = probe(topology, parse_endpoint("sip0.cube0.pe0", topology), parse_endpoint("sip0.cube0", topology),
                  [1 << 16], [])
    assert [hop.kind for hop in write.route] == ["dma", "tcm", "hbm"]

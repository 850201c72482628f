"""The shipped topologies load, and the model's derived facts follow from the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernbench.topology import DEFAULT_TOPOLOGY_PATH, PeAddress, Topology, load_topology, shipped_topology_names

SHIPPED = shipped_topology_names()


@pytest.mark.quick
def test_adr0002_t1_shipped_names_are_the_documented_machines():
    assert set(SHIPPED) == {"default", "single_sip", "large", "h100", "h200x4", "h200x8"}


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.quick
def test_adr0002_t2_shipped_file_loads_with_counts_derived_from_it(name):
    topology = load_topology(name)
    spec = topology.spec
    mesh, layout = spec["sip"]["cube_mesh"], spec["cube"]["pe_layout"]
    pes_per_cube = len(layout["corners"]) * layout["pe_per_corner"]
    assert topology.n_sips == spec["system"]["sips"]["count"]
    assert topology.cubes_per_sip == mesh["w"] * mesh["h"]
    assert topology.pes_per_cube == pes_per_cube
    assert topology.pes_per_sip == mesh["w"] * mesh["h"] * pes_per_cube
    assert topology.total_pes == spec["system"]["sips"]["count"] * topology.pes_per_sip
    assert topology.hbm_bytes_per_sip == mesh["w"] * mesh["h"] * spec["cube"]["hbm"]["capacity_gib"] * 2**30
    assert len(topology.pe_addresses(0)) == topology.pes_per_sip
    assert topology.dtypes == tuple(spec["pe"]["matrix_unit"]["flops_per_cycle"])


@pytest.mark.quick
def test_adr0002_t3_shipped_files_are_the_machines_the_adr_describes():
    default, single, large = (load_topology(name) for name in ("default", "single_sip", "large"))
    assert (default.n_sips, default.system.inter_sip.shape, default.cubes_per_sip, default.pes_per_cube) == (
        4,
        "ring",
        4,
        8,
    )
    assert single.n_sips == 1
    assert large.n_sips >= 16


@pytest.mark.quick
def test_adr0002_t4_units_are_normalized_to_exact_integers(write_text):
    text = DEFAULT_TOPOLOGY_PATH.read_text().replace(
        "bandwidth_gb_per_s: 2048, latency_ns: 20", "bandwidth_gb_per_s: 819.2, latency_ns: 0.5"
    )
    topology = load_topology(write_text(text))
    spec = topology.spec
    hbm_gb_per_s = spec["cube"]["hbm"]["bandwidth_gb_per_s"]
    assert topology.cube.hbm.bandwidth_bytes_per_s == hbm_gb_per_s * 10**9
    assert topology.sip.noc.hop_latency_ps == spec["sip"]["noc"]["hop_latency_ns"] * 1000
    assert topology.cube.hbm.capacity_bytes == spec["cube"]["hbm"]["capacity_gib"] * 2**30
    assert topology.cube.sram.capacity_bytes == spec["cube"]["sram"]["capacity_kib"] * 2**10
    assert topology.pe.clock_hz == round(spec["pe"]["clock_ghz"] * 10**9)
    assert topology.ipcq.max_slot_bytes == spec["ipcq"]["max_slot_kib"] * 1024
    # Fractions convert exactly, never through a float product.
    assert topology.cube.sram.bandwidth_bytes_per_s == 819_200_000_000
    assert topology.cube.sram.latency_ps == 500


@pytest.mark.quick
def test_adr0002_t5_every_normalized_number_is_an_int():
    """Every number but a share (a link's payload efficiency, an HBM stack's efficiency, the host's growth per GPU:
    exact fractions, written out as floats)."""
    def numbers(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key not in ("payload_efficiency", "efficiency", "host_growth_per_gpu"):
                    yield from numbers(item)
        elif isinstance(value, list):
            for item in value:
                yield from numbers(item)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield value

    found = list(numbers(load_topology().to_json_dict()))
    assert found and all(isinstance(number, int) for number in found)


@pytest.mark.quick
def test_adr0002_t6_none_name_and_path_resolve_to_files(tmp_path, monkeypatch):
    assert load_topology().source == DEFAULT_TOPOLOGY_PATH
    assert load_topology("default") == load_topology(None)
    assert load_topology(str(DEFAULT_TOPOLOGY_PATH)) == load_topology(Path(DEFAULT_TOPOLOGY_PATH))
    # Names resolve from any working folder (the files ship inside the package).
    monkeypatch.chdir(tmp_path)
    assert load_topology("large").source.name == "large.yaml"


def test_adr0002_t7_peak_flops_are_rate_times_clock_times_pes():
    topology = load_topology()
    spec = topology.spec
    clock_hz = round(spec["pe"]["clock_ghz"] * 10**9)
    for dtype, per_cycle in spec["pe"]["matrix_unit"]["flops_per_cycle"].items():
        assert topology.pe_peak_flops(dtype) == per_cycle * clock_hz
        assert topology.sip_peak_flops(dtype) == per_cycle * clock_hz * topology.pes_per_sip
        assert topology.system_peak_flops(dtype) == per_cycle * clock_hz * topology.total_pes


def test_adr0002_t8_pe_addresses_go_cube_by_cube_with_corners_in_layout_order():
    topology = load_topology()
    layout = topology.spec["cube"]["pe_layout"]
    addresses = topology.pe_addresses(1)
    assert addresses == tuple(sorted(addresses))
    assert len(set(addresses)) == len(addresses)
    assert all(address.sip == 1 for address in addresses)
    first_cube = [a for a in addresses if a.cube == 0]
    expected_corners = [corner for corner in layout["corners"] for _ in range(layout["pe_per_corner"])]
    assert [topology.corner_of(a) for a in first_cube] == expected_corners
    assert PeAddress(1, 2, 3).name == "sip1.c2.pe3"


def test_adr0002_t9_cube_xy_is_row_major():
    topology = load_topology("large")
    w = topology.sip.cube_mesh.w
    for cube in range(topology.cubes_per_sip):
        x, y = topology.cube_xy(cube)
        assert cube == y * w + x
        assert topology.cube_index(x, y) == cube


def test_adr0002_t10_spec_is_a_plain_deep_copy_of_the_file():
    import yaml

    topology = load_topology()
    spec = topology.spec
    assert spec == yaml.safe_load(DEFAULT_TOPOLOGY_PATH.read_text())
    assert type(spec) is dict and type(spec["cube"]["pe_layout"]["corners"]) is list
    spec["system"]["sips"]["count"] = 99
    spec["cube"]["pe_layout"]["corners"].append("x")
    assert topology.spec["system"]["sips"]["count"] == 4
    assert topology.spec["cube"]["pe_layout"]["corners"] == ["nw", "ne", "sw", "se"]
    assert topology.n_sips == 4


def test_adr0002_t11_json_dict_round_trips_and_carries_link_facts():
    topology = load_topology()
    data = json.loads(json.dumps(topology.to_json_dict()))
    link = data["system"]["inter_sip"]
    assert link["bandwidth_bytes_per_s"] == topology.system.inter_sip.bandwidth_bytes_per_s
    assert link["latency_ps"] == topology.system.inter_sip.latency_ps
    assert data["derived"]["total_pes"] == topology.total_pes
    assert data["derived"]["inter_sip_link"]["count"] == len(topology.all_inter_sip_links())
    assert data["pe"]["matrix_unit"]["flops_per_cycle"] == topology.spec["pe"]["matrix_unit"]["flops_per_cycle"]
    assert set(data["derived"]["peak_flops_per_s"]) == set(topology.dtypes)


def test_adr0002_t12_topology_is_frozen_and_hashable():
    topology = load_topology()
    with pytest.raises(AttributeError):
        topology.system = None  # type: ignore[misc]
    assert hash(topology) == hash(load_topology())
    assert isinstance(topology, Topology)


def test_adr0002_t49_an_hbm_stacks_channel_moves_data_at_its_sustained_rate(tmp_path):
    from fractions import Fraction

    from kernbench.session import Session
    from tests.derived_topology import derived_topology

    assert load_topology().cube.hbm.efficiency == 1
    hbm = load_topology("h100").cube.hbm
    assert hbm.efficiency == Fraction(9, 10) and hbm.sustained_bytes_per_s == hbm.bandwidth_bytes_per_s * 9 // 10
    busy = {}
    for name, path in (("sustained", "h100"),
                       ("peak", derived_topology(tmp_path, "h100", [(", efficiency: 0.9}", "}")], "peak.yaml"))):
        session = Session(path, timing_only=True)
        session.run(lambda torch: (torch.ones(1 << 20, device="cuda") + 1, torch.cuda.synchronize()), session.torch)
        busy[name] = sum(c.busy_ps for n, c in session.ctx.machine.channels.items() if n.endswith(".hbm"))
    # Each byte the stream moves holds its stack for 1/rate: 10/9 as long at 90% of the peak (to a ps a DMA).
    assert abs(busy["sustained"] * 9 - busy["peak"] * 10) <= 10 * 1000

"""Machine size: thousands of SIPs cost what a small machine costs, and the size bounds are range checks."""

from __future__ import annotations

import pytest
import yaml

from kernbench.topology import TopologyError, load_topology
from kernbench.topology.schema import LINK_SHAPES, MAX_MESH_SIDE, MAX_PE_PER_CORNER, MAX_SIPS
from tests.topology.conftest import default_spec
from tests.topology.test_validation import edited, line_containing

BIG = 4096


def rule_route(shape: str, sips: int, src: int, dst: int) -> list[str]:
    """Link names the ADR's routing rule gives (ring: shorter way, ties increasing; full mesh: direct; switch)."""
    if src == dst:
        return []
    if shape == "full_mesh":
        return [f"sip{src}->sip{dst}"]
    if shape == "switch":
        return [f"sip{src}->switch", f"switch->sip{dst}"]
    forward, backward = (dst - src) % sips, (src - dst) % sips
    step = 1 if forward <= backward else -1
    return [f"sip{(src + step * i) % sips}->sip{(src + step * (i + 1)) % sips}" for i in range(min(forward, backward))]


def rule_links(shape: str, sips: int) -> list[str]:
    """Every directed inter-SIP link name, SIP by SIP, in the documented order."""
    if shape == "switch":
        return [name for sip in range(sips) for name in (f"sip{sip}->switch", f"switch->sip{sip}")]
    if shape == "full_mesh":
        return [f"sip{src}->sip{dst}" for src in range(sips) for dst in range(sips) if dst != src]
    names: list[str] = []
    for sip in range(sips):
        for neighbour in ((sip + 1) % sips, (sip - 1) % sips):
            name = f"sip{sip}->sip{neighbour}"
            if neighbour != sip and name not in names:
                names.append(name)
    return names


@pytest.mark.parametrize("shape", LINK_SHAPES)
def test_adr0002_t39_a_4096_sip_machine_routes_far_sips_by_the_small_machines_rule(load_variant, shape):
    topology = load_variant(sips=BIG, shape=shape)
    link = topology.system.inter_sip
    for src, dst in ((0, BIG // 2), (BIG // 2, 0), (1, BIG - 1), (BIG - 1, 1), (17, 3000), (BIG - 1, BIG - 1)):
        route = topology.sip_route(src, dst)
        assert [hop.name for hop in route] == rule_route(shape, BIG, src, dst)
        for hop in route:
            assert (hop.kind, hop.bandwidth_bytes_per_s, hop.latency_ps) == (
                "inter_sip",
                link.bandwidth_bytes_per_s,
                link.latency_ps,
            )


@pytest.mark.parametrize("shape", LINK_SHAPES)
def test_adr0002_t40_inter_sip_links_are_counted_and_read_in_order_without_being_listed(load_variant, shape):
    for sips in (1, 2, 3, 5):
        links = load_variant(sips=sips, shape=shape).all_inter_sip_links()
        expected = rule_links(shape, sips)
        assert [link.name for link in links] == expected
        assert [links[i].name for i in range(-len(links), len(links))] == expected + expected
    big = load_variant(sips=BIG, shape=shape).all_inter_sip_links()
    assert len(big) == (BIG * (BIG - 1) if shape == "full_mesh" else 2 * BIG)
    last = BIG - 1
    tail = {
        "ring": [f"sip{last}->sip0", f"sip{last}->sip{last - 1}"],
        "full_mesh": [f"sip{last}->sip{last - 2}", f"sip{last}->sip{last - 1}"],
        "switch": [f"sip{last}->switch", f"switch->sip{last}"],
    }[shape]
    assert [link.name for link in big[-2:]] == tail


BOUNDS = [
    ("sips", "sips: {count: 4}", f"sips: {{count: {MAX_SIPS + 1}}}", "system.sips.count", MAX_SIPS),
    ("mesh_w", "w: 2, h: 2", f"w: {MAX_MESH_SIDE + 1}, h: 2", "sip.cube_mesh.w", MAX_MESH_SIDE),
    ("mesh_h", "w: 2, h: 2", f"w: 2, h: {MAX_MESH_SIDE + 1}", "sip.cube_mesh.h", MAX_MESH_SIDE),
    (
        "pe_per_corner",
        "pe_per_corner: 2",
        f"pe_per_corner: {MAX_PE_PER_CORNER + 1}",
        "cube.pe_layout.pe_per_corner",
        MAX_PE_PER_CORNER,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "key_path", "limit"), [case[1:] for case in BOUNDS], ids=[case[0] for case in BOUNDS]
)
def test_adr0002_t41_a_value_beyond_a_size_bound_is_one_error_naming_key_value_and_limit(
    write_text, old, new, key_path, limit
):
    text = edited(old, new)
    path = write_text(text)
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    message = str(caught.value)
    line = line_containing(text, new)
    assert message.startswith(f"{path}:{line}: {key_path}: found {limit + 1}, above the limit of {limit}; "), message
    assert "\n" not in message


def test_adr0002_t42_a_machine_at_every_size_bound_loads_and_routes(write_text):
    spec = default_spec()
    spec["system"]["sips"]["count"] = MAX_SIPS
    spec["sip"]["cube_mesh"] = {"w": MAX_MESH_SIDE, "h": MAX_MESH_SIDE}
    spec["cube"]["pe_layout"]["pe_per_corner"] = MAX_PE_PER_CORNER
    topology = load_topology(write_text(yaml.safe_dump(spec)))
    pes_per_cube = len(spec["cube"]["pe_layout"]["corners"]) * MAX_PE_PER_CORNER
    assert topology.total_pes == MAX_SIPS * MAX_MESH_SIDE**2 * pes_per_cube
    assert len(topology.all_inter_sip_links()) == 2 * MAX_SIPS
    assert len(topology.sip_route(0, MAX_SIPS // 2)) == MAX_SIPS // 2
    assert len(topology.noc_route(0, topology.cubes_per_sip - 1, sip=MAX_SIPS - 1)) == 2 * (MAX_MESH_SIDE - 1)

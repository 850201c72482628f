"""Routes: XY inside a SIP's mesh; ring, full mesh and switch between SIPs; stable link names."""

from __future__ import annotations

import pytest

from kernbench.topology import load_topology


def test_adr0002_t23_noc_route_goes_along_x_then_along_y():
    topology = load_topology("large")
    for src in range(topology.cubes_per_sip):
        for dst in range(topology.cubes_per_sip):
            route = topology.noc_route(src, dst, sip=3)
            (sx, sy), (dx, dy) = topology.cube_xy(src), topology.cube_xy(dst)
            assert len(route) == abs(sx - dx) + abs(sy - dy)
            here = src
            moved_along_y = False
            for link in route:
                assert link.name.startswith("sip3.noc.")
                assert link.src == f"sip3.c{here}"
                nxt = int(link.dst.rsplit(".c", 1)[1])
                (hx, hy), (nx, ny) = topology.cube_xy(here), topology.cube_xy(nxt)
                assert abs(hx - nx) + abs(hy - ny) == 1
                moved_along_y |= hy != ny
                assert not (moved_along_y and hx != nx), "an x step after a y step"
                here = nxt
            assert here == dst


def test_adr0002_t24_noc_route_to_the_same_cube_is_empty_and_links_carry_noc_numbers():
    topology = load_topology()
    assert topology.noc_route(2, 2, sip=0) == ()
    (link,) = topology.noc_route(0, 1, sip=0)
    assert link.name == "sip0.noc.c0->c1"
    assert link.bandwidth_bytes_per_s == topology.sip.noc.link_bandwidth_bytes_per_s
    assert link.latency_ps == topology.sip.noc.hop_latency_ps


@pytest.mark.parametrize("sips", [2, 3, 4, 5, 8])
def test_adr0002_t25_ring_route_takes_the_shorter_way_ties_increasing(load_variant, sips):
    topology = load_variant(sips=sips, shape="ring")
    for src in range(sips):
        for dst in range(sips):
            route = topology.sip_route(src, dst)
            forward, backward = (dst - src) % sips, (src - dst) % sips
            assert len(route) == min(forward, backward)
            step = 1 if forward <= backward else -1
            expected = [f"sip{(src + step * i) % sips}->sip{(src + step * (i + 1)) % sips}" for i in range(len(route))]
            assert [link.name for link in route] == expected


def test_adr0002_t26_ring_goes_both_ways_round_the_default_machine():
    topology = load_topology()
    assert [link.name for link in topology.sip_route(0, 1)] == ["sip0->sip1"]
    assert [link.name for link in topology.sip_route(0, 3)] == ["sip0->sip3"]
    assert [link.name for link in topology.sip_route(3, 0)] == ["sip3->sip0"]
    assert [link.name for link in topology.sip_route(1, 3)] == ["sip1->sip2", "sip2->sip3"]
    assert [link.name for link in topology.sip_route(3, 1)] == ["sip3->sip0", "sip0->sip1"]


def test_adr0002_t27_switch_route_is_two_hops_through_the_switch():
    topology = load_topology("large")
    assert topology.system.inter_sip.shape == "switch"
    route = topology.sip_route(5, 17)
    assert [link.name for link in route] == ["sip5->switch", "switch->sip17"]
    assert all(link.latency_ps == topology.system.inter_sip.latency_ps for link in route)
    assert topology.sip_route(5, 5) == ()
    assert len(topology.all_inter_sip_links()) == 2 * topology.n_sips


def test_adr0002_t28_full_mesh_route_is_one_direct_link(load_variant):
    topology = load_variant(sips=5, shape="full_mesh")
    for src in range(5):
        for dst in range(5):
            expected = [] if src == dst else [f"sip{src}->sip{dst}"]
            assert [link.name for link in topology.sip_route(src, dst)] == expected
    assert len(topology.all_inter_sip_links()) == 5 * 4


@pytest.mark.parametrize(("shape", "sips"), [("ring", 1), ("ring", 2), ("ring", 6), ("full_mesh", 4), ("switch", 3)])
def test_adr0002_t29_routes_use_only_enumerated_links_with_unique_names(load_variant, shape, sips):
    topology = load_variant(sips=sips, shape=shape, mesh=(3, 2))
    inter = {link.name: link for link in topology.all_inter_sip_links()}
    assert len(inter) == len(topology.all_inter_sip_links())
    for src in range(sips):
        for dst in range(sips):
            for link in topology.sip_route(src, dst):
                assert inter[link.name] == link
    noc = {link.name: link for link in topology.noc_links(0)}
    w, h = 3, 2
    assert len(noc) == len(topology.noc_links(0)) == 2 * ((w - 1) * h + w * (h - 1))
    for src in range(topology.cubes_per_sip):
        for dst in range(topology.cubes_per_sip):
            for link in topology.noc_route(src, dst, sip=0):
                assert noc[link.name] == link


def test_adr0002_t30_host_links_are_named_per_direction():
    topology = load_topology()
    down, up = topology.host_to_sip_link(2), topology.sip_to_host_link(2)
    assert (down.name, up.name) == ("host->sip2", "sip2->host")
    assert down.bandwidth_bytes_per_s == topology.system.host_link.bandwidth_bytes_per_s

"""Closed forms of copy times, derived from the topology (never from a run)."""

from __future__ import annotations

from kernbench.machine import IO_CUBE

PS_PER_S = 10**12


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def host_to_cube_path(topology, sip: int, cube: int) -> tuple[int, int]:
    """(total latency ps, bottleneck bandwidth B/s) of the host → cube HBM path, read off the topology."""
    links = [topology.host_to_sip_link(sip), *topology.noc_route(IO_CUBE, cube, sip=sip)]
    hbm = topology.cube.hbm
    latency = sum(link.latency_ps for link in links) + hbm.latency_ps
    bandwidth = min([link.bandwidth_bytes_per_s for link in links] + [hbm.bandwidth_bytes_per_s])
    return latency, bandwidth


def staircase_copy_ps(topology, sip: int, shard_cubes: list[int], shard_bytes: int) -> int:
    """Host→device copy of equal shards issued together: the shared host link serves them one after another.

    Shard k enters the host link k serialization times after the first and
    lands after its own path latency plus one serialization time.
    """
    ends = []
    host_bw = topology.host_to_sip_link(sip).bandwidth_bytes_per_s
    for k, cube in enumerate(shard_cubes):
        latency, bottleneck = host_to_cube_path(topology, sip, cube)
        assert bottleneck == host_bw, "the closed form assumes the host link is every path's bottleneck"
        occupancy = ceil_div(shard_bytes * PS_PER_S, bottleneck)
        ends.append(k * occupancy + latency + occupancy)
    return max(ends)


def dma_ps(topology, nbytes: int, data_cube: int, pe_cube: int, sip: int = 0) -> int:
    """One DMA between a cube's HBM and a PE's TCM on an idle machine: Σ latency + bytes over the slowest hop.

    The path: the PE's DMA engine, the owning cube's HBM, the mesh hops to the
    PE's cube, the PE's TCM.
    """
    hbm, tcm, dma = topology.cube.hbm, topology.pe.tcm, topology.pe.dma
    noc = topology.noc_route(data_cube, pe_cube, sip=sip)
    latency = hbm.latency_ps + sum(link.latency_ps for link in noc) + tcm.latency_ps
    slowest = min([dma.bandwidth_bytes_per_s, hbm.bandwidth_bytes_per_s, tcm.bandwidth_bytes_per_s]
                  + [link.bandwidth_bytes_per_s for link in noc])
    return latency + ceil_div(nbytes * PS_PER_S, slowest)

"""ADR 0002 T43: the optional `sip.l2` section is all or nothing."""

from __future__ import annotations

import pytest

from kernbench.topology import load_topology
from kernbench.topology.errors import TopologyError
from tests.derived_topology import derived_topology

NOC = "  noc: {hop_latency_ns: 10, link_bandwidth_gb_per_s: 1024}\n"


def with_l2(tmp_path, l2: str):
    """default.yaml with the `sip.l2` line `l2` after its NoC."""
    return derived_topology(tmp_path, "default", [(NOC, NOC + l2)], "l2.yaml")


def test_adr0002_t43_sip_l2_is_all_or_nothing(tmp_path):
    assert load_topology("default").sip.l2 is None
    spec = load_topology(with_l2(tmp_path, "  l2: {capacity_kib: 2048, bandwidth_gb_per_s: 4000, latency_ns: 40}\n"))
    assert (spec.sip.l2.capacity_bytes, spec.sip.l2.bandwidth_bytes_per_s, spec.sip.l2.latency_ps) == \
        (2048 * 1024, 4 * 10**12, 40_000)
    with pytest.raises(TopologyError, match=r"sip\.l2.*needs all of capacity_kib, bandwidth_gb_per_s, latency_ns; "
                                            r"missing latency_ns"):
        load_topology(with_l2(tmp_path, "  l2: {capacity_kib: 2048, bandwidth_gb_per_s: 4000}\n"))
    with pytest.raises(TopologyError, match=r"sip\.l2\.capacity_mib.*unknown key"):
        load_topology(with_l2(tmp_path, "  l2: {capacity_mib: 2, bandwidth_gb_per_s: 4000, latency_ns: 40}\n"))

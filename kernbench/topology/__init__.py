"""kernbench.topology: topology.yaml → a frozen, unit-normalized `Topology` with derived facts and routes."""

from kernbench.topology.errors import TopologyError
from kernbench.topology.loader import DEFAULT_TOPOLOGY_PATH, load_topology, shipped_topology_names
from kernbench.topology.model import PeAddress, Topology
from kernbench.topology.routes import Link

__all__ = [
    "DEFAULT_TOPOLOGY_PATH",
    "Link",
    "PeAddress",
    "Topology",
    "TopologyError",
    "load_topology",
    "shipped_topology_names",
]

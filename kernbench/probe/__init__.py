"""kernbench.probe: latency and bandwidth between two points of the simulated machine (`kernbench probe`)."""

from kernbench.probe.endpoints import ProbeEndpoint, ProbeError, parse_endpoint
from kernbench.probe.measure import ProbeResult, probe
from kernbench.probe.sizes import parse_sizes

__all__ = ["ProbeEndpoint", "ProbeError", "ProbeResult", "parse_endpoint", "parse_sizes", "probe"]

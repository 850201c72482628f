"""kernbench: a simulated multi-SIP HBM accelerator with a torch-like API.

A run gives two things at once: the numbers a workload computes (checkable
against numpy) and its simulated performance (time, bandwidth, utilization),
derived from a topology file and deterministic to the picosecond.
"""

from kernbench.errors import KernbenchError

__all__ = ["KernbenchError"]
__version__ = "0.1.0"

"""Data-parallel placement of tensors over cubes and PEs."""

from kernbench.policy.placement.default import FIRST_PE, INTERLEAVED, Interleaved, default_policy
from kernbench.policy.placement.dp import MODES, DPPolicy, Placement, PlacementError, Shard

__all__ = ["FIRST_PE", "INTERLEAVED", "MODES", "DPPolicy", "Interleaved", "Placement", "PlacementError", "Shard",
           "default_policy"]

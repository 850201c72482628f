"""Data-parallel placement of tensors over cubes and PEs."""

from kernbench.policy.placement.dp import MODES, DPPolicy, Placement, PlacementError, Shard

__all__ = ["MODES", "DPPolicy", "Placement", "PlacementError", "Shard"]

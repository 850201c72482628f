"""Placement policies: how a tensor is spread inside one SIP."""

from kernbench.policy.placement import DPPolicy, Placement, PlacementError, Shard

__all__ = ["DPPolicy", "Placement", "PlacementError", "Shard"]

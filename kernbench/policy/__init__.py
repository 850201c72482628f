"""Placement policies: how a tensor is spread inside one SIP."""

from kernbench.policy.placement import DPPolicy, Interleaved, Placement, PlacementError, Shard, default_policy

__all__ = ["DPPolicy", "Interleaved", "Placement", "PlacementError", "Shard", "default_policy"]

"""The DTensor sharding rules, one per op (registry.py), by op family; importing a family registers its rules."""

from kernbench.dtensor.rules import losses, matrix, pointwise, reductions, rows, views  # noqa: F401
from kernbench.dtensor.rules.registry import RULES

__all__ = ["RULES"]

"""The error tensor parallelism raises for a user's mistake."""

from kernbench.errors import KernbenchError


class ModelParallelError(KernbenchError):
    """Sizes that cannot be partitioned, or model-parallel state used before it was initialized."""

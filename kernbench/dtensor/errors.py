"""The errors of PyTorch's native tensor parallelism here: one line each, in PyTorch's words where it raises."""

from kernbench.errors import KernbenchError


class DTensorError(KernbenchError, RuntimeError):
    """A device mesh, DTensor, placement or parallel style used against its contract."""

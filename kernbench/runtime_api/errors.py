"""Errors a bench can cause through the runtime API."""

from kernbench.errors import KernbenchError


class TensorError(KernbenchError):
    """A tensor operation whose operands do not fit together (shape, dtype, device)."""


class DimensionError(TensorError, IndexError):
    """A dimension index outside a tensor's dimensions, or an index outside a dimension: PyTorch's `IndexError`,
    with its message, so code that catches `IndexError` as it would with torch still does (Python's iteration
    over a `Dataset` by `__getitem__` stops at it)."""


class FreedGraphError(TensorError, RuntimeError):
    """A backward through a graph an earlier backward freed: PyTorch's `RuntimeError`, with its message."""


class RuntimeUsageError(KernbenchError):
    """A runtime call made out of order or with arguments that do not fit (e.g. an unrecorded event)."""


class ValuesNotComputed(KernbenchError):
    """A host read of device values in a timing-only run, where no value is computed."""


class WorkingSetTooLarge(KernbenchError):
    """A kernel op whose operands do not fit in its PE's TCM (no spill is modelled; see ADR 0008)."""


class ModuleError(KernbenchError):
    """A `torch.nn` module used against its contract (a missing forward, an attribute of the wrong kind, a
    state dict that does not fit)."""


class OptimizerError(KernbenchError):
    """A `torch.optim` optimizer or scheduler given what it cannot optimize (a non-leaf tensor, a bad setting)."""


class DataLoaderError(KernbenchError, ValueError):
    """A `torch.utils.data` dataset, sampler or loader given options PyTorch refuses: its `ValueError`, with its
    message."""


class CollateError(KernbenchError, TypeError):
    """A batch `default_collate` cannot put together (strings in a numpy array, an unknown element type, samples
    of different lengths): PyTorch's `TypeError` or `RuntimeError` message."""

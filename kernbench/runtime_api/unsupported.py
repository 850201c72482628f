"""What kernbench does not provide says so: `torch.X is not supported by kernbench (see docs/torch-surface.md)`.

The fake `torch` and its submodules are `Namespace`s; `torch.ahbm` and
`Tensor` take their `__getattr__` from here. A missing public name is one
`UnsupportedError` line — an `AttributeError`, so `hasattr(torch, "X")`
stays False and `getattr(torch, "X", default)` works, and a
`KernbenchError`, so `kernbench run` prints it as one line (exit 2). Names
starting with `_` keep Python's plain `AttributeError`: they are protocol
probes (numpy's `__array_interface__`, copy's `__deepcopy__`), not torch
names. `KNOWN_UNSUPPORTED` is the curated list of common names that
docs/torch-surface.md shows as missing, with why.
"""

from __future__ import annotations

import types

from kernbench.errors import KernbenchError

SURFACE_DOC = "docs/torch-surface.md"

# Common PyTorch names kernbench does not provide, and why (listed in docs/torch-surface.md).
KNOWN_UNSUPPORTED = {
    "torch.compile": "no compiler: device work is Triton kernels (ADR 0007) and built-in device ops (ADR 0016)",
    "torch.jit": "no TorchScript: a bench is plain Python on the host",
    "torch.export": "no graph capture: a bench is plain Python on the host",
    "torch.autocast": "no autocasting: give each tensor its dtype",
    "torch.fft": "no FFT ops on the simulated device",
    "torch.sparse": "tensors are dense (strided views of a storage, ADR 0015)",
    "torch.utils.checkpoint": "activation checkpointing is kernbench.tp's (Megatron's checkpoint)",
    "torch.save": "no serialization: read values with .numpy() and save them with numpy",
    "torch.load": "no serialization: make tensors from numpy with torch.tensor or torch.from_numpy",
    "torch.ahbm.amp": "no autocasting: give each tensor its dtype",
    "torch.ahbm.graphs": "no graph capture: every launch is enqueued as it is made",
    "torch.ahbm.nvtx": "no NVTX ranges: kernbench run --trace records every op",
    "torch.distributed.rpc": "no remote procedure calls between ranks",
    "torch.distributed.fsdp": "no sharded data parallelism: kernbench.tp has tensor parallelism",
    "torch.Tensor.pin_memory": "host memory is not modelled as pageable or pinned: host copies are DMAs either way",
    "torch.Tensor.share_memory_": "ranks share one process already",
    "torch.Tensor.to_sparse": "tensors are dense",
}


class UnsupportedError(KernbenchError, AttributeError):
    """A torch name kernbench does not provide (docs/torch-surface.md lists those it does)."""

    def __init__(self, path: str, note: str = ""):
        super().__init__(f"{path} is not supported by kernbench ({note}see {SURFACE_DOC})")
        self.name = path.rpartition(".")[2]


class Namespace(types.ModuleType):
    """A module of the fake torch (`torch`, `torch.nn.functional`, ...): its names, and one line for any other."""

    def __init__(self, name: str, doc: str | None = None, /, **names):
        super().__init__(name, doc)
        self.__dict__.update(names)

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        raise UnsupportedError(f"{self.__name__}.{attr}")


def missing_attribute(obj, attr: str, path: str, note: str = ""):
    """`__getattr__` for a class of the torch surface (`Tensor`, `torch.ahbm`): `path.attr` is not supported.

    A name the class does have reached here because its property raised
    `AttributeError` inside; that property is evaluated again so its own
    error shows, not a claim that the name is missing.
    """
    if attr.startswith("_"):
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {attr!r}")
    if hasattr(type(obj), attr):
        return object.__getattribute__(obj, attr)
    raise UnsupportedError(f"{path}.{attr}", note)


def tensor_getattr(tensor, attr: str):
    """`Tensor.__getattr__`: a public attribute `Tensor` lacks is `torch.Tensor.X is not supported ...`."""
    return missing_attribute(tensor, attr, "torch.Tensor")

"""Just enough of a torch tensor over numpy for Triton's stock interpreter.

Triton's interpreter copies tensor arguments to "the host" through torch's
storage API, then reads and writes raw memory at `data_ptr()`. The array
already lives on the host, so storage, `cpu()` and the copy back are the
array itself. Used to show that a hooked Triton still runs stock launches,
and as the reference run of `benchmarks/kernel_overhead.py`.
"""

from __future__ import annotations

import numpy as np


class _DType:
    def __init__(self, array: np.ndarray) -> None:
        self._name = "bfloat16" if array.dtype.name == "bfloat16" else array.dtype.name

    def __str__(self) -> str:
        return f"torch.{self._name}"

    def __eq__(self, other) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class NumpyTensor:
    """A numpy array that answers the torch calls Triton's interpreter makes."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.dtype = _DType(array)

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def untyped_storage(self) -> "NumpyTensor":
        return self

    def cpu(self) -> "NumpyTensor":
        return self

    def new_empty(self, size, device=None) -> "NumpyTensor":
        return NumpyTensor(np.empty(size, self.array.dtype))

    def set_(self, storage: "NumpyTensor", offset, size, stride) -> "NumpyTensor":
        self.array = storage.array
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple:
        return self.array.shape

    def stride(self) -> tuple:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def copy_(self, other: "NumpyTensor") -> "NumpyTensor":
        if other.array is not self.array:
            np.copyto(self.array, other.array)
        return self

"""`Tensor`: a host array or a placed allocation in a SIP's HBM, with torch's surface.

Host code is asynchronous to the device. Device work on a tensor (a copy, a
fill, a kernel, a collective) is enqueued on a stream, and the tensor keeps
the handles of writes still in flight. Every way for host code to see device
values is a *host-read barrier*: it waits for those writes, then moves the
bytes to the host with a timed DMA. The barrier methods are listed in
`HOST_READS` (filled by the `@host_read` decorator), and all of them reach the
device bytes only through `_read_to_host`; `tests/runtime_api` checks that no
other method of this class touches them. With `--timing-only` no values
exist, and every host read is a `ValuesNotComputed` error naming the tensor
and the call, never stale bytes.
"""

from __future__ import annotations

import functools
import weakref
from math import prod
from typing import TYPE_CHECKING

import numpy as np

from kernbench.dtypes import DType
from kernbench.machine import Transfer, hbm, host
from kernbench.runtime_api.boxes import box_span, row_major_strides
from kernbench.runtime_api.copies import copy_into
from kernbench.runtime_api.device import CPU, DEVICE_TYPE, Device
from kernbench.runtime_api.errors import TensorError, ValuesNotComputed

if TYPE_CHECKING:
    from kernbench.machine.memory import Allocation
    from kernbench.runtime_api.context import RuntimeContext

HOST_READS: dict[str, str] = {}


def host_read(method):
    """Register `method` as a host-read barrier entry point."""
    HOST_READS[method.__name__] = (method.__doc__ or "").strip().splitlines()[0]
    return method


class Tensor:
    """A tensor on the host (`device='cpu'`) or on a simulated device (`ahbm:N`)."""

    def __init__(self, ctx: "RuntimeContext", shape: tuple[int, ...], dtype: DType, device: Device, name: str,
                 *, allocation: "Allocation | None" = None, host_array: np.ndarray | None = None):
        self._ctx = ctx
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self.name = name
        self._allocation = allocation
        self._host_array = host_array
        self._pending_writes: list = []

    # ---- metadata (no barrier: nothing here reads device values) ------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def stride(self, dim: int | None = None):
        """Element strides of the (always contiguous, row-major) layout, as torch reports them."""
        strides = row_major_strides(self.shape)
        return strides if dim is None else strides[dim]

    def is_contiguous(self) -> bool:
        return True

    @property
    def is_ahbm(self) -> bool:
        return not self.device.is_host

    @property
    def placement(self):
        """How the tensor is spread over its SIP's cubes and PEs (None for host tensors)."""
        return None if self._allocation is None else self._allocation.placement

    @property
    def allocation(self) -> "Allocation | None":
        """The HBM allocation holding the values (None for host tensors): what collectives address."""
        return self._allocation

    def data_ptr(self) -> int:
        if self._allocation is None:
            raise TensorError(f"tensor {self.name!r} is on the host; data_ptr() is for device tensors")
        return self._allocation.base

    def __kernbench_pointer__(self) -> tuple[int, str]:
        """The pointer a Triton kernel receives: the virtual address and the element type."""
        return self.data_ptr(), self.dtype.name

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- host reads ---------------------------------------------------------------------
    @host_read
    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a copy, for a device tensor)."""
        return self._read_to_host("numpy()")

    @property
    @host_read
    def data(self) -> np.ndarray:
        """The values as a numpy array, like `numpy()`."""
        return self._read_to_host(".data")

    @host_read
    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The values for `np.asarray(tensor)`."""
        values = self._read_to_host("np.asarray()")
        return values if dtype is None else values.astype(dtype)

    @host_read
    def __getitem__(self, index) -> "Tensor":
        """The indexed values, as a new host tensor."""
        values = np.ascontiguousarray(self._read_to_host("indexing")[index])
        return self._ctx_host_tensor(values)

    @host_read
    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise TensorError(f"item() needs a one-element tensor; {self.name!r} has shape {self.shape}")
        return self._read_to_host("item()").reshape(()).item()

    @host_read
    def tolist(self):
        """The values as nested Python lists."""
        return self._read_to_host("tolist()").tolist()

    @host_read
    def cpu(self) -> "Tensor":
        """A host copy of the tensor."""
        return self if self.device.is_host else self._ctx_host_tensor(self._read_to_host("cpu()"))

    @host_read
    def __repr__(self) -> str:
        """torch-style text of the values."""
        values = self._read_to_host("repr()")
        body = np.array2string(values.astype(np.float64) if self.dtype.name == "bf16" else values,
                               separator=", ", prefix="tensor(")
        extras = "" if self.device.is_host else f", device='{self.device}'"
        return f"tensor({body}{extras}, dtype={self.dtype!r})"

    __str__ = __repr__

    def _ctx_host_tensor(self, values: np.ndarray) -> "Tensor":
        return Tensor(self._ctx, values.shape, self.dtype, CPU, self._ctx.next_tensor_name("host"),
                      host_array=values)

    def _read_to_host(self, call: str) -> np.ndarray:
        """Wait for in-flight writes, then DMA the values to the host (the only host path to device bytes).

        `call` is the user's call that reads, named in the timing-only error.
        """
        if self._host_array is not None:
            return self._host_array
        self._ctx.block_on(self._pending_writes)  # first, so a failure of the work that wrote it shows
        self._pending_writes.clear()
        if self._ctx.timing_only:
            raise ValuesNotComputed(f"values are not computed with --timing-only: tensor {self.name!r} "
                                    f"({self.device}) read by {call}; check torch.is_timing_only() to skip it")
        out = np.empty(self.shape, dtype=self.dtype.numpy)
        transfers = []
        for shard in self._nearest_replica(cube=0):
            transfers.append(Transfer(
                src=hbm(self.device.index, shard.cube), dst=host(), nbytes=shard.numel() * self.dtype.itemsize,
                read=functools.partial(self._device_read, shard.index),
                write=functools.partial(out.__setitem__, shard.index)))
        machine = self._ctx.machine
        read = self._ctx.engine.spawn(machine.run_transfers, transfers, label=f"read {self.name} to host",
                                      data=not self._ctx.timing_only, name=f"host read of {self.name}")
        self._ctx.block_on([read])
        return out

    # ---- device-side data effects (run by the machine at the op's simulated time) ---------
    def _device_values(self, index: tuple[slice, ...]) -> np.ndarray:
        """The device bytes in this tensor's shape, holding their values at least inside the box `index`."""
        first, stop, _ = box_span(self.shape, index)
        return self._allocation.storage.typed(self.dtype.numpy, slice(first, stop)).reshape(self.shape)

    def _device_read(self, index) -> np.ndarray:
        return self._device_values(index)[index].copy()

    def _device_write(self, index, values) -> None:
        self._device_values(index)[index] = values

    def _device_fill(self, index, value) -> None:
        """`value` into every element of the box `index`; kept as a value by the storage where the box is contiguous."""
        first, stop, contiguous = box_span(self.shape, index)
        if not contiguous:
            self._device_write(index, value)
            return
        itemsize = self.dtype.itemsize
        self._allocation.storage.fill(first * itemsize, stop * itemsize, np.asarray(value, dtype=self.dtype.numpy))

    def _nearest_replica(self, cube: int):
        """The shards of the replica whose cube is nearest `cube` on the mesh."""
        placement = self.placement
        replica = self._ctx.machine.nearest_replica(placement, self.device.index, cube)
        return [shard for shard in placement.shards if shard.replica == replica]

    # ---- writes -------------------------------------------------------------------------
    @host_read
    def copy_(self, src: "Tensor | np.ndarray", non_blocking: bool = False) -> "Tensor":
        """Copy `src` into this tensor; a host read when this tensor is on the host and `src` is not.

        Host→device, device→host and device→device copies are each timed DMAs.
        """
        copy_into(self, src, non_blocking=non_blocking)
        return self

    def clone(self) -> "Tensor":
        """A new tensor with the same placement and (once the enqueued copy runs) the same values."""
        if self.device.is_host:
            return self._ctx_host_tensor(self._host_array.copy())
        twin = device_tensor(self._ctx, self.shape, self.dtype, self.device.index, self.placement.policy,
                             f"{self.name}.clone")
        return twin.copy_(self)


def device_tensor(ctx: "RuntimeContext", shape, dtype: DType, device_index: int, policy, name: str) -> Tensor:
    """Allocate an uninitialized tensor in `device_index`'s HBM, placed by `policy`."""
    topology = ctx.topology
    placement = policy.place(tuple(shape), topology.cubes_per_sip, topology.pes_per_cube)
    nbytes = prod(shape) * dtype.itemsize
    allocation = ctx.machine.memory[device_index].allocate(name, nbytes, dtype.itemsize, placement)
    tensor = Tensor(ctx, shape, dtype, Device(DEVICE_TYPE, device_index), name, allocation=allocation)
    weakref.finalize(tensor, ctx.machine.memory[device_index].free, allocation)
    return tensor

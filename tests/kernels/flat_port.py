"""A test double for the runtime: one flat byte buffer, an allocation table, a port.

`FlatMemory` hands out `DeviceArray`s (objects with `__kernbench_pointer__`)
at virtual addresses separated by unmapped guard gaps, and `FlatPort`
implements `ProgramPort` over it: every active lane is bounds-checked
against the allocation its address falls after, and a bad access raises
`KernelFault` before any byte is touched. The port counts what it is asked
to do, so tests can check the bridge charged each op.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from kernbench.kernels import KernelFault
from kernbench.kernels.triton_bridge.dtypes import numpy_dtype_of as np_dtype

BASE = 0x1000_0000
GUARD = 4096


class DeviceArray:
    """A kernbench-tensor stand-in: a name, a shape, a dtype and an address."""

    def __init__(self, memory: "FlatMemory", name: str, address: int, shape: tuple, dtype_name: str) -> None:
        self.memory, self.name, self.address, self.shape, self.dtype_name = memory, name, address, shape, dtype_name

    def __kernbench_pointer__(self) -> tuple[int, str]:
        return self.address, self.dtype_name

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np_dtype(self.dtype_name).itemsize

    def numpy(self) -> np.ndarray:
        start = self.address - BASE
        raw = self.memory.buffer[start : start + self.nbytes]
        return raw.view(np_dtype(self.dtype_name)).reshape(self.shape).copy()


class FlatMemory:
    """A bump allocator over one numpy byte buffer."""

    def __init__(self, size: int = 1 << 22) -> None:
        self.buffer = np.zeros(size, dtype=np.uint8)
        self.arrays: list[DeviceArray] = []
        self._next = BASE

    def from_numpy(self, name: str, values: np.ndarray, dtype_name: str) -> DeviceArray:
        values = np.ascontiguousarray(values, dtype=np_dtype(dtype_name))
        array = DeviceArray(self, name, self._next, values.shape, dtype_name)
        start = array.address - BASE
        self.buffer[start : start + values.nbytes] = values.reshape(-1).view(np.uint8)
        self._next += (values.nbytes + 2 * GUARD - 1) // GUARD * GUARD
        self.arrays.append(array)
        return array

    def zeros(self, name: str, shape: tuple, dtype_name: str) -> DeviceArray:
        return self.from_numpy(name, np.zeros(shape), dtype_name)

    def check(self, addresses: np.ndarray, size: int) -> np.ndarray:
        """Buffer offsets of `addresses`; raises KernelFault for any access outside its allocation."""
        bases = np.array([a.address for a in self.arrays], dtype=np.int64)
        owner = np.searchsorted(bases, addresses, side="right") - 1
        ends = np.array([a.address + a.nbytes for a in self.arrays], dtype=np.int64)
        bad = (owner < 0) | (addresses + size > ends[np.maximum(owner, 0)])
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            address, index = int(addresses[first]), int(owner[first])
            if index < 0:
                raise KernelFault(None, address, size)
            raise KernelFault(self.arrays[index].name, address - self.arrays[index].address, size)
        return addresses - BASE

    def read(self, addresses: np.ndarray, dtype: np.dtype) -> np.ndarray:
        offsets = self.check(addresses, dtype.itemsize)
        lanes = offsets[:, None] + np.arange(dtype.itemsize)
        return self.buffer[lanes].reshape(-1).view(dtype)

    def write(self, addresses: np.ndarray, values: np.ndarray) -> None:
        offsets = self.check(addresses, values.dtype.itemsize)
        lanes = offsets[:, None] + np.arange(values.dtype.itemsize)
        self.buffer[lanes] = np.ascontiguousarray(values).view(np.uint8).reshape(lanes.shape)


def _active(addresses, mask):
    flat = np.asarray(addresses).reshape(-1)
    if mask is None:
        return flat, np.ones(flat.shape, bool)
    active = np.broadcast_to(mask, np.shape(addresses)).reshape(-1)
    return flat[active], active


_RMW = {
    "add": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "xchg": lambda old, new: new,
}


class FlatPort:
    """`ProgramPort` over a `FlatMemory`, counting every request."""

    def __init__(self, memory: FlatMemory, on_load=None) -> None:
        self.memory = memory
        self.on_load = on_load
        self.calls: Counter = Counter()
        self.vector_ops: Counter = Counter()

    def load(self, addresses, mask, dtype_name):
        self.calls["load"] += 1
        dtype = np_dtype(dtype_name)
        where, active = _active(addresses, mask)
        out = np.zeros(active.shape, dtype)
        out[active] = self.memory.read(where, dtype)
        if self.on_load is not None:
            self.on_load()
        return out.reshape(np.shape(addresses))

    def store(self, addresses, values, mask):
        self.calls["store"] += 1
        where, active = _active(addresses, mask)
        values = np.broadcast_to(values, np.shape(addresses)).reshape(-1)[active]
        self.memory.write(where, values)

    def atomic_rmw(self, op, addresses, values, mask, dtype_name):
        self.calls["atomic_rmw"] += 1
        dtype = np_dtype(dtype_name)
        flat_addresses = np.asarray(addresses).reshape(-1)
        flat_values = np.broadcast_to(values, np.shape(addresses)).reshape(-1)
        active = np.ones(flat_addresses.shape, bool) if mask is None else np.broadcast_to(mask, np.shape(addresses)).reshape(-1)
        old = np.zeros(flat_addresses.shape, dtype)
        for lane in np.flatnonzero(active):  # lanes hitting one address apply in order, as hardware serializes them
            address = flat_addresses[lane : lane + 1]
            old[lane] = self.memory.read(address, dtype)[0]
            self.memory.write(address, np.asarray([_RMW[op](old[lane], flat_values[lane])], dtype))
        return old.reshape(np.shape(addresses))

    def atomic_cas(self, addresses, compare, values, dtype_name):
        self.calls["atomic_cas"] += 1
        dtype = np_dtype(dtype_name)
        flat_addresses = np.asarray(addresses).reshape(-1)
        compare = np.broadcast_to(compare, np.shape(addresses)).reshape(-1)
        values = np.broadcast_to(values, np.shape(addresses)).reshape(-1)
        old = np.zeros(flat_addresses.shape, dtype)
        for lane in range(flat_addresses.size):
            address = flat_addresses[lane : lane + 1]
            old[lane] = self.memory.read(address, dtype)[0]
            if old[lane] == compare[lane]:
                self.memory.write(address, np.asarray([values[lane]], dtype))
        return old.reshape(np.shape(addresses))

    def dot(self, a, b, acc, out_dtype_name):
        self.calls["dot"] += 1
        product = np.matmul(a.astype(np.float32), b.astype(np.float32))
        if acc is not None:
            product = product + acc.astype(np.float32)
        return product.astype(np_dtype(out_dtype_name))

    def vector(self, op, n_elements, dtype_name):
        self.calls["vector"] += 1
        self.vector_ops[op] += n_elements


def run_grid(launch, port) -> None:
    """Run every program of `launch` in order, as a runtime without contention would."""
    for z in range(launch.grid[2]):
        for y in range(launch.grid[1]):
            for x in range(launch.grid[0]):
                launch.run_program((x, y, z), port)

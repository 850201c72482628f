"""`SimProgramPort`: one Triton program's view of the simulated machine.

The bridge (ADR 0007) hands every memory access, atomic, dot and vector op
of a program to its port. This port turns each into PE ops on the program's
PE: a load is a DMA from the HBM of the cubes that hold the addressed bytes
into the PE's TCM (values read at the DMA's start), a store the reverse
(values visible at its end), a dot a matrix-unit op, a vector op a
vector-unit op — one op-log entry each. Addresses are checked against the
allocations of the launch's device before any byte moves: an access outside
every allocation, or past the end of the tensor its lowest address lies in,
is a `KernelFault` naming the tensor, offset and size (the bridge adds the
kernel and program). The DMAs themselves are `kernbench.machine.placed_dma`'s,
shared with the collectives' PE programs; costs and decisions are ADR 0008.
"""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import resolve_dtype
from kernbench.kernels import KernelFault
from kernbench.machine import Transfer, hbm, tcm
from kernbench.machine.placed_dma import lanes_per_cube, load_elements, store_elements
from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.runtime_api.errors import WorkingSetTooLarge

_ATOMIC_OPS = {
    "add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "xchg": lambda old, new: new,
}


class SimProgramPort:
    """The `ProgramPort` of one program instance running on one PE."""

    def __init__(self, ctx, kernel: str, program: int, pe, timing_only: bool):
        self._ctx = ctx
        self._machine = ctx.machine
        self._memory = ctx.machine.memory[pe.sip]
        self._kernel = kernel
        self._program = program
        self._pe = pe
        self._timing_only = timing_only
        self._tcm_bytes = ctx.topology.pe.tcm.capacity_bytes

    # ---- memory ------------------------------------------------------------------------
    def load(self, addresses: np.ndarray, mask: np.ndarray | None, dtype_name: str) -> np.ndarray:
        dtype = resolve_dtype(dtype_name).numpy
        active = addresses if mask is None else addresses[mask]
        out = np.zeros(addresses.shape, dtype=dtype)
        if active.size == 0:
            return out
        allocation, indices = self._locate(active, dtype.itemsize, "load")
        self._check_working_set(active.size * dtype.itemsize, "a load")
        gathered = load_elements(self._machine, self._pe, allocation, np.dtype(dtype), indices,
                                 label=self._kernel, program=self._program, data=not self._timing_only)
        if not self._timing_only:
            if mask is None:
                out[...] = gathered.reshape(addresses.shape)
            else:
                out[mask] = gathered
        return out

    def store(self, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray | None) -> None:
        active = addresses if mask is None else addresses[mask]
        if active.size == 0:
            return
        values = np.asarray(values)
        allocation, indices = self._locate(active, values.dtype.itemsize, "store")
        self._check_working_set(active.size * values.dtype.itemsize, "a store")
        payload = (values if mask is None else values[mask]).reshape(-1)
        store_elements(self._machine, self._pe, allocation, indices, payload,
                       label=self._kernel, program=self._program, data=not self._timing_only)

    def atomic_rmw(self, op: str, addresses, values, mask, dtype_name: str) -> np.ndarray:
        dtype = np.dtype(resolve_dtype(dtype_name).numpy) if dtype_name not in ("u16", "u32", "u64") \
            else np.dtype(f"uint{dtype_name[1:]}")
        active = addresses if mask is None else addresses[mask]
        old = np.zeros(addresses.shape, dtype=dtype)
        if active.size == 0:
            return old
        allocation, indices = self._locate(active, dtype.itemsize, f"atomic_{op}")
        new = np.asarray(values, dtype=dtype)
        new = (new if mask is None else new[mask]).reshape(-1)
        if not self._timing_only:
            view = allocation.storage.typed(dtype, indices)
            previous = np.empty(indices.size, dtype=dtype)
            # Lanes apply one after another, so lanes that hit the same address see each other.
            for lane, index in enumerate(indices):
                previous[lane] = view[index]
                view[index] = _ATOMIC_OPS[op](view[index], new[lane])
            if mask is None:
                old[...] = previous.reshape(addresses.shape)
            else:
                old[mask] = previous
        self._atomic_dma(allocation, indices, dtype.itemsize)
        return old

    def atomic_cas(self, addresses, compare, values, dtype_name: str) -> np.ndarray:
        dtype = np.dtype(resolve_dtype(dtype_name).numpy) if dtype_name not in ("u16", "u32", "u64") \
            else np.dtype(f"uint{dtype_name[1:]}")
        allocation, indices = self._locate(addresses.reshape(-1), dtype.itemsize, "atomic_cas")
        old = np.zeros(addresses.shape, dtype=dtype)
        if not self._timing_only:
            view = allocation.storage.typed(dtype, indices)
            expected = np.asarray(compare, dtype=dtype).reshape(-1)
            new = np.asarray(values, dtype=dtype).reshape(-1)
            flat = old.reshape(-1)
            for lane, index in enumerate(indices):
                flat[lane] = view[index]
                if view[index] == expected[lane]:
                    view[index] = new[lane]
        self._atomic_dma(allocation, indices, dtype.itemsize)
        return old

    # ---- compute -----------------------------------------------------------------------
    def dot(self, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None, out_dtype_name: str) -> np.ndarray:
        in_dtype = resolve_dtype(a.dtype)
        out_dtype = resolve_dtype(out_dtype_name).numpy
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = int(np.prod(a.shape[:-2], dtype=np.int64)) if a.ndim > 2 else 1
        flops = 2 * batch * m * n * k
        operand_bytes = a.nbytes + b.nbytes + (acc.nbytes if acc is not None else batch * m * n * np.dtype(out_dtype).itemsize)
        self._check_working_set(operand_bytes, "a dot's operands")
        pe = self._pe
        self._machine.compute(pe.matrix, gemm_ps(self._ctx.topology, in_dtype.name, flops), kind="gemm",
                              label=self._kernel, program=self._program, flops=flops,
                              args={"m": m, "n": n, "k": k, "dtype": in_dtype.name})
        if self._timing_only:
            return np.zeros(a.shape[:-1] + (n,), dtype=out_dtype) if acc is None else acc.astype(out_dtype)
        wide = np.int32 if in_dtype.name == "i8" else np.float32 if in_dtype.itemsize < 8 else np.float64
        result = np.matmul(a.astype(wide), b.astype(wide))
        if acc is not None:
            result = result + acc.astype(wide)
        return result.astype(out_dtype)

    def vector(self, op: str, n_elements: int, dtype_name: str) -> None:
        self._machine.compute(self._pe.vector, vector_ps(self._ctx.topology, n_elements), kind="vector",
                              label=self._kernel, program=self._program,
                              args={"op": op, "elements": n_elements, "dtype": dtype_name})

    # ---- shared machinery --------------------------------------------------------------
    def _locate(self, active: np.ndarray, itemsize: int, access: str):
        """The allocation holding every active address, and their element indices in it; else a fault."""
        lowest = int(active.min())
        allocation = self._memory.find(lowest)
        if allocation is None:
            raise KernelFault(None, lowest, itemsize)
        offsets = active.reshape(-1) - allocation.base
        bad = (offsets + itemsize > allocation.nbytes) | (offsets % itemsize != 0)
        if bad.any():
            offset = int(offsets[np.argmax(bad)])
            raise KernelFault(allocation.name, offset, itemsize)
        return allocation, offsets // itemsize

    def _check_working_set(self, nbytes: int, what: str) -> None:
        if nbytes > self._tcm_bytes:
            raise WorkingSetTooLarge(
                f"kernel '{self._kernel}' program {self._program}: {what} needs {nbytes} bytes of TCM but a PE "
                f"has {self._tcm_bytes}; use smaller blocks (BLOCK_* constexprs)")

    def _atomic_dma(self, allocation, indices: np.ndarray, itemsize: int) -> None:
        """The DMAs of an atomic, timed like a store; its data effect was applied at issue.

        Atomics are not hazard-tracked: programs racing on them is what they are for.
        """
        pe = self._pe
        here = tcm(pe.sip, pe.cube, pe.pe)
        replica = self._machine.nearest_replica(allocation.placement, pe.sip, pe.cube)
        transfers = [Transfer(src=here, dst=hbm(pe.sip, cube), nbytes=count * itemsize)
                     for cube, _, count in lanes_per_cube(allocation.placement, indices, replica)]
        self._machine.run_transfers(transfers, label=self._kernel, data=False, device=f"sip{pe.sip}",
                                    unit=f"{pe.name}.dma", program=self._program, dma_engine=pe.free_dma_engine())

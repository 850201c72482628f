"""`SimProgramPort`: one Triton program's view of the simulated machine.

The bridge (ADR 0007) hands every memory access, atomic, dot and vector op
of a program to its port. This port turns each into PE ops on the program's
PE: a load is a DMA from the HBM of the cubes that hold the addressed bytes
into the PE's TCM (values read at the DMA's start), a store the reverse
(values visible at its end), a dot a matrix-unit op, a vector op a
vector-unit op — one op-log entry each. Addresses are checked against the
allocations of the launch's device before any byte moves: an access outside
every allocation, or past the end of the tensor its lowest address lies in,
is a `KernelFault` naming the address, the lane, the tensor it lies in or is
nearest to and how far past its end (or before its start) it is (the bridge
adds the kernel and program). For pointers computed from a tensor argument
the bridge's memcheck (ADR 0014) has already checked one lane against that
tensor's allocation; this check, which keeps every active lane in the one
allocation holding the first, proves the rest (`one_allocation_per_access`).
The DMAs themselves are `kernbench.machine.placed_dma`'s, shared with the
collectives' PE programs; costs and decisions are ADR 0008.
What every port of a machine asks again and again — op durations and their
op-log args, dtypes, each placement's replica nearest a PE — is worked out
once per run (`_MachineCosts`, kept in the run's caches), since a grid's programs (replayed from
one trace, ADR 0007) make the same requests many thousand times; where a
block of addresses goes is worked out once per launch (`access_plans`).
"""

from __future__ import annotations

import weakref

import numpy as np

from kernbench.dtypes import resolve_dtype
from kernbench.kernels.errors import KernelFault
from kernbench.kernels.triton_bridge.values import all_set, placeholder
from kernbench.machine import Transfer, hbm, tcm
from kernbench.machine.placed_dma import kept_dmas, lanes_per_cube, load_elements, store_elements
from kernbench.machine.pe import gemm_ps, vector_ps
from kernbench.runtime_api.launch.access_plans import AccessPlan, AccessPlans
from kernbench.runtime_api.errors import WorkingSetTooLarge

_ATOMIC_OPS = {
    "add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "xchg": lambda old, new: new,
}


class _MachineCosts:
    """What every program's port asks of one machine again and again, worked out once per run.

    Op durations depend on the topology only; a placement's nearest replica
    to a PE on the mesh only. Kept in slots of the run's caches, so programs
    of every launch share them.
    """

    def __init__(self, machine) -> None:
        caches = machine.caches
        self.topology = machine.topology
        self.dma_view = _ReplicaCachingMachine(machine)
        self.vector_ops: dict[tuple, tuple[int, tuple]] = caches["kernel_port.vector_ops"]
        self.gemm_ops: dict[tuple, tuple[int, tuple]] = caches["kernel_port.gemm_ops"]
        self.dtypes: dict[str, np.dtype] = caches["kernel_port.dtypes"]

    def vector(self, op: str, n_elements: int, dtype_name: str) -> tuple[int, tuple]:
        """(duration, op-log args) of a vector op; records of equal ops share one args tuple."""
        key = (op, n_elements, dtype_name)
        known = self.vector_ops.get(key)
        if known is None:
            known = self.vector_ops[key] = (
                vector_ps(self.topology, n_elements), (("op", op), ("elements", n_elements), ("dtype", dtype_name)))
        return known

    def gemm(self, dtype_name: str, m: int, n: int, k: int, flops: int) -> tuple[int, tuple]:
        """(duration, op-log args) of a dot of `flops` flops of an m x k by k x n tile."""
        key = (dtype_name, m, n, k, flops)
        known = self.gemm_ops.get(key)
        if known is None:
            known = self.gemm_ops[key] = (
                gemm_ps(self.topology, dtype_name, flops), (("m", m), ("n", n), ("k", k), ("dtype", dtype_name)))
        return known

    def dtype(self, name: str) -> np.dtype:
        dtype = self.dtypes.get(name)
        if dtype is None:
            dtype = self.dtypes[name] = np.dtype(resolve_dtype(name).numpy)
        return dtype


class _ReplicaCachingMachine:
    """The machine as the placed DMAs see it, with `nearest_replica` remembered per (placement, sip, cube).

    Everything else is the machine's own, reached through a weak proxy: this
    view lives as long as the machine, never longer. A placement is
    unhashable, so it is remembered by identity and kept, so that its id
    stays its own.
    """

    def __init__(self, machine) -> None:
        self._machine = weakref.proxy(machine)
        self._nearest: dict[tuple[int, int, int], tuple[object, int]] = machine.caches["kernel_port.nearest"]
        self.engine = machine.engine
        self.caches = machine.caches

    def __getattr__(self, name: str):
        return getattr(self._machine, name)

    # What every DMA asks for, found without `__getattr__`.
    def issue_dma(self, *args):
        return self._machine.issue_dma(*args)

    def land(self, effect) -> None:
        self._machine.land(effect)

    def nearest_replica(self, placement, sip: int, cube: int) -> int:
        key = (id(placement), sip, cube)
        known = self._nearest.get(key)
        if known is None or known[0] is not placement:
            known = self._nearest[key] = (placement, self._machine.nearest_replica(placement, sip, cube))
        return known[1]


def _costs(machine) -> _MachineCosts:
    kept = machine.caches["kernel_port.costs"]
    costs = kept.get(machine)
    if costs is None:
        costs = kept[machine] = _MachineCosts(machine)
    return costs


class SimProgramPort:
    """The `ProgramPort` of one program instance running on one PE."""

    # `_locate` faults any access not wholly inside one allocation, so the bridge's memcheck checks one lane.
    one_allocation_per_access = True

    def __init__(self, ctx, kernel: str, program: int, pe, timing_only: bool, plans: AccessPlans):
        self._ctx = ctx
        self._machine = ctx.machine
        self._engine = ctx.machine.engine
        self._costs = _costs(ctx.machine)
        self._memory = ctx.machine.memory[pe.sip]
        self._kernel = kernel
        self._program = program
        self._pe = pe
        self._timing_only = timing_only
        self._tcm_bytes = ctx.topology.pe.tcm.capacity_bytes
        self._plans = plans  # the launch's, shared by its programs

    # ---- memory ------------------------------------------------------------------------
    def load(self, addresses: np.ndarray, mask: np.ndarray | None, dtype_name: str) -> np.ndarray:
        dtype = self._costs.dtype(dtype_name)
        plan, pieces = self._plan(addresses, mask, dtype.itemsize, "load")
        if not plan.count:
            return np.zeros(addresses.shape, dtype=dtype)
        gathered = load_elements(self._costs.dma_view, self._pe, plan.allocation, dtype, plan.indices,
                                 label=self._kernel, program=self._program, data=not self._timing_only,
                                 pieces=pieces)
        if self._timing_only:
            # Nothing was read; the bridge poisons what it gets, so zeros that take no memory will do.
            return placeholder(addresses.shape, dtype)
        if plan.active_mask is None:
            return gathered.reshape(addresses.shape)
        out = np.zeros(addresses.shape, dtype=dtype)
        out[plan.active_mask] = gathered
        return out

    def store(self, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray | None) -> None:
        values = np.asarray(values)
        plan, pieces = self._plan(addresses, mask, values.dtype.itemsize, "store")
        if not plan.count:
            return
        payload = (values if plan.active_mask is None else values[plan.active_mask]).reshape(-1)
        store_elements(self._costs.dma_view, self._pe, plan.allocation, plan.indices, payload,
                       label=self._kernel, program=self._program, data=not self._timing_only, pieces=pieces)

    def atomic_rmw(self, op: str, addresses, values, mask, dtype_name: str) -> np.ndarray:
        dtype = np.dtype(resolve_dtype(dtype_name).numpy) if dtype_name not in ("u16", "u32", "u64") \
            else np.dtype(f"uint{dtype_name[1:]}")
        active = addresses if mask is None else addresses[mask]
        old = np.zeros(addresses.shape, dtype=dtype)
        if active.size == 0:
            return old
        allocation, indices = self._locate(active, dtype.itemsize, f"atomic_{op}", addresses, mask)
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
        allocation, indices = self._locate(addresses.reshape(-1), dtype.itemsize, "atomic_cas", addresses, None)
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
        result_bytes = acc.nbytes if acc is not None else batch * m * n * np.dtype(out_dtype).itemsize
        operand_bytes = a.nbytes + b.nbytes + result_bytes
        self._check_working_set(operand_bytes, "a dot's operands")
        duration, pairs = self._costs.gemm(in_dtype.name, m, n, k, flops)
        self._engine.sleep_until(self._machine.issue_compute(
            self._pe.matrix, duration, kind="gemm", label=self._kernel, program=self._program, flops=flops,
            pairs=pairs))
        if self._timing_only:
            return placeholder(a.shape[:-1] + (n,), np.dtype(out_dtype))  # the bridge poisons it: not computed
        wide = np.int32 if in_dtype.name == "i8" else np.float32 if in_dtype.itemsize < 8 else np.float64
        result = np.matmul(a.astype(wide, copy=False), b.astype(wide, copy=False))
        if acc is not None:
            result += acc.astype(wide, copy=False)
        return result.astype(out_dtype, copy=False)

    def vector(self, op: str, n_elements: int, dtype_name: str) -> None:
        # `Machine.compute` with the op-log args built once per kind of op (`issue_compute`, then the wait).
        duration, pairs = self._costs.vector(op, n_elements, dtype_name)
        self._engine.sleep_until(self._machine.issue_compute(
            self._pe.vector, duration, kind="vector", label=self._kernel, program=self._program, pairs=pairs))

    # ---- shared machinery --------------------------------------------------------------
    def _plan(self, addresses: np.ndarray, mask: np.ndarray | None, itemsize: int,
              access: str) -> tuple[AccessPlan, tuple]:
        """The launch's kept plan of this access (a new one, checked, if none: a fault or an oversized block
        raises and is not kept), and its DMAs from this PE."""
        plan = self._plans.find(addresses, mask, itemsize, self._memory)
        if plan is None:
            active_mask = None if mask is None or all_set(mask) else mask  # all set: the same accesses, no gather
            active = addresses if active_mask is None else addresses[active_mask]
            if active.size == 0:
                plan = AccessPlan(addresses, mask, active_mask, 0, None, 0, None, {})
            else:
                allocation, indices = self._locate(active, itemsize, access, addresses, active_mask)
                self._check_working_set(active.size * itemsize, f"a {access}")
                plan = AccessPlan(addresses, mask, active_mask, active.size, allocation, int(active.item(0)),
                                  indices, {})
            self._plans.keep_plan(plan, itemsize)
        if not plan.count:
            return plan, ()
        return plan, kept_dmas(self._costs.dma_view, self._pe, plan.allocation, plan.indices, itemsize, plan.pieces)

    def _locate(self, active: np.ndarray, itemsize: int, access: str, addresses: np.ndarray, mask):
        """The allocation holding every active address, and their element indices in it; else a fault."""
        allocation = self._memory.find(active.item(0))
        if allocation is not None and not itemsize & (itemsize - 1) and allocation.base % itemsize == 0:
            # The usual case in four passes: every offset from the allocation holding the first address
            # is inside it (as unsigned, a negative offset is too large) and a multiple of the itemsize.
            offsets = active.reshape(-1) - allocation.base
            if (int(offsets.view(np.uint64).max()) + itemsize <= allocation.nbytes
                    and (itemsize == 1 or not int(np.bitwise_or.reduce(offsets)) & (itemsize - 1))):
                if itemsize > 1:
                    offsets >>= itemsize.bit_length() - 1
                return allocation, offsets
        lowest = int(active.min())
        allocation = self._memory.find(lowest)
        if allocation is None:
            raise self._fault(lowest, itemsize, access, addresses, mask)
        offsets = active.reshape(-1) - allocation.base
        bad = (offsets + itemsize > allocation.nbytes) | (offsets % itemsize != 0)
        if bad.any():
            raise self._fault(int(active.reshape(-1)[np.argmax(bad)]), itemsize, access, addresses, mask, allocation)
        return allocation, offsets // itemsize

    def _fault(self, address: int, itemsize: int, access: str, addresses, mask, reference=None) -> KernelFault:
        """The fault of an access at `address`, reported against `reference` (the allocation of the access's
        lowest address) or else the allocation nearest it, with the first lane (in block order) at it."""
        memory = self._memory
        inside = memory.find(address)
        if reference is None:
            reference = memory.nearest(address)
        at = np.asarray(addresses) == address
        if mask is not None:
            at &= mask
        first = int(np.flatnonzero(at.reshape(-1))[0])
        lane = tuple(int(i) for i in np.unravel_index(first, at.shape)) if at.ndim > 1 else first
        if reference is None:
            return KernelFault(None, address, itemsize, address=address, access=access, lane=lane)
        return KernelFault(reference.name, address - reference.base, itemsize, address=address, access=access,
                           lane=lane, tensor_bytes=reference.nbytes,
                           inside=inside.name if inside is not None and inside is not reference else None)

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
        replica = self._costs.dma_view.nearest_replica(allocation.placement, pe.sip, pe.cube)
        transfers = [Transfer(src=here, dst=hbm(pe.sip, cube), nbytes=count * itemsize)
                     for cube, _, count in lanes_per_cube(allocation.placement, indices, replica)]
        self._machine.run_transfers(transfers, label=self._kernel, data=False, device=f"sip{pe.sip}",
                                    unit=f"{pe.name}.dma", program=self._program, dma_engine=pe.free_dma_engine())

"""`ProgramPort`: the only way a program touches memory or spends time.

The bridge computes what numpy can compute cheaply and exactly
(elementwise math, reductions, address arithmetic) and hands the port
everything that needs the simulated machine: memory traffic, atomics, the
matrix unit, and a cost notice for each vector op it computed itself. One
port serves one program instance; the runtime implements it over its
simulated memory and clock, and any method may switch greenlets before it
returns.

Addresses are int64 arrays of virtual byte addresses with the shape of the
block being accessed. A mask, when given, has the same shape; masked-off
lanes are not accesses (their addresses may be anything, including out of
bounds) and the bridge ignores what a load returns for them. Bounds checks
are the port's: it raises `kernbench.kernels.KernelFault` naming the tensor,
offset and access size, and may leave `kernel` and `program_id` as None for
the bridge to fill in.

A port may declare `one_allocation_per_access = True`: it faults every
access whose active lanes are not all inside one allocation. The bridge's
memcheck (ADR 0014) then checks one active lane of each access through a
pointer with a known origin and relies on the port for the others; without
the declaration it checks every lane itself.

dtype names are kernbench's ("f16", "bf16", "f32", "f64", "i8", "i16",
"i32", "i64", "u8", "bool"); atomics may also name "u16", "u32" or "u64",
which Triton uses for the unsigned half of float atomic max/min. Loads of
"bool" tensors arrive as "i8", as in Triton.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class ProgramPort(Protocol):
    """What one program instance needs from the simulated machine."""

    def load(self, addresses: np.ndarray, mask: np.ndarray | None, dtype_name: str) -> np.ndarray:
        """Read one element of `dtype_name` at each active address; same shape as `addresses`."""

    def store(self, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray | None) -> None:
        """Write `values` (already of the element type) at each active address."""

    def atomic_rmw(
        self, op: str, addresses: np.ndarray, values: np.ndarray, mask: np.ndarray | None, dtype_name: str
    ) -> np.ndarray:
        """Apply op ("add", "max", "min", "and", "or", "xor", "xchg") per active lane; return the old values."""

    def atomic_cas(
        self, addresses: np.ndarray, compare: np.ndarray, values: np.ndarray, dtype_name: str
    ) -> np.ndarray:
        """Where memory equals `compare`, write `values`; return the old values (every lane is active)."""

    def dot(self, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None, out_dtype_name: str) -> np.ndarray:
        """Return a @ b (+ acc) in `out_dtype_name` and charge the matrix unit for it."""

    def vector(self, op: str, n_elements: int, dtype_name: str) -> None:
        """Charge the vector unit for an op over `n_elements` the bridge computed with numpy."""

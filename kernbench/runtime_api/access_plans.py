"""Where a launch's loads and stores go, worked out once per block of addresses and kept for the launch.

Before a program's load or store moves a byte, its port finds the lanes the
mask leaves active, the allocation holding their addresses, their element
indices in it (checking every one), and the DMAs that move them: one per
cube holding some of them, from the replica nearest the PE
(`placed_dma.plan_dmas`). That is several passes over the block. Programs
replayed from one trace (ADR 0007) access the same blocks again and again:
the trace's memo hands every program of a block row the same pointer
arrays, step by step of the K loop. So a launch keeps each answer
(`AccessPlan`) under the identity of the address and mask arrays, the
element size and the PE's cube (which picks the replica). The arrays are
held by the plan, so their ids stay theirs while it is kept.

A kept plan is used only while the allocation it found still holds its
first active address (`Memory.find` returns that same object): the same
allocation object has the same base, placement and size, so the indices,
the bounds checks and the DMAs are exactly what working them out again
would give. A plan is a pure function of what it is kept under; the DMAs
are still issued, timed and logged one by one for every access.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bytes of address, mask and index arrays one launch keeps; past it the oldest plans are dropped.
PLAN_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """One block's access: the arrays it is kept under, the active lanes' mask (None: every lane), how many
    lanes are active, and — when some are — their allocation, element indices and DMAs."""

    addresses: np.ndarray
    mask: np.ndarray | None
    active_mask: np.ndarray | None
    count: int
    allocation: object | None
    first_address: int
    indices: np.ndarray | None
    pieces: tuple

    @property
    def nbytes(self) -> int:
        held = self.addresses.nbytes + (0 if self.mask is None else self.mask.nbytes)
        return held + (0 if self.indices is None else self.indices.nbytes)


class AccessPlans:
    """The plans of one launch, oldest dropped first past `PLAN_BYTES`."""

    __slots__ = ("_plans", "_held")

    def __init__(self) -> None:
        self._plans: dict[tuple, AccessPlan] = {}
        self._held = 0

    def find(self, addresses: np.ndarray, mask: np.ndarray | None, itemsize: int, cube: int,
             memory) -> AccessPlan | None:
        """The plan kept for this access from a PE of `cube`, if its allocation in `memory` still holds it."""
        plan = self._plans.get((id(addresses), id(mask), itemsize, cube))
        if plan is None or plan.addresses is not addresses or plan.mask is not mask:
            return None
        if plan.allocation is not None and memory.find(plan.first_address) is not plan.allocation:
            return None
        return plan

    def keep(self, plan: AccessPlan, itemsize: int, cube: int) -> None:
        key = (id(plan.addresses), id(plan.mask), itemsize, cube)
        plans = self._plans
        previous = plans.pop(key, None)
        if previous is not None:
            self._held -= previous.nbytes
        plans[key] = plan
        self._held += plan.nbytes
        while self._held > PLAN_BYTES and plans:
            self._held -= plans.pop(next(iter(plans))).nbytes

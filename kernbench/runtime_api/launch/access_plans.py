"""Where a launch's loads and stores go, worked out once per block of addresses and kept for the launch.

Before a program's load or store moves a byte, its port finds the lanes the
mask leaves active, the allocation holding their addresses, their element
indices in it (checking every one), and the DMAs that move them: one per
cube holding some of them, from the replica nearest the PE
(`placed_dma.plan_dmas`). That is several passes over the block. Programs
replayed from one trace (ADR 0007) access the same blocks again and again:
the trace's memo hands every program of a block row the same pointer
arrays, step by step of the K loop. So a launch keeps each answer
(`AccessPlan`) under the identity of the address and mask arrays and the
element size, with its DMAs per replica (PEs of different cubes may read
different replicas of a tensor). The arrays are held by the plan, so their
ids stay theirs while it is kept.

A kept plan is used only while the allocation it found still holds its
first active address (`Memory.find` returns that same object): the same
allocation object has the same base, placement and size, so the indices,
the bounds checks and the DMAs are exactly what working them out again
would give. A plan is a pure function of what it is kept under; the DMAs
are still issued, timed and logged one by one for every access. The launches
of a run that run at once draw the plans' bytes from one pool of the run,
as their tapes' memos do (ADR 0007).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernbench.kernels.kept_values import KeptValues, MemoBudget

#: Bytes of address, mask and index arrays the launches of a run that run at once keep, together (a run's
#: `access_plan_pool`); a launch that finds the pool empty drops its own oldest plans.
PLAN_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """One block's access: the arrays it is kept under, the active lanes' mask (None: every lane), how many
    lanes are active, and — when some are — their allocation, element indices, and their DMAs for each replica
    asked for so far (`pieces`, filled in by the port)."""

    addresses: np.ndarray
    mask: np.ndarray | None
    active_mask: np.ndarray | None
    count: int
    allocation: object | None
    first_address: int
    indices: np.ndarray | None
    pieces: dict[int, tuple]

    @property
    def nbytes(self) -> int:
        held = self.addresses.nbytes + (0 if self.mask is None else self.mask.nbytes)
        return held + (0 if self.indices is None else self.indices.nbytes)


class AccessPlans(KeptValues):
    """The access plans of one launch, kept under the identity of their arrays and their element size, their
    bytes drawn from the run's pool `pool`; `release` at the launch's end."""

    __slots__ = ()

    def __init__(self, pool: list[int]) -> None:
        super().__init__(MemoBudget(pool))

    def find(self, addresses: np.ndarray, mask: np.ndarray | None, itemsize: int, memory) -> AccessPlan | None:
        """The plan kept for this access, if its allocation in `memory` still holds it."""
        plan = self.get((id(addresses), id(mask), itemsize))
        if plan is None or plan.addresses is not addresses or plan.mask is not mask:
            return None
        if plan.allocation is not None and memory.find(plan.first_address) is not plan.allocation:
            return None
        return plan

    def keep_plan(self, plan: AccessPlan, itemsize: int) -> None:
        self.keep((id(plan.addresses), id(plan.mask), itemsize), plan, plan.nbytes)

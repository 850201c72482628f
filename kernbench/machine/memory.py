"""Device memory: virtual addresses, per-cube HBM capacity, and the bytes themselves.

Each SIP has its own window of the virtual address space, so an address alone
says which device it is on (as a pointer does on a GPU). Allocations are
separated by an unmapped guard gap, so a kernel that runs a little past the
end of a tensor lands outside every allocation and faults instead of silently
reading its neighbour. Capacity is charged per cube from the tensor's
placement; an allocation that does not fit raises `OutOfMemoryError` and
changes nothing.

Capacity is checked before anything else happens, so a tensor that does not
fit never costs host memory. The store keeps one logical copy of each
tensor's bytes, even when its placement replicates it over cubes: replicas
are always written together, so their values never differ, and the cost
model charges each replica's HBM. Those bytes are a lazily backed `Storage`
(adr/0013-storage.md); a memory that is not `backed` (timing-only runs) keeps
none.
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, field

from kernbench.errors import KernbenchError
from kernbench.machine.storage import Storage
from kernbench.policy import Placement

DEVICE_WINDOW_BITS = 44  # 16 TiB of virtual space per SIP, far above any HBM capacity
ALIGNMENT = 256
GUARD_BYTES = 64 * 1024


# Allocations `DeviceMemory.release` gave back that hold no bytes since (not restored, not shared), while alive.
RELEASED: weakref.WeakSet = weakref.WeakSet()


class OutOfMemoryError(KernbenchError):
    """An allocation that does not fit in the HBM of the cubes its placement names."""


@dataclass(eq=False)
class Allocation:
    """One tensor's memory: where it is, what it is called, and its bytes (`storage`; None when not backed)."""

    name: str
    sip: int
    base: int
    nbytes: int
    placement: Placement
    itemsize: int
    storage: Storage | None = field(repr=False)
    charged: dict[int, int] = field(repr=False)  # cube -> HBM bytes held
    size_when_made: int = field(default=-1, repr=False)  # nbytes before a release (-1: as made, never released)
    keeps: object = field(default=None, repr=False)  # what holds the bytes shared from another allocation

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def reinterpreted(self, itemsize: int) -> "Allocation":
        """These bytes seen as elements of `itemsize` bytes (a view of another dtype: `view_as_real`): the same
        address, storage and charge, the placement's elements rescaled. Charged nothing more: no byte is new."""
        if itemsize == self.itemsize:
            return self
        return Allocation(self.name, self.sip, self.base, self.nbytes, self.placement.reinterpreted(self.itemsize,
                                                                                                    itemsize),
                          itemsize, self.storage, self.charged)


def window_base(sip: int) -> int:
    """The first address of SIP `sip`'s window: each SIP allocates in a window of its own, so an address names
    its SIP, and SIPs that allocate alike hold their tensors at the same offsets in their windows."""
    return (sip + 1) << DEVICE_WINDOW_BITS


class DeviceMemory:
    """The HBM of one SIP: a bump allocator over its address window and per-cube capacity."""

    def __init__(self, sip: int, cubes: int, capacity_per_cube: int, *, backed: bool = True):
        self.sip = sip
        self.backed = backed
        self.capacity_per_cube = capacity_per_cube
        self.used = [0] * cubes
        self.peak_total = 0
        self._next = window_base(sip)
        self._bases: list[int] = []
        self._allocations: list[Allocation] = []

    @property
    def allocated(self) -> int:
        return sum(self.used)

    def free_bytes(self) -> list[int]:
        return [self.capacity_per_cube - used for used in self.used]

    def allocate(self, name: str, nbytes: int, itemsize: int, placement: Placement) -> Allocation:
        charged = placement.bytes_per_cube(itemsize)
        short = {c: b for c, b in charged.items() if self.used[c] + b > self.capacity_per_cube}
        if short:
            free = ", ".join(f"cube {c}: {_size(f)}" for c, f in enumerate(self.free_bytes()))
            asked = ", ".join(f"cube {c}: {_size(b)}" for c, b in sorted(charged.items()))
            raise OutOfMemoryError(
                f"sip{self.sip}: cannot allocate tensor {name!r} ({_size(nbytes)}; per cube {asked}); "
                f"free HBM per cube: {free} (capacity {_size(self.capacity_per_cube)} each)")
        base = self._next
        self._next = _align(base + max(nbytes, 1) + GUARD_BYTES)
        storage = Storage(nbytes, name) if self.backed else None
        allocation = Allocation(name, self.sip, base, nbytes, placement, itemsize, storage, charged)
        for cube, nbytes_on_cube in charged.items():
            self.used[cube] += nbytes_on_cube
        self.peak_total = max(self.peak_total, self.allocated)
        self._bases.append(base)
        self._allocations.append(allocation)
        return allocation

    def free(self, allocation: Allocation) -> None:
        index = bisect.bisect_left(self._bases, allocation.base)
        if index < len(self._bases) and self._allocations[index] is allocation:
            del self._bases[index], self._allocations[index]
            for cube, nbytes_on_cube in allocation.charged.items():
                self.used[cube] -= nbytes_on_cube

    def release(self, allocation: Allocation) -> None:
        """Give the allocation's HBM back while tensors still view it (`UntypedStorage.resize_(0)`): it holds no
        bytes until `restore` or `share`. Work enqueued before still reads the values it had, as stream order
        lets a kernel launched before a free read the freed bytes on a GPU."""
        if allocation.nbytes == 0:
            return
        self.free(allocation)
        allocation.size_when_made = allocation.nbytes
        allocation.nbytes, allocation.charged, allocation.keeps = 0, {}, None
        RELEASED.add(allocation)

    def restore(self, allocation: Allocation) -> None:
        """A released allocation's bytes again, newly charged (values uninitialized), at a new address."""
        fresh = self.allocate(allocation.name, allocation.size_when_made, allocation.itemsize, allocation.placement)
        allocation.base, allocation.nbytes = fresh.base, fresh.nbytes
        allocation.storage, allocation.charged = fresh.storage, fresh.charged
        index = bisect.bisect_left(self._bases, fresh.base)
        self._allocations[index] = allocation
        RELEASED.discard(allocation)

    @staticmethod
    def share(allocation: Allocation, source: Allocation, keeps: object) -> None:
        """Point a released allocation at `source`'s bytes, charged once (to `source`), as PyTorch points one
        storage at another's data: `keeps` (what owns `source`) stays alive as long as the allocation does, so the
        bytes go back when both are gone."""
        allocation.base, allocation.nbytes, allocation.placement = source.base, source.nbytes, source.placement
        allocation.storage, allocation.charged, allocation.keeps = source.storage, {}, keeps
        RELEASED.discard(allocation)

    def find(self, address: int) -> Allocation | None:
        """The allocation containing `address`, or None (an unmapped address)."""
        index = bisect.bisect_right(self._bases, address) - 1
        if index >= 0 and address < self._allocations[index].end:
            return self._allocations[index]
        return None

    def nearest(self, address: int) -> Allocation | None:
        """The allocation containing `address`, else the one whose bytes are nearest it (the lower on a tie);
        None when nothing is allocated. What a memory fault is reported against."""
        index = bisect.bisect_right(self._bases, address) - 1
        below = self._allocations[index] if index >= 0 else None
        above = self._allocations[index + 1] if index + 1 < len(self._allocations) else None
        if below is None or above is not None and above.base - address < address - below.end + 1:
            return above
        return below

    def reset_peak(self) -> None:
        self.peak_total = self.allocated


def sip_of_address(address: int) -> int:
    """Which SIP's window an address lies in (-1 for addresses below every window)."""
    return (address >> DEVICE_WINDOW_BITS) - 1


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes} B"

"""Hazard detection for the data executor: reads of bytes another process is still writing.

`Machine.run_transfers` applies each DMA's data effect in simulated time: a
read takes the source bytes at the transfer's start, a write makes the
destination bytes visible at its end. Between a write's reservation and its
end its bytes are *in flight*. Every ordering the runtime offers — program
order, stream order, events, host barriers, IPCQ messages — waits for the
*completion* of earlier work, so a write still in flight when another
process reads the same bytes has no happens-before edge to that read: the
reader sees the old bytes here and could see the new ones on a machine
with slightly different timing. That is a hazard (ADR 0009), reported the
way a race detector reports one, or raised as `DataHazard` in strict mode.

The cost stays off the common path: in-flight writes are kept per
allocation as bounding byte ranges and dropped when they land; only a read
whose range overlaps another process's in-flight write compares exact
element sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernbench.errors import KernbenchError
from kernbench.machine.memory import Allocation
from kernbench.machine.strided_runs import StridedRuns, element_bounds


class DataHazard(KernbenchError):
    """A read raced a write (strict mode); the message names both ops, the tensor and the bytes."""

    def __init__(self, hazard: "Hazard"):
        super().__init__(str(hazard))
        self.hazard = hazard


@dataclass(slots=True)  # not frozen: one per DMA, and a frozen __init__ costs half again as much
class Region:
    """Elements of one allocation a DMA reads or writes: `elements` (indices or a slice) of `itemsize` bytes."""

    allocation: Allocation
    elements: np.ndarray | slice
    itemsize: int

    def bounds(self) -> tuple[int, int]:
        """[lo, hi) byte offsets in the allocation covering every element."""
        first, stop = element_bounds(self.elements)
        return first * self.itemsize, stop * self.itemsize

    def byte_offsets(self, itemsize: int) -> np.ndarray:
        """Offsets of the region's bytes in units of `itemsize` bytes (a divisor of its own itemsize)."""
        elements = self.elements
        if isinstance(elements, slice):
            elements = np.arange(elements.start, elements.stop, dtype=np.int64)
        elif isinstance(elements, StridedRuns):
            elements = elements.indices()
        ratio = self.itemsize // itemsize
        if ratio == 1:
            return elements
        return (elements[:, None] * ratio + np.arange(ratio)).ravel()


@dataclass(slots=True)  # not frozen, as Region
class Access:
    """Who did a DMA and when: its op-log label, program, unit, and simulated [start, end)."""

    label: str
    program: int | None
    unit: str
    start: int
    end: int

    def __str__(self) -> str:
        who = f"'{self.label}'" if self.program is None else f"kernel '{self.label}' program {self.program}"
        return f"{who} ({self.unit}, {self.start}-{self.end} ps)"


@dataclass(frozen=True, slots=True)
class Hazard:
    """A read of bytes [offset, offset + nbytes) of `tensor` while `writer` was still writing them."""

    tensor: str
    sip: int
    address: int
    offset: int
    nbytes: int
    reader: Access
    writer: Access

    def __str__(self) -> str:
        return (f"data hazard on tensor '{self.tensor}' (sip{self.sip}) bytes [{self.offset}, "
                f"{self.offset + self.nbytes}) at {self.address:#x}: {self.reader} read them at "
                f"{self.reader.start} ps while {self.writer} was still writing them, with nothing "
                "ordering the two; synchronize (a stream, event or host read) between them")

    def as_dict(self) -> dict:
        return {"message": str(self), "tensor": self.tensor, "sip": self.sip, "address": self.address, "offset": self.offset,
                "nbytes": self.nbytes, "reader": _access_dict(self.reader), "writer": _access_dict(self.writer)}


class _InFlight:
    __slots__ = ("region", "lo", "hi", "end", "who", "process")

    def __init__(self, region: Region, end: int, who: Callable[[], Access], process):
        self.region = region
        self.lo, self.hi = region.bounds()
        self.end = end
        self.who = who
        self.process = process


class HazardDetector:
    """In-flight writes per allocation, and the hazards found so far (`hazards`, in order found).

    Each op is named by `who`, a callable returning its `Access`, called only
    when a hazard is reported: the common case, no hazard, builds no report.
    """

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.hazards: list[Hazard] = []
        self._writes: dict[Allocation, list[_InFlight]] = {}

    def write_issued(self, region: Region, end: int, who: Callable[[], Access], process) -> _InFlight:
        """Remember a write landing at `end` until `write_landed`; returns its token."""
        entry = _InFlight(region, end, who, process)
        writes = self._writes.get(region.allocation)
        if writes is None:
            self._writes[region.allocation] = [entry]
        else:
            writes.append(entry)
        return entry

    def write_landed(self, entry: _InFlight) -> None:
        writes = self._writes[entry.region.allocation]
        writes.remove(entry)
        if not writes:
            del self._writes[entry.region.allocation]

    def read(self, region: Region, who: Callable[[], Access], process, now: int) -> Hazard | None:
        """Check a read starting now against in-flight writes of other processes; return the first hazard."""
        writes = self._writes.get(region.allocation)
        if not writes:
            return None
        # A write whose end has passed without landing belongs to a process that was killed.
        writes[:] = [w for w in writes if w.end >= now]
        lo, hi = region.bounds()
        for write in writes:
            if write.process is process or write.hi <= lo or hi <= write.lo:
                continue
            common = _common_bytes(region, write.region)
            if common is not None:
                offset, nbytes = common
                allocation = region.allocation
                hazard = Hazard(allocation.name, allocation.sip, allocation.base + offset, offset, nbytes,
                                who(), write.who())
                self.hazards.append(hazard)
                return hazard
        return None


def _common_bytes(region: Region, written: Region) -> tuple[int, int] | None:
    """(offset, nbytes) from the first to the last byte both regions hold, or None when they share none."""
    if region.elements.__class__ is slice and written.elements.__class__ is slice:
        # Two runs of whole elements: the bytes both hold are where their byte ranges overlap.
        (lo, hi), (written_lo, written_hi) = region.bounds(), written.bounds()
        lo, hi = max(lo, written_lo), min(hi, written_hi)
        return (lo, hi - lo) if lo < hi else None
    unit = min(region.itemsize, written.itemsize)
    mine = region.byte_offsets(unit)
    # Only the first and last shared byte are wanted: a membership test, not a sorted intersection.
    common = mine[np.isin(mine, written.byte_offsets(unit))]
    if not common.size:
        return None
    offset = int(common.min()) * unit
    return offset, (int(common.max()) + 1) * unit - offset


def _access_dict(access: Access) -> dict:
    return {"label": access.label, "program": access.program, "unit": access.unit,
            "start_ps": access.start, "end_ps": access.end}

"""A SIP's L2: which of its PEs' reads of HBM the cache serves, least recently used out first.

A GPU's SMs read their operand tiles through an L2 shared by all of them;
programs working on neighbouring output tiles read the same input tiles,
and the L2 serves most of those reads at several times HBM's bandwidth
(ADR 0008, "The L2"). kernbench keeps the timing of that, not the data:
values always come from the tensor's storage. The cache remembers the
reads it has served by tag — the read's first byte address, its last
element and its size — so a read of the same bytes again (the same tile by
another program) hits while the tag is held. Tags are held least recently
used out first until their bytes exceed the capacity; a read larger than
the whole cache is never held. Writes go around it (to HBM), allocate
nothing, and leave what it holds in place: reads after a write of the same
bytes may hit, as a write-back cache would serve them.
"""

from __future__ import annotations

from collections import OrderedDict

from kernbench.machine.data_executor import Region
from kernbench.machine.strided_runs import StridedRuns

# The `l2_window` of a read the L2 neither serves nor holds (`Machine.issue_dma`): a row a fused kernel reads a
# second time after the rows in flight on the GPU have pushed it out (ADR 0016, "Row kernels").
UNCACHED = 0


def read_tag(region: Region) -> tuple[int, int, int]:
    """A read's tag: (address of its first byte, of its last element, element count) — O(1), whatever its
    shape (the first and last lane of an index array; a tile's are its corners)."""
    base, itemsize, elements = region.allocation.base, region.itemsize, region.elements
    if isinstance(elements, slice):
        return base + elements.start * itemsize, base + (elements.stop - 1) * itemsize, elements.stop - elements.start
    if isinstance(elements, StridedRuns):
        return base + elements.start * itemsize, base + (elements.stop - 1) * itemsize, elements.size
    flat = elements.reshape(-1)
    return base + int(flat[0]) * itemsize, base + int(flat[-1]) * itemsize, flat.size


class L2Tags:
    """The tags a SIP's L2 holds, in order of last use, and their bytes."""

    __slots__ = ("capacity_bytes", "held_bytes", "hits", "misses", "_tags")

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.held_bytes = 0
        self.hits = self.misses = 0
        self._tags: OrderedDict[tuple[int, int, int], int] = OrderedDict()

    def read(self, tag: tuple[int, int, int], nbytes: int) -> bool:
        """Whether a read with `tag` hits; a miss is then held, as `nbytes` of the capacity (evicting the least
        recently used)."""
        tags = self._tags
        if tag in tags:
            tags.move_to_end(tag)
            self.hits += 1
            return True
        self.misses += 1
        if nbytes <= self.capacity_bytes:
            while self.held_bytes + nbytes > self.capacity_bytes:
                self.held_bytes -= tags.popitem(last=False)[1]
            tags[tag] = nbytes
            self.held_bytes += nbytes
        return False

    def held(self, origin: int) -> tuple:
        """What is held, least recently used first, with each tag's bytes, its addresses from `origin` (the SIP's
        window, `memory.window_base`): two L2s holding the same answer alike every later read at the same offsets
        in their windows."""
        return tuple(((first - origin, last - origin, count), nbytes)
                     for (first, last, count), nbytes in self._tags.items())

    def take(self, other: "L2Tags", shift: int, hits: int, misses: int) -> None:
        """Hold what `other` holds, `shift` bytes on in the address space, and count `hits` and `misses` more: the
        L2 of a rank whose reads were another rank's at the same offsets of its own window (a symmetric
        collective)."""
        self._tags = OrderedDict(((first + shift, last + shift, count), nbytes)
                                 for (first, last, count), nbytes in other._tags.items())
        self.held_bytes = other.held_bytes
        self.hits += hits
        self.misses += misses

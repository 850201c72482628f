"""`Storage`: the bytes of one allocation, spending host memory only where values are computed.

A simulated machine is usually larger than the host that simulates it (a
32-SIP machine holds terabytes of HBM), so an allocation must not cost host
memory for its declared size (adr/0013-storage.md). Three rules keep host
memory proportional to the bytes whose values a run computes:

- **Mapped, not allocated.** A storage of at least `MAPPED_FROM_BYTES` is an
  anonymous private mapping made on first access, without swap reservation.
  The operating system backs a page only when it is written; a page never
  written reads as zeros without being backed. Smaller storages are plain
  numpy arrays (a mapping per small tensor would exhaust the host's map
  count long before its memory).
- **Constant fills are kept as a value.** A fill (`zeros`, `full`, `ones`)
  of whole `CHUNK_BYTES` chunks releases their pages and remembers the fill
  pattern per chunk; the pattern is written into a chunk only when bytes of
  that chunk are next read or written (`typed`), and a zero pattern never is.
  Only a fill's partial chunks at its ends are written at once. A fill of a
  box that is not one run of bytes (a column-wise shard) waits as a box
  (`fill_box`): the boxes of one value that together cover the storage — the
  shards of one whole-tensor fill — become one fill of all of it, so a
  constant fill costs no host memory whatever the tensor's layout.
- **Released on free.** A storage lives as long as its allocation; its pages
  go back to the host with it.

Worst case: a run that writes every byte of a tensor backs all of it, as it
must to hold the values; a box fill read or written before the boxes of its
value cover the storage (a racing reader, a fill of a single shard) is
written out then, and backs the pages its box crosses. Timing-only runs
create no storage at all.
"""

from __future__ import annotations

import mmap
import sys
from math import prod

import numpy as np

from kernbench.errors import KernbenchError
from kernbench.machine.strided_runs import StridedRuns

CHUNK_BYTES = 1 << 20
MAPPED_FROM_BYTES = CHUNK_BYTES
# Linux refuses an anonymous mapping larger than RAM + swap unless it asks for no
# swap reservation; Python's mmap module names the flag only from 3.13 on.
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


class HostMemoryError(KernbenchError):
    """The host cannot hold the values a data run computes (timing-only needs no host storage)."""


class Storage:
    """The bytes of one allocation of `nbytes`, backed lazily (see the module docstring)."""

    __slots__ = ("nbytes", "name", "_map", "_bytes", "_pending", "_boxes", "_box_fill", "_box_elements", "_constant")

    def __init__(self, nbytes: int, name: str):
        self.nbytes = nbytes
        self.name = name
        self._map: mmap.mmap | None = None
        self._bytes: np.ndarray | None = None
        self._pending: dict[int, np.ndarray] = {}  # chunk -> fill pattern not written into it yet
        self._boxes: dict[tuple, tuple] = {}  # box bounds -> (index, lo, hi): box fills not written yet
        self._box_fill: tuple | None = None  # (shape, value) the waiting boxes share
        self._box_elements = 0  # elements the waiting boxes hold together
        self._constant: tuple | None = None  # (dtype, bytes) of the value boxes filled all of, untouched since

    def typed(self, dtype, selector=None) -> np.ndarray:
        """The whole storage as a flat array of `dtype`, the elements `selector` holding their values.

        `selector` (a slice or an index array of `dtype` elements; None for
        all) says which elements the caller touches, so only the pending
        fills of their chunks are written first.
        """
        if self._bytes is None:
            self._bytes = self._create()
        self._constant = None  # the caller may write
        if self._boxes:
            self._write_boxes()
        if self._pending:
            itemsize = np.dtype(dtype).itemsize
            lo, hi = _byte_bounds(selector, itemsize, self.nbytes)
            self._write_pending(lo, hi)
        whole = self.nbytes - self.nbytes % np.dtype(dtype).itemsize  # a view of another dtype: its whole elements
        return self._bytes[:whole].view(dtype)

    def fill(self, lo: int, hi: int, pattern: np.ndarray) -> None:
        """Set bytes [lo, hi) to repetitions of `pattern` (one element's bytes; `lo` is element-aligned)."""
        self._constant = None
        if self._boxes:
            self._write_boxes()
        pattern = np.ascontiguousarray(pattern).view(np.uint8).reshape(-1)
        zero = not pattern.any()
        if self._bytes is None and zero and not self._pending:
            return  # a storage never touched reads as zeros already
        first, last = -(-lo // CHUNK_BYTES), hi // CHUNK_BYTES
        if self.nbytes < MAPPED_FROM_BYTES or first >= last:
            _repeat(self.typed(np.uint8, slice(lo, hi))[lo:hi], pattern)
            return
        head, tail = first * CHUNK_BYTES, last * CHUNK_BYTES
        _repeat(self.typed(np.uint8, slice(lo, head))[lo:head], pattern)
        _repeat(self.typed(np.uint8, slice(tail, hi))[tail:hi], pattern)
        self._map.madvise(mmap.MADV_DONTNEED, head, tail - head)
        for chunk in range(first, last):
            if zero:
                self._pending.pop(chunk, None)
            else:
                self._pending[chunk] = pattern

    def fill_box(self, shape: tuple[int, ...], index: tuple[slice, ...], lo: int, hi: int, value: np.ndarray) -> None:
        """Set the box `index` of the storage seen as a row-major array of `shape` to `value` (one element of the
        storage's dtype); the box's bytes lie in [lo, hi) but are not all of them (`fill` takes a box that is).

        The box is one of a partition's (two boxes given are equal or
        disjoint: a placement's shards). It waits, as a fill's whole chunks
        do; once the waiting boxes of one value cover `shape` they are one
        `fill` of it all. A box of another value, a `fill`, and any read or
        write (`typed`) first write the waiting boxes out. A box of the value
        the whole storage holds changes nothing: another replica's copy of a
        shard of the same fill, or zeros in a storage never touched.
        """
        value = np.asarray(value)
        if self.nbytes < MAPPED_FROM_BYTES:
            self._write_box(shape, index, lo, hi, value)
            return
        if self._constant == (value.dtype, value.tobytes()) or (
                self._bytes is None and not self._pending and not self._boxes and not any(value.tobytes())):
            return  # the storage holds the value already (untouched, it reads as zeros)
        if self._boxes and (self._box_fill[0] != shape or self._box_fill[1].tobytes() != value.tobytes()
                            or self._box_fill[1].dtype != value.dtype):
            self._write_boxes()
        self._constant = None  # a box of another value waits: the storage no longer holds one value throughout
        key = tuple((s.start, s.stop) for s in index)
        if key not in self._boxes:
            self._box_elements += prod(s.stop - s.start for s in index)
        self._boxes[key] = (index, lo, hi)
        self._box_fill = (shape, value)
        if self._box_elements == prod(shape):  # the shards of one fill, all landed: one fill of the whole
            self._boxes, self._box_fill, self._box_elements = {}, None, 0
            self.fill(0, prod(shape) * value.itemsize, value)
            self._constant = (value.dtype, value.tobytes())

    def _write_boxes(self) -> None:
        boxes, (shape, value) = self._boxes, self._box_fill
        self._boxes, self._box_fill, self._box_elements = {}, None, 0
        for index, lo, hi in boxes.values():
            self._write_box(shape, index, lo, hi, value)

    def _write_box(self, shape, index, lo: int, hi: int, value: np.ndarray) -> None:
        self.typed(value.dtype, slice(lo // value.itemsize, -(-hi // value.itemsize)))[:prod(shape)] \
            .reshape(shape)[index] = value

    def _create(self) -> np.ndarray:
        if self.nbytes < MAPPED_FROM_BYTES:
            return np.zeros(self.nbytes, dtype=np.uint8)
        try:
            self._map = mmap.mmap(-1, self.nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _NORESERVE)
        except (OSError, OverflowError) as error:
            raise HostMemoryError(
                f"tensor {self.name!r}: the host cannot map {self.nbytes} bytes for its values ({error}); "
                "run with --timing-only, which keeps no values") from None
        return np.frombuffer(self._map, dtype=np.uint8)

    def _write_pending(self, lo: int, hi: int) -> None:
        first, last = lo // CHUNK_BYTES, -(-hi // CHUNK_BYTES)
        pending = self._pending
        for chunk in range(first, last) if last - first <= len(pending) else sorted(pending):
            pattern = pending.get(chunk)
            if pattern is None or not first <= chunk < last:
                continue
            start = chunk * CHUNK_BYTES
            stop = min(start + CHUNK_BYTES, self.nbytes)
            _repeat(self._bytes[start:stop], pattern)
            del pending[chunk]


def _repeat(target: np.ndarray, pattern: np.ndarray) -> None:
    """Fill the bytes `target` with `pattern` end to end (its length is a whole number of patterns)."""
    target.reshape(-1, pattern.size)[...] = pattern


def _byte_bounds(selector, itemsize: int, nbytes: int) -> tuple[int, int]:
    """[lo, hi) bytes covering every element `selector` names (all bytes for None)."""
    if selector is None:
        return 0, nbytes
    if isinstance(selector, slice):
        start, stop, _ = selector.indices(nbytes // itemsize)
        return start * itemsize, max(start, stop) * itemsize
    if isinstance(selector, StridedRuns):
        return selector.start * itemsize, selector.stop * itemsize
    indices = np.asarray(selector)
    if not indices.size:
        return 0, 0
    return int(indices.min()) * itemsize, (int(indices.max()) + 1) * itemsize

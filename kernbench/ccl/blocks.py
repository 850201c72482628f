"""A region's element indices as a few runs, without an index array as large as the region.

A channel of an all-gather takes the same slice of every rank's piece of
the output: p runs, one per rank, spaced a piece apart (a reduce-scatter's
input the same). As one index array that share would cost 8 bytes per
element of the call — 256 MiB for a 64 MiB f16 all-gather — while
every piece a schedule moves lies inside one rank's run. `Blocks` keeps
the runs and answers a slice with what the run holds (a `range` for a run
of a contiguous region, so a DMA takes it as a slice and builds nothing),
building an array only for a slice that straddles runs.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


class Blocks:
    """The concatenation of `runs` (each a `range` or an index array), indexed by position like one sequence."""

    __slots__ = ("runs", "_starts", "_length")

    def __init__(self, runs) -> None:
        self.runs = tuple(runs)
        starts, total = [], 0
        for run in self.runs:
            starts.append(total)
            total += len(run)
        self._starts, self._length = starts, total

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, positions: slice):
        """Positions [start, stop) (step 1): the run's own slice where they lie in one run, else an array."""
        start, stop, step = positions.indices(self._length)
        if step != 1:
            raise ValueError("Blocks take slices of step 1 only")
        stop = max(start, stop)
        first = max(0, bisect_right(self._starts, start) - 1)
        offset = self._starts[first]
        if stop - offset <= len(self.runs[first]):
            return self.runs[first][start - offset:stop - offset]
        parts, position = [], start
        for index in range(first, len(self.runs)):
            offset, run = self._starts[index], self.runs[index]
            if position >= stop:
                break
            piece = run[position - offset:min(stop, offset + len(run)) - offset]
            parts.append(np.arange(piece.start, piece.stop, dtype=np.int64) if isinstance(piece, range) else piece)
            position = offset + len(run)
        return np.concatenate(parts)

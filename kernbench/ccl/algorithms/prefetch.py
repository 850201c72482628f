"""Loading a member's next piece while it uses the current one.

A PE's DMA engines run beside its IPCQ engine and vector unit, so a
streaming schedule starts the load of piece j+1 before it sends or reduces
piece j (`PeProgram.start`), and the load stays off the critical path
whenever a piece's message takes longer than its load.
"""

from __future__ import annotations

from kernbench.ccl.algorithms.chunking import Range


def prefetch(ctx, region, ranges: list[Range], position: int):
    """Start loading piece `position` of `ranges` from `region`; its `Pending` handle, None past the last."""
    if position == len(ranges):
        return None
    return ctx.start(ctx.load, region, *ranges[position])

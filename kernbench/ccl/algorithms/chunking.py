"""How algorithms cut element ranges: into balanced parts, and into slot-sized pieces.

Every member computes the same cuts from the same counts, so sender and
receiver agree on every message without telling each other sizes; an empty
part yields no piece, on both sides.
"""

from __future__ import annotations

Range = tuple[int, int]


def split(start: int, stop: int, parts: int) -> list[Range]:
    """`parts` consecutive ranges covering [start, stop), sizes differing by at most one (larger first)."""
    size, extra = divmod(stop - start, parts)
    ranges, first = [], start
    for part in range(parts):
        last = first + size + (part < extra)
        ranges.append((first, last))
        first = last
    return ranges


def pieces(start: int, stop: int, per_piece: int) -> list[Range]:
    """[start, stop) in consecutive ranges of at most `per_piece` elements (none for an empty range)."""
    return [(first, min(first + per_piece, stop)) for first in range(start, stop, per_piece)]


def shifted(ranges: list[Range], offset: int) -> list[Range]:
    return [(a + offset, b + offset) for a, b in ranges]

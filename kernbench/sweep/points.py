"""A sweep's points: the product of its factors, in the order the sweep file lists them.

The last factor varies fastest, as in nested loops written in the file's
order, so the table reads the way the file does.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from kernbench.sweep.sweep_file import Axis, SweepSpec


@dataclass(frozen=True, slots=True)
class Point:
    """One run of a sweep: its position (1-based) and one value per axis."""

    index: int
    values: tuple[tuple[Axis, Any], ...]

    def value_of(self, name: str) -> Any:
        return next(value for axis, value in self.values if axis.name == name)

    def label(self, total: int) -> str:
        """`point 3 of 8 (topology.system.sips.count=2, --n=16)`: the point, for a message."""
        return (f"point {self.index} of {total} ("
                + ", ".join(f"{axis.name}={value}" for axis, value in self.values) + ")")


def expand_points(spec: SweepSpec) -> list[Point]:
    """Every point of `spec`: one per combination of its factors' rows."""
    points = []
    for index, rows in enumerate(itertools.product(*(factor.rows for factor in spec.factors)), start=1):
        points.append(Point(index, tuple((axis, value) for factor, row in zip(spec.factors, rows)
                                         for axis, value in zip(factor.axes, row))))
    return points

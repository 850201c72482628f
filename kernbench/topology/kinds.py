"""Value kinds of the topology schema: what a key may hold and how it is normalized.

Each kind checks one YAML value and returns it in the units the model uses
(integers of bytes, picoseconds, bytes per second, hertz), or raises a
`TopologyError` through the document, so the message carries file, line and
key path. Kinds know nothing about which key they sit under; `schema.py`
pairs them with keys.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kernbench.topology.document import Document, KeyPath


@dataclass(frozen=True, slots=True)
class Unit:
    """A unit named in a key's suffix and the factor to the model's integer base unit."""

    suffix: str
    plural: str
    base: str
    factor: int


NANOSECONDS = Unit("_ns", "nanoseconds", "ps", 1_000)
GB_PER_S = Unit("_gb_per_s", "GB/s (10^9 bytes/s)", "bytes/s", 10**9)
GIB = Unit("_gib", "GiB (2^30 bytes)", "bytes", 2**30)
KIB = Unit("_kib", "KiB (2^10 bytes)", "bytes", 2**10)
GHZ = Unit("_ghz", "GHz", "Hz", 10**9)


def describe(value: Any) -> str:
    """Name a YAML value the way a user would recognise it in their file."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"{value!r} (a string)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"{value!r} (a {type(value).__name__})"


def suggestion(word: str, options: tuple[str, ...] | list[str]) -> str:
    """' (did you mean X?)' for the closest option, or '' when none is close: typos are the usual cause."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_number(value: Any) -> bool:
    # YAML booleans are Python ints; `count: yes` must not pass as 1.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Count:
    """A whole number of things (SIPs, engines, lanes, flops per cycle).

    `maximum`, where set, bounds the size of the machine (adr/0002, "Size");
    a value above it is refused naming the limit, like any other range check.
    """

    minimum: int = 1
    maximum: int | None = None

    @property
    def expected(self) -> str:
        most = "" if self.maximum is None else f" and <= {self.maximum}"
        return f"a whole number >= {self.minimum}{most}"

    def normalize(self, value: Any, path: KeyPath, document: Document) -> int:
        if not _is_number(value) or isinstance(value, float) or value < self.minimum:
            raise document.error(path, f"found {describe(value)}; expected {self.expected}")
        if self.maximum is not None and value > self.maximum:
            raise document.error(path, f"found {value}, above the limit of {self.maximum}; expected {self.expected}")
        return value


@dataclass(frozen=True, slots=True)
class Quantity:
    """A physical quantity in the unit its key names, normalized to an exact integer of the base unit.

    Fractions are computed exactly (from the shortest decimal of a float), so
    819.2 GB/s is 819_200_000_000 bytes/s and never 819_199_999_999.
    """

    unit: Unit
    allow_zero: bool = False

    @property
    def expected(self) -> str:
        size = "a number >= 0" if self.allow_zero else "a positive number"
        return f"{size} of {self.unit.plural}"

    def normalize(self, value: Any, path: KeyPath, document: Document) -> int:
        valid = _is_number(value) and math.isfinite(value) and (value > 0 or (self.allow_zero and value == 0))
        if not valid:
            raise document.error(path, f"found {describe(value)}; expected {self.expected}")
        exact = Fraction(repr(value)) * self.unit.factor
        if exact.denominator != 1:
            raise document.error(
                path,
                f"found {value!r}, which is {float(exact):g} {self.unit.base}; "
                f"expected a whole number of {self.unit.base}",
            )
        return int(exact)


@dataclass(frozen=True, slots=True)
class Fraction01:
    """A share of something, 0 < x <= 1 (a link's payload efficiency; with `allow_zero`, 0 too), kept as an
    exact `Fraction`.

    Exact for the same reason quantities are: 0.77 of 450 GB/s is
    346_500_000_000 bytes/s, never a float that rounds differently per use.
    """

    allow_zero: bool = False

    @property
    def expected(self) -> str:
        return f"a number {'from 0' if self.allow_zero else 'above 0'} and at most 1"

    def normalize(self, value: Any, path: KeyPath, document: Document) -> Fraction:
        low_ok = (lambda v: v >= 0) if self.allow_zero else (lambda v: v > 0)
        if not (_is_number(value) and math.isfinite(value) and low_ok(value) and value <= 1):
            raise document.error(path, f"found {describe(value)}; expected {self.expected}")
        return Fraction(repr(value))


@dataclass(frozen=True, slots=True)
class Choice:
    """One name out of a fixed set (e.g. the inter-SIP link shape)."""

    options: tuple[str, ...]

    @property
    def expected(self) -> str:
        return "one of " + ", ".join(self.options)

    def normalize(self, value: Any, path: KeyPath, document: Document) -> str:
        if not isinstance(value, str) or value not in self.options:
            hint = suggestion(value, self.options) if isinstance(value, str) else ""
            raise document.error(path, f"found {describe(value)}{hint}; expected {self.expected}")
        return value


@dataclass(frozen=True, slots=True)
class DistinctChoices:
    """A non-empty list of distinct names out of a fixed set (e.g. the corners of a cube that hold PEs)."""

    options: tuple[str, ...]

    @property
    def expected(self) -> str:
        return "a non-empty list of distinct names out of " + ", ".join(self.options)

    def normalize(self, value: Any, path: KeyPath, document: Document) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise document.error(path, f"found {describe(value)}; expected {self.expected}")
        item_kind = Choice(self.options)
        seen: list[str] = []
        for index, item in enumerate(value):
            name = item_kind.normalize(item, path + (index,), document)
            if name in seen:
                raise document.error(path + (index,), f"found {name!r} a second time; expected {self.expected}")
            seen.append(name)
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class RateTable:
    """A mapping from names (dtypes) to a count each, e.g. matrix-unit flops per cycle per dtype."""

    names: tuple[str, ...]
    rate: Count = Count()

    @property
    def expected(self) -> str:
        return f"a non-empty mapping from {', '.join(self.names)} to {self.rate.expected}"

    def normalize(self, value: Any, path: KeyPath, document: Document) -> tuple[tuple[str, int], ...]:
        if not isinstance(value, dict) or not value:
            raise document.error(path, f"found {describe(value)}; expected {self.expected}")
        rates = []
        for name, rate in value.items():
            if name not in self.names:
                raise document.error(
                    path + (name,),
                    f"unknown name {name!r}{suggestion(name, self.names)}; expected one of {', '.join(self.names)}",
                )
            rates.append((name, self.rate.normalize(rate, path + (name,), document)))
        return tuple(rates)

"""Transfer sizes as people write them: `64`, `4K`, `1M,16M`, `2GiB` (binary units)."""

from __future__ import annotations

import re

from kernbench.probe.endpoints import ProbeError

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
_SIZE = re.compile(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", re.IGNORECASE)


def parse_sizes(text: str) -> list[int]:
    """A comma-separated list of byte counts, each a whole number with an optional K, M or G (binary)."""
    sizes = []
    for word in text.split(","):
        match = _SIZE.fullmatch(word)
        if match is None:
            raise ProbeError(f"--bytes {text!r}: {word.strip()!r} is not a size such as 64, 4K, 1M or 1G")
        sizes.append(int(match.group(1)) * UNITS[match.group(2).upper()])
    return sizes


def format_size(nbytes: int) -> str:
    """`64 B`, `4 KiB`, `16 MiB`: the largest binary unit that divides the size."""
    for suffix in ("G", "M", "K"):
        if nbytes and nbytes % UNITS[suffix] == 0:
            return f"{nbytes // UNITS[suffix]} {suffix}iB"
    return f"{nbytes} B"

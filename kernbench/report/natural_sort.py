"""Natural order for names with numbers in them: `sip2` before `sip10`, `c3->c12` after `c3->c4`."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"(\d+)")


def natural_key(text) -> tuple:
    """A sort key that compares runs of digits as numbers and the rest as text."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(str(text)))

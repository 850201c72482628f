"""The errors a sweep can give its user."""

from __future__ import annotations

from kernbench.errors import KernbenchError


class SweepError(KernbenchError):
    """A sweep file, a point derived from it, or a sweep option that cannot be used; one line naming it."""

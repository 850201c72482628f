"""The error a collective raises when its request, its algorithm or its members' programs go wrong."""

from __future__ import annotations

from kernbench.errors import KernbenchError


class CollectiveError(KernbenchError):
    """A collective that cannot run as asked: a malformed request, an algorithm without that kind,
    a send outside the wiring, or messages left unreceived; the message names the collective's label."""

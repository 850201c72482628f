"""`RunCaches`: the speed caches of one run, in one object, with one switch that turns them all off.

A run asks many questions again and again with the same answer: a
placement's cube boxes, an op's duration, the PE order of a launch, a
kernel's traced shapes. Each such answer is remembered in a named slot of
the run's `RunCaches`, which the run's context owns and hands down to the
machine and the launches that ask. So nothing is remembered beyond the run
(an entry keyed by an object's identity holds that object: its id stays its
own while the entry lives, and both go with the run), and the whole set can
be switched off: `RunCaches(enabled=False)` gives slots that keep nothing,
so every answer is worked out afresh. A cache changes speed only; a run
with caches off gives the same op log, picoseconds and values, which a test
checks.

This module sits at the bottom layer, beside `errors`, so that every layer
that keeps a cache can take the object it is handed without importing the
layer above that made it.
"""

from __future__ import annotations


class RunCaches(dict):
    """The run's caches: `caches[name]` is the slot named `name`, a dict made on first use (a lookup of a slot
    made already costs one dict lookup, which the hottest callers, a DMA's, can afford).

    A slot's users fill it (`slot[key] = value`, `slot.setdefault(key, value)`).
    With `enabled=False` each slot is a dict that stores nothing, so every
    `get` misses and the caller computes the answer as it would have the first
    time. Being a dict, a run's caches are empty, so false, until a slot is
    used: a default is chosen by `caches is None`, never `caches or ...`.
    """

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool = True) -> None:
        super().__init__()
        self.enabled = enabled

    def __missing__(self, name: str) -> dict:
        slot = self[name] = {} if self.enabled else _KeepsNothing()
        return slot


class _KeepsNothing(dict):
    """A slot with caches off: what is put in it is dropped, so it stays empty."""

    __slots__ = ()

    def __setitem__(self, key, value) -> None:
        pass

    def setdefault(self, key, default=None):
        return default

"""What the ranks' calls of one collective or message are matched on, and all_to_all's split sizes.

A rendezvous compares each rank's call with the first rank's, so a mismatch
is one error naming both ranks (`rendezvous.py`); the comparisons and the
counts a call is matched by are written here once for both rank backends.
"""

from __future__ import annotations

import numpy as np

from kernbench.ccl.errors import CollectiveError
from kernbench.ccl.rendezvous import Entry, Rendezvous


def nominal_counts(kind: str, input, output) -> tuple[int, int]:
    """What a rank's call is matched on: scatter and gather by the one rank's share (the root's list was
    checked against it), every other collective by its tensors."""
    if kind == "scatter":
        return output.numel(), output.numel()
    if kind == "gather":
        return input.numel(), input.numel()
    return input.numel(), output.numel()


def element_splits(tensor, split_sizes, n: int, call: str, what: str) -> tuple[int, ...]:
    """all_to_all_single's row split sizes (equal when None) as element counts."""
    rows = tensor.shape[0] if tensor.shape else 1
    per_row = tensor.numel() // rows if rows else 0
    if split_sizes is None:
        if rows % n:
            raise CollectiveError(f"{call}: the {what} has {rows} rows, which do not split into {n} equal parts; "
                                  f"pass {what}_split_sizes")
        return (rows // n * per_row,) * n
    sizes = list(split_sizes)
    if len(sizes) != n or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in sizes) \
            or sum(sizes) != rows:
        raise CollectiveError(f"{call}: {what}_split_sizes={sizes} must be {n} non-negative row counts summing to the "
                              f"{what}'s {rows} rows")
    return tuple(int(s) * per_row for s in sizes)


def equal_chunk_splits(count: int, n: int, call: str) -> tuple[tuple[int, ...], ...]:
    """all_to_all splits of PE ranks: each rank's chunk in n equal parts."""
    if count % n:
        raise CollectiveError(f"{call}: each PE rank's chunk of {count} elements does not split into {n} equal parts")
    return ((count // n,) * n,) * n


def check_splits(meeting: Rendezvous) -> None:
    """What rank r sends rank k is what rank k expects from r, for every pair (once every rank has called)."""
    entries = meeting.entries
    for r, sender in entries.items():
        for k, receiver in entries.items():
            sent, expected = sender.splits[0][k], receiver.splits[1][r]
            if sent != expected:
                raise CollectiveError(
                    f"{meeting.label}: rank {sender.global_rank} sends {sent} elements to rank "
                    f"{receiver.global_rank}, which expects {expected} from it (their split sizes disagree)")


def collectives_differ(a: Entry, b: Entry) -> str:
    sizes = () if a.splits is not None else (("input_count", "different sizes"), ("output_count", "different sizes"))
    return _first_difference(a, b, ("kind", "a different collective"), ("dtype", "different dtypes"), *sizes,
                             ("reduce_op", "different reduce ops"), ("premul_factor", "different factors"),
                             ("root", "different roots"))


def p2p_differ(a: Entry, b: Entry) -> str:
    if a.kind == b.kind:
        return f"both sides called {a.kind}"
    return _first_difference(a, b, ("dtype", "different dtypes"), ("input_count", "different sizes"))


def _first_difference(a: Entry, b: Entry, *checks: tuple[str, str]) -> str:
    """The message of the first field on which two ranks' calls differ, or '' when they match."""
    return next((problem for name, problem in checks if getattr(a, name) != getattr(b, name)), "")

"""Running a bench until its replicated spawns are exact: each spawn that diverges is simulated in full on the
next attempt (adr/0022), and the output the first attempts printed is not printed again."""

from __future__ import annotations

import contextlib
import sys

from kernbench.runtime_api.spmd import SpmdDiverged


def run_exactly(attempt):
    """`attempt(spmd_skip)` until it does not raise `SpmdDiverged`; its result.

    A run is deterministic up to the point where an episode diverges: the
    next attempt prints the same text first, so what an attempt printed to
    stdout is left out of the next one's, and the user reads the run's
    output once. Each divergence is one line on stderr, saying why the run
    takes longer.
    """
    skip: frozenset[int] = frozenset()
    printed = 0
    while True:
        with _stdout_after(printed) as stream:
            try:
                return attempt(skip)
            except SpmdDiverged as diverged:
                if diverged.episode in skip:
                    raise  # an episode that is skipped cannot diverge: a bug, not a retry
                print(f"kernbench: {diverged}; simulating the run again with that spawn's every rank "
                      "(adr/0022-spmd-replication.md)", file=sys.stderr)
                skip |= {diverged.episode}
                printed = max(printed, stream.seen)


class _After:
    """`sys.stdout` for an attempt: what it writes, less its first `skip` characters (the previous attempt's)."""

    def __init__(self, stream, skip: int):
        self._stream = stream
        self._skip = skip
        self.seen = 0

    def write(self, text: str) -> int:
        start = max(0, self._skip - self.seen)
        self.seen += len(text)
        if start < len(text):
            self._stream.write(text[start:])
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)  # flush, encoding, isatty, fileno, ...: the stream's


@contextlib.contextmanager
def _stdout_after(skip: int):
    stream = sys.stdout
    after = sys.stdout = _After(stream, skip)
    try:
        yield after
    finally:
        sys.stdout = stream

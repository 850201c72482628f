"""Each worker's `print` is a whole line: one line buffer per rank, as each PyTorch process has its own stdout.

Ranks are greenlets of one process. A rank that prints `"Rank", r,
tensor[0]` writes "Rank 0 " and then blocks in the host read of
`tensor[0]`, and another rank's words would land in the middle of its line.
Within `worker_stdout()` (`Session.run`), `sys.stdout` keeps one buffer per
greenlet: a line goes to the real stdout whole when its newline is written,
so lines appear in the order they were finished, which the engine makes
deterministic. What a worker leaves without a newline is written, ended by
one, when the worker returns, fails or is aborted (`as_worker`), and so is
anything still buffered when the block ends (unless a replicated spawn
diverged: the next attempt writes them again): another worker's words never
run into it. `flush()` passes the stream's flush on and leaves a partial
line waiting for its newline: a line is never split.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

from greenlet import getcurrent

from kernbench.runtime_api.spmd import SpmdDiverged


class WorkerStdout:
    """`sys.stdout` during a run: a line buffer per greenlet over the stream that was `sys.stdout` before it."""

    def __init__(self, stream):
        self._stream = stream
        self._partial: dict = {}  # greenlet -> its unfinished line, in the order the workers started one

    def write(self, text: str) -> int:
        worker = getcurrent()
        head, newline, tail = (self._partial.pop(worker, "") + text).rpartition("\n")
        if newline:
            self._stream.write(head + newline)
        if tail:
            self._partial[worker] = tail
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def end_line_of(self, worker) -> None:
        """Write what `worker` left without a newline as a line of its own (nothing when it left none)."""
        tail = self._partial.pop(worker, "")
        if tail:
            self._stream.write(tail + "\n")
            self._stream.flush()

    def end_all(self) -> None:
        for worker in list(self._partial):
            self.end_line_of(worker)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)  # encoding, isatty, fileno, ...: the stream's


@contextmanager
def worker_stdout():
    """`sys.stdout` is line-buffered per worker inside the block; the stream before it is back after, all written."""
    if isinstance(sys.stdout, WorkerStdout):  # a run inside a run's worker: its buffers already serve
        yield
        return
    stream = sys.stdout
    buffered = WorkerStdout(stream)
    sys.stdout = buffered
    try:
        yield
    except SpmdDiverged:
        raise  # its unfinished lines are the next attempt's to finish (cli/attempts.py)
    except BaseException:
        buffered.end_all()
        raise
    else:
        buffered.end_all()
    finally:
        sys.stdout = stream


def as_worker(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` as a worker's body: the partial line it leaves is written when it ends, however."""
    try:
        return fn(*args, **kwargs)
    finally:
        if isinstance(sys.stdout, WorkerStdout):
            sys.stdout.end_line_of(getcurrent())

"""One sweep per output folder at a time: a lock file that names its holder.

Two `kernbench sweep` runs into one `--out` would each run every point not
yet in the journal, the same work twice. The first run holds an exclusive
`flock` on `OUT/.kernbench-sweep.lock` and writes who it is into it
(process id, host, start time); a second is one `SweepError` naming that
holder. The operating system drops the lock when its process ends, however
it ends, so a crashed or killed sweep never leaves a folder locked; the
file itself stays, holding the last holder's line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from kernbench.sweep.errors import SweepError

LOCK_NAME = ".kernbench-sweep.lock"


@contextlib.contextmanager
def holding(folder: Path) -> Iterator[None]:
    """Hold `folder`'s sweep lock while open; `SweepError` naming the holder when another process holds it."""
    path = folder / LOCK_NAME
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(descriptor, 4096).decode("utf-8", "replace").strip() or "another process"
            raise SweepError(f"--out {folder}: another kernbench sweep is writing into it ({holder}); wait for it "
                             "to finish, or choose another --out") from None
        me = f"pid {os.getpid()} on {socket.gethostname()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}"
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, (me + "\n").encode("utf-8"), 0)
        yield
    finally:
        os.close(descriptor)  # closing the last descriptor drops the lock

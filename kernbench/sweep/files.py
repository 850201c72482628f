"""Writing into the sweep's output folder so that no reader ever sees half a file.

A rebuilt file (the CSV, the Parquet file, a plot) is written to a
temporary file beside its target, synced, and renamed over it with
`os.replace`: the old file or the new one, never a mix, whenever the
process stops.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def replace_file(target: Path, write: Callable[[Path], None], suffix: str = "") -> None:
    """Call `write(temporary_path)`, then put that file in place of `target` whole.

    `suffix` ends the temporary name, for writers that pick a format from it
    (matplotlib). On any exception the temporary file is removed and
    `target` is left as it was.
    """
    descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{suffix}")
    os.close(descriptor)
    temporary = Path(name)
    try:
        write(temporary)
        with open(temporary, "rb+") as file:
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def replace_text(target: Path, text: str) -> None:
    """`replace_file` for a text file."""
    replace_file(target, lambda path: path.write_text(text, encoding="utf-8"))

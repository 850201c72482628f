"""Files the command line writes (`--json`, `--trace`, `--draw`, a bench's `--plot`): checked first, replaced whole.

Every output path is checked before any work starts, so a path that cannot
be written costs one line and no run: it must not be a folder or a device,
its folder must exist, and a file must be creatable there (a file is
created and removed to find out, which is the only test that answers for
read-only mounts and for root alike). Two outputs that resolve to the same
file, or an output that is one of the run's inputs, are refused up front.

Writing goes to a temporary file in the target's own folder (so the rename
stays on one filesystem), which is flushed, synced and renamed over the
target with `os.replace` only once complete — and, when a command writes
several files, only once all of them are complete. A write that fails (disk
full, a size limit) or is interrupted (Ctrl-C, SIGTERM) removes the
temporary files and leaves the earlier files as they were; even `kill -9`
leaves them intact, with at most a stray `.NAME.*.tmp*` beside them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from kernbench.cli.interrupts import SIGNALS
from kernbench.errors import KernbenchError


class OutputPathError(KernbenchError):
    """An output the command cannot write, or outputs that would overwrite each other or an input."""


class OutputWriteError(KernbenchError):
    """Writing an output failed; the file that was there before is unchanged."""


def checked_output(flag: str, path: str | os.PathLike) -> Path:
    """The resolved path `flag` (`--json`) will write to; `OutputPathError` when it cannot be written there."""
    given = Path(path)
    target = Path(os.path.realpath(given))  # through symlinks: a link is written through, not replaced
    if str(given) == "" or given.name in ("", ".", ".."):
        raise OutputPathError(f"{flag} {str(given)!r}: expected a file name")
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise OutputPathError(f"{flag} {given}: cannot use it: {error.strerror or error}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputPathError(f"{flag} {given}: is a directory; expected a file name")
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputPathError(f"{flag} {given}: is {_kind(mode)}, not a regular file; expected a file name "
                              "(outputs are replaced whole, which a device or pipe cannot be)")
    folder = target.parent
    if not folder.is_dir():
        raise OutputPathError(f"{flag} {given}: the folder {folder} does not exist; create it first")
    try:
        descriptor, probe = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise OutputPathError(f"{flag} {given}: cannot create a file in {folder}: "
                              f"{error.strerror or error}") from None
    os.close(descriptor)
    os.unlink(probe)
    return target


def checked_outputs(outputs: Mapping[str, str | os.PathLike | None],
                    inputs: Mapping[str, str | os.PathLike | None] | None = None) -> dict[str, Path]:
    """`checked_output` of each given output, refusing two that are one file, or an output that is an input."""
    inputs = inputs or {}
    resolved: dict[str, Path] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        target = checked_output(flag, path)
        for other, seen in resolved.items():
            if seen == target:
                raise OutputPathError(f"{other} and {flag} both name {path}; expected two different files "
                                      "(one would overwrite the other)")
        for name, source in inputs.items():
            if source is not None and Path(os.path.realpath(source)) == target:
                raise OutputPathError(f"{flag} {path}: is the {name}; expected a new file (it would be overwritten)")
        resolved[flag] = target
    return resolved


class Staging:
    """Outputs written to temporary files beside their targets, put in place together by `staged_outputs`."""

    def __init__(self):
        self._staged: list[tuple[str, Path, Path]] = []  # (flag, temporary, target)

    @contextlib.contextmanager
    def file(self, flag: str, target: Path) -> Iterator:
        """A text file to write `target`'s new content into; complete and synced when the block ends.

        An `OSError` while writing (disk full, `RLIMIT_FSIZE`) is one
        `OutputWriteError` naming the flag and the file.
        """
        temporary = self.path(flag, target)
        try:
            with open(temporary, "w", encoding="utf-8") as file:
                yield file
                file.flush()
                os.fsync(file.fileno())
        except OSError as error:
            raise _write_error(flag, target, error) from None

    def path(self, flag: str, target: Path, suffix: str = "") -> Path:
        """A fresh temporary path beside `target`, ending in `suffix`, for a writer that wants a path
        (matplotlib picks the format from it); what is there when the staging ends replaces `target`."""
        with _signals_held():  # a signal between the file's creation and its staging would leave it behind
            try:
                descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                                    suffix=f".tmp{suffix}")
            except OSError as error:
                raise _write_error(flag, target, error) from None
            self._staged.append((flag, Path(name), target))
        os.close(descriptor)
        return Path(name)

    def _commit(self) -> None:
        while self._staged:
            flag, temporary, target = self._staged[0]
            try:
                os.chmod(temporary, _mode_for(target))
                os.replace(temporary, target)
            except OSError as error:
                raise _write_error(flag, target, error) from None
            self._staged.pop(0)

    def _discard(self) -> None:
        for _, temporary, _ in self._staged:
            with contextlib.suppress(OSError):
                temporary.unlink()
        self._staged.clear()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back in the block and delivered after it (where the platform can)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def staged_outputs() -> Iterator[Staging]:
    """Stage outputs in the block; when it ends without error, rename each over its target.

    Every file is complete on disk before the first rename, so a failure
    while writing any of them (or a signal) leaves every target as it was.
    On any exception the temporary files are removed.
    """
    staging = Staging()
    try:
        yield staging
        staging._commit()
    finally:
        staging._discard()


def _write_error(flag: str, target: Path, error: OSError) -> OutputWriteError:
    return OutputWriteError(f"{flag} {target}: cannot write it: {error.strerror or error}; "
                            "the previous file, if any, is unchanged")


def _mode_for(target: Path) -> int:
    """The existing file's permissions, else what `open(target, "w")` would have given (0o666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"

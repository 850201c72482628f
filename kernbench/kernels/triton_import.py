"""Work that waits for Triton: kernbench imports Triton only when the code it runs does.

Importing Triton takes about a quarter of a second, most of the start of a
`kernbench run` whose bench runs only collectives and device ops, and only
kernels need it. So what kernbench installs into Triton — the launch hook
that sends `kernel[grid](...)` on kernbench tensors to the simulator, and,
during a run, the driver that answers Triton's questions about the device
(ADR 0007) — is installed by `when_imported`: at once when Triton is already
imported, else as soon as `import triton` has run Triton's package, before
the code that imported it goes on (a kernel file, or a tutorial that asks
the driver for its device at import time, sees both in place).

Python has no hook for "after this module is imported", so while something
waits a `sys.meta_path` finder watches for the top-level `triton` import: it
finds Triton's spec through the finders after it and wraps the spec's
loader, whose `exec_module` runs Triton's package and then the waiting
work; the finder then leaves `sys.meta_path`. A library for post-import
hooks (wrapt's) would be a dependency for these few lines.
"""

from __future__ import annotations

import sys
from typing import Callable

_waiting: list[Callable[[], None]] = []


def when_imported(action: Callable[[], None]) -> Callable[[], None]:
    """Run `action()` once Triton is imported: now if it is, else right after its import. Return a function that
    cancels it if it has not run yet. An action already waiting is not added twice."""
    if "triton" in sys.modules:
        action()
        return _nothing
    if action not in _waiting:
        _waiting.append(action)
    if _WATCHER not in sys.meta_path:
        sys.meta_path.insert(0, _WATCHER)

    def cancel() -> None:
        if action in _waiting:
            _waiting.remove(action)
        if not _waiting and _WATCHER in sys.meta_path:
            sys.meta_path.remove(_WATCHER)

    return cancel


def _nothing() -> None:
    pass


class _Watcher:
    """A `sys.meta_path` finder that only wraps the loader of the top-level `triton` package."""

    def find_spec(self, name, path, target=None):
        if name != "triton":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenWaiting(spec.loader)
                return spec
        return None


class _ThenWaiting:
    """Triton's own loader, which runs the waiting work once Triton's package has run."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        if _WATCHER in sys.meta_path:
            sys.meta_path.remove(_WATCHER)
        while _waiting:
            _waiting.pop(0)()

    def __getattr__(self, name):
        return getattr(self._loader, name)  # resources, source, is_package: Triton's loader answers


_WATCHER = _Watcher()

"""A package whose public names are imported from their modules on first use (PEP 562's module `__getattr__`).

For packages whose modules bring in something slow that not every caller
needs: `kernbench.sweep` (the simulator, before the command line's signal
handlers are in place), `kernbench.kernels` and its Triton bridge (Triton,
which a run that launches no kernel never imports).
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_getattr(package: str, modules: dict[str, str]) -> Callable[[str], object]:
    """The `__getattr__` of `package`: name -> the name of the module holding it, imported when the name is first
    asked for and then kept in the package, so later lookups are plain attributes."""

    def __getattr__(name: str):
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__

"""The `torch` namespace of the run in progress, for library code written as if `torch` were importable.

Megatron-style code (`kernbench.tp`) calls `initialize_model_parallel(...)`
without handing over a `torch`, because in PyTorch it is a module. Here each
run has its own namespace; `Session.run` records it so such code can find
it, and `load_ccl_config()` finds the run's ccl configuration through it
(and `with torch.device(d):` the run's default device, bound in device.py).
One run at a time per process, as `kernbench run` and the tests use it.
"""

from __future__ import annotations

from kernbench.runtime_api.device import bind_device_scope
from kernbench.runtime_api.errors import RuntimeUsageError

_current = None


def set_current_torch(namespace) -> None:
    global _current
    _current = namespace
    bind_device_scope(getattr(namespace, "_device_scope", None))


def has_current_run() -> bool:
    return _current is not None


def current_torch():
    """The namespace of the run `Session.run` is running (or ran last)."""
    if _current is None:
        raise RuntimeUsageError("no kernbench run is in progress: run the code through kernbench run or "
                                "Session.run, or pass the bench's torch explicitly (torch=torch)")
    return _current

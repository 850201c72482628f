"""The Triton bridge: real `@triton.jit` kernels on kernbench's simulated machine.

Each name is imported from its module when first used (a module
`__getattr__`), so a module of the bridge that needs no Triton (`values`)
can be imported without loading Triton.
"""

import importlib

_MODULE_OF = {
    "CompiledKernel": "compiled",
    "DeviceProperties": "driver",
    "DriverHost": "driver",
    "install_driver": "driver",
    "uninstall_driver": "driver",
    "install_launch_hook": "hook",
    "uninstall_launch_hook": "hook",
    "PointerArg": "launch",
    "PreparedLaunch": "launch",
    "prepare_launch": "launch",
    "ProgramPort": "port",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return value

"""Running kernels on the simulated PEs: the Triton bridge and kernel errors.

The bridge's names load Triton, so they are imported when first used (a
module `__getattr__`): a run that launches no kernel never imports Triton
(`triton_import`).
"""

from kernbench.kernels.errors import DescriptorError, KernelFault, TimingOnlyRefusal, UnsupportedKernelError

_BRIDGE = frozenset({
    "CompiledKernel",
    "DeviceProperties",
    "DriverHost",
    "PointerArg",
    "PreparedLaunch",
    "ProgramPort",
    "install_driver",
    "install_launch_hook",
    "prepare_launch",
    "uninstall_driver",
    "uninstall_launch_hook",
})

__all__ = sorted(_BRIDGE | {"DescriptorError", "KernelFault", "TimingOnlyRefusal", "UnsupportedKernelError"})


def __getattr__(name: str):
    if name in _BRIDGE:
        from kernbench.kernels import triton_bridge

        value = globals()[name] = getattr(triton_bridge, name)  # found here from now on, without this call
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Running kernels on the simulated PEs: the Triton bridge and kernel errors.

The bridge's names load Triton, so they are imported when first used
(`lazy_names`): a run that launches no kernel never imports Triton
(`triton_import`).
"""

from kernbench.kernels.errors import DescriptorError, KernelFault, TimingOnlyRefusal, UnsupportedKernelError
from kernbench.lazy_names import lazy_getattr

_BRIDGE = {name: "kernbench.kernels.triton_bridge" for name in (
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
)}

__all__ = sorted([*_BRIDGE, "DescriptorError", "KernelFault", "TimingOnlyRefusal", "UnsupportedKernelError"])
__getattr__ = lazy_getattr(__name__, _BRIDGE)

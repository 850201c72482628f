"""Running kernels on the simulated PEs: the Triton bridge and kernel errors."""

from kernbench.kernels.errors import DescriptorError, KernelFault, TimingOnlyRefusal, UnsupportedKernelError
from kernbench.kernels.triton_bridge import (
    CompiledKernel,
    DeviceProperties,
    DriverHost,
    PointerArg,
    PreparedLaunch,
    ProgramPort,
    install_driver,
    install_launch_hook,
    prepare_launch,
    uninstall_driver,
    uninstall_launch_hook,
)

__all__ = [
    "CompiledKernel",
    "DescriptorError",
    "DeviceProperties",
    "DriverHost",
    "KernelFault",
    "PointerArg",
    "PreparedLaunch",
    "ProgramPort",
    "TimingOnlyRefusal",
    "UnsupportedKernelError",
    "install_driver",
    "install_launch_hook",
    "prepare_launch",
    "uninstall_driver",
    "uninstall_launch_hook",
]

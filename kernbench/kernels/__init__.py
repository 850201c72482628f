"""Running kernels on the simulated PEs: the Triton bridge and kernel errors."""

from kernbench.kernels.errors import KernelFault, TimingOnlyRefusal, UnsupportedKernelError
from kernbench.kernels.triton_bridge import (
    PointerArg,
    PreparedLaunch,
    ProgramPort,
    install_launch_hook,
    prepare_launch,
    uninstall_launch_hook,
)

__all__ = [
    "KernelFault",
    "PointerArg",
    "PreparedLaunch",
    "ProgramPort",
    "TimingOnlyRefusal",
    "UnsupportedKernelError",
    "install_launch_hook",
    "prepare_launch",
    "uninstall_launch_hook",
]

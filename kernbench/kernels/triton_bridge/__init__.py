"""The Triton bridge: real `@triton.jit` kernels on kernbench's simulated machine."""

from kernbench.kernels.triton_bridge.hook import install_launch_hook, uninstall_launch_hook
from kernbench.kernels.triton_bridge.launch import PointerArg, PreparedLaunch, prepare_launch
from kernbench.kernels.triton_bridge.port import ProgramPort

__all__ = [
    "PointerArg",
    "PreparedLaunch",
    "ProgramPort",
    "install_launch_hook",
    "prepare_launch",
    "uninstall_launch_hook",
]

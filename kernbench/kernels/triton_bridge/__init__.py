"""The Triton bridge: real `@triton.jit` kernels on kernbench's simulated machine."""

from kernbench.kernels.triton_bridge.compiled import CompiledKernel
from kernbench.kernels.triton_bridge.driver import DeviceProperties, DriverHost, install_driver, uninstall_driver
from kernbench.kernels.triton_bridge.hook import install_launch_hook, uninstall_launch_hook
from kernbench.kernels.triton_bridge.launch import PointerArg, PreparedLaunch, prepare_launch
from kernbench.kernels.triton_bridge.port import ProgramPort

__all__ = [
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
]

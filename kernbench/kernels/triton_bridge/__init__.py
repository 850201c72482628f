"""The Triton bridge: real `@triton.jit` kernels on kernbench's simulated machine.

Each name is imported from its module when first used (`lazy_names`), so a
module of the bridge that needs no Triton (`values`) can be imported without
loading Triton.
"""

from kernbench.lazy_names import lazy_getattr

_MODULE_OF = {
    "CompiledKernel": "kernbench.kernels.triton_bridge.compiled",
    "DeviceProperties": "kernbench.kernels.triton_bridge.driver",
    "DriverHost": "kernbench.kernels.triton_bridge.driver",
    "install_driver": "kernbench.kernels.triton_bridge.driver",
    "uninstall_driver": "kernbench.kernels.triton_bridge.driver",
    "install_launch_hook": "kernbench.kernels.triton_bridge.hook",
    "uninstall_launch_hook": "kernbench.kernels.triton_bridge.hook",
    "PointerArg": "kernbench.kernels.triton_bridge.launch",
    "PreparedLaunch": "kernbench.kernels.triton_bridge.launch",
    "prepare_launch": "kernbench.kernels.triton_bridge.launch",
    "ProgramPort": "kernbench.kernels.triton_bridge.port",
}

__all__ = sorted(_MODULE_OF)
__getattr__ = lazy_getattr(__name__, _MODULE_OF)

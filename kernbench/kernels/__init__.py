"""Running kernels on the simulated PEs: the Triton bridge and kernel errors.

The bridge's names load Triton, so they are imported when first used
(`lazy_names`, from the modules the bridge's package names for them): a run
that launches no kernel never imports Triton (`triton_import`).
"""

from kernbench.kernels import triton_bridge
from kernbench.kernels.errors import (DescriptorError, KernelFault, KernelLaunchError, TimingOnlyRefusal,
                                      UnsupportedKernelError)
from kernbench.lazy_names import lazy_getattr

__all__ = sorted([*triton_bridge.__all__, "DescriptorError", "KernelFault", "KernelLaunchError", "TimingOnlyRefusal",
                  "UnsupportedKernelError"])
__getattr__ = lazy_getattr(__name__, triton_bridge._MODULE_OF)

"""`torch.accelerator`: PyTorch's device-generic names for the current accelerator, here the simulated ahbm device
(`torch.ahbm`, alias `torch.cuda`)."""

from __future__ import annotations

from kernbench.runtime_api.device import DEVICE_TYPE, Device
from kernbench.runtime_api.unsupported import Namespace


def accelerator_namespace(ahbm) -> Namespace:
    """`torch.accelerator` of one run, answering through its `torch.ahbm`."""

    def is_available() -> bool:
        """True: the simulated device is the accelerator."""
        return ahbm.is_available()

    def device_count() -> int:
        """The number of simulated devices (SIPs)."""
        return ahbm.device_count()

    def current_accelerator(check_available: bool = False) -> Device:
        """The accelerator's device type, `ahbm` (a `torch.device`)."""
        return Device(DEVICE_TYPE, None)

    def current_device_index() -> int:
        """The calling rank's current device (`torch.ahbm.current_device()`)."""
        return ahbm.current_device()

    def set_device_index(device) -> None:
        """Make `device` the calling rank's current device (`torch.ahbm.set_device`)."""
        ahbm.set_device(device)

    def synchronize(device=None) -> None:
        """Wait for the device work in flight (`torch.ahbm.synchronize`)."""
        ahbm.synchronize(device)

    return Namespace("torch.accelerator", __doc__, is_available=is_available, device_count=device_count,
                     current_accelerator=current_accelerator, current_device_index=current_device_index,
                     current_device_idx=current_device_index, set_device_index=set_device_index,
                     set_device_idx=set_device_index, synchronize=synchronize)

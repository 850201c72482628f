"""`torch.device`-like values: `ahbm:N` for SIP N, `cpu` for the host."""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.errors import KernbenchError

DEVICE_TYPE = "ahbm"


class DeviceError(KernbenchError):
    """A device string or index that names no device of this machine."""


@dataclass(frozen=True)
class Device:
    type: str
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    @property
    def is_host(self) -> bool:
        return self.type == "cpu"


CPU = Device("cpu")


def parse_device(device, current: int, n_devices: int) -> Device:
    """Resolve `None` (the current device), an int, `"ahbm"`, `"ahbm:2"`, `"cpu"` or a `Device`."""
    if device is None:
        return Device(DEVICE_TYPE, current)
    if isinstance(device, Device):
        resolved = device if device.is_host or device.index is not None else Device(DEVICE_TYPE, current)
    elif isinstance(device, int) and not isinstance(device, bool):
        resolved = Device(DEVICE_TYPE, device)
    elif isinstance(device, str):
        kind, _, index = device.partition(":")
        if kind == "cpu" and not index:
            return CPU
        if kind != DEVICE_TYPE or (index and not index.isdigit()):
            raise DeviceError(f"unknown device {device!r}; expected 'cpu', 'ahbm' or 'ahbm:N'")
        resolved = Device(DEVICE_TYPE, int(index) if index else current)
    else:
        raise DeviceError(f"unknown device {device!r}; expected 'cpu', 'ahbm', 'ahbm:N' or an int")
    if not resolved.is_host and not 0 <= resolved.index < n_devices:
        raise DeviceError(f"device {resolved} does not exist: this machine has ahbm:0 .. ahbm:{n_devices - 1}")
    return resolved

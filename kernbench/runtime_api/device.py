"""`torch.device`-like values: `ahbm:N` for SIP N, `cpu` for the host; `cuda` is a spelling of `ahbm`.

A script written for GPUs says `"cuda"`, `"cuda:1"` or `torch.device("cuda", 1)`;
on the simulated machine those can only mean its own device, so they parse
to `ahbm` (as `nccl` names the `ahbm` backend in `torch.distributed`). A
device's `type` is therefore always `'cpu'` or `'ahbm'`. Constructing a
device checks its spelling; whether its index exists on this machine is
checked where it is used (`parse_device`), as torch checks a CUDA ordinal.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

from kernbench.errors import KernbenchError

DEVICE_TYPE = "ahbm"
# What each accepted device type spelling means here.
_TYPES = {"ahbm": DEVICE_TYPE, "cuda": DEVICE_TYPE, "cpu": "cpu"}
_SPELLINGS = "'cpu', 'ahbm' or 'cuda' (an alias of 'ahbm'), with an optional ':N'"


class DeviceError(KernbenchError):
    """A device string or index that names no device of this machine."""


@dataclass(frozen=True, init=False)
class Device:
    """`torch.device`: `device("ahbm:1")`, `device("ahbm", 1)`, `device("cuda:1")`, `device(1)`, `device("cpu")`."""

    type: str
    index: int | None

    def __init__(self, type, index: int | None = None):
        kind, parsed = _parse(type, index)
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", parsed)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + ("" if self.index is None else f", index={self.index}") + ")"

    @property
    def is_host(self) -> bool:
        return self.type == "cpu"

    def __enter__(self) -> "Device":
        """`with torch.device(d):` makes `d` the calling rank's default device for the block, as PyTorch's device
        context does."""
        _run_scope()[0](self)
        return self

    def __exit__(self, *exc) -> None:
        _run_scope()[1]()


# `with torch.device(d):` changes the run's default device, which lives in a part above this one: the run in
# progress binds its (enter, exit) here when it starts (current_run.set_current_torch).
_RUN_SCOPE: list = [None]


def bind_device_scope(scope) -> None:
    """The (enter, exit) of the run in progress's default-device blocks (None: no run)."""
    _RUN_SCOPE[0] = scope


def _run_scope():
    if _RUN_SCOPE[0] is None:
        raise DeviceError("with torch.device(...): no kernbench run is in progress to set the default device of")
    return _RUN_SCOPE[0]


def _parse(spec, index) -> tuple[str, int | None]:
    """(type, index) of a device spelling, with `cuda` read as `ahbm` and `cpu:0` as `cpu`."""
    if isinstance(spec, Device):
        if index is not None:
            raise DeviceError(f"torch.device({spec!r}, {index!r}): an index cannot be given with a device")
        return spec.type, spec.index
    if _is_index(spec) and index is None:
        return DEVICE_TYPE, _checked_index(spec, int(spec))
    if not isinstance(spec, str):
        raise DeviceError(f"unknown device {spec!r}; expected {_SPELLINGS}, an int or a torch.device")
    kind, colon, text = spec.partition(":")
    if kind not in _TYPES or (colon and not text.lstrip("-").isdigit()):
        raise DeviceError(f"unknown device {spec!r}; expected {_SPELLINGS}")
    if colon and index is not None:
        raise DeviceError(f"torch.device({spec!r}, {index!r}): the string already has an index; "
                          f"write torch.device({kind!r}, {index!r})")
    if index is not None and not _is_index(index):
        raise DeviceError(f"torch.device({spec!r}, {index!r}): the index must be an int")
    number = _checked_index(spec, int(text) if colon else None if index is None else int(index))
    if _TYPES[kind] == "cpu":
        if number not in (None, 0):
            raise DeviceError(f"device {spec!r}{'' if colon else f' index {number}'} does not exist: the host is "
                              "one device, 'cpu' (or 'cpu:0')")
        return "cpu", None
    return _TYPES[kind], number


def _is_index(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _checked_index(spec, number):
    if number is not None and number < 0:
        raise DeviceError(f"device {spec!r}: a device index must not be negative, got {number}")
    return number


CPU = Device("cpu")


def machine_devices(n_devices: int) -> str:
    """The devices of a machine with `n_devices` SIPs, as an error message lists them."""
    return f"ahbm:0 .. ahbm:{n_devices - 1}" if n_devices > 1 else "ahbm:0"


def parse_device(device, current: int, n_devices: int) -> Device:
    """Resolve `None` (the current device), an int, a string (`"ahbm:2"`, `"cuda"`, `"cpu"`) or a `Device`.

    The result is `cpu` or `ahbm:N` with N a device of this machine; an
    `ahbm` without index is the current device. Anything else is one
    `DeviceError` naming the device and the ones that exist.
    """
    if device is None:
        return Device(DEVICE_TYPE, current)
    try:
        resolved = device if isinstance(device, Device) else Device(device)
    except DeviceError as error:
        if str(error).startswith("unknown device"):
            raise DeviceError(f"unknown device {device!r}; this machine has cpu and {machine_devices(n_devices)} "
                              f"('cuda' is an alias of 'ahbm')") from None
        raise
    if resolved.is_host:
        return resolved
    if resolved.index is None:
        return Device(DEVICE_TYPE, current)
    if not resolved.index < n_devices:
        spelled = f"{device} (an alias of {resolved})" if isinstance(device, str) and device.startswith("cuda") \
            else str(resolved)
        raise DeviceError(f"device {spelled} does not exist: this machine has {machine_devices(n_devices)} "
                          f"(and cpu)")
    return resolved

"""What Triton's tutorials need to run on kernbench as written: `torch` and Triton's driver.

A tutorial says `import torch` and asks `triton.runtime.driver.active` for
its device. Here `torch` is the namespace of the kernbench run in progress
(the tutorial's host code runs inside `Session.run`), and `tutorial_driver()`
installs the bridge's Triton driver for as long as a test needs it, answering
from that run: the device the run is on and the default topology's PE model.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager

from kernbench.kernels import DeviceProperties, install_driver, uninstall_driver
from kernbench.runtime_api.current_run import current_torch, has_current_run
from kernbench.runtime_api.device import Device
from kernbench.topology import load_topology

TOPOLOGY = "default"


class _RunningTorch:
    """`torch` for tutorial code: every attribute is the running kernbench session's."""

    def __getattr__(self, name: str):
        return getattr(current_torch(), name)


torch = _RunningTorch()


class RunningSessionHost:
    """The `DriverHost` a runtime provides: the current device of the run, the topology's PE model."""

    def __init__(self) -> None:
        self.topology = load_topology(TOPOLOGY)

    def active_torch_device(self):
        if has_current_run():
            namespace = current_torch()
            return namespace.device("ahbm", namespace.ahbm.current_device())
        return Device("ahbm", 0)

    def device_properties(self, index: int) -> DeviceProperties:
        return DeviceProperties.from_topology(self.topology, index)


@contextmanager
def tutorial_driver():
    """Triton's active driver is kernbench's inside the block, Triton's own after it."""
    install_driver(RunningSessionHost())
    try:
        yield
    finally:
        uninstall_driver()


def import_tutorial(name: str):
    """Import a tutorial module; its module-level code asks the driver, so the caller holds `tutorial_driver()`."""
    return importlib.import_module(name)

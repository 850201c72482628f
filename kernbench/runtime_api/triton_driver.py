"""Triton's `driver.active` during a kernbench run: the run's current device and the topology's PE model.

Triton's tutorials ask the driver for the active device and its properties
(SM count, registers, shared memory), some at import time. While a run is
on, `triton_driver(topology)` makes the kernbench driver of the Triton
bridge (kernels/triton_bridge/driver.py, ADR 0007) Triton's active one,
answering from this module; afterwards Triton's own driver is back, so a
real GPU in the same process is untouched outside a run.
"""

from __future__ import annotations

from contextlib import contextmanager

from kernbench.kernels import DeviceProperties, install_driver, uninstall_driver
from kernbench.runtime_api.current_run import current_torch, has_current_run
from kernbench.runtime_api.device import DEVICE_TYPE, Device


class RunDriverHost:
    """The driver's host: the calling rank's current device once the run started (device 0 before)."""

    def __init__(self, topology):
        self._topology = topology

    def active_torch_device(self) -> Device:
        if has_current_run():
            return Device(DEVICE_TYPE, current_torch().ahbm.current_device())
        return Device(DEVICE_TYPE, 0)

    def device_properties(self, index: int) -> DeviceProperties:
        return DeviceProperties.from_topology(self._topology, index)


@contextmanager
def triton_driver(topology):
    """Triton's active driver is kernbench's inside the block, Triton's own after it."""
    install_driver(RunDriverHost(topology))
    try:
        yield
    finally:
        uninstall_driver()

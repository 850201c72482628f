"""Triton's `driver.active` during a kernbench run: the run's current device and the topology's PE model.

Triton's tutorials ask the driver for the active device and its properties
(SM count, registers, shared memory), some at import time. While a run is
on, `triton_driver(topology)` makes the kernbench driver of the Triton
bridge (kernels/triton_bridge/driver.py, ADR 0007) Triton's active one,
answering from this module; afterwards Triton's own driver is back, so a
real GPU in the same process is untouched outside a run. A run that never
imports Triton never loads it for this: the driver is installed when Triton
is imported (`kernels.triton_import`), or at once if it already is.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from kernbench.kernels.triton_import import when_imported
from kernbench.runtime_api.current_run import current_torch, has_current_run
from kernbench.runtime_api.device import DEVICE_TYPE, Device

if TYPE_CHECKING:
    from kernbench.kernels import DeviceProperties


class RunDriverHost:
    """The driver's host: the calling rank's current device once the run started (device 0 before)."""

    def __init__(self, topology):
        self._topology = topology

    def active_torch_device(self) -> Device:
        if has_current_run():
            return Device(DEVICE_TYPE, current_torch().ahbm.current_device())
        return Device(DEVICE_TYPE, 0)

    def device_properties(self, index: int) -> DeviceProperties:
        from kernbench.kernels import DeviceProperties

        return DeviceProperties.from_topology(self._topology, index)


@contextmanager
def triton_driver(topology):
    """Triton's active driver is kernbench's inside the block (from when Triton is imported), Triton's own after."""
    installed = []

    def install() -> None:
        from kernbench.kernels import install_driver

        install_driver(RunDriverHost(topology))
        installed.append(True)

    cancel = when_imported(install)
    try:
        yield
    finally:
        cancel()
        if installed:
            from kernbench.kernels import uninstall_driver

            uninstall_driver()

"""What `triton.runtime.driver.active` answers when kernels run on kernbench.

Host code written for a GPU asks Triton's driver about the device before it
launches anything: tutorial 02 sizes a persistent grid from
`utils.get_device_properties(DEVICE.index)` (`multiprocessor_count`,
`max_num_regs`, `max_shared_mem`, `warpSize`), tutorials pick their configs
from `get_current_target().backend`, and every tutorial allocates on
`get_active_torch_device()`. `install_driver(host)` makes Triton's active
driver one that answers from the simulated machine; the runtime supplies the
two things the bridge cannot know (`DriverHost`): the current torch device
and the properties of a device.

The numbers come from the PE model (`DeviceProperties.from_topology`): a PE
is a multiprocessor, its vector lanes are a warp, its TCM is both the shared
memory and the register file (counted in 32-bit registers), and
`resident_programs` programs share a PE, so the occupancy tutorial 02
computes is exactly the number of programs a PE keeps in flight.

The backend is named "kernbench": code that branches on "cuda" or "hip"
takes neither branch's hardware-specific path. Anything else a GPU driver
does (launching compiled binaries, streams of a real device) is refused with
`UnsupportedKernelError`, since no binary is ever built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver as _triton_driver

from kernbench.kernels.errors import UnsupportedKernelError

BACKEND = "kernbench"
_REGISTER_BYTES = 4


@dataclass(frozen=True)
class DeviceProperties:
    """One simulated device (a SIP) as a GPU driver describes a device."""

    index: int
    pe_count: int
    vector_lanes: int
    tcm_bytes: int
    resident_programs: int
    clock_hz: int

    @classmethod
    def from_topology(cls, topology, index: int) -> DeviceProperties:
        """The properties of SIP `index` of a loaded `kernbench.topology.Topology`."""
        pe = topology.pe
        return cls(index=index, pe_count=topology.pes_per_sip, vector_lanes=pe.vector_unit.lanes,
                   tcm_bytes=pe.tcm.capacity_bytes, resident_programs=pe.resident_programs, clock_hz=pe.clock_hz)

    @property
    def max_num_regs(self) -> int:
        """The TCM counted in 32-bit registers: a PE's whole register file."""
        return self.tcm_bytes // _REGISTER_BYTES

    @property
    def shared_bytes_per_program(self) -> int:
        """The TCM share of one resident program."""
        return self.tcm_bytes // self.resident_programs

    def registers_per_thread(self, num_warps: int) -> int:
        """Registers per thread that fill a PE's register file with `resident_programs` programs.

        So `max_num_regs // (n_regs * warpSize * num_warps)`, the occupancy a
        GPU program computes, is `resident_programs`.
        """
        return max(1, self.max_num_regs // (self.resident_programs * self.vector_lanes * max(1, num_warps)))

    def as_triton_dict(self) -> dict[str, int]:
        """`utils.get_device_properties(index)` as Triton's CUDA driver spells it (clock in kHz)."""
        return {
            "multiprocessor_count": self.pe_count,
            "max_num_regs": self.max_num_regs,
            "max_shared_mem": self.tcm_bytes,
            "warpSize": self.vector_lanes,
            "sm_clock_rate": self.clock_hz // 1000,
        }


class DriverHost(Protocol):
    """What the runtime tells the driver: the current device and any device's properties."""

    def active_torch_device(self) -> Any:
        """The `torch.device` host code allocates on now (`torch.device("ahbm", current)`)."""

    def device_properties(self, index: int) -> DeviceProperties:
        """The properties of device `index`."""


class _Utils:
    def __init__(self, host: DriverHost) -> None:
        self._host = host

    def get_device_properties(self, index) -> dict[str, int]:
        return self._host.device_properties(0 if index is None else int(index)).as_triton_dict()


class KernbenchDriver:
    """A Triton driver (duck-typed `DriverBase`) for the simulated machine."""

    def __init__(self, host: DriverHost) -> None:
        self.host = host
        self.utils = _Utils(host)
        self.backend = BACKEND

    @staticmethod
    def is_active() -> bool:
        """Never chosen by Triton's own driver discovery: only `install_driver` activates it."""
        return False

    def get_active_torch_device(self):
        return self.host.active_torch_device()

    def get_current_device(self) -> int:
        index = getattr(self.host.active_torch_device(), "index", None)
        return 0 if index is None else int(index)

    def get_current_target(self) -> GPUTarget:
        properties = self.host.device_properties(self.get_current_device())
        return GPUTarget(BACKEND, "ahbm", properties.vector_lanes)

    def get_current_stream(self, device=None) -> int:
        return 0

    def __getattr__(self, name: str):
        raise UnsupportedKernelError(
            f"triton.runtime.driver.active.{name} is not available on kernbench: kernels run on the simulator, "
            "not as compiled binaries on a GPU")


_saved: list[Any] = []


def install_driver(host: DriverHost) -> KernbenchDriver:
    """Make `triton.runtime.driver.active` answer from `host`; installing again replaces the host."""
    if not _saved:
        _saved.append(_triton_driver._active)
    active = KernbenchDriver(host)
    _triton_driver.set_active(active)
    return active


def uninstall_driver() -> None:
    """Give Triton back the driver it had before `install_driver` (no-op when none is installed)."""
    if _saved:
        _triton_driver._active = _saved.pop()


def active_device_properties(index: int) -> DeviceProperties:
    """The installed host's properties of device `index`; a named error when no kernbench driver is installed."""
    active = _triton_driver._active
    if not isinstance(active, KernbenchDriver):
        raise UnsupportedKernelError(
            "kernel.warmup(...) on kernbench tensors needs the kernbench Triton driver for the device's "
            "properties; it is installed with the runtime (kernbench.kernels.install_driver)")
    return active.host.device_properties(index)

"""The simulated hardware of one run: memory, channels, and the DMA primitive."""

from kernbench.machine.endpoints import Endpoint, hbm, host, tcm
from kernbench.machine.machine import IO_CUBE, Machine, Transfer
from kernbench.machine.memory import Allocation, DeviceMemory, OutOfMemoryError, sip_of_address

__all__ = [
    "IO_CUBE", "Allocation", "DeviceMemory", "Endpoint", "Machine", "OutOfMemoryError", "Transfer",
    "hbm", "host", "sip_of_address", "tcm",
]

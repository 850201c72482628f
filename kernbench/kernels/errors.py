"""Errors a kernel can cause, written for the person who launched it."""

from __future__ import annotations

from kernbench.errors import KernbenchError


class KernelFault(KernbenchError):
    """A kernel touched memory it does not own.

    The port that checks the access raises it with what it knows (the tensor
    the address falls in, the byte offset inside it, the access size); the
    Triton bridge fills in `kernel` and `program_id` on its way out when the
    port left them `None`, so the launcher always sees all five fields. The
    message is built when it is read, after those fields are complete.
    """

    def __init__(
        self,
        tensor: str | None,
        offset: int,
        access_size: int,
        kernel: str | None = None,
        program_id: tuple[int, int, int] | None = None,
    ) -> None:
        super().__init__(tensor, offset, access_size, kernel, program_id)
        self.tensor = tensor
        self.offset = offset
        self.access_size = access_size
        self.kernel = kernel
        self.program_id = program_id

    def __str__(self) -> str:
        where = (
            f"tensor '{self.tensor}' at byte offset {self.offset}"
            if self.tensor is not None
            else f"unallocated address {self.offset:#x}"
        )
        return (
            f"kernel '{self.kernel}' program {self.program_id}: out-of-bounds "
            f"{self.access_size}-byte access to {where}"
        )


class TimingOnlyRefusal(KernbenchError):
    """A kernel whose behaviour depends on loaded data ran in timing-only mode.

    In timing-only mode loads return values nobody read, so a branch, loop
    bound or address computed from them would make the simulated timeline
    fiction. The kernel is refused rather than silently mistimed.
    """

    def __init__(self, kernel: str, program_id: tuple[int, int, int], use: str) -> None:
        super().__init__(
            f"kernel '{kernel}' program {program_id} cannot run timing-only: {use} "
            "depends on a value loaded from memory; run it with data "
            "(timing_only=False) or make that decision from arguments instead"
        )
        self.kernel = kernel
        self.program_id = program_id


class UnsupportedKernelError(KernbenchError):
    """A kernel uses a Triton feature the bridge does not simulate."""


class DescriptorError(KernbenchError):
    """A tensor descriptor breaks Triton's rules (16-byte aligned base, strides and inner offsets; last stride 1).

    A GPU's copy engine refuses such a descriptor, so the bridge does too,
    rather than run a kernel that only works on the simulator.
    """

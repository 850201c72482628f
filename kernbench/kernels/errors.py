"""Errors a kernel can cause, written for the person who launched it."""

from __future__ import annotations

from kernbench.errors import KernbenchError


class KernelFault(KernbenchError):
    """A kernel touched memory it does not own: compute-sanitizer's memcheck report, as one line.

    Whoever checks the access raises it with what it knows: the tensor the
    fault is reported against (the tensor the kernel's pointer was derived
    from when the bridge knows it, else the tensor nearest the address, else
    None), the byte offset of the faulting address from that tensor's start
    (negative before it), the access size and, where known, the address, the
    kind of access (`load`, `store`, `atomic_add`, ...), the lane of the block
    (its index, a tuple for blocks of more than one dimension), the tensor's
    size, the kernel argument the pointer came from, and the tensor the
    address lies in instead (`inside`). The Triton bridge fills in `kernel`
    and `program_id` on its way out when they are None, so the launcher
    always sees them. The message is built when it is read, after every
    field is complete, and is one line.
    """

    def __init__(
        self,
        tensor: str | None,
        offset: int,
        access_size: int,
        kernel: str | None = None,
        program_id: tuple[int, int, int] | None = None,
        *,
        address: int | None = None,
        access: str | None = None,
        lane: int | tuple[int, ...] | None = None,
        tensor_bytes: int | None = None,
        argument: str | None = None,
        inside: str | None = None,
    ) -> None:
        super().__init__(tensor, offset, access_size, kernel, program_id)
        self.tensor = tensor
        self.offset = offset
        self.access_size = access_size
        self.kernel = kernel
        self.program_id = program_id
        self.address = address
        self.access = access
        self.lane = lane
        self.tensor_bytes = tensor_bytes
        self.argument = argument
        self.inside = inside

    def __str__(self) -> str:
        head = f"kernel '{self.kernel}' program {self.program_id}: "
        if self.address is None or (self.tensor_bytes is None and self.tensor is not None):
            # A port that names only the tensor and the offset.
            where = (
                f"tensor '{self.tensor}' at byte offset {self.offset}"
                if self.tensor is not None
                else f"unallocated address {self.offset:#x}"
            )
            return f"{head}out-of-bounds {self.access_size}-byte {self.access or 'access'} to {where}"
        lane = f" (lane {self.lane})" if self.lane is not None else ""
        access = f"{self.access_size}-byte {self.access or 'access'} at {self.address:#x}{lane}"
        if self.tensor is None:
            return f"{head}out-of-bounds {access}: no tensor is allocated on this device"
        facts = [f"argument '{self.argument}'"] if self.argument is not None else []
        facts.append(f"{self.tensor_bytes} bytes")
        described = f"tensor '{self.tensor}' ({', '.join(facts)})"
        if self.offset < 0:
            where = f"{-self.offset} bytes before the start of {described}"
        elif self.offset >= self.tensor_bytes:
            where = f"{self.offset - self.tensor_bytes} bytes past the end of {described}"
        elif self.offset + self.access_size > self.tensor_bytes:
            where = f"running {self.offset + self.access_size - self.tensor_bytes} bytes past the end of {described}"
        else:
            return f"{head}misaligned {access}: byte offset {self.offset} of {described}"
        inside = f", inside tensor '{self.inside}'" if self.inside is not None else ""
        return f"{head}out-of-bounds {access}: {where}{inside}"


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


class KernelLaunchError(KernbenchError):
    """A launch the kernel cannot take: arguments that do not bind to its parameters, a grid that is not 1 to 3
    non-negative integers, or more programs than the run allows."""


class UnsupportedKernelError(KernbenchError):
    """A kernel uses a Triton feature the bridge does not simulate."""


class DescriptorError(KernbenchError):
    """A tensor descriptor breaks Triton's rules (16-byte aligned base, strides and inner offsets; last stride 1).

    A GPU's copy engine refuses such a descriptor, so the bridge does too,
    rather than run a kernel that only works on the simulator.
    """

"""`kernel.warmup(...)` on kernbench tensors: a compiled-kernel stand-in with numbers from the PE model.

Triton's `warmup` compiles without launching and returns a `CompiledKernel`
whose `n_regs`, `n_spills` and `metadata.shared` host code reads to size a
persistent grid (tutorial 02). Nothing is compiled here; the numbers are the
PE's (`driver.DeviceProperties`): `n_regs` is the register share that fits
`resident_programs` programs of `num_warps` warps in a PE's TCM,
`metadata.shared` is one resident program's share of the TCM, and
`n_spills` is 0, since a program's working set is bounded by the TCM itself
(a block that does not fit is the runtime's `WorkingSetTooLarge`). So the
occupancy a GPU program derives, from registers or from shared memory, is
`resident_programs`. `compiled[grid](*args)` launches the kernel as
`kernel[grid](*args)` would.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from kernbench.kernels.triton_bridge.driver import BACKEND, DeviceProperties
from kernbench.kernels.triton_bridge.launch import PreparedLaunch

_DEFAULT_NUM_WARPS = 4
_DEFAULT_NUM_STAGES = 3


class CompiledKernel:
    """What `warmup` returns: launch options, PE-model resource numbers, and a launcher."""

    def __init__(self, prepared: PreparedLaunch, options: dict, properties: DeviceProperties,
                 launch: Callable[[Any, tuple, dict], Any]) -> None:
        num_warps = int(options.get("num_warps") or _DEFAULT_NUM_WARPS)
        num_stages = int(options.get("num_stages") or _DEFAULT_NUM_STAGES)
        self.name = prepared.kernel_name
        self.n_regs = properties.registers_per_thread(num_warps)
        self.n_spills = 0
        self.n_max_threads = num_warps * properties.vector_lanes
        self.metadata = SimpleNamespace(
            name=prepared.kernel_name, num_warps=num_warps, num_stages=num_stages, num_ctas=1,
            shared=properties.shared_bytes_per_program, target=SimpleNamespace(backend=BACKEND, arch="ahbm",
                                                                             warp_size=properties.vector_lanes))
        self._launch = launch

    def _init_handles(self) -> None:
        """Nothing to load: no binary was built."""

    def __getitem__(self, grid) -> Callable:
        """`compiled[grid](*args)`: launch with every argument positional, constexprs included, as Triton's."""
        return lambda *args, **kwargs: self._launch(grid, args, kwargs)

    def __repr__(self) -> str:
        return f"CompiledKernel({self.name!r}, n_regs={self.n_regs}, shared={self.metadata.shared})"

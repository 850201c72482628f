"""`install_launch_hook`: route launches on kernbench tensors to the runtime.

`kernel[grid](...)` is `KernelInterface.__getitem__` calling the kernel's
`run`, so replacing `run` on the four kernel classes Triton launches through
(`JITFunction`, the interpreter's `InterpretedFunction`, `Autotuner`,
`Heuristics`) catches both spellings, for kernels created before or after
the hook and whether or not `TRITON_INTERPRET` chose the interpreter class.
The outermost wrapper sees the call first, so a decorated kernel is
prepared once, as a whole. A launch with no kernbench tensor among its
arguments goes to the original `run` untouched: the same kernel file runs
on a GPU with torch tensors. A host `TensorDescriptor` over a kernbench
tensor counts as a kernbench tensor. Before `on_launch` sees a launch its
`check` runs, so an operation the bridge does not simulate is an
`UnsupportedKernelError` raised by `kernel[grid](...)` (or by `warmup`)
itself, as a GPU's compile error is. `kernel.warmup(...)` (a `run` with
`warmup=True`) prepares the launch without running it and returns a
`compiled.CompiledKernel` whose numbers come from the PE model. The launch
is prepared with the speed caches of the run its first kernbench tensor
belongs to (`caches_of`), so its kernel's traced shapes serve the run's
later launches.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernbench.kernels.triton_bridge.compiled import CompiledKernel
from kernbench.kernels.triton_bridge.driver import active_device_properties
from kernbench.kernels.triton_bridge.launch import (PreparedLaunch, holds_kernbench_tensor, kernbench_tensors,
                                                     prepare_launch)
from kernbench.run_caches import RunCaches

_KERNEL_CLASSES = (JITFunction, InterpretedFunction, Autotuner, Heuristics)
_original_runs: dict[type, Callable] = {}


def _has_kernbench_tensor(args: tuple, kwargs: dict) -> bool:
    return any(map(holds_kernbench_tensor, (*args, *kwargs.values())))


def _hooked_run(original: Callable, on_launch: Callable[[PreparedLaunch], Any],
                caches_of: Callable[[Any], RunCaches] | None) -> Callable:
    def prepared(kernel, grid, args: tuple, kwargs: dict) -> PreparedLaunch:
        """The launch, prepared and checked: what a compiler would refuse fails here, at the launch (or warmup)."""
        tensor = next((t for value in (*args, *kwargs.values()) for t in kernbench_tensors(value)), None)
        caches = caches_of(tensor) if caches_of is not None and tensor is not None else None
        launch = prepare_launch(kernel, grid, args, kwargs, caches=caches)
        launch.check()
        return launch

    @functools.wraps(original)
    def run(self, *args, **kwargs):
        if not _has_kernbench_tensor(args, kwargs):
            return original(self, *args, **kwargs)
        grid = kwargs.pop("grid")
        warmup = kwargs.pop("warmup", False)
        launch = prepared(self, grid, args, kwargs)
        if not warmup:
            return on_launch(launch)
        device = getattr(launch.pointer_args[0].tensor, "device", None) if launch.pointer_args else None
        index = getattr(device, "index", None) or 0
        return CompiledKernel(launch, kwargs, active_device_properties(index),
                              lambda grid, args, kwargs: on_launch(prepared(self, grid, args, kwargs)))

    return run


def install_launch_hook(on_launch: Callable[[PreparedLaunch], Any],
                        caches_of: Callable[[Any], RunCaches] | None = None) -> None:
    """Make launches on kernbench tensors call `on_launch(prepared)` and return its result.

    `caches_of(tensor)`, where given, is the `RunCaches` of the run a
    kernbench tensor belongs to; without it each launch keeps its own.
    Installing again replaces the previous callbacks.
    """
    uninstall_launch_hook()
    for kernel_class in _KERNEL_CLASSES:
        original = vars(kernel_class)["run"]
        _original_runs[kernel_class] = original
        kernel_class.run = _hooked_run(original, on_launch, caches_of)


def uninstall_launch_hook() -> None:
    """Restore Triton's own `run` methods; a no-op when no hook is installed."""
    while _original_runs:
        kernel_class, original = _original_runs.popitem()
        kernel_class.run = original

"""`parallelize_module(module, device_mesh, parallelize_plan)`: PyTorch's entry point of tensor parallelism."""

from __future__ import annotations

import fnmatch

from kernbench.dtensor.device_mesh import DeviceMesh
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.parallel.style import ParallelStyle


def parallelize_module(module, device_mesh: DeviceMesh | None = None, parallelize_plan=None, *,
                       src_data_rank: int | None = 0):
    """Apply `parallelize_plan` — a `ParallelStyle` for `module` itself, or a dict from dotted submodule paths
    (`fnmatch` patterns per part, e.g. `"layers.*.attention"`) to styles — over the 1-D `device_mesh`, in
    place; return `module`."""
    if device_mesh is None:
        raise DTensorError("parallelize_module: pass the device_mesh (kernbench keeps no current mesh)")
    if device_mesh.ndim != 1:
        raise DTensorError(f"Tensor Parallel only accepts a 1D DeviceMesh, but found {device_mesh.ndim}D! If you "
                           'have a 2-D or N-D device_mesh, consider passing in device_mesh["tp"]')
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan.apply(module, device_mesh)
    if not isinstance(parallelize_plan, dict):
        raise DTensorError(f"Expect Union[ParallelStyle, Dict] for parallelize_plan, {type(parallelize_plan)} found!")
    for path, style in parallelize_plan.items():
        if not path:
            raise DTensorError("Expect module path to be non-empty, but got empty string!")
        head, _, rest = path.partition(".")
        matched = [(name, child) for name, child in module.named_children() if fnmatch.fnmatch(name, head)]
        if not matched:
            raise DTensorError(f"parallelize_plan: module path {path!r} matches no submodule of "
                               f"{type(module).__name__}")
        for _, child in matched:
            parallelize_module(child, device_mesh, {rest: style} if rest else style, src_data_rank=src_data_rank)
    return module

"""`distribute_module(module, device_mesh, partition_fn, input_fn, output_fn)`: PyTorch's building block of
parallel styles — lay out a module's parameters and hook its inputs and outputs."""

from __future__ import annotations

from kernbench.dtensor.dtensor import DTensor, distribute_tensor
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Replicate
from kernbench.runtime_api.nn.parameter import Parameter


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None, output_fn=None):
    """`partition_fn(name, submodule, device_mesh)` on every submodule (default: every parameter not yet a
    DTensor replicated), then `input_fn(module, inputs, device_mesh)` as a forward pre-hook and
    `output_fn(module, outputs, device_mesh)` as a forward hook; returns `module`."""
    if device_mesh is None:
        raise DTensorError("distribute_module: pass the device_mesh (kernbench keeps no current mesh)")
    for name, submodule in module.named_modules():
        if partition_fn is not None:
            partition_fn(name, submodule, device_mesh)
            continue
        for key, param in list(submodule.named_parameters(recurse=False)):
            if not isinstance(param, DTensor):
                replicated = distribute_tensor(param.detach(), device_mesh, [Replicate()] * device_mesh.ndim)
                submodule.register_parameter(key, Parameter(replicated, requires_grad=param.requires_grad))
    if input_fn is not None:
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, device_mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, device_mesh))
    return module

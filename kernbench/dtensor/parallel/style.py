"""The parallel styles of `parallelize_module`: how a module's parameters are laid out and its inputs and
outputs moved, each as PyTorch's `torch.distributed.tensor.parallel.style` defines it.

A style's `apply(module, mesh)` replaces the module's parameters by DTensor
parameters (`distribute_tensor` from rank 0, as PyTorch does) and registers
a forward pre-hook that turns plain inputs into DTensors of `input_layouts`
and redistributes them to the layouts the module computes in, and a forward
hook that redistributes the output to `output_layouts` and, with
`use_local_output`, hands back the local tensor.
"""

from __future__ import annotations

from kernbench.dtensor.dtensor import DTensor, distribute_tensor
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Replicate, Shard
from kernbench.runtime_api.nn.layers import Embedding, Linear
from kernbench.runtime_api.nn.parameter import Parameter


class ParallelStyle:
    """The base of the styles: `apply(module, device_mesh)` parallelizes `module` in place and returns it."""

    src_data_rank: int | None = 0

    def apply(self, module, device_mesh):
        raise NotImplementedError


def _one(layout):
    return layout if layout is None or isinstance(layout, (tuple, list)) else (layout,)


def _as_dtensor(value, mesh, layout, desired):
    """An input as a DTensor of `desired` layout: a plain tensor taken as `layout` (from_local), a DTensor as it
    is (PyTorch does not check it against `layout`), then redistributed."""
    if layout is None or not hasattr(value, "shape"):
        return value
    if not isinstance(value, DTensor):
        value = DTensor.from_local(value, mesh, (layout,), run_check=False)
    if desired is not None and value.placements != _resolved(desired, value.ndim):
        value = value.redistribute(placements=(desired,))
    return value


def _resolved(layout, ndim: int) -> tuple:
    return (Shard(layout.dim % ndim),) if layout.is_shard() else (layout,)


def _output(value, mesh, layout, use_local_output: bool):
    if not isinstance(value, DTensor):
        raise DTensorError(f"expected the module's output to be a DTensor, got {type(value).__name__}")
    if layout is not None and value.placements != _resolved(layout, value.ndim):
        value = value.redistribute(placements=(layout,))
    return value.to_local() if use_local_output else value


def _distribute_parameters(module, mesh, layouts: dict, src_data_rank) -> None:
    for name, param in list(module.named_parameters(recurse=False)):
        placement = layouts.get(name, Replicate())
        dtensor = distribute_tensor(param.detach(), mesh, (placement,), src_data_rank=src_data_rank)
        module.register_parameter(name, Parameter(dtensor, requires_grad=param.requires_grad))


class _InOut(ParallelStyle):
    """A style that lays out a Linear or Embedding's parameters and moves its first input and its output."""

    default_input = Replicate()
    default_output = Replicate()

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output: bool = True):
        self.input_layouts = (_one(input_layouts) or (self.default_input,))[0]
        self.output_layouts = (_one(output_layouts) or (self.default_output,))[0]
        self.use_local_output = use_local_output

    def apply(self, module, device_mesh):
        if not isinstance(module, (Linear, Embedding)):
            raise DTensorError(f"{type(self).__name__} currently only support nn.Linear and nn.Embedding!")
        _distribute_parameters(module, device_mesh, self._parameter_layouts(module), self.src_data_rank)
        desired = self._desired_input(module)
        module.register_forward_pre_hook(
            lambda mod, args: (_as_dtensor(args[0], device_mesh, self.input_layouts, desired), *args[1:]))
        module.register_forward_hook(
            lambda mod, args, out: _output(out, device_mesh, self.output_layouts, self.use_local_output))
        return module

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class ColwiseParallel(_InOut):
    """The weight split by output features (Shard(0); an Embedding's by columns, Shard(1)); input Replicate,
    output sharded on its last dimension (Shard(-1)) by default."""

    default_output = Shard(-1)

    def _parameter_layouts(self, module) -> dict:
        return {"weight": Shard(1), "bias": Shard(0)} if isinstance(module, Embedding) else \
            {"weight": Shard(0), "bias": Shard(0)}

    def _desired_input(self, module):
        return Replicate()


class RowwiseParallel(_InOut):
    """The weight split by input features (Shard(1); an Embedding's by rows, Shard(0)), the bias whole; input
    sharded on its last dimension (an Embedding's ids whole), output Replicate (an all-reduce) by default."""

    default_input = Shard(-1)

    def _parameter_layouts(self, module) -> dict:
        return {"weight": Shard(0)} if isinstance(module, Embedding) else {"weight": Shard(1), "bias": Replicate()}

    def _desired_input(self, module):
        return Replicate() if isinstance(module, Embedding) else Shard(-1)


class SequenceParallel(ParallelStyle):
    """A module computed on a shard of the sequence (`sequence_dim`, 1 by default): parameters replicated,
    a plain input taken as Shard(sequence_dim), the output left a DTensor unless `use_local_output`."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False):
        self.sequence_dim, self.use_local_output = sequence_dim, use_local_output

    def apply(self, module, device_mesh):
        _distribute_parameters(module, device_mesh, {}, self.src_data_rank)
        layout = Shard(self.sequence_dim)
        module.register_forward_pre_hook(lambda mod, args: tuple(
            _sequence_input(a, device_mesh, layout) for a in args))
        module.register_forward_hook(
            lambda mod, args, out: out.to_local() if self.use_local_output and isinstance(out, DTensor) else out)
        return module


def _sequence_input(value, mesh, layout):
    if not hasattr(value, "shape"):
        return value
    if isinstance(value, DTensor):
        return value if value.placements == _resolved(layout, value.ndim) else value.redistribute(placements=(layout,))
    return DTensor.from_local(value, mesh, (layout,), run_check=False)


class PrepareModuleInput(ParallelStyle):
    """The module's positional inputs taken as `input_layouts` and keyword inputs as `input_kwarg_layouts`,
    redistributed to `desired_input_layouts` / `desired_input_kwarg_layouts` (None, or a missing key, for an
    input left alone); local tensors handed on with `use_local_output`."""

    def __init__(self, *, input_layouts=None, desired_input_layouts=None, input_kwarg_layouts=None,
                 desired_input_kwarg_layouts=None, use_local_output: bool = False):
        self.input_layouts = _one(input_layouts)
        self.desired_input_layouts = _one(desired_input_layouts)
        self.input_kwarg_layouts = input_kwarg_layouts or {}
        self.desired_input_kwarg_layouts = desired_input_kwarg_layouts or {}
        self.use_local_output = use_local_output
        if self.input_layouts is not None and (self.desired_input_layouts is None or
                                               len(self.input_layouts) != len(self.desired_input_layouts)):
            raise DTensorError("input_layouts and desired_input_layouts should have same length!")
        if len(self.input_kwarg_layouts) != len(self.desired_input_kwarg_layouts):
            raise DTensorError("input_kwarg_layouts and desired_input_kwarg_layouts should have same length!")

    def apply(self, module, device_mesh):
        if self.input_kwarg_layouts:
            module.register_forward_pre_hook(lambda mod, args, kwargs: (
                self._prepared(args, device_mesh), self._prepared_kwargs(kwargs, device_mesh)), with_kwargs=True)
        elif self.input_layouts is not None:
            module.register_forward_pre_hook(lambda mod, args: self._prepared(args, device_mesh))
        return module

    def _prepared(self, args: tuple, mesh) -> tuple:
        if self.input_layouts is None:
            return args
        if len(args) != len(self.input_layouts):
            raise DTensorError("module inputs and input_layouts should have same length!")
        return tuple(self._one_input(value, mesh, layout, desired)
                     for value, layout, desired in zip(args, self.input_layouts, self.desired_input_layouts))

    def _prepared_kwargs(self, kwargs: dict, mesh) -> dict:
        return {key: self._one_input(value, mesh, self.input_kwarg_layouts.get(key),
                                     self.desired_input_kwarg_layouts.get(key)) for key, value in kwargs.items()}

    def _one_input(self, value, mesh, layout, desired):
        value = _as_dtensor(value, mesh, layout, desired)
        return value.to_local() if self.use_local_output and isinstance(value, DTensor) else value


class PrepareModuleOutput(ParallelStyle):
    """The module's output(s), DTensors of `output_layouts` (plain ones taken as such), redistributed to
    `desired_output_layouts`; local tensors handed back with `use_local_output` (the default)."""

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output: bool = True):
        self.output_layouts = _one(output_layouts)
        self.desired_output_layouts = _one(desired_output_layouts)
        self.use_local_output = use_local_output
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise DTensorError("output_layouts and desired_output_layouts should have same length!")

    def apply(self, module, device_mesh):
        module.register_forward_hook(lambda mod, args, out: self._prepared(out, device_mesh))
        return module

    def _prepared(self, outputs, mesh):
        single = not isinstance(outputs, tuple)
        outputs = (outputs,) if single else outputs
        prepared = []
        for value, layout, desired in zip(outputs, self.output_layouts, self.desired_output_layouts):
            value = _as_dtensor(value, mesh, layout, desired)
            prepared.append(value.to_local() if self.use_local_output and isinstance(value, DTensor) else value)
        return prepared[0] if single else tuple(prepared)

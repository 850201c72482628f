"""`torch.nn.parallel.DistributedDataParallel`: a module replicated on every rank of a group, its gradients
averaged over the group during the backward pass.

At construction each parameter and buffer is broadcast from the group's
first rank, so every replica starts the same. In each forward the wrapped
module sees, in place of each parameter, the output of `_AverageGrad` (the
same storage, no device work), whose backward all-reduces that parameter's
gradient with `ReduceOp.AVG` as soon as autograd has it — so the
collectives run inside the backward pass, as DDP's overlap them with it.
PyTorch's DDP gathers gradients into buckets before reducing; here each
parameter's gradient is its own all-reduce. `no_sync()` (or
`require_backward_grad_sync = False`) skips the reduction, for gradient
accumulation.
"""

from __future__ import annotations

from contextlib import contextmanager

from kernbench.runtime_api.autograd import Function, GradMode
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.nn.module import Module


class _AverageGrad(Function):
    """Forward: the parameter's storage, unchanged. Backward: the gradient averaged over the group (all-reduce)."""

    @staticmethod
    def forward(ctx, parameter, group):
        ctx.group = group
        return parameter.detach()

    @staticmethod
    def backward(ctx, grad):
        distributed = current_torch().distributed
        averaged = grad.clone()
        distributed.all_reduce(averaged, op=distributed.ReduceOp.AVG, group=ctx.group)
        return averaged, None


class DistributedDataParallel(Module):
    """`module` replicated over the ranks of `process_group` (every rank by default): parameters and buffers
    broadcast from its first rank at construction, each gradient averaged over it by an all-reduce during
    backward (one per parameter, no buckets)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **kwargs) -> None:
        super().__init__()
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.device_ids = device_ids
        self.require_backward_grad_sync = True
        self._broadcast([p for p in module.parameters()] + list(module.buffers()))

    def _broadcast(self, tensors) -> None:
        distributed = current_torch().distributed
        for tensor in tensors:
            with GradMode(tensor._ctx, False):
                distributed.broadcast(tensor.detach(), group=self.process_group, group_src=0)

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers:
            self._broadcast(list(self.module.buffers()))
        if not self.require_backward_grad_sync:
            return self.module(*inputs, **kwargs)
        seen, swapped = {}, []
        for module in self.module.modules():
            for name, parameter in module._parameters.items():
                if parameter is not None and parameter.requires_grad:
                    if id(parameter) not in seen:  # a tied parameter is averaged once
                        seen[id(parameter)] = _AverageGrad.apply(parameter, self.process_group)
                    swapped.append((module, name, parameter))
                    module._parameters[name] = seen[id(parameter)]
        try:
            return self.module(*inputs, **kwargs)
        finally:
            for module, name, parameter in swapped:
                module._parameters[name] = parameter

    @contextmanager
    def no_sync(self):
        """Inside the block, backward passes accumulate local gradients with no all-reduce."""
        previous, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

"""`torch.nn.utils`: `clip_grad_norm_`, as device work with no host read (as PyTorch's, which does not sync)."""

from __future__ import annotations

import math

from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import ModuleError
from kernbench.runtime_api.ops.shapes import stack
from kernbench.runtime_api.tensor.core import Tensor


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None):
    """Scale the gradients of `parameters` so that their joint `norm_type`-norm is at most `max_norm`; returns
    the norm before clipping. Each gradient's norm, their norm, the factor min(1, max_norm / (norm + 1e-6)) and
    each gradient's in-place scaling are device ops."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    if error_if_nonfinite:
        raise ModuleError("clip_grad_norm_(error_if_nonfinite=True) would read the norm to the host; kernbench "
                          "keeps it on the device, as error_if_nonfinite=False does")
    if not grads:
        raise ModuleError("clip_grad_norm_: none of the parameters has a gradient (call backward() first)")
    norm_type = float(norm_type)
    with autograd.GradMode(grads[0]._ctx, False):
        if math.isinf(norm_type):
            total = stack([g.abs().amax() for g in grads]).amax()
        elif norm_type == 2.0:
            total = stack([g.norm() for g in grads]).norm()
        else:
            total = stack([g.abs().pow(norm_type).sum() for g in grads]).sum().pow(1.0 / norm_type)
        factor = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(factor.to(g.dtype))
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of `parameters` to [−clip_value, clip_value] in place."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in parameters:
        if p.grad is not None:
            with autograd.GradMode(p._ctx, False):
                p.grad.clamp_(-clip_value, clip_value)

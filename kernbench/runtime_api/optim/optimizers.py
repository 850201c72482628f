"""torch.optim's optimizers: `Optimizer`, `SGD`, `Adam`, `AdamW`, `RMSprop`, with PyTorch's update formulas.

A step is device work: each parameter's update is tensor ops on the device
(elementwise passes over the parameter, its gradient and its state), run
outside autograd as PyTorch's `@torch.no_grad()` step is. The step count and
the learning rate stay on the host, as they do in PyTorch's default
(non-capturable) optimizers. `foreach=` and `fused=` are accepted: they
choose how PyTorch launches the same arithmetic, which kernbench runs as one
device op per step of the formula.
"""

from __future__ import annotations

import math

from kernbench.runtime_api import autograd
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.errors import OptimizerError
from kernbench.runtime_api.tensor.core import Tensor


class Optimizer:
    """The base of every optimizer (`torch.optim.Optimizer`): parameter groups with their settings, per-parameter
    state, `zero_grad`, `state_dict` / `load_state_dict`, `add_param_group`."""

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = dict(defaults)
        self.state: dict = {}
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise OptimizerError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                                 "but got torch.Tensor")
        groups = list(params)
        if not groups:
            raise OptimizerError("optimizer got an empty parameter list")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with settings of its own (the defaults fill the rest)."""
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise OptimizerError(f"optimizer can only optimize Tensors, but one of the params is "
                                     f"{type(p).__name__}")
            if not p.is_leaf:
                raise OptimizerError("can't optimize a non-leaf Tensor")
        present = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in present for p in params):
            raise OptimizerError("some parameters appear in more than one parameter group")
        group = {**self.defaults, **param_group, "params": params}
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Every parameter's gradient dropped (`set_to_none`) or filled with zeros."""
        autograd.zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        """One update of every parameter with a gradient (device work, outside autograd); `closure()`, if given,
        recomputes the loss first and its value is returned."""
        loss = None
        if closure is not None:
            loss = closure()
        first = next((p for group in self.param_groups for p in group["params"] if p.grad is not None), None)
        if first is None:
            return loss
        with autograd.GradMode(first._ctx, False):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad.neg() if group.get("maximize") else p.grad, group,
                                     self.state.setdefault(p, {}))
        return loss

    def _update(self, p, grad, group: dict, state: dict) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict:
        """{"state": per-parameter state by index, "param_groups": the groups' settings, params as indices}."""
        index = {}
        groups = []
        for group in self.param_groups:
            numbered = {k: v for k, v in group.items() if k != "params"}
            numbered["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(numbered)
        state = {index[id(p)]: dict(values) for p, values in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """The settings and state of `state_dict` (from an optimizer over parameters of the same shapes)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(saved["params"]) != len(own["params"]) for saved, own in zip(groups, self.param_groups)):
            raise OptimizerError("loaded state dict has a different number of parameter groups or parameters")
        by_index = {}
        for saved, own in zip(groups, self.param_groups):
            by_index.update(zip(saved["params"], own["params"]))
            own.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {by_index[i]: {k: v.clone() if isinstance(v, Tensor) else v for k, v in values.items()}
                      for i, values in state_dict["state"].items()}

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        return "\n".join(lines + [")"])


def _check(lr, eps=0.0, betas=(0.0, 0.0), weight_decay=0.0, momentum=0.0) -> None:
    for what, value in (("learning rate", lr), ("epsilon value", eps), ("weight_decay value", weight_decay),
                        ("momentum value", momentum)):
        if not 0.0 <= value:
            raise OptimizerError(f"Invalid {what}: {value}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise OptimizerError(f"Invalid beta parameter at index {i}: {beta}")


class SGD(Optimizer):
    """Stochastic gradient descent with PyTorch's momentum (dampening, Nesterov) and weight decay (L2, added to
    the gradient); each step is a few elementwise device ops per parameter."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0, weight_decay: float = 0,
                 nesterov: bool = False, *, maximize: bool = False, foreach=None, differentiable: bool = False,
                 fused=None) -> None:
        _check(lr, weight_decay=weight_decay, momentum=momentum)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise OptimizerError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, p, grad, group: dict, state: dict) -> None:
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum:
            buffer = state.get("momentum_buffer")
            if buffer is None:
                buffer = state["momentum_buffer"] = grad.clone()
            else:
                buffer.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buffer, alpha=momentum) if group["nesterov"] else buffer
        p.add_(grad, alpha=-group["lr"])


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's bias corrections, L2 weight decay added to the gradient, and AMSGrad;
    each step is about ten elementwise device ops per parameter."""

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 amsgrad: bool = False, *, foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None) -> None:
        _check(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable, fused=fused))

    def _update(self, p, grad, group: dict, state: dict) -> None:
        (beta1, beta2), lr, decay = group["betas"], group["lr"], group["weight_decay"]
        if not state:
            state.update(step=0, exp_avg=_zeros_like(p), exp_avg_sq=_zeros_like(p))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _zeros_like(p)
        state["step"] += 1
        step = state["step"]
        if decay and self.decoupled:
            p.mul_(1 - lr * decay)
        elif decay:
            grad = grad.add(p, alpha=decay)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"].maximum_(exp_avg_sq)
        denom = (second.sqrt() / math.sqrt(1 - beta2 ** step)).add_(group["eps"])
        p.add_(exp_avg / denom, alpha=-lr / (1 - beta1 ** step))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): the parameter is scaled by 1 − lr · weight_decay
    before the Adam step (weight_decay 0.01 by default); elementwise device ops, as Adam's."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused)


class RMSprop(Optimizer):
    """RMSprop with PyTorch's smoothing `alpha`, `eps` outside the square root, optional centering, momentum and
    L2 weight decay; elementwise device ops per parameter."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0,
                 momentum: float = 0, centered: bool = False, capturable: bool = False, foreach=None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check(lr, eps, weight_decay=weight_decay, momentum=momentum)
        if not 0.0 <= alpha:
            raise OptimizerError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _update(self, p, grad, group: dict, state: dict) -> None:
        alpha = group["alpha"]
        if not state:
            state.update(step=0, square_avg=_zeros_like(p))
            if group["momentum"]:
                state["momentum_buffer"] = _zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = _zeros_like(p)
        state["step"] += 1
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg = state["square_avg"].mul_(alpha).add_(grad * grad, alpha=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"].mul_(alpha).add_(grad, alpha=1 - alpha)
            avg = (square_avg - grad_avg * grad_avg).sqrt().add_(group["eps"])
        else:
            avg = square_avg.sqrt().add_(group["eps"])
        if group["momentum"]:
            step = state["momentum_buffer"].mul_(group["momentum"]).add_(grad / avg)
        else:
            step = grad / avg
        p.add_(step, alpha=-group["lr"])


def _zeros_like(p):
    """Zeros of `p`'s shape, dtype, device and placement (an HBM fill), for the optimizer's state."""
    return current_torch().zeros_like(p)

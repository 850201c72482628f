"""`torch.nn.init`: fills of a parameter in place, as device fills, outside autograd (as PyTorch's run under
`no_grad`), with PyTorch's formulas for the bounds and standard deviations."""

from __future__ import annotations

import math

from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import ModuleError
from kernbench.runtime_api.ops import fills

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain of a nonlinearity (PyTorch's table): 1 for linear and sigmoid, 5/3 for tanh, √2 for
    relu, √(2 / (1 + slope²)) for leaky_relu, 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ModuleError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ModuleError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ModuleError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _without_grad(tensor, fill):
    with autograd.GradMode(tensor._ctx, False):
        fill()
    return tensor


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with U(a, b) (a device fill: one vector pass and a store per tile)."""
    return _without_grad(tensor, lambda: fills.uniform_(tensor, a, b, generator=generator))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std²) (a device fill)."""
    return _without_grad(tensor, lambda: fills.normal_(tensor, mean, std, generator=generator))


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None):
    """Fill with N(mean, std²) truncated to [a, b] (a device fill)."""
    return _without_grad(tensor, lambda: fills.trunc_normal_(tensor, mean, std, a, b, generator=generator))


def constant_(tensor, val: float):
    """Fill with `val` (an HBM fill)."""
    return _without_grad(tensor, lambda: tensor.fill_(val))


def zeros_(tensor):
    """Fill with 0 (an HBM fill)."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with 1 (an HBM fill)."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """U(−a, a) with a = gain · √(6 / (fan_in + fan_out)) (Glorot; a device fill)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """N(0, std²) with std = gain · √(2 / (fan_in + fan_out)) (Glorot; a device fill)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """U(−bound, bound) with bound = gain · √(3 / fan) (He), the gain of `nonlinearity` with slope `a` (a device fill)."""
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None):
    """N(0, std²) with std = gain / √fan (He; a device fill)."""
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)

"""In-place random fills (`uniform_`, `normal_`): values drawn from the tensor's device generator, written by
a device fill (device_ops.generate)."""

from __future__ import annotations

from kernbench.runtime_api import autograd
from kernbench.runtime_api.ops import device_ops


def uniform_(x, a: float = 0.0, b: float = 1.0, *, generator=None):
    """Fill with U(a, b) in place (a device fill: one vector pass and a store per tile)."""
    autograd.check_in_place(x, "uniform", ())
    rng = x._ctx.rng_for(generator, x.device)
    device_ops.generate("uniform_", lambda count: rng.uniform(a, b, count), x)
    return x


def normal_(x, mean: float = 0.0, std: float = 1.0, *, generator=None):
    """Fill with N(mean, std²) in place (a device fill)."""
    autograd.check_in_place(x, "normal", ())
    rng = x._ctx.rng_for(generator, x.device)
    device_ops.generate("normal_", lambda count: rng.normal(mean, std, count), x)
    return x


def trunc_normal_(x, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, *, generator=None):
    """Fill with N(mean, std²) truncated to [a, b] in place (a device fill; draws outside are drawn again)."""
    autograd.check_in_place(x, "trunc_normal", ())
    rng = x._ctx.rng_for(generator, x.device)

    def draw(count):
        values = rng.normal(mean, std, count)
        outside = (values < a) | (values > b)
        while outside.any():
            values[outside] = rng.normal(mean, std, int(outside.sum()))
            outside = (values < a) | (values > b)
        return values
    device_ops.generate("trunc_normal_", draw, x)
    return x

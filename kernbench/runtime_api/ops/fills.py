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

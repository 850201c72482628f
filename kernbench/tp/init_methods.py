"""Megatron's weight initializers (`megatron.core.utils.init_method_normal` and its scaled twin).

An init method of kernbench's kind fills a master weight in place from a
numpy generator: `init_(array, rng)`. The configuration derives its
defaults from these (`TransformerConfig.init_method`) and the layers call
them, so they live below both rather than in either. The layers also take
Megatron's kind, called with the weight tensor alone and filling it in
place from the run's generator (`partial(torch.nn.init.normal_, std=...)`,
`torch.nn.init.xavier_normal_`): `takes_a_tensor` tells them apart.
"""

from __future__ import annotations

import inspect
from typing import Callable

import numpy as np

InitMethod = Callable[[np.ndarray, np.random.Generator], None]


def takes_a_tensor(init_method) -> bool:
    """Whether `init_method` is Megatron's kind (one required positional parameter: the tensor it fills) rather
    than kernbench's (two: the array and the numpy generator)."""
    try:
        parameters = inspect.signature(init_method).parameters.values()
    except (TypeError, ValueError):  # a callable Python cannot inspect: kernbench's kind, as before
        return False
    required = [p for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                                              p.POSITIONAL_OR_KEYWORD)]
    return len(required) == 1


def init_method_normal(sigma: float) -> InitMethod:
    """Megatron's `init_method_normal`: fill the master weight in place from N(0, sigma^2)."""

    def init_(weight: np.ndarray, rng: np.random.Generator) -> None:
        weight[...] = rng.normal(0.0, sigma, size=weight.shape)

    return init_


def scaled_init_method_normal(sigma: float, num_layers: int) -> InitMethod:
    """Megatron's `scaled_init_method_normal`: N(0, (sigma / sqrt(2 num_layers))^2), for output layers."""
    return init_method_normal(sigma / np.sqrt(2.0 * num_layers))

"""Megatron's weight initializers (`megatron.core.utils.init_method_normal` and its scaled twin).

An init method fills a master weight in place from a numpy generator. The
configuration derives its defaults from these (`TransformerConfig.init_method`)
and the layers call them, so they live below both rather than in either.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

InitMethod = Callable[[np.ndarray, np.random.Generator], None]


def init_method_normal(sigma: float) -> InitMethod:
    """Megatron's `init_method_normal`: fill the master weight in place from N(0, sigma^2)."""

    def init_(weight: np.ndarray, rng: np.random.Generator) -> None:
        weight[...] = rng.normal(0.0, sigma, size=weight.shape)

    return init_


def scaled_init_method_normal(sigma: float, num_layers: int) -> InitMethod:
    """Megatron's `scaled_init_method_normal`: N(0, (sigma / sqrt(2 num_layers))^2), for output layers."""
    return init_method_normal(sigma / np.sqrt(2.0 * num_layers))

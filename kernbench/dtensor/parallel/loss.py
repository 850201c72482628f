"""`loss_parallel()`: inside the block, `cross_entropy` on class-sharded DTensor logits needs no gathered logits."""

from __future__ import annotations

from contextlib import contextmanager

from kernbench.dtensor.rules import losses


@contextmanager
def loss_parallel():
    """A context manager (per rank) in which `F.cross_entropy` of logits sharded on the class dimension is
    computed on the shards (rules/losses.py). Call `loss.backward()` inside it too, as PyTorch asks."""
    losses.enter()
    try:
        yield
    finally:
        losses.leave()

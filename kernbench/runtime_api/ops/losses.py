"""The losses of `torch.nn.functional`: `cross_entropy`, `nll_loss`, `mse_loss`, written with tensor methods so
that each step is a device op with its own derivative.

A target class is picked without reading the targets to the host: the
targets are compared with the classes (an iota on the device) into a one-hot
mask, and the log-probabilities are summed under it — elementwise passes over
the logits, as a fused cross-entropy kernel reads them once.
"""

from __future__ import annotations

from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.ops.elementwise import where
from kernbench.runtime_api.ops.functional import log_softmax
from kernbench.runtime_api.ops.positional import iota
from kernbench.runtime_api.ops.overrides import overridable

REDUCTIONS = ("none", "mean", "sum")


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
             reduction: str = "mean"):
    """The negative log-likelihood of each target class in `input` (log-probabilities, classes in dim 1), with
    torch's `weight`, `ignore_index` and `reduction` (the mean over the weights of the targets not ignored)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    logp = _classes_last(input, target)
    picked, valid, weights = _pick(logp, target, weight, ignore_index)
    return _reduced(-picked * weights, weights, reduction)


@overridable
def cross_entropy(input, target, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """log_softmax over the classes (dim 1), then `nll_loss`; or, with a floating target of the input's shape,
    the cross entropy with those class probabilities. `label_smoothing` mixes in the uniform distribution."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise TensorError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    logp = log_softmax(_classes_last(input, target), -1)
    classes = logp.shape[-1]
    if target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise TensorError(f"cross_entropy: a target of class probabilities must have the input's shape "
                              f"{input.shape}, got {target.shape}")
        probabilities = _classes_last(target, None)
        if label_smoothing:
            probabilities = probabilities * (1 - label_smoothing) + label_smoothing / classes
        terms = logp * probabilities if weight is None else logp * probabilities * weight
        losses = -terms.sum(-1)
        return _reduced(losses, None, reduction, count=losses.numel())
    picked, valid, weights = _pick(logp, target, weight, ignore_index)
    losses = -picked * weights
    if label_smoothing:
        spread = logp.sum(-1) if weight is None else (logp * weight).sum(-1)
        losses = losses * (1 - label_smoothing) - where(valid, spread, 0.0) * (label_smoothing / classes)
    return _reduced(losses, weights, reduction)


@overridable
def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """The squared difference of `input` and `target` (of one shape), its mean, sum or itself (`reduction`)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise TensorError(f"mse_loss: target size ({tuple(target.shape)}) must be the same as input size "
                          f"({tuple(input.shape)})")
    squared = (input - target).square()
    return squared if reduction == "none" else squared.mean() if reduction == "mean" else squared.sum()


def legacy_reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        if reduce is False:
            return "none"
        return "sum" if size_average is False else "mean"
    if reduction not in REDUCTIONS:
        raise TensorError(f"{reduction} is not a valid value for reduction")
    return reduction


def _classes_last(input, target):
    """`input` with its classes (dim 1, or dim 0 of a 1-D input) last, checked against `target`'s shape."""
    if input.ndim == 0:
        raise TensorError("cross_entropy: the input must have a class dimension")
    if target is not None and not target.dtype.is_floating_point:
        expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
        if tuple(target.shape) != tuple(expected):
            raise TensorError(f"Expected input batch_size ({input.shape[0] if input.ndim >= 2 else 1}) to match "
                              f"target batch_size ({target.shape[0] if target.ndim else 1}): input {input.shape}, "
                              f"target {target.shape}")
    return input.permute(0, *range(2, input.ndim), 1) if input.ndim > 2 else input


def _pick(logp, target, weight, ignore_index: int):
    """(log-probability of each target class, the mask of targets not ignored, each target's weight — 0 where
    ignored), all of the target's shape."""
    onehot = target.unsqueeze(-1) == iota(logp, logp.shape[-1], target.dtype)
    picked = where(onehot, logp, 0.0).sum(-1)
    valid = target != ignore_index
    weights = valid.to_dtype(logp.dtype) if weight is None else where(onehot, weight, 0.0).sum(-1) * valid
    return picked, valid, weights


def _reduced(losses, weights, reduction: str, count=None):
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "sum":
        return total
    return total / (weights.sum() if count is None else count)

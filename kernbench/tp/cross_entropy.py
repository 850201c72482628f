"""Megatron's `vocab_parallel_cross_entropy`: the cross-entropy loss of logits split over the vocabulary.

Each rank of the tensor-parallel group holds its vocabulary partition's
logits [..., V/p] (a column-parallel output layer's, ungathered). The loss
needs the whole softmax, built from three all-reduces over the group, as
Megatron does: the max of each row (for a stable exponent), the target's
logit (only the rank holding the target's id contributes it; the others
add 0) and the sum of the exponentials. Each rank then holds the whole
row's loss `log Σ exp(z - max) - (z_target - max)`. The backward is each
rank's softmax partition minus 1 at the target's position (on the rank that
holds it), times the incoming gradient — no communication. With
`label_smoothing` the loss mixes in the mean log-probability, Megatron's
formula.

The all-reduces are `torch.distributed.all_reduce` as a bench's `import torch`
gives it (`torch_module`), called for a group of one rank too, as Megatron
calls them, so a test that replaces `torch.distributed.all_reduce` sees each.
All of it is device work on the run's `torch` (reductions, elementwise ops,
advanced indexing for the target's logits) and the group's collectives;
the logits are computed with in float32 as Megatron's `.float()` does, and
the caller's logits are not modified (Megatron's kernel reuses them in place).
"""

from __future__ import annotations

from kernbench.runtime_api.autograd import Function
from kernbench.runtime_api.namespace.torch_imports import torch_module
from kernbench.tp import parallel_state
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.mappings import _size_and_rank
from kernbench.tp.parallel_state import get_tensor_model_parallel_group
from kernbench.tp.utils import VocabUtility


class _VocabParallelCrossEntropy(Function):
    """Forward: the loss per row, three all-reduces over `tp_group`. Backward: softmax minus the one-hot target."""

    @staticmethod
    def forward(ctx, vocab_parallel_logits, target, label_smoothing=0.0, tp_group=None):
        if tp_group is None:
            tp_group = get_tensor_model_parallel_group()
        torch = parallel_state.torch_namespace()
        dist = torch_module("torch.distributed")  # as Megatron calls it, so a replaced all_reduce is seen
        logits = vocab_parallel_logits.float()
        logits_max = logits.max(dim=-1)[0]
        _all_reduce(dist, logits_max, dist.ReduceOp.MAX, tp_group)
        world_size, rank = _size_and_rank(tp_group)
        partition_vocab_size = logits.shape[-1]
        start, end = VocabUtility.vocab_range_from_per_partition_vocab_size(partition_vocab_size, rank, world_size)
        shifted = logits - logits_max.unsqueeze(-1)
        target_mask = (target < start) | (target >= end)
        masked_target_1d = (target - start).masked_fill(target_mask, 0).reshape(-1)
        logits_2d = shifted.reshape(-1, partition_vocab_size)
        rows = torch.arange(logits_2d.shape[0], device=logits_2d.device)
        predicted_logits = logits_2d[rows, masked_target_1d].reshape(*target.shape).masked_fill(target_mask, 0.0)
        exp_logits = shifted.exp()
        sum_exp_logits = exp_logits.sum(dim=-1)
        _all_reduce(dist, predicted_logits, dist.ReduceOp.SUM, tp_group)
        _all_reduce(dist, sum_exp_logits, dist.ReduceOp.SUM, tp_group)
        loss = sum_exp_logits.log() - predicted_logits
        softmax = exp_logits / sum_exp_logits.unsqueeze(-1)
        vocab_size = partition_vocab_size
        if label_smoothing > 0:
            if not 0.0 < label_smoothing < 1.0:
                raise ModelParallelError(f"vocab_parallel_cross_entropy: label_smoothing={label_smoothing!r} must be "
                                         "in [0, 1)")
            smoothing = label_smoothing * vocab_size / (vocab_size - 1)
            loss = (1.0 - smoothing) * loss - smoothing * softmax.log().mean(dim=-1)
        ctx.label_smoothing, ctx.vocab_size = label_smoothing, vocab_size
        ctx.save_for_backward(softmax, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        torch = parallel_state.torch_namespace()
        grad_2d = softmax.reshape(-1, ctx.vocab_size).clone()
        rows = torch.arange(grad_2d.shape[0], device=grad_2d.device)
        update = 1.0 - target_mask.reshape(-1).float()
        if ctx.label_smoothing > 0:
            smoothing = ctx.label_smoothing * ctx.vocab_size / (ctx.vocab_size - 1)
            grad_2d[rows, masked_target_1d] = grad_2d[rows, masked_target_1d] - (1.0 - smoothing) * update
            grad_2d = grad_2d - smoothing / ctx.vocab_size
        else:
            grad_2d[rows, masked_target_1d] = grad_2d[rows, masked_target_1d] - update
        grad_input = grad_2d.reshape(*softmax.shape) * grad_output.unsqueeze(-1)
        return grad_input, None, None, None


def _all_reduce(dist, tensor, op, group) -> None:
    """`torch.distributed.all_reduce` over `group`, called as Megatron calls it, a group of one rank included (so
    a replaced `torch.distributed.all_reduce` sees every call); only kernbench's world of one, with no process
    group (`parallel_state`'s module docstring), has nothing to call it on."""
    if group is not None or dist.is_initialized():
        dist.all_reduce(tensor, op=op, group=group)


def vocab_parallel_cross_entropy(vocab_parallel_logits, target, label_smoothing: float = 0.0, tp_group=None):
    """The cross-entropy loss of each row of logits split over the vocabulary across `tp_group` (default: this
    rank's tensor-parallel group): logits [s, b, V/p], target ids [s, b] -> loss [s, b], float32."""
    return _VocabParallelCrossEntropy.apply(vocab_parallel_logits, target, label_smoothing, tp_group)

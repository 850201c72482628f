"""Megatron's `finalize_model_grads`: the gradient synchronization that ends a training step's backward pass.

After `loss.backward()` each rank holds gradients that are not yet the
model's: data-parallel replicas saw different micro-batches, and with
sequence parallelism every tensor-parallel rank saw only its slice of the
sequence, so the gradients of the parameters replicated across the
tensor-parallel group and used on that slice (the layer norms, a row-parallel
layer's bias: those marked `sequence_parallel`) are partial sums. Megatron
finishes both in `finalize_model_grads`: the data-parallel reduction (its
DDP's `finish_grad_sync`, averaging) and the all-reduce of the marked
gradients over the tensor-parallel group, coalesced into one buffer. The
collectives are device work on the calling rank's stream, timed and recorded
like any other.
"""

from __future__ import annotations

from kernbench.tp import parallel_state


def finalize_model_grads(model) -> None:
    """Average every gradient over the data-parallel group, then sum the `sequence_parallel` ones over the
    tensor-parallel group (one all-reduce of their concatenation). `model` is a layer or a list of layers with
    `parameters()`; parameters without a gradient are skipped.

    Megatron's DDP reduces gradients in buckets; here each gradient is its own all-reduce (`ReduceOp.AVG`).
    """
    torch = parallel_state.get_torch_namespace()
    layers = model if isinstance(model, (list, tuple)) else [model]
    trained = [p for layer in layers for p in layer.parameters() if p is not None and p.grad is not None]
    grads = [p.grad for p in trained]
    marked = [p.grad for p in trained if getattr(p, "sequence_parallel", False)]
    if parallel_state.get_data_parallel_world_size() > 1:
        group = parallel_state.get_data_parallel_group()
        for grad in grads:
            torch.distributed.all_reduce(grad, op=torch.distributed.ReduceOp.AVG, group=group)
    if marked and parallel_state.get_tensor_model_parallel_world_size() > 1:
        coalesced = torch.cat([grad.reshape(-1) for grad in marked])
        torch.distributed.all_reduce(coalesced, group=parallel_state.get_tensor_model_parallel_group())
        offset = 0
        for grad in marked:
            grad.copy_(coalesced[offset:offset + grad.numel()].view(grad.shape))
            offset += grad.numel()

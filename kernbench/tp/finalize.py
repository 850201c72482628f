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
    """Average every gradient over the data-parallel group (an expert layer's, marked `allreduce = False`:
    scaled by 1 / that group's size and summed over the expert data-parallel group, as Megatron's DDP does),
    then sum the `sequence_parallel` ones over the tensor-parallel group (one all-reduce of their
    concatenation). `model` is a layer or a list of layers with `parameters()`; parameters without a gradient
    are skipped.

    Megatron's DDP reduces gradients in buckets; here each gradient is its own all-reduce (`ReduceOp.AVG`).
    """
    torch = parallel_state.get_torch_namespace()
    dist = torch.distributed
    layers = model if isinstance(model, (list, tuple)) else [model]
    trained = [p for layer in layers for p in layer.parameters() if p is not None and p.grad is not None]
    dense = [p.grad for p in trained if getattr(p, "allreduce", True)]
    expert = [p.grad for p in trained if not getattr(p, "allreduce", True)]
    marked = [p.grad for p in trained if getattr(p, "sequence_parallel", False)]
    data_parallel = parallel_state.get_data_parallel_world_size()
    if data_parallel > 1:
        group = parallel_state.get_data_parallel_group()
        for grad in dense:
            dist.all_reduce(grad, op=dist.ReduceOp.AVG, group=group)
    if expert and parallel_state.get_expert_data_parallel_world_size() > 1:
        # Megatron's DDP: an expert gradient is scaled by 1 / the data-parallel size and summed over the expert
        # data-parallel group.
        for grad in expert:
            grad.mul_(1.0 / data_parallel)
            dist.all_reduce(grad, group=parallel_state.get_expert_data_parallel_group())
    if marked and parallel_state.get_tensor_model_parallel_world_size() > 1:
        coalesced = torch.cat([grad.reshape(-1) for grad in marked])
        torch.distributed.all_reduce(coalesced, group=parallel_state.get_tensor_model_parallel_group())
        offset = 0
        for grad in marked:
            grad.copy_(coalesced[offset:offset + grad.numel()].view(grad.shape))
            offset += grad.numel()

"""Autograd on the simulated device: the graph device ops record, and `backward()` as device work (adr/0017).

A differentiable op whose inputs require grad records a `Node` on its
output: the inputs, and a function from the output's gradient to each
input's. `Tensor.backward()` walks the graph in reverse topological order
and runs those functions — with device ops, so the backward pass is
enqueued, placed, costed, logged and traced like the forward — and adds
each leaf's gradient into its `.grad`. As in PyTorch, a backward frees the
graph it ran through unless told `retain_graph=True`: a second backward
through a freed node raises PyTorch's error instead of adding the same
gradients again. Grad mode is per rank (greenlet), as
it is per thread in PyTorch: `no_grad()` in one rank leaves the others
recording.

This module works on tensors through their methods only, so the op table's
rows (ops/) and the views (tensor/core.py) can both record into it.
"""

from __future__ import annotations

import functools
import itertools

from kernbench.runtime_api.errors import FreedGraphError, TensorError

# PyTorch's words, so that a search for them finds PyTorch's advice.
FREED_GRAPH = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
               "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
               "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
               "if you need to access saved tensors after calling backward.")


class RemovableHandle:
    """What `register_forward_hook` and `Tensor.register_hook` return: `remove()` takes the hook out."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self._hooks, self.id = hooks, next(self._ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Node:
    """How one op's output gradient becomes its inputs' (None where an input needs none)."""

    __slots__ = ("name", "inputs", "backward", "freed")

    def __init__(self, name: str, inputs: tuple, backward):
        self.name = name
        self.inputs = inputs
        self.backward = backward
        self.freed = False  # a backward ran through it without retain_graph

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def grad_enabled(ctx) -> bool:
    return not ctx.grad_disabled.get(ctx.engine.current_process)


class GradMode:
    """`torch.no_grad()` / `enable_grad()` / `set_grad_enabled(mode)`: a context manager and a decorator."""

    def __init__(self, ctx, enabled: bool):
        self._ctx = ctx
        self._enabled = enabled
        self._saved: list[int] = []

    def __enter__(self):
        disabled, key = self._ctx.grad_disabled, self._ctx.engine.current_process
        depth = disabled.get(key, 0)
        self._saved.append(depth)
        if self._enabled:
            disabled.pop(key, None)
        else:
            disabled[key] = depth + 1
        return self

    def __exit__(self, *exc) -> None:
        disabled, key = self._ctx.grad_disabled, self._ctx.engine.current_process
        depth = self._saved.pop()
        if depth:
            disabled[key] = depth
        else:
            disabled.pop(key, None)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with GradMode(self._ctx, self._enabled):
                return fn(*args, **kwargs)
        return wrapped


def requires_grad(value) -> bool:
    return getattr(value, "requires_grad", False)


def record(out, name: str, inputs, backward):
    """Make `out` the result of op `name` over `inputs` when grad mode is on and an input requires grad.

    `backward(grad)` returns one gradient per input (None for numbers and
    inputs that need none), in `inputs`' order.
    """
    if any(requires_grad(x) for x in inputs) and grad_enabled(out._ctx):
        out.grad_fn = Node(name, tuple(x if requires_grad(x) else None for x in inputs), backward)
        out.requires_grad = True
    return out


def check_in_place(tensor, name: str, others) -> None:
    """In-place ops may not rewrite what the graph needs: refused on a leaf, or on values a backward reads."""
    if not grad_enabled(tensor._ctx) or not (requires_grad(tensor) or any(requires_grad(o) for o in others)):
        return
    if tensor.requires_grad and tensor.grad_fn is None:
        raise TensorError(f"{name}_: a leaf tensor that requires grad ({tensor.name!r}) is used in an in-place "
                          "operation; wrap it in torch.no_grad() or use the out-of-place form")
    raise TensorError(f"{name}_: in-place operations on tensors that take part in autograd are not supported by "
                      f"kernbench; use the out-of-place form ({name})")


def backward(root, gradient=None, retain_graph=None) -> None:
    """Accumulate d(root)/d(leaf) into every leaf's `.grad`, running the backward ops as device work.

    The nodes it runs are freed unless `retain_graph`: a later backward
    through one is `FreedGraphError`, as in PyTorch.
    """
    if not root.requires_grad:
        raise TensorError(f"backward: tensor {root.name!r} does not require grad and has no grad_fn")
    if gradient is None:
        if root.numel() != 1:
            raise TensorError(f"backward: grad can be implicitly created only for scalar outputs; {root.name!r} "
                              f"has shape {root.shape}: pass gradient=")
        gradient = _ones_like(root)
    elif tuple(gradient.shape) != tuple(root.shape):
        raise TensorError(f"backward: gradient of shape {gradient.shape} for a tensor of shape {root.shape}")
    order = _topological(root)
    grads = {root: gradient}
    with GradMode(root._ctx, False):
        for tensor in order:
            grad = grads.pop(tensor, None)
            if grad is None:
                continue
            for hook in list(getattr(tensor, "_grad_hooks", {}).values()):
                changed = hook(grad)
                grad = grad if changed is None else changed
            node = tensor.grad_fn
            if node is None or getattr(tensor, "_retains_grad", False):
                _accumulate(tensor, grad)
            if node is None:
                continue
            if node.freed:
                raise FreedGraphError(FREED_GRAPH)
            node.freed = not retain_graph
            for source, source_grad in zip(node.inputs, node.backward(grad)):
                if source is None or source_grad is None:
                    continue
                source_grad = sum_to_shape(source_grad, source.shape)
                if source_grad.dtype is not source.dtype:  # a gradient has its tensor's dtype, as in PyTorch
                    source_grad = source_grad.to_dtype(source.dtype)
                grads[source] = source_grad if source not in grads else grads[source] + source_grad


def _topological(root) -> list:
    """Tensors of the graph below `root`, each after every tensor computed from it."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        tensor, expanded = stack.pop()
        if expanded:
            order.append(tensor)
            continue
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        stack.append((tensor, True))
        node = tensor.grad_fn
        if node is not None:
            stack.extend((source, False) for source in node.inputs if source is not None and id(source) not in seen)
    return order[::-1]


def _accumulate(tensor, grad) -> None:
    if tensor.grad is None:
        tensor.grad = grad.contiguous() if grad.shape == tensor.shape else grad.expand(tensor.shape).contiguous()
    else:
        tensor.grad.add_(grad)


def sum_to_shape(grad, shape: tuple[int, ...]):
    """`grad` summed over the dimensions broadcasting added or stretched, back to `shape`."""
    shape = tuple(shape)
    if tuple(grad.shape) == shape:
        return grad
    lead = grad.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and grad.shape[lead + d] != 1)
    summed = grad.sum(dims, keepdim=True) if dims else grad
    return summed.reshape(shape)


def _ones_like(tensor):
    ones = tensor._new_like(tensor.shape, f"{tensor.name}.grad_seed")
    return ones.fill_(1)


def view_backward(base, transform, injective: bool):
    """The backward of a view: the gradient placed into zeros of the base's shape through the same view."""
    def backward(grad):
        if not injective:  # expand: each base element was seen several times
            return (sum_to_shape(grad, base.shape),)
        zeros = base._new_like(base.shape, f"{base.name}.grad").fill_(0)
        zeros._viewed(transform(zeros._layout), "grad").copy_(grad, non_blocking=True)
        return (zeros,)
    return backward


class FunctionCtx:
    """The `ctx` of a `torch.autograd.Function`: saved tensors and whatever the forward stores on it."""

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self.non_differentiable = tensors

    def mark_dirty(self, *tensors) -> None:
        self.dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class Function:
    """`torch.autograd.Function`: subclass with static `forward(ctx, ...)` and `backward(ctx, *grads)`; call `apply`.

    The forward runs with grad mode off; when an input requires grad each
    tensor output gets a node that calls `backward` with that output's
    gradient and zeros for the others (the chain rule is linear, so the sum
    over outputs is what one combined call would give).
    """

    @classmethod
    def apply(cls, *args, **kwargs):
        tensors = [a for a in args if hasattr(a, "requires_grad")]
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(requires_grad(a) for a in args)
        run = tensors[0]._ctx if tensors else None
        if run is None:
            return cls.forward(ctx, *args, **kwargs)
        with GradMode(run, False):
            outputs = cls.forward(ctx, *args, **kwargs)
            # An input returned as it is comes out as a view of it (as in PyTorch), so the node goes on the view and
            # the input keeps its own history (a leaf stays a leaf).
            inputs = {id(a) for a in tensors}
            if isinstance(outputs, tuple):
                outputs = tuple(o.view(o.shape) if id(o) in inputs else o for o in outputs)
            elif id(outputs) in inputs:
                outputs = outputs.view(outputs.shape)
        results = outputs if isinstance(outputs, tuple) else (outputs,)
        skip = {id(t) for t in getattr(ctx, "non_differentiable", ())}
        for position, out in enumerate(results):
            if hasattr(out, "requires_grad") and id(out) not in skip:
                record(out, cls.__name__, args, _function_backward(cls, ctx, results, position, len(args)))
        return outputs


def _function_backward(cls, ctx, results, position: int, n_inputs: int):
    def backward(grad):
        grads = [grad if i == position else
                 (r._new_like(r.shape, f"{r.name}.zero_grad").fill_(0) if hasattr(r, "requires_grad") else None)
                 for i, r in enumerate(results)]
        returned = cls.backward(ctx, *grads)
        returned = returned if isinstance(returned, tuple) else (returned,)
        if len(returned) != n_inputs:
            raise TensorError(f"{cls.__name__}.backward returned {len(returned)} gradients for {n_inputs} inputs of "
                              "forward; return one per input (None for inputs without a gradient)")
        return returned
    return backward


def zero_grads(parameters, set_to_none: bool) -> None:
    """Each parameter's gradient dropped (`set_to_none`) or filled with zeros: `Module.zero_grad`'s and
    `Optimizer.zero_grad`'s work."""
    for parameter in parameters:
        if parameter.grad is not None:
            if set_to_none:
                parameter.grad = None
            else:
                parameter.grad.zero_()

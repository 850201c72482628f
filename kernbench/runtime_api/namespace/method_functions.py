"""`torch.X(tensor, ...)` for Tensor's view and shape methods that are not rows of the op table (`torch.reshape`,
`torch.transpose`, `torch.tensor_split`, …): each is the method, called on its first argument."""

from __future__ import annotations

from kernbench.runtime_api.tensor.core import Tensor

_METHODS = ("reshape", "transpose", "permute", "flatten", "squeeze", "unsqueeze", "split", "chunk", "narrow",
            "tensor_split", "movedim", "unbind", "select", "clone", "numel", "t")


def _function_of(name: str):
    method = getattr(Tensor, name)

    def function(input, *args, **kwargs):
        return method(input, *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"`input.{name}(...)`: " + (method.__doc__ or f"Tensor.{name}.").strip().split("\n\n")[0]
    return function


def is_tensor(obj) -> bool:
    """Whether `obj` is a kernbench tensor (a `Parameter` included)."""
    return isinstance(obj, Tensor)


METHOD_FUNCTIONS = {name: _function_of(name) for name in _METHODS}
METHOD_FUNCTIONS["is_tensor"] = is_tensor

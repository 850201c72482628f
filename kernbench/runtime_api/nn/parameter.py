"""`torch.nn.Parameter`: a tensor that a module registers as one of its parameters."""

from __future__ import annotations

from kernbench.runtime_api.errors import TensorError
from kernbench.runtime_api.tensor.core import Tensor


class _ParameterMeta(type):
    """As PyTorch's: a tensor subclass that cannot become a Parameter's class (a DTensor) is a parameter when
    flagged `_is_param`, so `isinstance(p, nn.Parameter)` holds for it too."""

    def __instancecheck__(cls, instance) -> bool:
        return super().__instancecheck__(instance) or (isinstance(instance, Tensor) and
                                                       getattr(instance, "_is_param", False))


class Parameter(Tensor, metaclass=_ParameterMeta):
    """`torch.nn.Parameter(data, requires_grad=True)`: `data`'s storage as a leaf that requires grad, registered
    as a parameter when assigned to a module's attribute; a tensor everywhere else (its ops give plain tensors).
    A tensor subclass (a DTensor) stays of its class, detached and flagged as a parameter, as in PyTorch."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if not isinstance(data, Tensor):
            raise TensorError(f"nn.Parameter expects a tensor, got {type(data).__name__} (kernbench makes no "
                              "empty default)")
        parameter = data.detach()
        if type(data) not in (Tensor, Parameter):
            parameter.requires_grad_(requires_grad)
            parameter._is_param = True
            return parameter
        parameter.__class__ = cls  # the same storage and layout, seen as a parameter
        return parameter.requires_grad_(requires_grad)

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        """Made by `__new__`; nothing is left to set."""

"""torch.nn's layers, activations and losses, each a `Module` over the op table's functions.

A layer's parameters are made as PyTorch makes them: on `device=` (else the
run's default device, `torch.set_default_device`) in `dtype=` (else
float32), and initialized by `torch.nn.init` with PyTorch's rules — device
fills, drawn from the device's generator.
"""

from __future__ import annotations

import math

from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.errors import ModuleError
from kernbench.runtime_api.nn import init
from kernbench.runtime_api.nn.module import Module
from kernbench.runtime_api.nn.parameter import Parameter
from kernbench.runtime_api.ops import functional, linalg, losses


def _empty(shape, device, dtype):
    return current_torch().empty(tuple(shape), device=device, dtype=dtype)


class Identity(Module):
    """Returns its input (any constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x Wᵀ + b, W of shape (out_features, in_features) and b U(−1/√in, 1/√in) initialized as PyTorch does
    (a GEMM, then an add)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_empty((out_features, in_features), device, dtype))
        self.register_parameter("bias", Parameter(_empty((out_features,), device, dtype)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return linalg.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A table of `num_embeddings` vectors of `embedding_dim`, N(0, 1) initialized; forward gathers the rows at
    the given indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ModuleError("Padding_idx must be within num_embeddings")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = None if padding_idx is None else padding_idx % num_embeddings
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, \
            scale_grad_by_freq, sparse
        weight = _empty((num_embeddings, embedding_dim), device, dtype) if _weight is None else _weight
        self.weight = Parameter(weight, requires_grad=not _freeze)
        if _weight is None:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            init.zeros_(self.weight.detach()[self.padding_idx])

    def forward(self, input):
        return functional.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                                    self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalization over the last dims of `normalized_shape` (biased variance), then weight (ones) and bias
    (zeros) when `elementwise_affine`."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = functional.as_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.register_parameter("weight", Parameter(_empty(self.normalized_shape, device, dtype))
                                if elementwise_affine else None)
        self.register_parameter("bias", Parameter(_empty(self.normalized_shape, device, dtype))
                                if elementwise_affine and bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input):
        return functional.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """x / √(mean(x²) + eps) over the last dims, then weight (ones) when `elementwise_affine`."""

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.normalized_shape = functional.as_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.register_parameter("weight", Parameter(_empty(self.normalized_shape, device, dtype))
                                if elementwise_affine else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return functional.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """Zeroes each element with probability `p` in training (scaling the rest by 1/(1 − p)); identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ModuleError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return functional.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _Activation(Module):
    """An elementwise activation: the op table's row of that name (one vector pass)."""

    row: str

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        apply = getattr(input, self.row + "_" if self.inplace else self.row)
        return apply()


class ReLU(_Activation):
    """max(x, 0), elementwise."""

    row = "relu"


class SiLU(_Activation):
    """x · sigmoid(x), elementwise."""

    row = "silu"


class Tanh(_Activation):
    """tanh(x), elementwise."""

    row = "tanh"


class Sigmoid(_Activation):
    """sigmoid(x), elementwise."""

    row = "sigmoid"


class GELU(Module):
    """GELU, exact (erf) or `approximate='tanh'`, elementwise."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return functional.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class _OverDim(Module):
    """A function of the op table applied over `dim` (when None, the one torch's legacy rule picks)."""

    function = None

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return type(self).function(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_OverDim):
    """softmax over `dim`."""

    function = staticmethod(functional.softmax)


class LogSoftmax(_OverDim):
    """log_softmax over `dim`."""

    function = staticmethod(functional.log_softmax)


class Flatten(Module):
    """Dims `start_dim` to `end_dim` flattened into one (a view where strides allow)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """Dim `dim` unflattened into `unflattened_size`."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)


class CrossEntropyLoss(Module):
    """`F.cross_entropy` with the settings given here (weight, ignore_index, reduction, label_smoothing)."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.reduction = losses.legacy_reduction(size_average, reduce, reduction)

    def forward(self, input, target):
        return losses.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                                    reduction=self.reduction, label_smoothing=self.label_smoothing)


class MSELoss(Module):
    """`F.mse_loss` with the reduction given here."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = losses.legacy_reduction(size_average, reduce, reduction)

    def forward(self, input, target):
        return losses.mse_loss(input, target, reduction=self.reduction)

"""Matrix products: `matmul` and the forms torch spells out (`mm`, `bmm`, `linear`), timed as GEMMs
(library_gemm.matmul: 2·m·n·k flops on the matrix units, operand tiles over DMA)."""

from __future__ import annotations

from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.topology import TopologyError
from kernbench.runtime_api.ops import device_ops, library_gemm
from kernbench.runtime_api.ops.elementwise import result_maker
from kernbench.runtime_api.ops.overrides import overridable


@overridable
def matmul(a, b):
    """torch.matmul: dot, matrix-vector, matrix and batched products (batch dims broadcast)."""
    return _product(a, b, None, "matmul")


def _product(a, b, bias, name: str):
    """`a @ b` (+ `bias` along the last dim, in the GEMM's epilogue), recording its backward.

    A product of a tensor of more than two dims with a matrix is one GEMM
    over the tensor's rows, as torch folds it (`a` reshaped to (rows, K)),
    not a batch of one per leading index; its weight gradient is then one
    GEMM too (rowsᵀ @ grad).
    """
    if a.ndim == 0 or b.ndim == 0:
        raise TensorError(f"{name}: both arguments need at least one dimension")
    if a.dtype is not b.dtype:
        raise TensorError(f"{name}: expected both operands to have the same dtype, got {a.dtype.name} and "
                          f"{b.dtype.name}")
    device_ops.check_same_device([a, b] if bias is None else [a, b, bias], name)
    left, right = (a.unsqueeze(0) if a.ndim == 1 else a), (b.unsqueeze(-1) if b.ndim == 1 else b)
    if left.shape[-1] != right.shape[-2]:
        raise TensorError(f"{name}: shapes {a.shape} and {b.shape} cannot be multiplied "
                          f"({left.shape[-1]} != {right.shape[-2]})")
    if not a.device.is_host:
        topology = a._ctx.topology
        try:
            topology.pe.matrix_unit.rate(a.dtype.name)
        except TopologyError:
            raise TensorError(f"{name}: the matrix unit of {topology.source.name} has no rate for {a.dtype.name} "
                              f"(it has {', '.join(topology.dtypes)})") from None
    make = result_maker((a,))
    if right.ndim == 2 and left.ndim > 2:
        rows = left.reshape(-1, left.shape[-1])
        folded = make((rows.shape[0], right.shape[-1]), a.dtype, a.device, name)
        library_gemm.matmul(rows, right, folded, name, bias)
        out = folded.view(*left.shape[:-1], right.shape[-1])

        def backward(g):
            grads = g.reshape(-1, g.shape[-1])
            return ((grads @ right.mT).view(*left.shape) if autograd.requires_grad(left) else None,
                    rows.mT @ grads if autograd.requires_grad(right) else None,
                    grads.sum(0) if bias is not None and autograd.requires_grad(bias) else None)
    else:
        batch = device_ops.broadcast_shape([left.shape[:-2], right.shape[:-2]], name)
        out = make(batch + (left.shape[-2], right.shape[-1]), a.dtype, a.device, name)
        library_gemm.matmul(left, right, out, name, bias)

        def backward(g):
            return (matmul(g, right.mT) if autograd.requires_grad(left) else None,
                    matmul(left.mT, g) if autograd.requires_grad(right) else None,
                    g.reshape(-1, g.shape[-1]).sum(0) if bias is not None and autograd.requires_grad(bias) else None)
    inputs = (left, right) if bias is None else (left, right, bias)
    autograd.record(out, name, inputs, lambda g: backward(g)[:len(inputs)])
    if a.ndim == 1:
        out = out.squeeze(-2)
    if b.ndim == 1:
        out = out.squeeze(-1)
    return out


def mm(a, b):
    """Matrix product of two 2-D tensors."""
    if a.ndim != 2 or b.ndim != 2:
        raise TensorError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return matmul(a, b)


def bmm(a, b):
    """Batched matrix product of two 3-D tensors with equal batch sizes."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise TensorError(f"bmm: expected 3-D tensors with one batch size, got shapes {a.shape} and {b.shape}")
    return matmul(a, b)


@overridable
def linear(x, weight, bias=None):
    """x @ weightᵀ (+ bias): one GEMM with the bias added in its epilogue, as torch's addmm runs it (cuBLASLt's bias
    epilogue); a bias that is not one value per output feature is added after."""
    if weight.ndim == 2 and x.ndim >= 1 and x.shape[-1] != weight.shape[-1]:
        rows = x.numel() // max(1, x.shape[-1]) if x.ndim > 1 else 1
        raise TensorError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
                          f"{weight.shape[-1]}x{weight.shape[0]})")
    transposed = weight.mT if weight.ndim >= 2 else weight
    fused = bias is not None and weight.ndim == 2 and x.ndim >= 2 and tuple(bias.shape) == (weight.shape[0],) \
        and bias.dtype is x.dtype
    if fused:
        return _product(x, transposed, bias, "linear")
    out = matmul(x, transposed)
    return out if bias is None else out + bias

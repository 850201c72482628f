"""Matrix products: `matmul` and the forms torch spells out (`mm`, `bmm`, `linear`), timed as GEMMs
(library_gemm.matmul: 2·m·n·k flops on the matrix units, operand tiles over DMA)."""

from __future__ import annotations

from kernbench.runtime_api import autograd
from kernbench.runtime_api.errors import TensorError
from kernbench.topology import TopologyError
from kernbench.runtime_api.ops import device_ops, library_gemm
from kernbench.runtime_api.ops.elementwise import result_maker


def matmul(a, b):
    """torch.matmul: dot, matrix-vector, matrix and batched products (batch dims broadcast)."""
    if a.ndim == 0 or b.ndim == 0:
        raise TensorError("matmul: both arguments need at least one dimension")
    if a.dtype is not b.dtype:
        raise TensorError(f"matmul: expected both operands to have the same dtype, got {a.dtype.name} and "
                          f"{b.dtype.name}")
    device_ops.check_same_device([a, b], "matmul")
    left, right = (a.unsqueeze(0) if a.ndim == 1 else a), (b.unsqueeze(-1) if b.ndim == 1 else b)
    if left.shape[-1] != right.shape[-2]:
        raise TensorError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied "
                          f"({left.shape[-1]} != {right.shape[-2]})")
    batch = device_ops.broadcast_shape([left.shape[:-2], right.shape[:-2]], "matmul")
    out = result_maker((a,))(batch + (left.shape[-2], right.shape[-1]), a.dtype, a.device, "matmul")
    if not a.device.is_host:
        topology = a._ctx.topology
        try:
            topology.pe.matrix_unit.rate(a.dtype.name)
        except TopologyError:
            raise TensorError(f"matmul: the matrix unit of {topology.source.name} has no rate for {a.dtype.name} "
                              f"(it has {', '.join(topology.dtypes)})") from None
    library_gemm.matmul(left, right, out)
    autograd.record(out, "matmul", (left, right), lambda g: (
        matmul(g, right.mT) if autograd.requires_grad(left) else None,
        matmul(left.mT, g) if autograd.requires_grad(right) else None))
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


def linear(x, weight, bias=None):
    """x @ weightᵀ (+ bias): a matmul, then an add."""
    if weight.ndim == 2 and x.ndim >= 1 and x.shape[-1] != weight.shape[-1]:
        rows = x.numel() // max(1, x.shape[-1]) if x.ndim > 1 else 1
        raise TensorError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
                          f"{weight.shape[-1]}x{weight.shape[0]})")
    out = matmul(x, weight.mT if weight.ndim >= 2 else weight)
    return out if bias is None else out + bias

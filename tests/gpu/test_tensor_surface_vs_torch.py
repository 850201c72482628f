"""ADR 0016 T15: the same small programs on kernbench's torch namespace and on real PyTorch agree.

Each program below is written once, against a namespace `t` (`t.tensor`,
`t.nn.functional`, tensor methods and operators), and run twice: with
kernbench's namespace (tensors on the simulated device, ops as device work)
and with real PyTorch on the CPU. Results must agree in kind (tensor,
tuple, Python scalar), dtype, shape and value (the per-dtype tolerance of
`kernbench.numerics`); programs marked as views also compare strides and
storage offsets, and programs that write through a view return the base, so
aliasing is compared too. Skipped where torch is not installed (CI); it
runs wherever torch is (the GPU machine has it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.session import Session

torch = pytest.importorskip("torch")


@dataclass(frozen=True)
class Program:
    """`run(t, *inputs)` on both namespaces; `inputs` as (shape, dtype name) specs, made from one seed."""

    run: Callable
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    view: bool = False  # compare strides and storage offsets too


def _spec(*specs):
    return tuple((shape, dtype) for shape, dtype in specs)


F32_45 = ((4, 5), "f32")
F32_5 = ((5,), "f32")
I32_45 = ((4, 5), "i32")
F16_45 = ((4, 5), "f16")
F32_345 = ((3, 4, 5), "f32")


def _inplace(method, *args):
    def run(t, x, *rest):
        getattr(x, method)(*args, *rest)
        return x
    return run


def _augmented_add(t, x, y):
    x += y
    return x


def _augmented_div(t, x):
    x /= 3
    return x


def _write_through_view(t, x):
    x.view(20)[3:7].add_(10.0)
    return x


def _setitem_column(t, x):
    x[:, 1] = 5.0
    return x


def _setitem_mask(t, x):
    x[x > 0] = 0.0
    return x


def _transpose_then_write(t, x):
    x.T[1].mul_(-1.0)
    return x


def _pairs(t, x):
    """x (4, 6) as 4 × 3 complex numbers: a view."""
    return t.view_as_complex(x.view(4, 3, 2))


def _write_through_imag(t, x):
    _pairs(t, x).imag.mul_(-1.0)
    return x


def _rotary(t, x):
    angles = t.outer(t.arange(4).float(), t.arange(3).float() * 0.5)
    return t.view_as_real(_pairs(t, x) * t.polar(t.ones_like(angles), angles)).flatten(1)


def _complex_gradient(t, x, y):
    """The gradient of a real loss through the complex views, a complex product, abs and angle (PyTorch's
    conjugate-Wirtinger convention)."""
    x.requires_grad_()
    z = _pairs(t, x)
    w = z * t.polar(y.abs() + 0.5, y)
    (t.view_as_real(w) ** 2).sum().add(z.abs().sum()).add(z.angle().sum()).add((z * z.conj()).real.sum()).backward()
    return x.grad


def _complex_leaf_gradient(t, x, y):
    z = _pairs(t, x).detach().requires_grad_()
    (t.view_as_real(z * t.complex(y, -y)) * t.arange(6).float().view(3, 2)).sum().backward()
    return t.view_as_real(z.grad)


PROGRAMS = {
    # operators, broadcasting and torch's type promotion
    "add broadcast": Program(lambda t, x, y: x + y, _spec(F32_45, F32_5)),
    "sub scalar": Program(lambda t, x: x - 2.5, _spec(F32_45)),
    "reflected sub": Program(lambda t, x: 2.0 - x, _spec(F32_45)),
    "mul f16 3-d broadcast": Program(lambda t, x, y: x * y, _spec(((3, 1, 5), "f16"), ((4, 1), "f16"))),
    "true divide": Program(lambda t, x, y: x / y, _spec(F32_45, F32_45)),
    "integer true divide": Program(lambda t, x, y: x / y, _spec(I32_45, I32_45)),
    "floor divide": Program(lambda t, x, y: x // y, _spec(I32_45, I32_45)),
    "remainder": Program(lambda t, x: x % 3, _spec(I32_45)),
    "power": Program(lambda t, x: x ** 2, _spec(F32_45)),
    "negate and abs": Program(lambda t, x: (-x).abs(), _spec(F32_45)),
    "int meets f16": Program(lambda t, x, y: x + y, _spec(I32_45, F16_45)),
    "int times float scalar": Program(lambda t, x: x * 1.5, _spec(I32_45)),
    "f16 times int scalar": Program(lambda t, x: x * 3, _spec(F16_45)),
    "bool plus int scalar": Program(lambda t, x: (x > 0) + 2, _spec(F32_45)),
    "f16 meets 0-d f32": Program(lambda t, x, y: x + y.sum(), _spec(F16_45, F32_5)),
    "f16 meets bf16": Program(lambda t, x: x + x.to(t.bfloat16), _spec(F16_45)),
    # comparisons and logic
    "greater": Program(lambda t, x, y: x > y, _spec(F32_45, F32_5)),
    "equal scalar": Program(lambda t, x: x == 3, _spec(I32_45)),
    "not equal": Program(lambda t, x, y: x != y, _spec(I32_45, I32_45)),
    "and or xor not": Program(lambda t, x, y: (((x > 0) & (y < 0)) | ((x < 0) ^ (y > 0))) & ~(x > 1),
                              _spec(F32_45, F32_45)),
    "logical_and": Program(lambda t, x, y: t.logical_and(x > 0, y > 0), _spec(F32_45, F32_45)),
    # in-place forms
    "add_": Program(_inplace("add_"), _spec(F32_45, F32_45)),
    "mul_ scalar": Program(_inplace("mul_", 2.0), _spec(F32_45)),
    "+=": Program(_augmented_add, _spec(F32_45, F32_5)),
    "/=": Program(_augmented_div, _spec(F32_45)),
    "clamp_": Program(_inplace("clamp_", -0.5, 0.5), _spec(F32_45)),
    "fill_": Program(_inplace("fill_", 3.0), _spec(F16_45)),
    "zero_": Program(_inplace("zero_"), _spec(I32_45)),
    "copy_ converts": Program(lambda t, x, y: x.copy_(y), _spec(F16_45, F32_5)),
    # views and aliasing
    "view": Program(lambda t, x: x.view(5, 4), _spec(F32_45), view=True),
    "view -1": Program(lambda t, x: x.view(-1, 2), _spec(F32_45), view=True),
    "reshape of a transpose copies": Program(lambda t, x: x.T.reshape(20), _spec(F32_45), view=True),
    "flatten": Program(lambda t, x: x.flatten(1), _spec(F32_345), view=True),
    "unsqueeze squeeze": Program(lambda t, x: x.unsqueeze(1).squeeze(), _spec(F32_45), view=True),
    "permute": Program(lambda t, x: x.permute(2, 0, 1), _spec(F32_345), view=True),
    "transpose": Program(lambda t, x: x.transpose(0, 2), _spec(F32_345), view=True),
    ".T": Program(lambda t, x: x.T, _spec(F32_45), view=True),
    ".mT": Program(lambda t, x: x.mT, _spec(F32_345), view=True),
    "expand": Program(lambda t, x: x.expand(3, 5), _spec(((1, 5), "f32")), view=True),
    "narrow": Program(lambda t, x: x.narrow(1, 1, 3), _spec(F32_45), view=True),
    "select": Program(lambda t, x: x[1], _spec(F32_345), view=True),
    "slices and steps": Program(lambda t, x: x[1:, ::2], _spec(F32_45), view=True),
    "ellipsis and None": Program(lambda t, x: x[..., None, 1], _spec(F32_345), view=True),
    "advanced index": Program(lambda t, x: x[[0, 2, 2]], _spec(F32_45)),
    "boolean mask": Program(lambda t, x: x[x > 0], _spec(F32_45)),
    "chunk": Program(lambda t, x: x.chunk(2, dim=1), _spec(F32_45), view=True),
    "split": Program(lambda t, x: x.split([1, 3], dim=0), _spec(F32_45), view=True),
    "unbind": Program(lambda t, x: x.unbind(1), _spec(F32_345), view=True),
    "contiguous of a permute": Program(lambda t, x: x.permute(1, 0).contiguous(), _spec(F32_45), view=True),
    "is_contiguous": Program(lambda t, x: (x.is_contiguous(), x.T.is_contiguous(), x[:, :1].is_contiguous()),
                             _spec(F32_45)),
    "write through a view": Program(_write_through_view, _spec(F32_45)),
    "setitem column": Program(_setitem_column, _spec(F32_45)),
    "setitem mask": Program(_setitem_mask, _spec(F32_45)),
    "write through a transpose": Program(_transpose_then_write, _spec(F32_45)),
    # complex numbers: views of the real pairs, complex rows, gradients
    "view_as_complex of a slice": Program(lambda t, x: t.view_as_real(_pairs(t, x)[:, 1:]), _spec(((4, 6), "f32")),
                                          view=True),
    "real and imag views": Program(lambda t, x: (_pairs(t, x).real, _pairs(t, x).imag), _spec(((4, 6), "f32")),
                                   view=True),
    "write through imag": Program(_write_through_imag, _spec(((4, 6), "f32"))),
    "rotary with polar": Program(_rotary, _spec(((4, 6), "f32"))),
    "complex abs angle": Program(lambda t, x: (_pairs(t, x).abs(), _pairs(t, x).angle(), t.complex(x, x).abs()),
                                 _spec(((4, 6), "f32"))),
    "complex gradient": Program(_complex_gradient, _spec(((4, 6), "f32"), ((3,), "f32"))),
    "complex leaf gradient": Program(_complex_leaf_gradient, _spec(((4, 6), "f32"), ((3,), "f32"))),
    # reductions
    "sum dim keepdim": Program(lambda t, x: x.sum(dim=1, keepdim=True), _spec(F32_345)),
    "sum of ints": Program(lambda t, x: x.sum(), _spec(I32_45)),
    "mean dims": Program(lambda t, x: x.mean(dim=(0, 2)), _spec(F32_345)),
    "max dim": Program(lambda t, x: tuple(x.max(dim=1)), _spec(F32_45)),
    "min all": Program(lambda t, x: x.min(), _spec(F16_45)),
    "amax": Program(lambda t, x: x.amax(dim=-1), _spec(F32_345)),
    "argmax": Program(lambda t, x: x.argmax(dim=0), _spec(F32_45)),
    "norm": Program(lambda t, x: x.norm(), _spec(F32_45)),
    "var": Program(lambda t, x: x.var(dim=1), _spec(F32_45)),
    "std keepdim": Program(lambda t, x: x.std(dim=0, keepdim=True), _spec(F32_45)),
    # matmul family
    "matmul 2-d": Program(lambda t, x, y: x @ y, _spec(((6, 8), "f32"), ((8, 3), "f32"))),
    "matmul f16": Program(lambda t, x, y: t.matmul(x, y), _spec(((6, 8), "f16"), ((8, 3), "f16"))),
    "bmm": Program(lambda t, x, y: t.bmm(x, y), _spec(((2, 3, 4), "f32"), ((2, 4, 5), "f32"))),
    "matmul broadcasts batches": Program(lambda t, x, y: x @ y, _spec(((2, 1, 3, 4), "f32"), ((3, 4, 2), "f32"))),
    "mm": Program(lambda t, x, y: t.mm(x, y), _spec(((3, 4), "f32"), ((4, 2), "f32"))),
    "matrix times vector": Program(lambda t, x, y: x @ y, _spec(F32_45, F32_5)),
    "linear": Program(lambda t, x, w, b: t.nn.functional.linear(x, w, b),
                      _spec(((3, 5), "f32"), ((4, 5), "f32"), ((4,), "f32"))),
    # joining
    "cat": Program(lambda t, x, y: t.cat([x, y], dim=1), _spec(F32_45, F32_45)),
    "stack": Program(lambda t, x, y: t.stack([x, y], dim=1), _spec(F32_45, F32_45)),
    # softmax and nn.functional
    "softmax": Program(lambda t, x: x.softmax(dim=-1), _spec(F32_345)),
    "log_softmax": Program(lambda t, x: t.log_softmax(x, dim=1), _spec(F32_45)),
    "relu": Program(lambda t, x: t.nn.functional.relu(x), _spec(F32_45)),
    "gelu": Program(lambda t, x: t.nn.functional.gelu(x), _spec(F32_45)),
    "gelu tanh": Program(lambda t, x: t.nn.functional.gelu(x, approximate="tanh"), _spec(F32_45)),
    "silu": Program(lambda t, x: t.nn.functional.silu(x), _spec(F32_45)),
    "layer_norm": Program(lambda t, x, w, b: t.nn.functional.layer_norm(x, (5,), w, b),
                          _spec(F32_345, F32_5, F32_5)),
    "rms_norm": Program(lambda t, x, w: t.nn.functional.rms_norm(x, (5,), w), _spec(F32_345, F32_5)),
    "dropout in eval": Program(lambda t, x: t.nn.functional.dropout(x, p=0.5, training=False), _spec(F32_45)),
    "softmax of f16": Program(lambda t, x: t.nn.functional.softmax(x, dim=0), _spec(F16_45)),
    # selection
    "where": Program(lambda t, x, y: t.where(x > 0, x, y), _spec(F32_45, F32_5)),
    "where scalar": Program(lambda t, x: t.where(x > 0, x, 0.0), _spec(F32_45)),
    "masked_fill": Program(lambda t, x: x.masked_fill(x < 0, -1.0), _spec(F32_45)),
    "clamp": Program(lambda t, x: t.clamp(x, min=-0.5, max=0.25), _spec(F32_45)),
    # unary math
    "exp log sqrt": Program(lambda t, x: (x.abs() + 1).log() + x.exp() - (x.abs() + 1).sqrt(), _spec(F32_45)),
    "rsqrt tanh sigmoid": Program(lambda t, x: (x.abs() + 1).rsqrt() + x.tanh() + x.sigmoid(), _spec(F32_45)),
    # comparisons of whole tensors, host values, 0-d tensors
    "allclose equal": Program(lambda t, x, y: (t.allclose(x, x + 1e-7), t.equal(x, x), t.allclose(x, y)),
                              _spec(F32_45, F32_45)),
    "isclose": Program(lambda t, x, y: t.isclose(x, y, rtol=0.5, atol=0.5), _spec(F32_45, F32_45)),
    "item": Program(lambda t, x: x.sum().item(), _spec(I32_45)),
    "float of an element": Program(lambda t, x: float(x[1, 2]), _spec(F32_45)),
    "tolist": Program(lambda t, x: x[:2].tolist(), _spec(I32_45)),
    "0-d element": Program(lambda t, x: x[0, 0], _spec(F32_45), view=True),
    "0-d arithmetic": Program(lambda t, x: x[0, 0] * 2 + x.sum(), _spec(F32_45)),
}


def _inputs(name: str, specs) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = []
    for shape, dtype in specs:
        if dtype.startswith("i"):
            # No zeros: the integer divisions would divide by them.
            arrays.append((rng.integers(1, 7, shape) * rng.choice([-1, 1], shape)).astype(np.dtype(dtype.replace("i", "int"))))
        else:
            arrays.append(rng.uniform(-2.0, 2.0, shape).astype({"f16": np.float16, "f32": np.float32}[dtype]))
    return arrays


def _described(value, read):
    """A result as plain data: (kind, dtype, shape, strides, offset, values) for tensors, recursively for tuples."""
    if isinstance(value, (tuple, list)):
        return ("sequence", type(value).__name__ if isinstance(value, list) else "tuple",
                [_described(item, read) for item in value])
    if isinstance(value, (bool, int, float)):
        return ("scalar", type(value).__name__, value)
    return ("tensor", repr(value.dtype), tuple(value.shape), tuple(value.stride()), value.storage_offset(),
            read(value))


def _read_torch(tensor) -> np.ndarray:
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy().copy()


def _read_kernbench(tensor) -> np.ndarray:
    values = tensor.numpy()
    return values.astype(np.float32) if values.dtype.name == "bfloat16" else np.array(values)


def _run_all(namespace, make, read) -> dict:
    results = {}
    for name, program in PROGRAMS.items():
        inputs = [make(array) for array in _inputs(name, program.inputs)]
        try:
            results[name] = _described(program.run(namespace, *inputs), read)
        except Exception as error:  # compared below: both sides must fail, or neither
            results[name] = ("error", type(error).__name__, str(error).splitlines()[0] if str(error) else "")
    return results


@pytest.fixture(scope="module")
def both():
    expected = _run_all(torch, lambda array: torch.tensor(array), _read_torch)
    session = Session("default")
    simulated = {}

    def bench(t):
        simulated.update(_run_all(t, lambda array: t.tensor(array), _read_kernbench))

    session.run(bench, session.torch)
    return simulated, expected


def _assert_same(simulated, expected, view: bool, where: str) -> None:
    assert simulated[0] == expected[0], f"{where}: kernbench gave {simulated}, torch {expected}"
    kind = expected[0]
    if kind == "error":
        return
    if kind == "sequence":
        assert simulated[1] == expected[1] and len(simulated[2]) == len(expected[2]), where
        for index, (mine, theirs) in enumerate(zip(simulated[2], expected[2])):
            _assert_same(mine, theirs, view, f"{where}[{index}]")
        return
    if kind == "scalar":
        assert simulated[1] == expected[1], f"{where}: {simulated[1]} where torch gives {expected[1]}"
        assert_close(simulated[2], expected[2], "f32" if expected[1] == "float" else "i64")
        return
    _, dtype, shape, strides, offset, values = expected
    assert simulated[1] == dtype, f"{where}: dtype {simulated[1]}, torch {dtype}"
    assert simulated[2] == shape, f"{where}: shape {simulated[2]}, torch {shape}"
    if view:
        assert (simulated[3], simulated[4]) == (strides, offset), (
            f"{where}: strides/offset {simulated[3]}/{simulated[4]}, torch {strides}/{offset}")
    dtype_name = {"torch.float16": "f16", "torch.bfloat16": "bf16", "torch.float32": "f32",
                  "torch.float64": "f64", "torch.bool": "bool"}.get(dtype, "i64")
    assert_close(simulated[5], values, dtype_name)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_adr0016_t15_the_same_program_agrees_with_pytorch(both, name):
    simulated, expected = both
    assert expected[name][0] != "error", f"the program itself is wrong for torch: {expected[name]}"
    _assert_same(simulated[name], expected[name], PROGRAMS[name].view, name)

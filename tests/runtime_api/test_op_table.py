"""ADR 0016, "One table": every op is one row, its forms are made from the row, and its cost class is what it
logs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kernbench.dtypes import as_real_pairs
from kernbench.numerics import assert_close
from kernbench.runtime_api.ops import binding, functional
from kernbench.runtime_api.ops.table import ROWS, Cost, OpRow
from kernbench.session import Session
from tests.cli import REPO_ROOT

# How each row that is not a plain elementwise or reduction row is called in the cost test: sample(torch, x, y)
# with x, y (64, 64) float32 device tensors in [0.5, 1.5) makes what the call needs and returns the call, which is measured.
SAMPLE_CALLS = {
    "where": lambda torch, x, y: (lambda m: lambda: torch.where(m, x, y))(x > 0),
    "clamp": lambda torch, x, y: lambda: torch.clamp(x, -0.5, 0.5),
    "masked_fill": lambda torch, x, y: (lambda m: lambda: torch.masked_fill(x, m, 0.0))(x > 0),
    "to_dtype": lambda torch, x, y: lambda: x.to_dtype("f16"),
    "float": lambda torch, x, y: (lambda h: lambda: h.float())(x.half()),
    "half": lambda torch, x, y: lambda: x.half(),
    "bfloat16": lambda torch, x, y: lambda: x.bfloat16(),
    "double": lambda torch, x, y: lambda: x.double(),
    "long": lambda torch, x, y: lambda: x.long(),
    "int": lambda torch, x, y: lambda: x.int(),
    "bool": lambda torch, x, y: lambda: x.bool(),
    "type_as": lambda torch, x, y: (lambda h: lambda: x.type_as(h))(x.half()),
    "max": lambda torch, x, y: lambda: torch.max(x, 1)[0],
    "min": lambda torch, x, y: lambda: torch.min(x, 1)[0],
    "var": lambda torch, x, y: lambda: torch.var(x),
    "std": lambda torch, x, y: lambda: torch.std(x),
    "norm": lambda torch, x, y: lambda: torch.norm(x),
    "topk": lambda torch, x, y: lambda: torch.topk(x, 3)[0],
    "multinomial": lambda torch, x, y: lambda: torch.multinomial(x, 2),
    "matmul": lambda torch, x, y: lambda: torch.matmul(x, y),
    "mm": lambda torch, x, y: lambda: torch.mm(x, y),
    "bmm": lambda torch, x, y: (lambda a, b: lambda: torch.bmm(a, b))(x.unsqueeze(0), y.unsqueeze(0)),
    "linear": lambda torch, x, y: lambda: torch.nn.functional.linear(x, y, x[0]),
    "cat": lambda torch, x, y: lambda: torch.cat([x, y]),
    "stack": lambda torch, x, y: lambda: torch.stack([x, y]),
    "isclose": lambda torch, x, y: lambda: torch.isclose(x, y),
    "allclose": lambda torch, x, y: lambda: torch.allclose(x, y),
    "equal": lambda torch, x, y: lambda: torch.equal(x, y),
    "assert_close": lambda torch, x, y: lambda: torch.testing.assert_close(x, x),
    "softmax": lambda torch, x, y: lambda: torch.softmax(x, -1),
    "log_softmax": lambda torch, x, y: lambda: torch.log_softmax(x, -1),
    "layer_norm": lambda torch, x, y: lambda: torch.nn.functional.layer_norm(x, (64,)),
    "rms_norm": lambda torch, x, y: lambda: torch.nn.functional.rms_norm(x, (64,)),
    "dropout": lambda torch, x, y: lambda: torch.nn.functional.dropout(x, 0.5),
    "vstack": lambda torch, x, y: lambda: torch.vstack([x, y]),
    "pad": lambda torch, x, y: lambda: torch.nn.functional.pad(x, (1, 2, 0, 1)),
    "tril": lambda torch, x, y: lambda: torch.tril(x),
    "one_hot": lambda torch, x, y: (lambda t: lambda: torch.nn.functional.one_hot(t, 5))(torch.tensor([0, 3, 4, 3])),
    "triu": lambda torch, x, y: lambda: torch.triu(x, 1),
    "embedding": lambda torch, x, y: (lambda i: lambda: torch.nn.functional.embedding(i, x))(torch.tensor([3, 1, 3])),
    "scaled_dot_product_attention": lambda torch, x, y: lambda: torch.nn.functional.scaled_dot_product_attention(
        x[None], y[None], x[None], is_causal=True),
    "cross_entropy": lambda torch, x, y: (lambda t: lambda: torch.nn.functional.cross_entropy(x, t))(
        torch.randint(0, 64, (64,))),
    "nll_loss": lambda torch, x, y: (lambda t: lambda: torch.nn.functional.nll_loss(x, t))(torch.randint(0, 64, (64,))),
    "mse_loss": lambda torch, x, y: lambda: torch.nn.functional.mse_loss(x, y),
    "view_as_real": lambda torch, x, y: (lambda c: lambda: torch.view_as_real(c))(torch.complex(x, y)),
    "view_as_complex": lambda torch, x, y: (lambda pairs: lambda: torch.view_as_complex(pairs))(x.view(64, 32, 2)),
    "real": lambda torch, x, y: (lambda c: lambda: torch.real(c))(torch.complex(x, y)),
    "imag": lambda torch, x, y: (lambda c: lambda: torch.imag(c))(torch.complex(x, y)),
    "conj": lambda torch, x, y: (lambda c: lambda: torch.conj(c))(torch.complex(x, y)),
    "outer": lambda torch, x, y: (lambda a, b: lambda: torch.outer(a, b))(x[0], y[1]),
    "uniform_": lambda torch, x, y: lambda: x.uniform_(),
    "normal_": lambda torch, x, y: lambda: x.normal_(),
}
INTEGRAL = {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}


def _sample_call(row: OpRow):
    if row.name in SAMPLE_CALLS:
        return SAMPLE_CALLS[row.name]
    function = binding.TORCH_FUNCTIONS[row.name]

    def sample(torch, x, y):
        if row.name in INTEGRAL:
            x, y = x.int(), y.int()
        if row.cost is Cost.REDUCTION:
            operand = x > 0 if row.name in ("all", "any") else x
            return lambda: function(operand, 0)
        return lambda: function(x) if row.operands == 1 else function(x, y)
    return sample


def _logged_by(row: OpRow):
    """The op-log records of one call of `row` on inputs already on the device, and the call's first output."""
    session = Session("default")
    got = {}

    def bench(torch):
        x, y = torch.rand(64, 64, device="cuda") + 0.5, torch.rand(64, 64, device="cuda") + 0.5  # every row's domain
        call = _sample_call(row)(torch, x, y)
        torch.ahbm.synchronize()
        first = len(session.ctx.machine.oplog)
        got["out"] = call()
        torch.ahbm.synchronize()
        got["records"] = list(session.ctx.machine.oplog)[first:]

    session.run(bench, session.torch)
    return got["records"], got["out"]


def _labels(records, kind: str) -> set[str]:
    return {r.label for r in records if r.kind == kind}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_adr0016_t120_each_rows_cost_class_is_what_its_device_work_logs(name):
    """ELEMENTWISE: the row's passes (one, or `ERF_PASSES`) over the result's elements under the row's name (a cast:
    under `to`);
    REDUCTION: vector passes under its name; GEMM: matrix-unit ops and DMAs (and, split over K, vector passes
    summing the partials); COPY: DMAs only; FILL: a vector
    pass and DMAs under its name; FUSED: vector passes under its name and the result stored once; ATTENTION:
    matrix-unit ops and DMAs under its name and its softmax's vector passes, the result stored once beside one
    logsumexp a row; COMPOSITE: the device ops of two or more rows; VIEW: nothing; HOST: device ops, then a read to
    the host."""
    row = ROWS[name]
    records, out = _logged_by(row)
    kinds = {r.kind for r in records}
    vector = [r for r in records if r.kind == "vector"]
    if row.cost is Cost.ELEMENTWISE:
        assert kinds <= {"dma", "vector"} and len(_labels(records, "vector")) == 1
        assert sum(r.args["elements"] for r in vector) == row.passes * as_real_pairs(out.dtype, out.numel())[1]
    elif row.cost is Cost.REDUCTION:
        assert kinds <= {"dma", "vector"} and _labels(records, "vector") == {name}
    elif row.cost is Cost.GEMM:
        assert "gemm" in kinds and kinds <= {"dma", "gemm", "vector"}
        assert all(r.args["op"] == "sum_partials" for r in vector)
    elif row.cost is Cost.COPY:
        assert kinds == {"dma"}
    elif row.cost is Cost.FILL:
        assert kinds <= {"dma", "vector"} and _labels(records, "vector") == {name}
    elif row.cost is Cost.FUSED:
        assert kinds <= {"dma", "vector"} and _labels(records, "vector") == {name}
        stored = sum(r.nbytes for r in records if r.kind == "dma" and r.args.get("dst", "").endswith("hbm"))
        assert stored == out.numel() * out.dtype.itemsize
    elif row.cost is Cost.ATTENTION:
        assert kinds == {"dma", "gemm", "vector"} and _labels(records, "gemm") == {name}
        assert {r.args["op"] for r in vector} == {"attention softmax"}
        stored = sum(r.nbytes for r in records if r.kind == "dma" and r.args.get("dst", "").endswith("hbm"))
        assert stored == out.numel() * out.dtype.itemsize + out.numel() // out.shape[-1] * 4
    elif row.cost is Cost.COMPOSITE:
        assert len(_labels(records, "vector") | _labels(records, "gemm")) >= 2
    elif row.cost is Cost.VIEW:
        assert records == [] and out._allocation.storage is not None
    else:
        assert row.cost is Cost.HOST and any(r.label.endswith(" to host") for r in records)


def test_adr0016_t121_every_form_of_every_row_is_bound_where_torch_has_it():
    """torch.X, Tensor.X, Tensor.X_, F.X and torch.testing.X exist for each of a row's forms and aliases, and for
    no other: a run's namespace holds the forms the binding made from the rows."""
    session = Session("single_sip")
    torch = session.torch
    places = {"torch": (vars(torch), binding.TORCH_FUNCTIONS),
              "functional": (vars(torch.nn.functional), binding.FUNCTIONAL),
              "testing": (vars(torch.testing), binding.TESTING)}
    for row in ROWS.values():
        for name in (row.name, *row.aliases):
            for form, (namespace, made) in places.items():
                if form in row.forms:
                    assert namespace[name] is made[name], (row.name, form)
                else:
                    assert name not in made and callable(namespace.get(name)) is False, (row.name, form)
            assert callable(getattr(torch.Tensor, name, None)) == ("method" in row.forms), row.name
            assert hasattr(torch.Tensor, name + "_") == ("inplace" in row.forms), row.name


def test_adr0016_t122_tensor_has_the_rows_methods_from_its_definition():
    """Importing the tensor module alone gives Tensor every method and operator (no import of the session or of
    another module installs them)."""
    script = ("import sys; from kernbench.runtime_api.tensor.core import Tensor; "
              "assert 'kernbench.session' not in sys.modules; "
              "print(all(hasattr(Tensor, n) for n in ('exp', 'exp_', 'sum', '__add__', '__radd__', '__iadd__', "
              "'__matmul__', 'softmax', 'clamp_', 'float')))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_adr0016_t123_a_new_row_is_a_whole_op():
    """A row made outside the table (hypot, as a user adding an op would write it) gives a torch form and an
    in-place form with numpy's values, one vector pass under its name, and its derivative."""
    row = OpRow("hypot", Cost.ELEMENTWISE, frozenset({"torch", "inplace"}), numpy=np.hypot, dtypes="float",
                operands=2, grad=(lambda g, a, b, out: g * a / out, lambda g, a, b, out: g * b / out))
    hypot, hypot_ = binding.torch_form(row), binding.in_place_form(row)
    a, b = np.array([[3.0, 5.0]]), np.array([[4.0, 12.0]])
    session = Session("default")
    got = {}

    def bench(torch):
        x, y = torch.tensor(a, device="cuda").requires_grad_(), torch.tensor(b, device="cuda")
        out = hypot(x, y)
        out.sum().backward()
        z = torch.tensor(a, device="cuda")
        got.update(value=out.numpy(), grad=x.grad.numpy(), same=hypot_(z, y) is z, in_place=z.numpy())

    session.run(bench, session.torch)
    assert_close(got["value"], np.hypot(a, b), "f32")
    assert_close(got["grad"], a / np.hypot(a, b), "f32")
    assert got["same"]
    assert_close(got["in_place"], np.hypot(a, b), "f32")
    assert len([r for r in session.ctx.machine.oplog if r.kind == "vector" and r.label == "hypot"]) == 2


@pytest.mark.parametrize("name", sorted(name for name, row in ROWS.items() if row.cost not in (Cost.FILL, Cost.HOST)))
def test_adr0016_t124_a_row_is_differentiable_as_the_table_says(name):
    """An output of a row over inputs that require grad has a backward exactly where the row's derivative is not
    "none" and the output is floating or complex (integer and bool results have none, as in torch)."""
    row = ROWS[name]
    session = Session("default")
    got = {}

    def bench(torch):
        x = (torch.rand(64, 64, device="cuda") + 0.5).requires_grad_()
        y = (torch.rand(64, 64, device="cuda") + 0.5).requires_grad_()
        out = _sample_call(row)(torch, x, y)()
        got.update(floating=out.dtype.is_differentiable, recorded=out.grad_fn is not None)

    session.run(bench, session.torch)
    assert got["recorded"] == (row.derivative != "none" and got["floating"])


def _layer_norm_reference(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mean) * rstd * w + b, (x - mean) * rstd, rstd


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_adr0016_t127_fused_norms_and_softmax_match_numpy_forward_and_backward(dtype):
    """layer_norm, rms_norm, softmax and log_softmax as fused row kernels: numpy's values (computed in float32
    for half types) and, for loss = sum(out * c), the analytic gradients of input, weight and bias."""
    rng = np.random.default_rng(127)
    x, c = rng.normal(size=(6, 40)), rng.normal(size=(6, 40))
    w, b = rng.normal(size=40), rng.normal(size=40)
    x = x.astype(np.float16).astype(np.float64) if dtype == "f16" else x
    got = {}

    def bench(torch):
        F = torch.nn.functional
        for name in ("layer_norm", "rms_norm", "softmax", "log_softmax"):
            tx = torch.tensor(x, dtype=dtype, device="cuda").requires_grad_()
            tw = torch.tensor(w, dtype=dtype, device="cuda").requires_grad_()
            tb = torch.tensor(b, dtype=dtype, device="cuda").requires_grad_()
            out = {"layer_norm": lambda: F.layer_norm(tx, (40,), tw, tb), "rms_norm": lambda: F.rms_norm(tx, (40,), tw),
                   "softmax": lambda: torch.softmax(tx, -1), "log_softmax": lambda: torch.log_softmax(tx, -1)}[name]()
            (out.float() * torch.tensor(c, device="cuda")).sum().backward()
            got[name] = (out.float().numpy(), tx.grad.float().numpy(),
                         None if tw.grad is None else tw.grad.float().numpy(),
                         None if tb.grad is None else tb.grad.float().numpy())

    session = Session("default")
    session.run(bench, session.torch)
    y, xhat, rstd = _layer_norm_reference(x, w, b)
    cw = c * w
    dx = rstd * (cw - cw.mean(-1, keepdims=True) - xhat * (cw * xhat).mean(-1, keepdims=True))
    expected = {"layer_norm": (y, dx, (c * xhat).sum(0), c.sum(0))}
    eps = float(np.finfo(np.float16 if dtype == "f16" else np.float32).eps)
    r = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    expected["rms_norm"] = (x * r * w, r * (cw - x * r * (cw * x * r).mean(-1, keepdims=True)), (c * x * r).sum(0), None)
    s = np.exp(x - x.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    expected["softmax"] = (s, s * (c - (c * s).sum(-1, keepdims=True)), None, None)
    expected["log_softmax"] = (np.log(s), c - s * c.sum(-1, keepdims=True), None, None)
    for name, values in expected.items():
        for value, reference in zip(got[name], values):
            if reference is None:
                assert value is None, name
            else:
                assert_close(value, reference, dtype)
    records = [r for r in session.ctx.machine.oplog if r.kind == "vector" and r.label == "layer_norm"]
    passes = functional.ROW_KERNEL_PASSES
    assert sum(r.args["elements"] for r in records) == passes * x.size  # the row kernel's passes over each element

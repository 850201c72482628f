"""ADR 0017: autograd on the simulated device — gradients against numpy, the backward pass as device work."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.runtime_api.errors import TensorError
from kernbench.dtypes import float32
from kernbench.runtime_api.ops.library_gemm import library_plan
from kernbench.session import Session
from tests.cli import REPO_ROOT, run_kernbench_in_process
from tests.runtime_api.op_rows import BINARY, UNARY

POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "log1p"}
STEP = 1e-6


def _run(fn, timing_only: bool = False):
    session = Session("default", timing_only=timing_only)
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return session, out["value"]


def _numeric_derivative(fn, x: np.ndarray) -> np.ndarray:
    """d f(x) / dx elementwise by central differences in float64: the reference every row is held to."""
    return (fn(x + STEP) - fn(x - STEP)) / (2 * STEP)


@pytest.mark.parametrize("name", sorted({name for name, row in UNARY.items() if row.grad}
                                         - {"sign", "floor", "ceil", "round", "trunc", "abs"}))
def test_adr0017_t1_each_unary_gradient_is_the_functions_derivative(name):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.3 if name in POSITIVE else -1.5, 1.5, (3, 17))

    def bench(torch):
        t = torch.tensor(x, dtype=torch.float64).requires_grad_()
        getattr(t, name)().sum().backward()
        return t.grad.numpy()

    _, grad = _run(bench)
    assert_close(grad, _numeric_derivative(UNARY[name].numpy, x), "f32")


@pytest.mark.parametrize("name", sorted({name for name, row in BINARY.items() if row.grad}
                                         - {"floor_divide", "remainder", "fmod"}))
@pytest.mark.quick
def test_adr0017_t2_each_binary_gradient_is_the_partial_derivatives_with_broadcasting(name):
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.5, 1.5, (4, 5)), rng.uniform(0.5, 1.5, (5,))
    b[0] = a[0, 0] + 0.25  # no ties for maximum/minimum

    def bench(torch):
        ta = torch.tensor(a, dtype=torch.float64).requires_grad_()
        tb = torch.tensor(b, dtype=torch.float64).requires_grad_()
        getattr(ta, name)(tb).sum().backward()
        return ta.grad.numpy(), tb.grad.numpy()

    _, (grad_a, grad_b) = _run(bench)
    fn = BINARY[name].numpy
    assert_close(grad_a, _numeric_derivative(lambda v: fn(v, b), a), "f32")
    assert_close(grad_b, _numeric_derivative(lambda v: fn(a, v), np.broadcast_to(b, a.shape)).sum(0), "f32")


@pytest.mark.quick
def test_adr0017_t3_a_linear_layer_gradients_are_the_analytic_ones():
    """loss = sum(gelu(x Wᵀ + b)): dW = gᵀx, dx = gW, db = Σg with g = gelu'(y)."""
    rng = np.random.default_rng(3)
    x, w, bias = (rng.normal(size=shape).astype(np.float32).astype(np.float64) for shape in ((8, 16), (4, 16), (4,)))

    def bench(torch):  # f32: the matrix unit's widest type
        tx = torch.tensor(x, dtype=torch.float32).requires_grad_()
        tw = torch.nn.Parameter(torch.tensor(w, dtype=torch.float32))
        tb = torch.nn.Parameter(torch.tensor(bias, dtype=torch.float32))
        torch.nn.functional.gelu(torch.nn.functional.linear(tx, tw, tb)).sum().backward()
        return tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()

    _, (dx, dw, db) = _run(bench)
    y = x @ w.T + bias
    g = _numeric_derivative(UNARY["gelu"].numpy, y)
    assert_close(dw, g.T @ x, "f32")
    assert_close(dx, g @ w, "f32")
    assert_close(db, g.sum(0), "f32")


@pytest.mark.quick
def test_adr0017_t4_gradients_flow_through_views_reductions_and_composites():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 8))

    def bench(torch):
        t = torch.tensor(x, dtype=torch.float64).requires_grad_()
        picked = t.T[1:5].reshape(-1)[::3]  # transpose, slice, reshape (a copy), step
        loss = picked.sum() + torch.softmax(t, dim=-1)[:, 0].mean() + t.amax(1).sum() + t.var()
        loss.backward()
        return t.grad.numpy()

    _, grad = _run(bench)

    def loss(v):
        e = np.exp(v - v.max(-1, keepdims=True))
        return v.T[1:5].reshape(-1)[::3].sum() + (e / e.sum(-1, keepdims=True))[:, 0].mean() + v.max(1).sum() \
            + v.var(ddof=1)

    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = STEP
        numeric[index] = (loss(x + step) - loss(x - step)) / (2 * STEP)
    assert_close(grad, numeric, "f32")


@pytest.mark.quick
def test_adr0017_t5_autograd_function_runs_its_own_backward():
    def bench(torch):
        class CubeFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a, scale):
                ctx.save_for_backward(a)
                ctx.scale = scale
                return a * a * a * scale

            @staticmethod
            def backward(ctx, grad):
                (a,) = ctx.saved_tensors
                return grad * a * a * (3 * ctx.scale), None

        u = torch.tensor([1.0, 2.0, -1.0]).requires_grad_()
        out = CubeFn.apply(u, 2.0)
        assert out.grad_fn is not None
        out.sum().backward()
        return u.grad.numpy()

    _, grad = _run(bench)
    assert np.array_equal(grad, [6.0, 24.0, 6.0])


@pytest.mark.quick
def test_adr0017_t6_gradients_accumulate_and_no_grad_records_nothing():
    def bench(torch):
        w = torch.ones(3).requires_grad_()
        (w * 2).sum().backward()
        (w * 3).sum().backward()
        with torch.no_grad():
            detached = w * 5
        assert torch.is_grad_enabled()
        return w.grad.numpy(), detached.requires_grad, detached.grad_fn, w.data.requires_grad

    _, (grad, requires, fn, data_requires) = _run(bench)
    assert np.array_equal(grad, [5.0, 5.0, 5.0]) and requires is False and fn is None and data_requires is False


@pytest.mark.quick
def test_adr0017_t7_in_place_ops_that_would_corrupt_the_graph_are_one_line():
    def bench(torch):
        w = torch.ones(3).requires_grad_()
        with pytest.raises(TensorError, match=r"^add_: a leaf tensor that requires grad .* is used in an in-place"):
            w.add_(1.0)
        y = w * 2
        with pytest.raises(TensorError, match=r"^mul_: in-place operations on tensors that take part in autograd"):
            y.mul_(3.0)
        with torch.no_grad():
            w.add_(1.0)  # an optimizer step
        w.data.copy_(torch.zeros(3))  # Megatron's weight.data.copy_ idiom
        return w.numpy()

    _, values = _run(bench)
    assert np.array_equal(values, [0.0, 0.0, 0.0])


def test_adr0017_t8_the_backward_pass_is_device_work_timed_like_the_forward():
    def bench(torch):
        x = torch.ones(256, 256).requires_grad_()
        w = torch.ones(256, 256).requires_grad_()
        loss = (x @ w).sum()
        torch.ahbm.synchronize()
        before = len(torch_session[0].ctx.machine.oplog)
        loss.backward()
        torch.ahbm.synchronize()
        return [op for op in torch_session[0].ctx.machine.oplog][before:]

    torch_session = []
    timings = {}
    for timing_only in (False, True):
        session = Session("default", timing_only=timing_only)
        torch_session[:] = [session]
        out = {}
        session.run(lambda torch: out.update(ops=bench(torch)), session.torch)
        timings[timing_only] = [(op.kind, op.label, op.start, op.end) for op in out["ops"]]
    backward_gemms = [op for op in timings[False] if op[0] == "gemm"]
    plan = library_plan(torch_session[0].ctx, 1, 256, 256, 256, float32)
    # Two matmuls, one gemm op per tile and part of K.
    assert len(backward_gemms) == 2 * -(-256 // plan.block_m) * -(-256 // plan.block_n) * plan.splits
    assert timings[False] == timings[True]


def test_adr0017_t11_the_readme_training_example_runs_as_written(tmp_path):
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Tensors, operators and training steps", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    bench = tmp_path / "train_step.py"
    bench.write_text(example)
    result = run_kernbench_in_process("run", str(bench), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    loss, shape = result.stdout.splitlines()[0].split(" ", 1)
    assert float(loss) > 0 and shape == "(1024, 512)"


def test_adr0017_t12_factories_take_requires_grad_and_testing_compares_with_torchs_tolerances():
    def bench(torch):
        w = torch.randn(4, 4, requires_grad=True)
        z = torch.zeros(3, requires_grad=True, pin_memory=True)
        torch.testing.assert_close(torch.ones(3) * (1 + 1e-7), torch.ones(3))
        with pytest.raises(AssertionError):
            torch.testing.assert_close(torch.ones(3) * 1.01, torch.ones(3))
        return w.requires_grad and w.is_leaf, z.requires_grad

    _, got = _run(bench)
    assert got == (True, True)


@pytest.mark.parametrize("key", [np.array([1, 3, 1, 1, 0, 3]), (np.array([0, 2, 0]), np.array([1, 1, 1]))])
def test_adr0017_t13_indexing_backward_sums_the_gradients_of_repeated_indices(key):
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    upstream = np.random.default_rng(13).standard_normal(base[key].shape).astype(np.float32)

    def step(torch):
        x = torch.tensor(base).requires_grad_()
        index = tuple(torch.tensor(part) for part in key) if isinstance(key, tuple) else torch.tensor(key)
        (x[index] * torch.tensor(upstream)).sum().backward()
        return x.grad.numpy()

    expected = np.zeros_like(base)
    np.add.at(expected, key, upstream)
    assert_close(_run(step)[1], expected, "f32")

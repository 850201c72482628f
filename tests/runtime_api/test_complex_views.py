"""ADR 0016 and 0017: complex numbers — the views between a complex tensor and its real pairs, polar, complex,
conj, outer — against numpy, and autograd through them in PyTorch's convention (checked by finite differences)."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.runtime_api.errors import TensorError
from kernbench.session import Session

STEP = 1e-6


def _run(fn, topology: str = "default"):
    session = Session(topology)
    out = {}
    session.run(lambda torch: out.update(value=fn(torch)), session.torch)
    return session, out["value"]


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_adr0016_t144_complex_views_share_storage_and_writes_through_them_write_the_complex_tensor(device):
    """view_as_real / view_as_complex / .real / .imag are views of the same storage with PyTorch's shapes, strides
    and offsets, cost no device work, and a write through any of them is seen through the others."""
    rng = np.random.default_rng(138)
    pairs = rng.standard_normal((3, 4, 2)).astype(np.float32)

    def bench(torch):
        x = torch.tensor(pairs, device=device)
        oplog = x._ctx.machine.oplog
        torch.ahbm.synchronize()
        before = len(oplog)
        z = torch.view_as_complex(x)
        back = torch.view_as_real(z)
        column = torch.view_as_complex(x[:, 1:3])  # a view of a view: offset and strides in complex elements
        real, imag = z.real, z.imag
        views = len(oplog) - before
        layouts = {t: (tuple(v.shape), v.stride(), v.storage_offset(), v.dtype.torch_name)
                   for t, v in (("z", z), ("back", back), ("column", column), ("real", real), ("imag", imag))}
        first = z.numpy().copy()
        imag[0].fill_(7.0)  # through .imag: the complex tensor and the float tensor under it change
        real[:, 2] = torch.tensor([1.0, 2.0, 3.0], device=device)
        z[2, 3] = torch.tensor(5.0 - 6.0j, device=device)  # through the complex view: the floats change
        odd = torch.arange(5, dtype=torch.float32, device=device)  # a storage of 5 floats holds 2 complex numbers
        torch.view_as_complex(odd[:4].view(2, 2))[1] = torch.tensor(7.0 + 8.0j, device=device)
        return views, layouts, first, z.numpy(), x.numpy(), column.numpy(), z.real.is_contiguous(), odd.numpy()

    _, (views, layouts, first, z, x, column, contiguous, odd) = _run(bench)
    assert views == 0
    assert layouts == {"z": ((3, 4), (4, 1), 0, "complex64"), "back": ((3, 4, 2), (8, 2, 1), 0, "float32"),
                       "column": ((3, 2), (4, 1), 1, "complex64"), "real": ((3, 4), (8, 2), 0, "float32"),
                       "imag": ((3, 4), (8, 2), 1, "float32")}
    expected = pairs[..., 0] + 1j * pairs[..., 1]
    np.testing.assert_array_equal(first, expected)
    expected[0] = expected[0].real + 7.0j
    expected[:, 2] = np.array([1.0, 2.0, 3.0]) + 1j * expected[:, 2].imag
    expected[2, 3] = 5.0 - 6.0j
    np.testing.assert_array_equal(z, expected.astype(np.complex64))
    np.testing.assert_array_equal(x, np.stack([expected.real, expected.imag], -1).astype(np.float32))
    np.testing.assert_array_equal(column, expected[:, 1:3])
    assert not contiguous
    np.testing.assert_array_equal(odd, [0.0, 1.0, 7.0, 8.0, 4.0])


def test_adr0016_t145_complex_rows_match_numpy_and_a_complex_multiply_is_one_pass_over_real_pairs():
    """polar, complex, conj, outer, abs, angle and complex arithmetic give numpy's values (complex64 from float32,
    complex128 from float64); a complex multiply is one vector pass over twice its elements, as a GPU kernel over the
    pairs."""
    rng = np.random.default_rng(139)
    r, theta = rng.uniform(0.5, 2.0, (5, 6)), rng.uniform(-3.0, 3.0, (5, 6))
    a, b = rng.standard_normal(5), rng.standard_normal(6)

    def bench(torch):
        tr, tt = torch.tensor(r, dtype=torch.float32), torch.tensor(theta, dtype=torch.float32)
        polar = torch.polar(tr, tt)
        made = torch.complex(tr, tt)
        wide = torch.polar(torch.tensor(r), torch.tensor(theta))  # float64 → complex128
        torch.ahbm.synchronize()
        oplog = tr._ctx.machine.oplog
        before = len(oplog)
        product = polar * made
        torch.ahbm.synchronize()
        passes = [(op.args["elements"], op.args["dtype"]) for op in list(oplog)[before:] if op.kind == "vector"]
        ones = torch.ones_like(polar)
        outer = torch.outer(torch.tensor(a), torch.tensor(b))
        return (polar.numpy(), made.numpy(), wide.dtype.torch_name, wide.numpy(), product.numpy(),
                made.conj().numpy(), (made * 2 + 1j).numpy(), ones.numpy(), ones.dtype.torch_name, outer.numpy(),
                sum(n for n, _ in passes), {d for _, d in passes}, torch.polar(tr, tt).real.is_floating_point(),
                made.abs().dtype.torch_name, made.abs().numpy(), made.angle().numpy())

    _, got = _run(bench)
    polar, made, wide_dtype, wide, product, conj, affine, ones, ones_dtype, outer, lanes, lane_dtypes, real, \
        abs_dtype, magnitude, angle = got
    expected_polar = r * np.cos(theta) + 1j * r * np.sin(theta)
    assert_close(polar.real, expected_polar.real, "f32")
    assert_close(polar.imag, expected_polar.imag, "f32")
    assert polar.dtype == np.complex64 and wide_dtype == "complex128" and ones_dtype == "complex64" and real
    np.testing.assert_allclose(wide, expected_polar, rtol=1e-12)
    np.testing.assert_array_equal(made, (r + 1j * theta).astype(np.complex64))
    np.testing.assert_allclose(product, polar * made, rtol=1e-6)
    np.testing.assert_array_equal(conj, np.conj(made))
    np.testing.assert_allclose(affine, made * 2 + 1j, rtol=1e-6)
    np.testing.assert_array_equal(ones, np.ones((5, 6), np.complex64))
    np.testing.assert_allclose(outer, np.outer(a, b), rtol=1e-12)
    assert lanes == 2 * 30 and lane_dtypes == {"f32"}
    assert abs_dtype == "float32"
    np.testing.assert_allclose(magnitude, np.abs(made), rtol=1e-6)
    np.testing.assert_allclose(angle, np.angle(made), rtol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda torch: torch.view_as_complex(torch.zeros(4, 3)), "Tensor must have a last dimension of size 2"),
    (lambda torch: torch.view_as_complex(torch.zeros(2, 4).t()), "Tensor must have a last dimension with stride 1"),
    (lambda torch: torch.view_as_complex(torch.zeros(3, 3)[:, 1:]),
     "Tensor must have a stride divisible by 2 for all but last dimension"),
    (lambda torch: torch.view_as_complex(torch.zeros(5)[1:3]), "Tensor must have a storage_offset divisible by 2"),
    (lambda torch: torch.view_as_complex(torch.zeros(())), "Input tensor must have one or more dimensions"),
    (lambda torch: torch.view_as_complex(torch.zeros(4, 2, dtype=torch.int64)),
     "view_as_complex is only supported for half, float and double tensors, but got a tensor of scalar type: Long"),
    (lambda torch: torch.view_as_real(torch.zeros(4, 2)), "view_as_real is only supported for complex tensors"),
    (lambda torch: torch.zeros(3).imag, "imag is not implemented for tensors with non-complex dtypes."),
    (lambda torch: torch.outer(torch.zeros(2, 2), torch.zeros(2)), "outer: Expected 1-D argument self, but got 2-D"),
    (lambda torch: torch.polar(torch.ones(2), torch.ones(2, dtype=torch.float64)),
     "Expected object of scalar type Float but got scalar type Double for second argument"),
    (lambda torch: torch.complex(torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64)),
     "Expected both inputs to be Half, Float or Double tensors but got Long and Long"),
])
def test_adr0016_t146_bad_complex_views_are_one_line_in_pytorchs_words(call, message):
    with pytest.raises(TensorError) as error:
        _run(call)
    assert message in str(error.value) and "\n" not in str(error.value)


def _real_loss(z_pairs: np.ndarray, r, theta, c) -> float:
    """The real loss the autograd test differentiates, in float64 numpy: L = Σ c·view_as_real(z·polar(r, θ))
    + Σ |z|² · r + Σ |z| + Σ angle(z) (z given as its real pairs)."""
    z = z_pairs[..., 0] + 1j * z_pairs[..., 1]
    w = z * (r * np.exp(1j * theta))
    return float((c * np.stack([w.real, w.imag], -1)).sum() + (np.abs(z) ** 2 * r).sum() + np.abs(z).sum()
                 + np.angle(z).sum())


def test_adr0017_t14_complex_gradients_follow_pytorchs_convention_and_finite_differences():
    """For a real loss of z = x + iy, z.grad is ∂L/∂x + i·∂L/∂y (PyTorch's conjugate-Wirtinger convention): checked
    element by element against central differences in float64, through view_as_complex, polar, a complex multiply,
    conj, abs, angle, view_as_real, .real and .imag; the real inputs' gradients likewise."""
    rng = np.random.default_rng(14)
    pairs, r, theta = rng.standard_normal((3, 4, 2)), rng.uniform(0.5, 2.0, (3, 4)), rng.uniform(-3, 3, (3, 4))
    c = rng.standard_normal((3, 4, 2))

    def bench(torch):
        x = torch.tensor(pairs).requires_grad_()
        tr, tt = torch.tensor(r).requires_grad_(), torch.tensor(theta).requires_grad_()
        z = torch.view_as_complex(x)
        w = z * torch.polar(tr, tt)
        squared = (z * z.conj()).real  # |z|², through conj and .real
        loss = (torch.view_as_real(w) * torch.tensor(c)).sum() + (squared * tr).sum() + z.abs().sum() + \
            z.angle().sum() + (z.imag * 0.0).sum()
        loss.backward()
        zc = torch.view_as_complex(torch.tensor(pairs)).requires_grad_()  # a complex leaf: its grad is complex
        (torch.view_as_real(zc * torch.polar(torch.tensor(r), torch.tensor(theta))) * torch.tensor(c)).sum().backward()
        return loss.item(), x.grad.numpy(), tr.grad.numpy(), tt.grad.numpy(), zc.grad.numpy(), zc.grad.dtype.torch_name

    _, (loss, gx, gr, gt, gz, gz_dtype) = _run(bench)
    assert loss == pytest.approx(_real_loss(pairs, r, theta, c), rel=1e-12)

    def numeric(values, bump):
        grad = np.zeros_like(values)
        for index in np.ndindex(values.shape):
            step = np.zeros_like(values)
            step[index] = STEP
            grad[index] = (bump(values + step) - bump(values - step)) / (2 * STEP)
        return grad

    dx = numeric(pairs, lambda p: _real_loss(p, r, theta, c))
    np.testing.assert_allclose(gx, dx, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gr, numeric(r, lambda v: _real_loss(pairs, v, theta, c)), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gt, numeric(theta, lambda v: _real_loss(pairs, r, v, c)), rtol=1e-6, atol=1e-8)
    # The complex leaf: ∂L/∂x + i·∂L/∂y of the first term alone (c · rotation: conj(polar) · (c_re + i·c_im)).
    rotation = r * np.exp(1j * theta)
    np.testing.assert_allclose(gz, np.conj(rotation) * (c[..., 0] + 1j * c[..., 1]), rtol=1e-12)
    assert gz_dtype == "complex128"


def _rotary(torch):
    """Rotary position embeddings as Llama-style model files write them: angles from an outer product, cis by
    torch.polar, pairs of the last dimension viewed as complex numbers, rotated by a complex multiply, viewed
    back as real pairs and flattened."""
    def cis(head_dim, positions, theta=10000.0):
        inverse = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
        angles = torch.outer(torch.arange(positions, device=inverse.device), inverse).float()
        return torch.polar(torch.ones_like(angles), angles)

    def rotate(x, freqs):
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        freqs = freqs.view(*[n if i in (1, pairs.ndim - 1) else 1 for i, n in enumerate(pairs.shape)])
        return torch.view_as_real(pairs * freqs).flatten(3).type_as(x)
    return cis, rotate


def _rotary_reference(x: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rotation of each pair (x_2k, x_2k+1) at position s by angle s·θ_k, and the gradient of Σ c·out: the
    pairs of c rotated back by the same angle (derived by hand: a rotation's transpose is its inverse)."""
    head = x.shape[-1]
    angles = np.arange(x.shape[1])[:, None] * (1.0 / 10000.0 ** (np.arange(0, head, 2) / head))[None]
    cos, sin = np.cos(angles)[None, :, None], np.sin(angles)[None, :, None]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(x.shape)
    ce, co = c[..., 0::2], c[..., 1::2]
    grad = np.stack([ce * cos + co * sin, -ce * sin + co * cos], -1).reshape(x.shape)
    return out, grad


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_adr0017_t15_rotary_embeddings_written_with_complex_numbers_match_numpy_forward_and_backward(dtype):
    """The rotary embedding as model files write it (polar, view_as_complex, multiply, view_as_real, flatten,
    type_as) on a (batch, seq, heads, head_dim) query: numpy's rotation, and the input gradient rotated back."""
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 5, 3, 8)).astype(dtype).astype(np.float64)
    c = rng.standard_normal(x.shape)

    def bench(torch):
        cis, rotate = _rotary(torch)
        tx = torch.tensor(x, dtype=getattr(torch, dtype), device="cuda").requires_grad_()
        out = rotate(tx, cis(8, 16)[0:5])
        (out.float() * torch.tensor(c, dtype=torch.float32, device="cuda")).sum().backward()
        return out.dtype.torch_name, out.float().numpy(), tx.grad.float().numpy()

    _, (out_dtype, out, grad) = _run(bench)
    expected, expected_grad = _rotary_reference(x, c)
    assert out_dtype == dtype
    assert_close(out, expected, "f16" if dtype == "float16" else "f32")
    assert_close(grad, expected_grad, "f16" if dtype == "float16" else "f32")

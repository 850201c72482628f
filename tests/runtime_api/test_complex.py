"""ADR 0020, issue 39: complex tensors as model and collective code makes them.

`torch.complex64`/`cfloat` and `torch.complex128`/`cdouble` are in the dtype
table: factories make them, `randn` draws real and imaginary parts of
variance 1/2 each (torch's complex normal), elementwise add and multiply
and sums compute in them, and promotion follows torch (complex beats float;
complex64 with a double is complex128; a Python complex number is
complex64 with float32 tensors). The vector unit works on a complex
element as two lanes of its real type, so a complex64 add takes the time of
a float32 add over its real pairs.
"""

from __future__ import annotations

import numpy as np

from kernbench.session import Session


def test_adr0020_t28_complex_tensors_are_made_added_multiplied_and_promoted_as_torchs():
    session = Session("default")
    torch = session.torch

    def bench(torch):
        assert torch.cfloat is torch.complex64 and torch.cdouble is torch.complex128
        a_np = np.array([1 + 2j, -3 + 0.5j, 4 - 1j], dtype=np.complex64)
        a = torch.tensor(a_np)
        b = torch.ones(3, dtype=torch.cfloat) * 2j
        z = torch.zeros(2, 2, dtype=torch.cdouble)
        assert a.dtype is torch.complex64 and a.is_complex() and not a.is_floating_point()
        assert z.dtype is torch.complex128 and not z.numpy().any()
        results = {
            "add": (a + b, a_np + 2j),
            "mul": (a * b, a_np * 2j),
            "float": (a * torch.ones(3), a_np),
            "sum": (a.sum(), a_np.sum()),
        }
        for name, (got, want) in results.items():
            assert got.dtype is torch.complex64, name
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, err_msg=name)
        assert (a + torch.ones(3, dtype=torch.float64)).dtype is torch.complex128
        assert (torch.ones(3) + 1j).dtype is torch.complex64
        assert torch.tensor([1 + 2j, 3]).dtype is torch.complex64  # a list's complex numbers: the default complex
        torch.manual_seed(0)
        draws = torch.randn(200_000, dtype=torch.cfloat).numpy()
        torch.manual_seed(0)
        again = torch.randn(200_000, dtype=torch.cfloat).numpy()
        return draws, again

    draws, again = session.run(bench, torch)
    assert draws.dtype == np.complex64 and (draws == again).all()
    assert abs(draws.mean()) < 0.01
    np.testing.assert_allclose([draws.real.var(), draws.imag.var()], [0.5, 0.5], rtol=0.02)


def test_adr0020_t33_a_complex_op_costs_the_vector_work_of_its_real_pairs():
    session = Session("default")

    def timed(torch, dtype, n):
        x, y = torch.ones(n, dtype=dtype), torch.ones(n, dtype=dtype)
        start, end = torch.ahbm.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
        start.record()
        x + y
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def bench(torch):
        return timed(torch, torch.complex64, 1 << 14), timed(torch, torch.float32, 1 << 15), \
            timed(torch, torch.float32, 1 << 14)

    complex_time, pairs_time, float_time = session.run(bench, session.torch)
    assert complex_time == pairs_time > float_time

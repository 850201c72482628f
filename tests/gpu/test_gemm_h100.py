"""ADR 0008 T13: topology/h100.yaml predicts the library GEMM's time on a real H100 within 15% (4096^3 fp16).

Skips cleanly where torch or a CUDA device is absent (as in CI), and on a
GPU other than an H100 (the topology describes an H100 SXM5). On an H100 it
simulates the library matmul for 4096^3 fp16 on the h100 topology, timing
only (a few minutes of host CPU), runs the same kernel file with real
Triton on the GPU with the same grid and block sizes (do_bench's median),
and compares: error = (simulated - measured) / measured, |error| <= 0.15.

It failed (+3.46) until the topology had an L2 (`sip.l2`) and channels
kept the gaps a held-back transfer leaves (ADR 0003); adr/0008-cost-model.md,
"A GEMM fidelity check against a real H100", says why, and benchmarks/gemm_h100.py prints the figures.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if "H100" not in torch.cuda.get_device_name():
    pytest.skip(f"not an H100 ({torch.cuda.get_device_name()}): topology/h100.yaml describes one",
                allow_module_level=True)

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gemm_h100.py"
_spec = importlib.util.spec_from_file_location("gemm_h100", _BENCH)
gemm_h100 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gemm_h100)

SIZE = 4096


def test_adr0008_t13_h100_topology_predicts_the_library_gemm_within_15_percent():
    """ADR 0008 T13: simulated and measured 4096^3 fp16 library GEMM agree within 15% on an H100."""
    simulated_s = gemm_h100.simulate(SIZE)["ps"] / 1e12
    measured_s = gemm_h100.measure(SIZE)["ms"] / 1e3
    error = gemm_h100.error(simulated_s, measured_s)
    assert abs(error) <= gemm_h100.TOLERANCE, (
        f"{SIZE}^3 fp16: simulated {simulated_s * 1e6:.1f} us, measured {measured_s * 1e6:.1f} us, "
        f"error {error:+.3f} (limit {gemm_h100.TOLERANCE})")

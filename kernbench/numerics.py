"""Per-dtype tolerances for comparing simulated results with numpy.

One table, used by every numerical check, so a test can never loosen its
own tolerance. The half-precision rows are sized for gemm-like reductions
(fp32 accumulation of rounded inputs, rounded output); integers and bools
compare exactly.
"""

from __future__ import annotations

import numpy as np

_TOLERANCES: dict[str, tuple[float, float]] = {
    "f16": (1e-2, 1e-2),
    "bf16": (2e-2, 2e-2),
    "f32": (1e-5, 1e-5),
    "f64": (1e-12, 1e-12),
}


def tolerance(dtype_name: str) -> tuple[float, float]:
    """(rtol, atol) for results of kernbench dtype `dtype_name`."""
    return _TOLERANCES.get(dtype_name, (0.0, 0.0))


def assert_close(actual, expected, dtype_name: str) -> None:
    """Assert `actual` matches `expected` within `tolerance(dtype_name)`."""
    rtol, atol = tolerance(dtype_name)
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol
    )

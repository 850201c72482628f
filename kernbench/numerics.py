"""How simulated values are computed and compared: IEEE arithmetic without numpy's warnings, and per-dtype
tolerances.

`device_arithmetic()` is the one error state every place that computes a
tensor's values runs under (device programs, host tensors' ops, casts, a
collective's reductions): a division by zero is inf, an overflow inf, an
invalid operation nan, as on the device and in PyTorch, which prints
nothing for them; numpy would print a `RuntimeWarning` for each.

The tolerances are one table, used by every numerical check, so a test can
never loosen its own tolerance. The half-precision rows are sized for
gemm-like reductions (fp32 accumulation of rounded inputs, rounded output);
integers and bools compare exactly.
"""

from __future__ import annotations

import numpy as np

_TOLERANCES: dict[str, tuple[float, float]] = {
    "f16": (1e-2, 1e-2),
    "bf16": (2e-2, 2e-2),
    "f32": (1e-5, 1e-5),
    "f64": (1e-12, 1e-12),
}


def device_arithmetic() -> np.errstate:
    """A context manager: numpy computes IEEE results (inf, nan) inside it without a warning (module docstring).

    A new one per `with`: numpy's error state is per context (per greenlet),
    so it is entered where the values are computed, in the greenlet that
    computes them.
    """
    return np.errstate(all="ignore")


def tolerance(dtype_name: str) -> tuple[float, float]:
    """(rtol, atol) for results of kernbench dtype `dtype_name`."""
    return _TOLERANCES.get(dtype_name, (0.0, 0.0))


def assert_close(actual, expected, dtype_name: str) -> None:
    """Assert `actual` matches `expected` within `tolerance(dtype_name)`."""
    rtol, atol = tolerance(dtype_name)
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol
    )

"""Comparisons whose answer the host reads (`allclose`, `equal`, `torch.testing.assert_close`) and `isclose`."""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import bool_, float32
from kernbench.runtime_api.ops.device_ops import float_type
from kernbench.runtime_api.ops.elementwise import elementwise_op
from kernbench.runtime_api.ops.promotion import is_tensor, result_type

# torch.testing.assert_close's defaults (rtol, atol) by dtype.
_ASSERT_CLOSE_TOLERANCE = {"f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "f32": (1.3e-6, 1e-5), "f64": (1e-7, 1e-7)}


def isclose(a, b, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False):
    """|a − b| ≤ atol + rtol·|b|, elementwise (one vector op per element)."""
    dtype = float_type(result_type(a, b))

    def close(x, y):
        near = np.abs(x - y) <= atol + rtol * np.abs(y)
        return near | (np.isnan(x) & np.isnan(y)) if equal_nan else near | (x == y)

    return elementwise_op("isclose", close, (a, b), bool_, dtype)


def allclose(a, b, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether every element is close: isclose, an all-reduction, and a host read of one value."""
    return bool(isclose(a, b, rtol, atol, equal_nan).all().item())


def equal(a, b) -> bool:
    """Same shape and the same values: eq, an all-reduction, a host read."""
    return a.shape == b.shape and bool(a.eq(b).all().item())


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan: bool = False, msg=None, **_):
    """`torch.testing.assert_close`: host reads of both, compared with torch's default tolerances per dtype."""
    got = np.asarray(actual.numpy() if is_tensor(actual) else actual, dtype=np.float64)
    want = np.asarray(expected.numpy() if is_tensor(expected) else expected, dtype=np.float64)
    dtype = actual.dtype if is_tensor(actual) else float32
    default_rtol, default_atol = _ASSERT_CLOSE_TOLERANCE.get(dtype.name, (0.0, 0.0))
    np.testing.assert_allclose(got, want, rtol=default_rtol if rtol is None else rtol,
                               atol=default_atol if atol is None else atol, equal_nan=equal_nan,
                               err_msg=msg or "")

"""torch's type promotion: the dtype of `a op b` for tensors, zero-dim tensors and Python numbers.

The result's *category* (bool < integer < floating < complex) is the highest of all
operands'. Within it, dimensioned tensors decide; zero-dim tensors decide
only when no dimensioned tensor reaches the category, and Python numbers
only when no tensor does (then the default dtype: float32, int64). Two
dtypes promote as torch's `promote_types` does, which differs from numpy's
where an integer meets a floating type (int64 + float16 is float16) and where
float16 meets bfloat16 (float32). A complex type meeting a wider float widens
to the complex type of that float (complex64 with float64 is complex128).
"""

from __future__ import annotations

import numpy as np

from kernbench.dtypes import DType, bool_, complex64, complex128, float32, int64, resolve_dtype

_FLOAT_RANK = {"f16": 1, "bf16": 1, "f32": 2, "f64": 3, "c64": 2, "c128": 3}


def category(dtype: DType) -> int:
    """0 for bool, 1 for integers, 2 for floating types, 3 for complex types."""
    return 0 if dtype is bool_ else 2 if dtype.is_floating_point else 3 if dtype.is_complex else 1


def promote_types(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ca, cb = category(a), category(b)
    if 3 in (ca, cb):  # the complex type holding both: complex128 when either part is double
        return complex128 if 3 in (_FLOAT_RANK.get(a.name), _FLOAT_RANK.get(b.name)) else complex64
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        ra, rb = _FLOAT_RANK[a.name], _FLOAT_RANK[b.name]
        if ra == rb:  # float16 with bfloat16: neither holds the other
            return float32
        return a if ra > rb else b
    return resolve_dtype(np.promote_types(a.numpy, b.numpy))


def result_type(*operands) -> DType:
    """The dtype torch gives an elementwise op over `operands` (tensors and Python numbers)."""
    tensors = [op for op in operands if is_tensor(op)]
    dimensioned = [t.dtype for t in tensors if t.shape != ()]
    zero_dim = [t.dtype for t in tensors if t.shape == ()]
    numbers = [op for op in operands if not is_tensor(op)]
    result = None
    for group in (dimensioned, zero_dim):
        if group:
            promoted = _promote_all(group)
            if result is None or category(promoted) > category(result):
                result = promoted if result is None else promote_types(result, promoted)
    scalar_category = max((_number_category(x) for x in numbers), default=-1)
    if result is None or scalar_category > category(result):
        default = (bool_, int64, float32, complex64)[scalar_category]
        result = default if result is None else promote_types(result, default)
    return result


def is_tensor(value) -> bool:
    """A kernbench tensor (not a number or a numpy scalar, which promote as Python numbers do)."""
    return hasattr(type(value), "__kernbench_pointer__")


def _promote_all(dtypes: list[DType]) -> DType:
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = promote_types(result, dtype)
    return result


def _number_category(value) -> int:
    if isinstance(value, (bool, np.bool_)):
        return 0
    if isinstance(value, (int, np.integer)):
        return 1
    return 3 if isinstance(value, (complex, np.complexfloating)) else 2

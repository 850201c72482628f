"""The three spellings of an element type: kernbench's, Triton's, numpy's.

kernbench tensors name their element type with short strings ("f16",
"bf16", ...); kernels see Triton dtypes; the data lives in numpy arrays
(bfloat16 through ml_dtypes). The unsigned 16/32/64-bit names are not tensor
types: Triton emits them only for the bit tricks behind float atomic max/min,
and the port needs them to apply an unsigned comparison.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import triton.language as tl

from kernbench.kernels.errors import UnsupportedKernelError

_BY_NAME: dict[str, tuple[tl.dtype, np.dtype]] = {
    "f16": (tl.float16, np.dtype(np.float16)),
    "bf16": (tl.bfloat16, np.dtype(ml_dtypes.bfloat16)),
    "f32": (tl.float32, np.dtype(np.float32)),
    "f64": (tl.float64, np.dtype(np.float64)),
    "i8": (tl.int8, np.dtype(np.int8)),
    "i16": (tl.int16, np.dtype(np.int16)),
    "i32": (tl.int32, np.dtype(np.int32)),
    "i64": (tl.int64, np.dtype(np.int64)),
    "u8": (tl.uint8, np.dtype(np.uint8)),
    "u16": (tl.uint16, np.dtype(np.uint16)),
    "u32": (tl.uint32, np.dtype(np.uint32)),
    "u64": (tl.uint64, np.dtype(np.uint64)),
    "bool": (tl.int1, np.dtype(np.bool_)),
}
_NAME_BY_TRITON = {triton_type.name: name for name, (triton_type, _) in _BY_NAME.items()}
_NUMPY_BY_TRITON = {triton_type.name: np_type for triton_type, np_type in _BY_NAME.values()}

_ADDRESS = np.dtype(np.int64)

#: The element types a kernbench tensor may have.
TENSOR_DTYPE_NAMES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool")


def triton_dtype(name: str) -> tl.dtype:
    """The Triton dtype of a kernbench dtype name."""
    if name not in TENSOR_DTYPE_NAMES:
        raise UnsupportedKernelError(
            f"tensor dtype '{name}' is not one of {', '.join(TENSOR_DTYPE_NAMES)}"
        )
    return _BY_NAME[name][0]


def numpy_dtype_of(name: str) -> np.dtype:
    """The numpy dtype of a kernbench dtype name, as ports store and return values."""
    return _BY_NAME[name][1]


def numpy_dtype(dtype: tl.dtype) -> np.dtype:
    """The numpy dtype holding values of a scalar Triton dtype (pointers are int64 addresses)."""
    if dtype.is_ptr():
        return _ADDRESS
    try:
        return _NUMPY_BY_TRITON[dtype.name]
    except KeyError:
        raise UnsupportedKernelError(f"Triton dtype {dtype} is not simulated (fp8 and friends are not)") from None


def dtype_name(dtype: tl.dtype) -> str:
    """The kernbench name of a scalar Triton dtype, as the port receives it."""
    try:
        return _NAME_BY_TRITON[dtype.name]
    except KeyError:
        raise UnsupportedKernelError(f"Triton dtype {dtype} is not simulated (fp8 and friends are not)") from None


def cost_dtype_name(dtype: tl.dtype) -> str:
    """The dtype name a vector op is charged in: address arithmetic counts as i64."""
    return "i64" if dtype.is_ptr() else dtype_name(dtype)


def element_size(dtype: tl.dtype) -> int:
    """Bytes per element in memory; Triton's int1 occupies a byte."""
    return max(1, dtype.primitive_bitwidth // 8)

"""Element types: one `DType` object per kind, named as kernbench and torch name them.

A bench may say `"f16"`, `"float16"`, `"half"` or `torch.float16` (which is
this module's `float16` object); all resolve to the same `DType`. bf16 uses
`ml_dtypes.bfloat16`, so bf16 data is a real numpy array with bf16 rounding; the
float8 types (`float8_e4m3fn`, `float8_e5m2`) likewise use ml_dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from kernbench.errors import KernbenchError


class DTypeError(KernbenchError):
    """A dtype name or object kernbench does not know."""


@dataclass(frozen=True)
class DType:
    """An element type: its short name (`f16`), torch name (`float16`) and numpy dtype."""

    name: str
    torch_name: str
    numpy: np.dtype

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.name.startswith(("f", "bf"))

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("c")

    @property
    def is_differentiable(self) -> bool:
        """Whether a tensor of this type can require gradients: floating and complex types, as in PyTorch."""
        return self.is_floating_point or self.is_complex

    @property
    def scalar_type(self) -> str:
        """PyTorch's ScalarType name (`Float`, `BFloat16`, `Long`), as aten's messages print a dtype."""
        return _SCALAR_TYPES.get(self.name, self.torch_name)

    def __repr__(self) -> str:
        return f"torch.{self.torch_name}"


float16 = DType("f16", "float16", np.dtype(np.float16))
bfloat16 = DType("bf16", "bfloat16", np.dtype(ml_dtypes.bfloat16))
float32 = DType("f32", "float32", np.dtype(np.float32))
float64 = DType("f64", "float64", np.dtype(np.float64))
int8 = DType("i8", "int8", np.dtype(np.int8))
int16 = DType("i16", "int16", np.dtype(np.int16))
int32 = DType("i32", "int32", np.dtype(np.int32))
int64 = DType("i64", "int64", np.dtype(np.int64))
uint8 = DType("u8", "uint8", np.dtype(np.uint8))
bool_ = DType("bool", "bool", np.dtype(np.bool_))
# torch's two float8 formats, as ml_dtypes stores them (storage and conversion only: no kernel computes in them).
float8_e4m3fn = DType("f8e4m3fn", "float8_e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn))
float8_e5m2 = DType("f8e5m2", "float8_e5m2", np.dtype(ml_dtypes.float8_e5m2))
# Complex numbers as pairs of their real type (numpy's layout, and torch's): collectives move them as reals.
complex64 = DType("c64", "complex64", np.dtype(np.complex64))
complex128 = DType("c128", "complex128", np.dtype(np.complex128))

_SCALAR_TYPES = {"f16": "Half", "bf16": "BFloat16", "f32": "Float", "f64": "Double", "i8": "Char", "i16": "Short",
                 "i32": "Int", "i64": "Long", "u8": "Byte", "bool": "Bool", "f8e4m3fn": "Float8_e4m3fn",
                 "f8e5m2": "Float8_e5m2", "c64": "ComplexFloat", "c128": "ComplexDouble"}

ALL_DTYPES = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool_, float8_e4m3fn, float8_e5m2,
              complex64, complex128)

# torch's aliases (torch.half, torch.float, ...) besides each dtype's two names.
_ALIASES = {"half": float16, "float": float32, "double": float64, "int": int32, "long": int64, "short": int16,
            "cfloat": complex64, "cdouble": complex128}
_BY_NAME = {**{d.name: d for d in ALL_DTYPES}, **{d.torch_name: d for d in ALL_DTYPES}, **_ALIASES}
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES}


def resolve_dtype(dtype: DType | str | np.dtype | type | None, default: DType = float32) -> DType:
    """The `DType` for any accepted spelling; `None` gives `default`."""
    if dtype is None:
        return default
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        key = dtype.removeprefix("torch.")
        if key in _BY_NAME:
            return _BY_NAME[key]
    else:
        try:
            found = _BY_NUMPY.get(np.dtype(dtype))
        except TypeError:
            found = None
        if found is not None:
            return found
    valid = ", ".join(d.name for d in ALL_DTYPES)
    raise DTypeError(f"unknown dtype {dtype!r}; expected one of {valid} (or a torch name such as 'float16')")


def as_real_pairs(dtype: DType, n_elements: int) -> tuple[DType, int]:
    """The (dtype, elements) a vector unit works on: a complex element is two lanes of its real type, as PyTorch
    hands complex data to NCCL (`view_as_real`) and a GPU kernel computes on it; any other is itself."""
    if not dtype.is_complex:
        return dtype, n_elements
    return resolve_dtype(np.dtype(f"f{dtype.itemsize // 2}")), 2 * n_elements


def dtype_of_array(array: np.ndarray) -> DType:
    """The `DType` of a numpy array (float64 data stays float64, as in `torch.from_numpy`)."""
    return resolve_dtype(array.dtype)

"""Tensor descriptors and block pointers: blocks named by shape, strides and offsets.

Both describe a block of a strided tensor by where it starts instead of by a
block of addresses. On a GPU they become TMA copies (descriptors) or address
arithmetic the compiler generates (block pointers); on a PE both are what
its DMA engines take natively, a strided block. The bridge lowers each
access to one masked load or store through the port, exactly as a kernel
that spelt the addresses out, so its cost is the DMA of the elements it
touches and bounds are checked by the port as for any access. Elements
outside the described tensor are not accessed: a load fills them with the
padding (zero unless "nan" was asked for), a store skips them.

Rules kept from Triton (its interpreter and compiler agree on them):
descriptor bases are 16-byte aligned, every stride but the last is a
multiple of 16 bytes, the last stride is 1, the innermost block offset is
16-byte aligned, and every element of a descriptor block is bounds-checked
against the descriptor's shape. A block pointer checks only the dimensions
named in `boundary_check`; its other lanes are accessed as addressed.

Triton 3.6 lowers block pointers in `semantic`; 3.9 removed them (its
`tl.make_block_ptr` raises). The bridge replaces `tl.make_block_ptr`,
`tl.advance`, `tl.load` and `tl.store` with the functions below on every
version, so a kernel written with block pointers behaves the same whichever
Triton is installed; loads and stores of ordinary pointers fall through to
Triton's own builtins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import triton.language as tl
from triton._C.libtriton import ir

from kernbench.kernels.errors import DescriptorError, TimingOnlyRefusal
from kernbench.kernels.triton_bridge.context import current_program
from kernbench.kernels.triton_bridge.dtypes import element_size, numpy_dtype
from kernbench.kernels.triton_bridge.values import Origin, Value

_ALIGNMENT = 16


@dataclass(frozen=True)
class StridedBlock:
    """A block of `block_shape` elements of a strided tensor: the geometry both kinds share.

    `base` is a byte address, `shape`/`strides`/`offsets` are in elements.
    `poisoned` marks a geometry computed from loaded values (timing only):
    it may not decide which bytes move. `origin` is the base pointer's
    (`values.Origin`), which the memcheck holds every access to.
    """

    base: int
    element: tl.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    poisoned: bool = False
    origin: Origin | None = None

    def access(self, offsets: tuple[int, ...], checked: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        """Byte addresses of the block at `offsets`, and which lanes lie inside `shape` along `checked` dims.

        The mask is None when every lane is inside, so a block that fits
        costs what an unmasked access costs.
        """
        itemsize = element_size(self.element)
        ndim = len(self.block_shape)
        addresses = np.full(self.block_shape, self.base, dtype=np.int64)
        inside = None
        for dim, (extent, stride, start) in enumerate(zip(self.block_shape, self.strides, offsets)):
            index = np.arange(start, start + extent, dtype=np.int64).reshape(
                [extent if d == dim else 1 for d in range(ndim)])
            addresses = addresses + index * (stride * itemsize)
            if dim in checked and (start < 0 or start + extent > self.shape[dim]):
                lanes = (index >= 0) & (index < self.shape[dim])
                inside = lanes if inside is None else inside & lanes
        if inside is not None:
            inside = np.broadcast_to(inside, self.block_shape)
        return addresses, inside


@dataclass(frozen=True)
class Descriptor(StridedBlock):
    """The handle of a `tl.tensor_descriptor`: a strided block geometry and its padding."""

    padding: str = "zero"
    round_f32_to_tf32: bool = False

    def validate(self) -> None:
        itemsize = element_size(self.element)
        if self.base % _ALIGNMENT:
            raise DescriptorError(f"a tensor descriptor's base address {self.base:#x} is not 16-byte aligned")
        if self.strides[-1] != 1:
            raise DescriptorError(f"a tensor descriptor's last stride must be 1, got {self.strides[-1]}")
        for stride in self.strides[:-1]:
            if stride * itemsize % _ALIGNMENT:
                raise DescriptorError(
                    f"a tensor descriptor's strides must be multiples of 16 bytes, got {stride} x {itemsize} bytes")

    def block_at(self, offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        if offsets[-1] * element_size(self.element) % _ALIGNMENT:
            raise DescriptorError(
                f"a tensor descriptor block's innermost offset must be 16-byte aligned, got element {offsets[-1]}")
        return self.access(offsets, tuple(range(len(self.block_shape))))


@dataclass(frozen=True)
class BlockPointer(StridedBlock):
    """The handle of a block pointer (`tl.make_block_ptr`): a strided block geometry at `offsets`."""

    offsets: tuple[int, ...] = ()
    order: tuple[int, ...] = ()


# -- descriptors ----------------------------------------------------------------------


def padding_name(padding) -> str:
    """"zero" or "nan", from Triton's enum (what `semantic` passes) or its string (a host descriptor's)."""
    return "nan" if padding in ("nan", ir.PADDING_OPTION.PAD_NAN) else "zero"


def make_descriptor(base: Value, shape, strides, block_shape, padding, round_f32_to_tf32: bool = False) -> Descriptor:
    """A validated descriptor handle from scalar `Value`s (or ints) for base, shape and strides."""
    values = [base, *shape, *strides]
    descriptor = Descriptor(
        base=_int(base), element=base.dtype.element_ty, shape=tuple(map(_int, shape)),
        strides=tuple(map(_int, strides)), block_shape=tuple(int(b) for b in block_shape),
        poisoned=any(isinstance(v, Value) and v.poisoned for v in values),
        origin=base.origin if isinstance(base, Value) else None,
        padding=padding_name(padding), round_f32_to_tf32=round_f32_to_tf32)
    if not descriptor.poisoned:
        descriptor.validate()
    return descriptor


def host_descriptor(base_pointer: tl.tensor, descriptor) -> tl.tensor_descriptor:
    """The kernel-side value of a host `TensorDescriptor` whose base became `base_pointer`."""
    handle = make_descriptor(
        base_pointer.handle, descriptor.shape, descriptor.strides, descriptor.block_shape,
        descriptor.padding, bool(getattr(descriptor, "round_f32_to_tf32", False)))
    shape = [_scalar_tensor(s, tl.int32) for s in handle.shape]
    strides = [_scalar_tensor(s, tl.int64) for s in handle.strides]
    return tl.tensor_descriptor(handle, shape, strides, tl.block_type(handle.element, list(handle.block_shape)))


def round_f32_to_tf32(data: np.ndarray) -> np.ndarray:
    """Round float32 to 10 mantissa bits, nearest even, Inf and NaN kept: what a TF32 tensor map's load does."""
    bits = np.asarray(data, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    bias = ((bits >> np.uint32(13)) & np.uint32(1)) + np.uint32(0x00000FFF)
    return np.where(special, bits, (bits + bias) & np.uint32(0xFFFFE000)).view(np.float32)


# -- block pointers: the language functions --------------------------------------------


def make_block_ptr(original, base, shape, strides, offsets, block_shape, order, _semantic=None):
    """`tl.make_block_ptr`: a pointer to a `block_shape` block of a strided tensor."""
    if not isinstance(base, tl.tensor) or not base.type.is_ptr() or base.type.element_ty.is_block():
        raise ValueError("Expected `base` to be a pointer type (but not a block pointer type or others)")
    block_shape = tuple(_static_int(b) for b in _listed(block_shape))
    order = tuple(_static_int(o) for o in _listed(order))
    shape, strides, offsets = _listed(shape), _listed(strides), _listed(offsets)
    if sorted(order) != list(range(len(order))):
        raise ValueError("Expected a permutation of (0, 1, ..., len(order)-1) in order")
    if not all(len(block_shape) == len(values) for values in (shape, strides, offsets, order)):
        raise ValueError("Expected shape/strides/offsets/block_shape to have the same length")
    # A block pointer holds its geometry as Python numbers read from values, which a program trace cannot follow.
    current_program().builder.untraceable("a block pointer")
    element = base.type.element_ty
    if element == tl.int1:
        element = tl.int8  # as Triton: bool blocks are stored as bytes
    scalars = [base, *shape, *strides, *offsets]
    handle = BlockPointer(
        base=_int(base.handle), element=element, shape=tuple(map(_int, shape)), strides=tuple(map(_int, strides)),
        block_shape=block_shape, poisoned=any(isinstance(s, tl.tensor) and s.handle.poisoned for s in scalars),
        origin=base.handle.origin, offsets=tuple(map(_int, offsets)), order=order)
    return tl.tensor(handle, tl.pointer_type(tl.block_type(element, list(block_shape))))


def advance(original, base, offsets, _semantic=None):
    """`tl.advance`: the same block pointer moved by `offsets` elements (one scalar add per dimension)."""
    if not _is_block_pointer(base):
        return original(base, offsets, _semantic=_semantic)
    handle: BlockPointer = base.handle
    deltas = _listed(offsets)
    if len(deltas) != len(handle.offsets):
        raise ValueError("len(ptr.offsets) != len(offsets)")
    current_program().builder.charge("advance", len(deltas), tl.int32)
    poisoned = handle.poisoned or any(isinstance(d, tl.tensor) and d.handle.poisoned for d in deltas)
    moved = tuple(o + _int(d) for o, d in zip(handle.offsets, deltas))
    return tl.tensor(replace(handle, offsets=moved, poisoned=poisoned), base.type)


def load(original, pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False, _semantic=None):
    """`tl.load` with Triton 3.6's signature on every version: block pointers here, the rest to Triton."""
    if not _is_block_pointer(pointer):
        _no_block_options(boundary_check, padding_option, "loading")
        return original(pointer, mask, other, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                        volatile=volatile, _semantic=_semantic)
    if mask is not None or other is not None:
        raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
    handle: BlockPointer = pointer.handle
    padding = _unwrap(padding_option)
    if padding not in ("", None, "zero", "nan"):
        raise ValueError(f"Padding option {padding} not supported")
    if padding == "nan" and handle.element.is_int():
        raise ValueError("Padding option `nan` is not supported for integer block pointers")
    builder = current_program().builder
    addresses, inside = _block_pointer_access(handle, boundary_check, "a block-pointer load")
    fill = np.nan if padding == "nan" else 0
    value = builder.load_block(addresses, inside, fill, handle.element, handle.origin)
    return tl.tensor(value, tl.block_type(handle.element, list(handle.block_shape)))


def store(original, pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="",
          _semantic=None):
    """`tl.store` with Triton 3.6's signature on every version: block pointers here, the rest to Triton."""
    if not _is_block_pointer(pointer):
        _no_block_options(boundary_check, "", "storing")
        return original(pointer, value, mask, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                        _semantic=_semantic)
    if mask is not None:
        raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
    handle: BlockPointer = pointer.handle
    value = _semantic.to_tensor(value)
    if not value.type.is_block():
        value = _semantic.broadcast_impl_shape(value, list(handle.block_shape))
    if tuple(value.shape) != handle.block_shape:
        raise ValueError(f"Block shape({list(handle.block_shape)}) and value shape({list(value.shape)}) mismatch")
    value = _semantic.cast(value, handle.element)
    addresses, inside = _block_pointer_access(handle, boundary_check, "a block-pointer store")
    current_program().builder.store_block(addresses, value.handle, inside, handle.origin)


# -- helpers ---------------------------------------------------------------------------


def _is_block_pointer(value) -> bool:
    return isinstance(value, tl.tensor) and isinstance(value.handle, BlockPointer)


def _block_pointer_access(handle: BlockPointer, boundary_check, use: str):
    if handle.poisoned:
        program = current_program()
        raise TimingOnlyRefusal(program.kernel_name, program.program_id, f"the block of {use}")
    checked = tuple(sorted(_static_int(d) for d in _listed(boundary_check)))
    if any(not 0 <= d < len(handle.block_shape) for d in checked) or len(set(checked)) != len(checked):
        raise ValueError(f"boundary_check {list(checked)} must name distinct dimensions of a "
                         f"{len(handle.block_shape)}-d block")
    return handle.access(handle.offsets, checked)


def _no_block_options(boundary_check, padding_option, doing: str) -> None:
    if _listed(boundary_check) or _unwrap(padding_option):
        raise ValueError(f"`padding_option` or `boundary_check` argument is not supported for {doing} a tensor of "
                         "pointers or a scalar; use block pointers (defined by `make_block_ptr`) instead")


def _unwrap(value):
    return value.value if isinstance(value, tl.constexpr) else value


def _listed(values) -> list:
    values = _unwrap(values)
    if values is None:
        return []
    if isinstance(values, (list, tuple, tl.tuple)):
        return list(values)
    return [values]


def _static_int(value) -> int:
    value = _unwrap(value)
    if not isinstance(value, (int, np.integer)):
        raise ValueError(f"expected a constant integer, got {value!r}")
    return int(value)


def _int(value) -> int:
    """A Python int from an int, a constexpr, a scalar tensor or a scalar `Value`."""
    value = _unwrap(value)
    if isinstance(value, tl.tensor):
        value = value.handle
    if isinstance(value, Value):
        return int(value.data.reshape(-1)[0])
    return int(value)


def _scalar_tensor(value: int, dtype: tl.dtype) -> tl.tensor:
    return tl.tensor(Value(np.array([value], dtype=numpy_dtype(dtype)), dtype), dtype)

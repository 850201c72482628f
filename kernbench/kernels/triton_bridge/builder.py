"""`BridgeBuilder`: Triton's builder interface, one program instance at a time.

Triton's language layer (`triton.language.semantic`) type-checks every op and
then calls one `create_<op>` method on its builder; the compiler's builder
emits MLIR, Triton's interpreter computes with numpy. This builder computes
with numpy as well, but owns nothing global: it holds one program's id, grid
and port, and sends every effect outside the program through the port —
loads, stores and atomics as memory accesses, `dot` to the matrix unit, and
a `vector` cost notice for each op it computed itself. Layout-only ops
(splat, broadcast, reshape, transposes, joins) move no data on a vector
machine and are not charged.

Values are `Value`s (see `values`). Each op's result is poisoned when an
input is; in timing-only mode loads, atomics and dots also poison, since
their data did not come from real memory. A poisoned result is not computed:
it is a zero placeholder of the result's shape and numpy dtype (`values.
placeholder`), and the op is charged exactly as when it is computed, so a
timing-only run costs the same simulated time without the arithmetic. Index
and address arithmetic is never poisoned and always computed. Addresses and
masks must never be poisoned: they decide which bytes move, so a poisoned
one is a `TimingOnlyRefusal` naming the kernel, program and use.

**Memcheck** (ADR 0014). A pointer computed from a kernel argument keeps
that argument's allocation as its `origin` (`values`); every load, store
and atomic through it must keep each active lane (masked-off lanes are not
accesses, as on a GPU) inside that allocation, else it is a `KernelFault`
naming the argument, the tensor, the address, the lane and how far past its
end (or before its start) the address is. An address that runs far past
its tensor into a neighbouring one is caught, which the port alone,
checking only that an access lies in *some* live allocation, cannot do.
With a port that faults every access not wholly inside one allocation
(`one_allocation_per_access`) the bridge checks one lane and the port the
rest; with any other, the bridge checks every lane. `memcheck=False` skips
these checks (the port's own remain); pointers without an origin are the
port's to check.

Signatures follow Triton 3.6-3.9: memory ops take their cache and eviction
hints as trailing arguments, whose number differs between versions and
whose meaning (caching) the simulated memory has no use for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import triton.language as tl
from triton._C.libtriton import ir

from kernbench.kernels.errors import KernelFault, TimingOnlyRefusal, UnsupportedKernelError
from kernbench.kernels.triton_bridge import blocks, reductions
from kernbench.kernels.triton_bridge.dtypes import cost_dtype_name, dtype_name, element_size, numpy_dtype
from kernbench.kernels.triton_bridge.port import ProgramPort
from kernbench.kernels.triton_bridge.values import Origin, Value, all_set, placeholder, same_origin

_RMW_OPS = {
    ir.ATOMIC_OP.ADD: "add",
    ir.ATOMIC_OP.FADD: "add",
    ir.ATOMIC_OP.MAX: "max",
    ir.ATOMIC_OP.UMAX: "max",
    ir.ATOMIC_OP.MIN: "min",
    ir.ATOMIC_OP.UMIN: "min",
    ir.ATOMIC_OP.AND: "and",
    ir.ATOMIC_OP.OR: "or",
    ir.ATOMIC_OP.XOR: "xor",
    ir.ATOMIC_OP.XCHG: "xchg",
}


@dataclass(frozen=True)
class BridgeOptions:
    """The compile options `semantic` reads from its builder.

    Overflow sanitizing and device asserts are off (they would add ops a
    compiled kernel does not run); the dot precisions are the ones Triton's
    own interpreter accepts. The bridge computes every dot exactly in the
    accumulator's dtype whatever the precision asked for.
    """

    debug: bool = False
    sanitize_overflow: bool = False
    arch: str | None = None
    extern_libs: dict | None = None
    supported_fp8_dtypes: tuple[str, ...] = ()
    deprecated_fp8_dot_operand_dtypes: tuple[str, ...] = ()
    default_dot_input_precision: str = "tf32"
    allowed_dot_input_precisions: tuple[str, ...] = ("tf32", "tf32x3", "ieee")
    max_num_imprecise_acc_default: int = 0
    backend_name: str = "kernbench"


_OPTIONS = BridgeOptions()


def _poisoned(*values: Value) -> bool:
    for value in values:
        if value.poisoned:
            return True
    return False


def _result_shape(inputs: tuple[Value, ...]) -> tuple[int, ...]:
    """The shape an elementwise op over `inputs` produces (`semantic` has already broadcast them)."""
    shape = inputs[0].data.shape
    for value in inputs[1:]:
        if value.data.shape != shape:
            return np.broadcast_shapes(*(v.data.shape for v in inputs))
    return shape


def _broadcast(data: np.ndarray, shape) -> np.ndarray:
    """`np.broadcast_to(data, shape)` for a same-rank or one-element `data`, without its Python overhead.

    A read-only view with stride 0 along every broadcast axis; layout ops are
    on every program's path, and numpy's own helper costs more than the op.
    """
    shape = tuple(shape)
    base = np.ascontiguousarray(data)
    if base.size == 1:
        strides = (0,) * len(shape)
    elif base.ndim == len(shape):
        strides = []
        for have, want, stride in zip(base.shape, shape, base.strides):
            if have != want and have != 1:
                return np.broadcast_to(data, shape)  # not broadcastable: numpy's error
            strides.append(stride if have == want else 0)
    else:
        return np.broadcast_to(data, shape)
    view = np.ndarray(shape, base.dtype, base, 0, tuple(strides))
    view.flags.writeable = False
    return view


def _constant(np_dtype, tl_dtype):
    def create(self, value):
        return Value(np.array([value], dtype=np_dtype), tl_dtype)

    return create


def _type(tl_dtype):
    return lambda self: tl_dtype


def _binary(ufunc, op):
    def create(self, lhs, rhs):
        if lhs.poisoned or rhs.poisoned:
            return self._skipped(op, lhs.dtype, lhs.dtype, lhs, rhs)
        return self._computed(op, ufunc(lhs.data, rhs.data), lhs.dtype)

    return create


def _comparison(ufunc):
    def create(self, lhs, rhs):
        if lhs.poisoned or rhs.poisoned:
            return self._skipped("cmp", lhs.dtype, tl.int1, lhs, rhs)
        self.charge("cmp", lhs.data.size, lhs.dtype)
        return Value(ufunc(lhs.data, rhs.data), tl.int1)

    return create


def _unary(ufunc, op):
    def create(self, arg):
        if arg.poisoned:
            return self._skipped(op, arg.dtype, arg.dtype, arg)
        return self._computed(op, ufunc(arg.data), arg.dtype)

    return create


def _cast(self, src, dst_type, *rounding_or_signedness):
    dst = dst_type.scalar
    if src.poisoned:
        return self._skipped("cast", dst, dst, src)
    return self._computed("cast", src.data.astype(numpy_dtype(dst)), dst)


def _truncating_divide(lhs, rhs):
    """Integer division rounding toward zero, as C and Triton do (numpy floors)."""
    quotient = np.floor_divide(lhs, rhs)
    inexact = (np.remainder(lhs, rhs) != 0) & ((lhs < 0) != (rhs < 0))
    return quotient + inexact.astype(quotient.dtype)


def _reciprocal_sqrt(data):
    return 1 / np.sqrt(data)


_LOW_32 = np.uint64(0xFFFF_FFFF)
_32 = np.uint64(32)


def _unsigned_multiply_high(lhs, rhs):
    """The high half of the full product of two integers read as unsigned at their width (`tl.umulhi`).

    Signed operands take part through their bit pattern and the high half is
    read back at their type, as the hardware instruction does. Up to 32 bits
    the product fits a uint64; 64-bit operands are split into 32-bit limbs,
    whose partial products and carries each fit a uint64, since numpy has no
    128-bit integers.
    """
    lhs, rhs = np.broadcast_arrays(np.asarray(lhs), np.asarray(rhs))
    dtype = lhs.dtype
    unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
    a, b = lhs.view(unsigned).astype(np.uint64), rhs.view(unsigned).astype(np.uint64)
    if dtype.itemsize < 8:
        return (a * b >> np.uint64(dtype.itemsize * 8)).astype(unsigned).view(dtype)
    a_lo, a_hi, b_lo, b_hi = a & _LOW_32, a >> _32, b & _LOW_32, b >> _32
    low_cross = a_hi * b_lo
    middle = (a_lo * b_lo >> _32) + (low_cross & _LOW_32) + a_lo * b_hi
    return (a_hi * b_hi + (low_cross >> _32) + (middle >> _32)).view(dtype)


class BridgeBuilder:
    """Executes one program's ops with numpy, its memory and costs through a port."""

    options = _OPTIONS
    codegen_fns = {"min_dot_size": lambda lhs_type, rhs_type: (1, 1, 1)}

    def __init__(
        self,
        port: ProgramPort,
        kernel_name: str,
        program_id: tuple[int, int, int],
        grid: tuple[int, int, int],
        timing_only: bool,
        memcheck: bool = True,
    ) -> None:
        self.port = port
        self.kernel_name = kernel_name
        self.program_id = program_id
        self.grid = grid
        self.timing_only = timing_only
        self.memcheck = memcheck
        self._port_confines = getattr(port, "one_allocation_per_access", False)

    def __getattr__(self, name: str):
        if name.startswith(("create_", "get_")):
            op = name.split("_", 1)[1]
            raise UnsupportedKernelError(
                f"kernel '{self.kernel_name}' uses '{op}', which the kernbench Triton bridge does not simulate"
            )
        raise AttributeError(name)

    # -- bookkeeping -------------------------------------------------------

    def charge(self, op: str, n_elements: int, dtype: tl.dtype) -> None:
        """Tell the port the bridge computed a vector op over `n_elements`."""
        self.port.vector(op, n_elements, cost_dtype_name(dtype))

    def _computed(self, op: str, data: np.ndarray, dtype: tl.dtype) -> Value:
        """Charge `op` over the elements of `data`, which the bridge computed from unpoisoned inputs."""
        self.charge(op, data.size, dtype)
        return Value(data, dtype)

    def _skipped(self, op: str, charged: tl.dtype, result: tl.dtype, *inputs: Value) -> Value:
        """Charge `op` as `_computed` would, but leave its poisoned result uncomputed."""
        data = placeholder(_result_shape(inputs), numpy_dtype(result))
        self.charge(op, data.size, charged)
        return Value(data, result, True)

    def _addresses(self, pointers: Value, access: str) -> np.ndarray:
        if pointers.poisoned:
            raise TimingOnlyRefusal(self.kernel_name, self.program_id, f"the address of {access}")
        return pointers.data

    def _mask(self, mask: Value | None, access: str) -> np.ndarray | None:
        """A mask's lanes decide which bytes move and what they cost, so it must come from real values."""
        if mask is None:
            return None
        if mask.poisoned:
            raise TimingOnlyRefusal(self.kernel_name, self.program_id, f"the mask of {access}")
        return mask.data

    def checked_access(self, origin: Origin | None, addresses: np.ndarray, active: np.ndarray | None,
                       itemsize: int, access: str, port_call, *args):
        """`port_call(*args)`, the port's side of one access, under the memcheck when the pointer has an origin.

        With a port that faults every access not wholly inside one allocation
        (`one_allocation_per_access`, as the runtime's), one active lane inside
        the origin proves them all inside: checking it is the whole cost of the
        memcheck when nothing is wrong. With any other port every active lane
        is checked first. A fault the port raises for an access that leaves the
        origin is reported against the origin, naming the kernel argument.
        """
        if origin is None or not self.memcheck:
            return port_call(*args)
        if self._port_confines:
            first = 0
            if active is not None and not active.flat[0]:  # usually lane 0 is active: no search
                first = int(active.argmax())
                if not active.flat[first]:
                    return port_call(*args)  # no lane is active: nothing is accessed
            address = addresses.flat[first]
            if not origin.base <= address <= origin.end - itemsize:
                raise self._origin_fault(addresses, active, origin, itemsize, access)
        else:
            self._check_every_lane(addresses, active, origin, itemsize, access)
        try:
            return port_call(*args)
        except KernelFault:
            if self._outside(addresses, active, origin, itemsize).any():
                raise self._origin_fault(addresses, active, origin, itemsize, access) from None
            raise

    def _check_every_lane(self, addresses, active, origin: Origin, itemsize: int, access: str) -> None:
        if active is not None and all_set(active):
            active = None
        if active is None:
            low, high = addresses.min(), addresses.max()
        else:
            low = addresses.min(where=active, initial=origin.base)
            high = addresses.max(where=active, initial=origin.base)
        if low < origin.base or high + itemsize > origin.end:
            raise self._origin_fault(addresses, active, origin, itemsize, access)

    @staticmethod
    def _outside(addresses, active, origin: Origin, itemsize: int) -> np.ndarray:
        """Which lanes of an access are active and not wholly inside `origin`."""
        addresses = np.asarray(addresses)
        outside = (addresses < origin.base) | (addresses > origin.end - itemsize)
        if active is not None:
            outside &= active
        return outside

    def _origin_fault(self, addresses, active, origin: Origin, itemsize: int, access: str) -> KernelFault:
        """The fault of the first active lane (in block order) outside `origin`."""
        addresses = np.asarray(addresses)
        first = int(np.flatnonzero(self._outside(addresses, active, origin, itemsize).reshape(-1))[0])
        address = int(addresses.reshape(-1)[first])
        lane = tuple(int(i) for i in np.unravel_index(first, addresses.shape)) if addresses.ndim > 1 else first
        return KernelFault(origin.tensor, address - origin.base, itemsize, self.kernel_name, self.program_id,
                           address=address, access=access, lane=lane, tensor_bytes=origin.end - origin.base,
                           argument=origin.argument)

    # -- what the Python layer sees (hooks for `trace`, no-ops here) ----------------

    def observe(self, value: Value, converted) -> None:
        """The kernel's Python code converted `value` to `converted` (a branch or loop bound)."""

    def untraceable(self, reason: str) -> None:
        """Bridge code outside the builder read or made values (block pointers, custom reductions)."""

    # -- types (dtype.to_ir is patched to return the dtype itself) ------------

    get_void_ty = _type(tl.void)
    get_int1_ty = _type(tl.int1)
    get_int8_ty = _type(tl.int8)
    get_uint8_ty = _type(tl.uint8)
    get_int16_ty = _type(tl.int16)
    get_uint16_ty = _type(tl.uint16)
    get_int32_ty = _type(tl.int32)
    get_uint32_ty = _type(tl.uint32)
    get_int64_ty = _type(tl.int64)
    get_uint64_ty = _type(tl.uint64)
    get_half_ty = _type(tl.float16)
    get_bf16_ty = _type(tl.bfloat16)
    get_float_ty = _type(tl.float32)
    get_double_ty = _type(tl.float64)

    def get_ptr_ty(self, element_type, address_space):
        return tl.pointer_type(element_type, address_space)

    def get_block_ty(self, element_type, shape):
        return tl.block_type(element_type, list(shape))

    # -- constants ---------------------------------------------------------

    get_int1 = _constant(np.bool_, tl.int1)
    get_int8 = _constant(np.int8, tl.int8)
    get_uint8 = _constant(np.uint8, tl.uint8)
    get_int16 = _constant(np.int16, tl.int16)
    get_uint16 = _constant(np.uint16, tl.uint16)
    get_int32 = _constant(np.int32, tl.int32)
    get_uint32 = _constant(np.uint32, tl.uint32)
    get_int64 = _constant(np.int64, tl.int64)
    get_uint64 = _constant(np.uint64, tl.uint64)
    get_fp16 = _constant(np.float16, tl.float16)
    get_bf16 = _constant(numpy_dtype(tl.bfloat16), tl.bfloat16)
    get_fp32 = _constant(np.float32, tl.float32)
    get_fp64 = _constant(np.float64, tl.float64)

    def get_null_value(self, type):
        scalar = type.scalar
        return Value(np.zeros(1, numpy_dtype(scalar)), scalar)

    def get_all_ones_value(self, type):
        scalar = type.scalar
        return Value(np.array([-1]).astype(numpy_dtype(scalar)), scalar)

    # -- programming model ----------------------------------------------------

    def create_get_program_id(self, axis):
        return Value(np.array([self.program_id[axis]], dtype=np.int32), tl.int32)

    def create_get_num_programs(self, axis):
        return Value(np.array([self.grid[axis]], dtype=np.int32), tl.int32)

    def create_barrier(self):
        """Programs share no on-chip state in the simulation; a barrier orders nothing."""

    def create_assume(self, condition):
        """An optimizer hint; it changes no value."""

    def create_print(self, prefix, hex, values, is_signed):
        for value in values:
            print(f"pid {self.program_id}{prefix}", "<not computed: timing only>" if value.poisoned else value.data)

    # -- memory --------------------------------------------------------------

    def get_cache_policy(self, cache_modifier, eviction_policy):
        return None

    def create_load(self, ptr, *hints):
        return self._load(ptr, None, None)

    def create_masked_load(self, ptrs, mask, other, *hints):
        return self._load(ptrs, mask, other)

    def _load(self, ptrs: Value, mask: Value | None, other: Value | None) -> Value:
        addresses = self._addresses(ptrs, "a load")
        active = self._mask(mask, "a load")
        return self.load_block(addresses, active, other.data if other is not None else 0, ptrs.dtype.element_ty,
                               ptrs.origin)

    def load_block(self, addresses: np.ndarray, active: np.ndarray | None, fill, element: tl.dtype,
                   origin: Origin | None = None) -> Value:
        """Load `element`s at `addresses`; lanes outside `active` are not read and hold `fill`."""
        loaded = self.checked_access(origin, addresses, active, element_size(element), "load",
                                     self.port.load, addresses, active, dtype_name(element))
        data = np.asarray(loaded, dtype=numpy_dtype(element))
        if self.timing_only:
            # The port's values are stand-ins; filling masked-off lanes would compute nothing real.
            return Value(data, element, True)
        if active is not None and not all_set(active):
            data = np.where(active, data, np.asarray(fill, dtype=data.dtype))
        return Value(data, element)

    def store_block(self, addresses: np.ndarray, value: Value, active: np.ndarray | None,
                    origin: Origin | None = None) -> None:
        """Store `value` at `addresses`; lanes outside `active` are not written."""
        self.checked_access(origin, addresses, active, value.data.dtype.itemsize, "store",
                            self.port.store, addresses, value.data, active)

    def create_store(self, ptr, value, *hints):
        self.store_block(self._addresses(ptr, "a store"), value, None, ptr.origin)

    def create_masked_store(self, ptrs, value, mask, *hints):
        addresses = self._addresses(ptrs, "a store")
        self.store_block(addresses, value, self._mask(mask, "a store"), ptrs.origin)

    def create_atomic_rmw(self, rmw_op, ptr, value, mask, sem, scope):
        if rmw_op not in _RMW_OPS:
            raise UnsupportedKernelError(f"kernel '{self.kernel_name}' uses atomic {rmw_op}, which is not simulated")
        element = ptr.dtype.element_ty
        addresses = self._addresses(ptr, "an atomic")
        active = self._mask(mask, "an atomic")
        op = _RMW_OPS[rmw_op]
        old = self.checked_access(ptr.origin, addresses, active, element_size(element), f"atomic_{op}",
                          self.port.atomic_rmw, op, addresses, value.data, active, dtype_name(element))
        return Value(np.asarray(old, dtype=numpy_dtype(element)), value.dtype, self.timing_only or value.poisoned)

    def create_atomic_cas(self, ptr, compare, value, sem, scope):
        element = ptr.dtype.element_ty
        addresses = self._addresses(ptr, "an atomic")
        old = self.checked_access(ptr.origin, addresses, None, element_size(element), "atomic_cas",
                          self.port.atomic_cas, addresses, compare.data, value.data, dtype_name(element))
        poisoned = self.timing_only or _poisoned(compare, value)
        return Value(np.asarray(old, dtype=numpy_dtype(element)), value.dtype, poisoned)

    # -- tensor descriptors (block pointers are lowered in `blocks`, above the builder) ----------

    def create_make_tensor_descriptor(self, base, shape, strides, block_shape, is_signed, padding="zero"):
        return blocks.make_descriptor(base, shape, strides, block_shape, padding)

    def create_descriptor_load(self, desc, offsets, *hints):
        addresses, inside = desc.block_at(self._offsets(desc, offsets, "a descriptor load"))
        fill = np.nan if desc.padding == "nan" else 0
        value = self.load_block(addresses, inside, fill, desc.element, desc.origin)
        if desc.round_f32_to_tf32 and desc.element == tl.float32 and not value.poisoned:
            value = Value(blocks.round_f32_to_tf32(value.data), value.dtype)
        return value

    def create_descriptor_store(self, desc, value, offsets):
        addresses, inside = desc.block_at(self._offsets(desc, offsets, "a descriptor store"))
        self.store_block(addresses, value, inside, desc.origin)

    def _offsets(self, desc, offsets, access: str) -> tuple[int, ...]:
        """A descriptor's block offsets decide which bytes move, so neither they nor its geometry may be poisoned."""
        if desc.poisoned or any(o.poisoned for o in offsets):
            raise TimingOnlyRefusal(self.kernel_name, self.program_id, f"the block of {access}")
        return tuple(int(o.data.reshape(-1)[0]) for o in offsets)

    # -- matrix unit -----------------------------------------------------------

    def create_dot(self, a, b, acc, input_precision, max_num_imprecise_acc):
        out = self.port.dot(a.data, b.data, acc.data, dtype_name(acc.dtype))
        poisoned = self.timing_only or _poisoned(a, b, acc)
        return Value(np.asarray(out, dtype=numpy_dtype(acc.dtype)), acc.dtype, poisoned)

    # -- reductions ------------------------------------------------------------------

    def create_reduce(self, combine_fn, inputs, axis, keep_dims):
        """`tl.reduce` with a standard combiner (`reductions.is_standard`): one numpy reduction, one vector op."""
        return reductions.reduce_values(self, combine_fn, inputs, axis, keep_dims)

    # -- pointer arithmetic and index generation -----------------------------------

    def create_addptr(self, ptr, offset):
        if ptr.poisoned or offset.poisoned:
            return self._skipped("addptr", ptr.dtype, ptr.dtype, ptr, offset)
        step = element_size(ptr.dtype.element_ty)
        offsets = offset.data
        if offsets.size and not any(offsets.strides) and offsets.shape == ptr.data.shape:
            # One offset splat over the block (a pointer advanced by a scalar): scale that one element
            # (a view of it, not a copy of the block) and add it, broadcast, in the same int64 arithmetic.
            scaled = np.multiply(offsets[(slice(0, 1),) * offsets.ndim], step, dtype=np.int64)
            data = np.add(ptr.data, scaled)
        else:
            data = ptr.data + np.multiply(offsets, step, dtype=np.int64)
        self.charge("addptr", data.size, ptr.dtype)
        return Value(data, ptr.dtype, False, ptr.origin)

    def create_make_range(self, ret_ty, start, stop):
        return self._computed("arange", np.arange(start, stop, dtype=np.int32), tl.int32)

    # -- elementwise arithmetic ----------------------------------------------------

    create_fadd = _binary(np.add, "add")
    create_add = _binary(np.add, "add")
    create_fsub = _binary(np.subtract, "sub")
    create_sub = _binary(np.subtract, "sub")
    create_fmul = _binary(np.multiply, "mul")
    create_mul = _binary(np.multiply, "mul")
    create_fdiv = _binary(np.divide, "div")
    create_precise_divf = _binary(np.divide, "div")
    create_approx_divf = _binary(np.divide, "div")
    create_sdiv = _binary(_truncating_divide, "div")
    create_udiv = _binary(np.floor_divide, "div")
    create_frem = _binary(np.fmod, "rem")
    create_srem = _binary(np.fmod, "rem")
    create_urem = _binary(np.fmod, "rem")
    create_and = _binary(np.bitwise_and, "and")
    create_or = _binary(np.bitwise_or, "or")
    create_xor = _binary(np.bitwise_xor, "xor")
    create_shl = _binary(np.left_shift, "shl")
    # numpy shifts signed integers arithmetically and unsigned ones logically,
    # which is what `semantic` chooses these two ops by.
    create_lshr = _binary(np.right_shift, "shr")
    create_ashr = _binary(np.right_shift, "shr")
    create_minsi = _binary(np.minimum, "min")
    create_minui = _binary(np.minimum, "min")
    create_minimumf = _binary(np.minimum, "min")
    create_minnumf = _binary(np.fmin, "min")
    create_maxsi = _binary(np.maximum, "max")
    create_maxui = _binary(np.maximum, "max")
    create_maximumf = _binary(np.maximum, "max")
    create_maxnumf = _binary(np.fmax, "max")
    create_umulhi = _binary(_unsigned_multiply_high, "umulhi")

    create_icmpEQ = _comparison(np.equal)
    create_icmpNE = _comparison(np.not_equal)
    create_icmpSLT = _comparison(np.less)
    create_icmpSLE = _comparison(np.less_equal)
    create_icmpSGT = _comparison(np.greater)
    create_icmpSGE = _comparison(np.greater_equal)
    create_icmpULT = _comparison(np.less)
    create_icmpULE = _comparison(np.less_equal)
    create_icmpUGT = _comparison(np.greater)
    create_icmpUGE = _comparison(np.greater_equal)
    create_fcmpOEQ = _comparison(np.equal)
    create_fcmpONE = _comparison(np.not_equal)
    create_fcmpOLT = _comparison(np.less)
    create_fcmpOLE = _comparison(np.less_equal)
    create_fcmpOGT = _comparison(np.greater)
    create_fcmpOGE = _comparison(np.greater_equal)
    create_fcmpUNE = _comparison(np.not_equal)

    create_fneg = _unary(np.negative, "neg")
    create_fabs = _unary(np.abs, "abs")
    create_iabs = _unary(np.abs, "abs")
    create_floor = _unary(np.floor, "floor")
    create_ceil = _unary(np.ceil, "ceil")
    create_exp = _unary(np.exp, "exp")
    create_exp2 = _unary(np.exp2, "exp2")
    create_log = _unary(np.log, "log")
    create_log2 = _unary(np.log2, "log2")
    create_sin = _unary(np.sin, "sin")
    create_cos = _unary(np.cos, "cos")
    create_sqrt = _unary(np.sqrt, "sqrt")
    create_precise_sqrt = _unary(np.sqrt, "sqrt")
    create_rsqrt = _unary(_reciprocal_sqrt, "rsqrt")

    def create_select(self, condition, x, y):
        if _poisoned(condition, x, y):
            return self._skipped("select", x.dtype, x.dtype, condition, x, y)
        selected = self._computed("select", np.where(condition.data, x.data, y.data), x.dtype)
        if x.origin is not None:
            selected.origin = same_origin(x, y)  # pointers of one argument stay that argument's
        return selected

    def create_fma(self, x, y, z):
        if _poisoned(x, y, z):
            return self._skipped("fma", x.dtype, x.dtype, x, y, z)
        return self._computed("fma", x.data * y.data + z.data, x.dtype)

    def create_clampf(self, x, low, high, propagate_nans):
        if _poisoned(x, low, high):
            return self._skipped("clamp", x.dtype, x.dtype, x, low, high)
        if propagate_nans == ir.PROPAGATE_NAN.ALL:
            data = np.clip(x.data, low.data, high.data)
        else:
            data = np.fmin(np.fmax(x.data, low.data), high.data)
        return self._computed("clamp", data, x.dtype)

    # -- conversions -------------------------------------------------------------

    create_fp_ext = _cast
    create_fp_trunc = _cast
    create_fp_to_fp = _cast
    create_si_to_fp = _cast
    create_ui_to_fp = _cast
    create_fp_to_si = _cast
    create_fp_to_ui = _cast
    create_int_cast = _cast

    def create_bitcast(self, src, dst_type):
        dst = dst_type.scalar
        target = numpy_dtype(dst)
        data = src.data if target.itemsize == src.data.itemsize else np.ascontiguousarray(src.data)
        return Value(data.view(target), dst, src.poisoned, src.origin if dst.is_ptr() else None)

    def create_int_to_ptr(self, src, dst_type):
        dst = dst_type.scalar
        if src.poisoned:
            return Value(placeholder(src.data.shape, np.dtype(np.int64)), dst, True)
        return Value(src.data.astype(np.int64), dst)

    def create_ptr_to_int(self, src, dst_type):
        dst = dst_type.scalar
        if src.poisoned:
            return Value(placeholder(src.data.shape, numpy_dtype(dst)), dst, True)
        return Value(src.data.astype(numpy_dtype(dst)), dst)

    # -- layout (not charged) ----------------------------------------------------------

    def create_splat(self, ret_ty, arg):
        return Value(_broadcast(arg.data, ret_ty.shape), arg.dtype, arg.poisoned, arg.origin)

    def create_unsplat(self, arg):
        return Value(arg.data.reshape(1), arg.dtype, arg.poisoned, arg.origin)

    def create_broadcast(self, arg, shape):
        return Value(_broadcast(arg.data, shape), arg.dtype, arg.poisoned, arg.origin)

    def create_expand_dims(self, arg, axis):
        shape = arg.data.shape
        axis = axis % (len(shape) + 1)
        return Value(arg.data.reshape(shape[:axis] + (1,) + shape[axis:]), arg.dtype, arg.poisoned, arg.origin)

    def create_reshape(self, arg, shape, allow_reorder):
        return Value(arg.data.reshape(shape), arg.dtype, arg.poisoned, arg.origin)

    def create_trans(self, arg, perm):
        return Value(np.transpose(arg.data, perm), arg.dtype, arg.poisoned, arg.origin)

    def create_cat(self, lhs, rhs):
        return Value(np.concatenate([lhs.data, rhs.data]), lhs.dtype, _poisoned(lhs, rhs), same_origin(lhs, rhs))

    def create_join(self, lhs, rhs):
        return Value(np.stack([lhs.data, rhs.data], axis=-1), lhs.dtype, _poisoned(lhs, rhs), same_origin(lhs, rhs))

    def create_split(self, arg):
        return (
            Value(arg.data[..., 0], arg.dtype, arg.poisoned, arg.origin),
            Value(arg.data[..., 1], arg.dtype, arg.poisoned, arg.origin),
        )

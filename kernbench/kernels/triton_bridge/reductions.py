"""`tl.reduce` for the bridge: numpy for the standard combiners, a tree otherwise.

Triton's `reduce` builds an MLIR region from its combine function, which a
numpy builder cannot run, so (as in Triton's interpreter) the language's
`reduce` itself is replaced while the bridge runs. `tl.sum`, `tl.max`,
`tl.min`, `tl.argmax`, `tl.argmin` and `tl.reduce(..., _prod_combine)` are
single numpy reductions charged as one vector op over the input, made by
the builder's `create_reduce` (so a program trace records them as any other
builder call). Any other
combine function is applied pairwise over halves of the reduced axis
(log2(n) vectorized calls), which is exact for the associative combiners
`tl.reduce` requires; its ops are charged as the combiner runs them. A
poisoned input (timing only) is charged the same and not reduced.
"""

from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.language import standard

from kernbench.kernels.triton_bridge.context import current_program
from kernbench.kernels.triton_bridge.values import Value, placeholder


def _sum(data, axis):
    accumulate = np.float32 if data.dtype.itemsize < 4 and data.dtype.kind not in "biu" else data.dtype
    return np.sum(data, axis=axis, dtype=accumulate).astype(data.dtype)


def _arg_extreme(pick):
    def reduce(values, indices, axis):
        where = np.expand_dims(pick(values, axis=axis), axis)
        return (
            np.take_along_axis(values, where, axis).squeeze(axis),
            np.take_along_axis(indices, where, axis).squeeze(axis),
        )

    return reduce


_SINGLE = {
    standard._sum_combine: ("reduce_sum", _sum),
    standard._prod_combine: ("reduce_prod", lambda data, axis: np.prod(data, axis=axis).astype(data.dtype)),
    standard._elementwise_max: ("reduce_max", lambda data, axis: np.fmax.reduce(data, axis=axis)),
    standard._elementwise_min: ("reduce_min", lambda data, axis: np.fmin.reduce(data, axis=axis)),
}
_WITH_INDEX = {
    standard._argmax_combine_tie_break_left: ("argmax", _arg_extreme(np.argmax)),
    standard._argmax_combine_tie_break_fast: ("argmax", _arg_extreme(np.argmax)),
    standard._argmin_combine_tie_break_left: ("argmin", _arg_extreme(np.argmin)),
    standard._argmin_combine_tie_break_fast: ("argmin", _arg_extreme(np.argmin)),
}


def _uncomputed(data: np.ndarray, axis: int) -> np.ndarray:
    """The placeholder a poisoned reduction of `data` along `axis` leaves."""
    return placeholder(data.shape[:axis] + data.shape[axis + 1 :], data.dtype)


def _wrap(data: np.ndarray, dtype: tl.dtype, poisoned: bool) -> tl.tensor:
    if data.ndim == 0:
        return tl.tensor(Value(data.reshape(1), dtype, poisoned), dtype)
    return tl.tensor(Value(data, dtype, poisoned), tl.block_type(dtype, list(data.shape)))


def _pairwise(arrays, dtypes, poisoned, combine_fn):
    """Reduce the last axis by combining its two halves until one element is left."""
    while arrays[0].shape[-1] > 1:
        half = arrays[0].shape[-1] // 2
        lhs = [_wrap(a[..., :half], t, poisoned) for a, t in zip(arrays, dtypes)]
        rhs = [_wrap(a[..., half : 2 * half], t, poisoned) for a, t in zip(arrays, dtypes)]
        combined = combine_fn(*lhs, *rhs)
        combined = combined if isinstance(combined, tuple) else (combined,)
        arrays = [
            np.concatenate([c.handle.data, a[..., 2 * half :]], axis=-1) for c, a in zip(combined, arrays)
        ]
    return [a[..., 0] for a in arrays]


def is_standard(combine_fn) -> bool:
    """Whether `combine_fn` is one numpy reduction (`reduce_values`) rather than a tree of combiner calls."""
    return combine_fn in _SINGLE or combine_fn in _WITH_INDEX


def reduce_values(builder, combine_fn, inputs: list[Value], axis: int | None, keep_dims: bool) -> tuple[Value, ...]:
    """The builder's `create_reduce`: a standard combiner over `inputs` along `axis`, one vector op.

    Results are arrays of the reduced shape (a 0-d result is one element, as
    scalars are); a poisoned input is charged the same and not reduced.
    """
    dtypes = [v.dtype for v in inputs]
    poisoned = any(v.poisoned for v in inputs)
    arrays = [v.data if axis is not None else v.data.reshape(-1) for v in inputs]
    reduced_axis = 0 if axis is None else axis % arrays[0].ndim
    if combine_fn in _SINGLE:
        op, single = _SINGLE[combine_fn]
        builder.charge(op, arrays[0].size, dtypes[0])
        results = [_uncomputed(arrays[0], reduced_axis) if poisoned else single(arrays[0], reduced_axis)]
    else:
        op, with_index = _WITH_INDEX[combine_fn]
        builder.charge(op, arrays[0].size, dtypes[0])
        if poisoned:
            results = [_uncomputed(a, reduced_axis) for a in arrays[:2]]
        else:
            results = list(with_index(arrays[0], arrays[1], reduced_axis))
    if keep_dims:
        kept_axes = tuple(range(inputs[0].data.ndim)) if axis is None else reduced_axis
        results = [np.expand_dims(r, kept_axes) for r in results]
    results = [np.asarray(r) for r in results]
    return tuple(Value(r.reshape(1) if r.ndim == 0 else r, t, poisoned) for r, t in zip(results, dtypes))


def reduce(input, axis, combine_fn, keep_dims=False, **_ignored):
    """Reduce `input` (a tensor or a tuple of same-shaped tensors) along `axis`."""
    if isinstance(input, tl.tensor):
        return reduce((input,), axis, combine_fn, keep_dims)[0]
    axis = tl.core._unwrap_if_constexpr(axis)
    keep_dims = tl.core._unwrap_if_constexpr(keep_dims)
    handles = [t.handle for t in input]
    dtypes = [t.dtype for t in input]
    builder = current_program().builder
    if is_standard(combine_fn):
        shape = list(handles[0].data.shape)
        if axis is None:
            shape = [1] * len(shape) if keep_dims else []
        else:
            shape[axis % len(shape)] = 1
            if not keep_dims:
                del shape[axis % len(shape)]
        values = builder.create_reduce(combine_fn, handles, axis, keep_dims)
        return tuple(tl.tensor(v, tl.block_type(t, shape) if shape else t) for v, t in zip(values, dtypes))

    # The tree below slices and joins values outside the builder, which a program trace cannot follow.
    builder.untraceable("a reduction with a custom combine function")
    poisoned = any(h.poisoned for h in handles)
    arrays = [h.data if axis is not None else h.data.reshape(-1) for h in handles]
    reduced_axis = 0 if axis is None else axis % arrays[0].ndim
    moved = [np.moveaxis(a, reduced_axis, -1) for a in arrays]
    results = _pairwise(moved, dtypes, poisoned, combine_fn)
    if keep_dims:
        kept_axes = tuple(range(handles[0].data.ndim)) if axis is None else reduced_axis
        results = [np.expand_dims(r, kept_axes) for r in results]
    return tuple(_wrap(np.asarray(r), t, poisoned) for r, t in zip(results, dtypes))

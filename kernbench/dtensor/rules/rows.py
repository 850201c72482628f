"""Ops over whole rows — norms, softmaxes, attention — and the embedding lookup.

`layer_norm`/`rms_norm` (over the last dimensions) and `softmax`/
`log_softmax` (over `dim`) keep a shard of any other dimension — sequence
parallelism's norms — and gather one of theirs; the norm's weight and bias
stay whole and, beside a sharded input, get a Partial gradient.
`scaled_dot_product_attention` keeps a shard of a batch or head dimension
shared by query, key and value (heads split by a column-parallel
projection). `embedding` with its table split by rows (RowwiseParallel)
looks up the ids the rank holds, zero elsewhere, and gives a Partial result;
split by columns (ColwiseParallel) it gives the output's last dimension.
"""

from __future__ import annotations

from kernbench.dtensor.grad_layout import FOLLOW
from kernbench.dtensor.placements import Partial, Replicate, Shard, chunk_bounds
from kernbench.dtensor.rules.registry import Sharding, dtensors_of, register, wrap_dim
from kernbench.runtime_api.ops import functional


def _norm_dims(op: str, x, args, kwargs) -> set:
    if op in ("softmax", "log_softmax"):
        dim = args[1] if len(args) > 1 else kwargs.get("dim", -1)
        return {wrap_dim(-1 if dim is None else dim, x.ndim)}
    normalized = args[1] if len(args) > 1 else kwargs["normalized_shape"]
    count = 1 if isinstance(normalized, int) else len(normalized)
    return set(range(x.ndim - count, x.ndim))


@register("layer_norm", "rms_norm", "softmax", "log_softmax")
def rowwise(op, args, kwargs) -> Sharding:
    x = args[0]
    dims = _norm_dims(op, x, args, kwargs)
    params = [a for a in (*args[2:], *kwargs.values()) if hasattr(a, "_placements")]
    inputs = {id(x): [], **{id(p): [] for p in params}}
    grads = {id(x): [], **{id(p): [] for p in params}}
    output = []
    for m, p in enumerate(x.placements):
        keep = p.is_shard() and p.dim not in dims
        inputs[id(x)].append(p if keep else Replicate())
        grads[id(x)].append(p if keep else FOLLOW)
        output.append(p if keep else Replicate())
        for w in params:
            inputs[id(w)].append(Replicate())
            grads[id(w)].append(Partial() if keep else FOLLOW)
    return Sharding({k: tuple(v) for k, v in inputs.items()}, tuple(output), tuple(x.shape),
                    {k: tuple(v) for k, v in grads.items()})


@register("scaled_dot_product_attention")
def attention(op, args, kwargs) -> Sharding:
    q, k, v = args[:3]
    shape = (*q.shape[:-1], v.shape[-1])
    inputs = {id(t): [] for t in (q, k, v)}
    output = []
    for m, p in enumerate(q.placements):
        keep = p.is_shard() and p.dim < q.ndim - 2 and k.placements[m] == p and v.placements[m] == p
        for t in (q, k, v):
            inputs[id(t)].append(p if keep else Replicate())
        output.append(p if keep else Replicate())
    return Sharding({key: tuple(value) for key, value in inputs.items()}, tuple(output), shape)


@register("embedding")
def embedding(op, args, kwargs) -> Sharding:
    ids, weight = args[0], args[1]
    mesh = weight.device_mesh
    shape = (*ids.shape, weight.shape[1])
    output, wanted_ids = [], []
    row_split = None
    for m, w in enumerate(weight.placements):
        p = ids.placements[m]
        if w.is_shard(0):
            output.append(Partial()), wanted_ids.append(Replicate())
            row_split = (m, chunk_bounds(weight.shape[0], mesh.size(m), mesh.get_local_rank(m)))
        elif w.is_shard(1):
            output.append(Shard(ids.ndim)), wanted_ids.append(Replicate())
        else:
            output.append(p if not p.is_partial() else Replicate()), wanted_ids.append(output[-1])
    call = None
    if row_split is not None:
        start, stop = row_split[1]

        def call(local_ids, local_weight, *rest, **kw):
            inside = (local_ids >= start).logical_and(local_ids < stop)
            rows = functional.embedding((local_ids - start) * inside, local_weight, *rest, **kw)
            return rows * inside.unsqueeze(-1).to_dtype(rows.dtype)
    return Sharding({id(ids): tuple(wanted_ids)}, tuple(output), shape, call=call)


@register("item", "numpy", "tolist", "cpu", "__float__", "__int__", "__bool__", "__array__", "allclose", "equal",
          "assert_close")
def host_read(op, args, kwargs) -> Sharding:
    """A host read sees the whole value: each DTensor is made Replicate first (its collectives run); a plain
    tensor it is compared with (`allclose`, `equal`, `torch.testing.assert_close`) is read as it is."""
    whole = (Replicate(),) * next(d for d in dtensors_of(args, kwargs)).device_mesh.ndim
    return Sharding({id(d): whole for d in dtensors_of(args, kwargs)}, None, None)


host_read.takes_plain_tensors = True

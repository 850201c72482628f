"""Views and reshapes: a shard follows its dimension through the view when it can, else the input is gathered.

`transpose`, `t`, `permute` and `movedim` carry each Shard to where its
dimension goes. `view`, `reshape` and the ops that are reshapes
(`flatten`, `unflatten`, `view_as`, `squeeze`, `unsqueeze`) group the input
and output dimensions whose sizes multiply to each other; a Shard on the
first input dimension of a group moves to the group's first output
dimension when that dimension splits evenly over the mesh, as PyTorch's view
rules allow; any other Shard is gathered first. The local view gets local
sizes.
"""

from __future__ import annotations

from math import prod

from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.placements import Replicate, Shard, chunk_bounds
from kernbench.dtensor.rules.registry import Sharding, register, wrap_dim


@register("transpose", "swapaxes", "t", "permute", "movedim", "T", "mT")
def transpose(op, args, kwargs) -> Sharding:
    x = args[0]
    order = _order(op, x.ndim, args[1:], kwargs)
    shape = tuple(x.shape[i] for i in order)
    output = tuple(Shard(order.index(p.dim)) if p.is_shard() else p for p in x.placements)
    call = (lambda local: local.permute(order)) if op in ("T", "mT") else None
    return Sharding({}, output, shape, call=call)


def _order(op: str, ndim: int, rest: tuple, kwargs) -> list[int]:
    order = list(range(ndim))
    if op in ("t", "T") or (op == "mT" and ndim >= 2):
        order[-2:] = order[-2:][::-1] if ndim >= 2 else order[-2:]
    elif op in ("transpose", "swapaxes"):
        i, j = (wrap_dim(v, ndim) for v in (list(rest) + [kwargs.get("dim0"), kwargs.get("dim1")])[:2])
        order[i], order[j] = order[j], order[i]
    elif op == "permute":
        dims = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        order = [wrap_dim(d, ndim) for d in dims]
    else:  # movedim
        sources = [wrap_dim(s, ndim) for s in (rest[0] if isinstance(rest[0], (tuple, list)) else (rest[0],))]
        targets = [wrap_dim(t, ndim) for t in (rest[1] if isinstance(rest[1], (tuple, list)) else (rest[1],))]
        remaining = iter(d for d in range(ndim) if d not in sources)
        placed = dict(zip(targets, sources))
        order = [placed[i] if i in placed else next(remaining) for i in range(ndim)]
    return order


@register("view", "reshape", "flatten", "unflatten", "view_as", "reshape_as", "squeeze", "unsqueeze")
def view(op, args, kwargs) -> Sharding:
    x = args[0]
    target = _target_shape(op, x, args[1:], kwargs)
    groups = _groups(x.shape, target)
    mesh = x.device_mesh
    wanted, output = [], []
    for m, p in enumerate(x.placements):
        moved = Replicate() if p.is_shard() else p
        if p.is_shard():
            for ins, outs in groups:
                ins = [d for d in ins if x.shape[d] != 1]  # a dimension of one neither holds nor moves a shard
                outs = [d for d in outs if target[d] != 1]
                if ins and ins[0] == p.dim and outs and target[outs[0]] % mesh.size(m) == 0 and \
                        (len(ins) == 1 or x.shape[p.dim] % mesh.size(m) == 0):
                    moved = Shard(outs[0])
        wanted.append(p if moved.is_shard() or not p.is_shard() else Replicate())
        output.append(moved)
    local_shape = list(target)
    for m, p in enumerate(output):
        if p.is_shard():
            start, stop = chunk_bounds(target[p.dim], mesh.size(m), mesh.get_local_rank(m))
            local_shape[p.dim] = stop - start
    method = "view" if op in ("view", "view_as") else "reshape"
    return Sharding({id(x): tuple(wanted)}, tuple(output), target,
                    call=lambda local, *rest, **kw: getattr(local, method)(tuple(local_shape)))


def _target_shape(op: str, x, rest: tuple, kwargs) -> tuple:
    shape = list(x.shape)
    if op in ("view", "reshape"):
        sizes = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        sizes = list(sizes or kwargs.get("shape", ()))
        if sizes.count(-1) > 1:
            raise DTensorError(f"{op}: only one dimension can be inferred")
        if -1 in sizes:
            known = prod(s for s in sizes if s != -1)
            sizes[sizes.index(-1)] = prod(shape) // known if known else 0
        if prod(sizes) != prod(shape):
            raise DTensorError(f"shape '{list(rest)}' is invalid for input of size {prod(shape)}")
        return tuple(sizes)
    if op in ("view_as", "reshape_as"):
        return tuple(rest[0].shape)
    if op == "flatten":
        start = wrap_dim(rest[0] if rest else kwargs.get("start_dim", 0), x.ndim)
        end = wrap_dim(rest[1] if len(rest) > 1 else kwargs.get("end_dim", -1), x.ndim)
        return tuple(shape[:start] + [prod(shape[start:end + 1])] + shape[end + 1:])
    if op == "unflatten":
        dim = wrap_dim(rest[0], x.ndim)
        sizes = list(rest[1])
        if -1 in sizes:
            sizes[sizes.index(-1)] = shape[dim] // prod(s for s in sizes if s != -1)
        return tuple(shape[:dim] + sizes + shape[dim + 1:])
    if op == "unsqueeze":
        dim = rest[0] if rest else kwargs["dim"]
        dim = dim % (x.ndim + 1)
        return tuple(shape[:dim] + [1] + shape[dim:])
    dims = rest[0] if rest else kwargs.get("dim")
    dims = range(x.ndim) if dims is None else [wrap_dim(d, x.ndim) for d in (dims if isinstance(dims, (tuple, list))
                                                                              else (dims,))]
    return tuple(n for i, n in enumerate(shape) if not (i in dims and n == 1))


def _groups(source: tuple, target: tuple) -> list[tuple[list, list]]:
    """Runs of input and output dimensions whose sizes have the same product, in order."""
    groups, i, j = [], 0, 0
    while i < len(source) or j < len(target):
        ins, outs = [], []
        a = b = 1
        while True:
            if a <= b and i < len(source) and (not ins or a != b or source[i] == 1):
                a *= source[i]
                ins.append(i)
                i += 1
            elif j < len(target) and (not outs or a != b):
                b *= target[j]
                outs.append(j)
                j += 1
            else:
                break
            if a == b and ins and outs:
                break
        groups.append((ins, outs))
    return groups


@register("__getitem__")
def getitem(op, args, kwargs) -> Sharding:
    """Basic indexing (ints, slices, `...`, None): a shard of a dimension left whole stays, renumbered; a
    sharded dimension that is sliced or picked is gathered first. Indexing by a tensor is not provided."""
    x, key = args[0], args[1]
    key = key if isinstance(key, tuple) else (key,)
    if any(not (k is None or k is Ellipsis or isinstance(k, (int, slice))) for k in key):
        raise DTensorError("DTensor indexing: only ints, slices, ... and None are supported")
    explicit = sum(k is not None and k is not Ellipsis for k in key)
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (x.ndim - explicit) + key[at + 1:]
    key = key + (slice(None),) * (x.ndim - sum(k is not None for k in key))
    source_to_output, shape, source, out = {}, [], 0, 0
    for k in key:
        if k is None:
            shape.append(1)
            out += 1
            continue
        if isinstance(k, slice):
            source_to_output[source] = out
            shape.append(len(range(*k.indices(x.shape[source]))))
            out += 1
        source += 1
    wanted, output = [], []
    for p in x.placements:
        whole = p.is_shard() and (p.dim not in source_to_output or _key_of(key, p.dim) != slice(None))
        wanted.append(Replicate() if whole else p)
        output.append(Replicate() if whole else Shard(source_to_output[p.dim]) if p.is_shard() else p)
    return Sharding({id(x): tuple(wanted)}, tuple(output), tuple(shape))


def _key_of(key: tuple, dim: int):
    """The index of `key` (None entries skipped) that applies to source dimension `dim`."""
    return [k for k in key if k is not None][dim]


@register("cat", "concat", "concatenate", "stack")
def join(op, args, kwargs) -> Sharding:
    """`cat`/`stack` of DTensors laid out alike: a shard of a dimension other than the joined one stays; a shard
    of the joined dimension is gathered first."""
    tensors = list(args[0])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    first = tensors[0]
    ndim = first.ndim + (op == "stack")
    dim = wrap_dim(dim, ndim)
    shape = list(first.shape)
    if op == "stack":
        shape.insert(dim, len(tensors))
    else:
        shape[dim] = sum(t.shape[dim] for t in tensors)
    layout = []
    for p in first.placements:
        moved = p.dim + (op == "stack" and p.dim >= dim) if p.is_shard() else None
        layout.append(Replicate() if p.is_partial() or (p.is_shard() and moved == dim and op != "stack") else
                      (Shard(moved) if p.is_shard() else p))
    wanted = tuple(Replicate() if p.is_shard() and p.dim == dim and op != "stack" else
                   (Replicate() if p.is_partial() else p) for p in first.placements)
    return Sharding({id(t): wanted for t in tensors}, tuple(layout), tuple(shape))


@register("split", "chunk", "unbind")
def split(op, args, kwargs) -> Sharding:
    """`split`/`chunk`/`unbind` along a dimension: its shard, if any, is gathered first; other shards stay in
    every piece (renumbered when `unbind` drops the dimension)."""
    x = args[0]
    dim = wrap_dim(args[2] if len(args) > 2 else kwargs.get("dim", 0) if op != "unbind" else
                   (args[1] if len(args) > 1 else kwargs.get("dim", 0)), x.ndim)
    size = x.shape[dim]
    if op == "unbind":
        lengths = [1] * size
    elif op == "chunk":
        chunks = args[1] if len(args) > 1 else kwargs["chunks"]
        lengths = [stop - start for start, stop in (chunk_bounds(size, chunks, i) for i in range(chunks))
                   if stop > start]
    else:
        sections = args[1] if len(args) > 1 else kwargs["split_size_or_sections"]
        lengths = list(sections) if isinstance(sections, (list, tuple)) else \
            [min(sections, size - start) for start in range(0, size, sections)]
    wanted = tuple(Replicate() if p.is_shard(dim) else p for p in x.placements)
    if op == "unbind":
        layout = tuple(Shard(p.dim - (p.dim > dim)) if p.is_shard() else p for p in wanted)
        shapes = [tuple(n for i, n in enumerate(x.shape) if i != dim)] * size
    else:
        layout = wanted
        shapes = [tuple(length if i == dim else n for i, n in enumerate(x.shape)) for length in lengths]
    return Sharding({id(x): wanted}, [layout] * len(shapes), shapes)


@register("view_as_real", "view_as_complex", "real", "imag")
def complex_view(op, args, kwargs) -> Sharding:
    """The views between complex numbers and their real pairs: `view_as_real` adds a last dimension of 2 and
    `view_as_complex` drops it, a shard of that dimension gathered first (a pair is never split over ranks);
    `real` / `imag` keep the shape. Every other placement stays: the views are linear, so Partial too."""
    x = args[0]
    if op == "view_as_complex":
        wanted = tuple(Replicate() if p.is_shard(x.ndim - 1) else p for p in x.placements)
        return Sharding({id(x): wanted}, wanted, tuple(x.shape[:-1]))
    shape = tuple(x.shape) + ((2,) if op == "view_as_real" else ())
    return Sharding({}, tuple(x.placements), shape)

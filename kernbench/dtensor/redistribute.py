"""Moving a DTensor's local tensor from one layout to another: the only place DTensor's collectives are born.

Each change of placement on one mesh dimension is one collective on that
dimension's process group, as PyTorch's `_redistribute.py` issues them:

| from → to | what runs |
|---|---|
| Shard(d) → Replicate | all-gather (concatenated along d) |
| Partial → Replicate | all-reduce |
| Partial → Shard(d) | reduce-scatter (along d) |
| norm terms (`NormPartial`) → Replicate | all-reduce of their squares, then the square root |
| Replicate → Shard(d) | the rank's chunk, copied out (no communication) |
| Replicate → Partial | the value divided by the ranks (PyTorch's `_partition_value`; nothing in backward) |
| Shard(d) → Shard(e) | all-to-all (where both dimensions divide evenly; else all-gather, then a chunk) |

A dimension the mesh does not divide is padded to equal chunks for the
collective and cut back after, as PyTorch pads uneven shards. A group of one
rank moves nothing. `Redistribute` is the autograd Function over the local
tensor: its backward moves the gradient from the layout it arrives in back
to the input's (a Partial gradient reduce-scatters into a Shard, all-reduces
into a Replicate), so the backward collectives are derived, not written per
layer.
"""

from __future__ import annotations

from kernbench.dtensor.comm import backward_pass, issue
from kernbench.dtensor.errors import DTensorError
from kernbench.dtensor.grad_layout import resolve
from kernbench.dtensor.placements import NormPartial, Replicate, chunk_bounds, normalized
from kernbench.runtime_api.autograd import Function


def redistribute_local(local, mesh, source: tuple, target: tuple, shape: tuple, *, backward: bool = False):
    """`local` (this rank's part of a tensor of global `shape` laid out as `source`) laid out as `target`."""
    for dim, (have, want) in enumerate(zip(source, target)):
        if have != want:
            local = _move(local, mesh, dim, have, want, shape, backward)
    return local


def _move(local, mesh, mesh_dim: int, have, want, shape: tuple, backward: bool):
    n = mesh.size(mesh_dim)
    group, index = mesh.get_group(mesh_dim), mesh.get_local_rank(mesh_dim)
    if isinstance(have, NormPartial) and not want.is_partial():
        whole = _norm_of_norms(local, group, n)
        return whole if want.is_replicate() else local_chunk(whole, n, index, want.dim)
    if any(p.is_partial() and p.reduce_op != "sum" for p in (have, want)) or (have.is_partial() and want.is_partial()):
        raise DTensorError(f"redistribute: {have} to {want} is not supported (kernbench's Partial is a sum)")
    if want.is_partial():
        if backward or n == 1:
            return local  # a gradient needs no partition: every rank's term is the whole
        return local / n if not have.is_shard() else _move(_gather(local, group, n, have.dim, shape), mesh,
                                                          mesh_dim, Replicate(), want, shape, backward)
    if have.is_partial():
        if want.is_replicate():
            return _all_reduce(local, group, n)
        return _reduce_scatter(local, group, n, index, want.dim, shape)
    if have.is_shard() and want.is_shard() and n > 1 and not shape[have.dim] % n and not shape[want.dim] % n:
        return _all_to_all(local, group, n, have.dim, want.dim)
    if have.is_shard():
        local = _gather(local, group, n, have.dim, shape)
        if want.is_replicate():
            return local
    return local_chunk(local, n, index, want.dim)


def local_chunk(full, n: int, index: int, dim: int):
    """Chunk `index` of `n` of `full` along `dim` (torch.chunk's sizes), as a contiguous copy."""
    start, stop = chunk_bounds(full.shape[dim], n, index)
    return _copied(full, dim, start, stop - start)


def scatter_chunks(full, group, n: int, index: int, dim: int, source: int):
    """This rank's chunk along `dim` of group rank `source`'s `full` (a scatter; chunks travel padded)."""
    width = -(-full.shape[dim] // n)
    pieces = [_padded(local_chunk(full, n, r, dim), dim, width) for r in range(n)] if index == source else None
    received = full.new_empty(tuple(width if d == dim else size for d, size in enumerate(full.shape)))
    issue("scatter", received, pieces, group=group, group_src=source)
    start, stop = chunk_bounds(full.shape[dim], n, index)
    return _copied(received, dim, 0, stop - start)


def _copied(tensor, dim: int, start: int, length: int):
    if not length:  # a rank past the last chunk holds an empty shard, as torch.chunk leaves it
        return tensor.new_empty(tuple(0 if d == dim else size for d, size in enumerate(tensor.shape)))
    return tensor.narrow(dim, start, length).contiguous()


def _padded(local, dim: int, length: int):
    """`local` grown along `dim` to `length` with zeros (uneven shards travel padded, as PyTorch's do)."""
    if local.shape[dim] == length:
        return local.contiguous()
    shape = list(local.shape)
    shape[dim] = length
    padded = local.new_zeros(tuple(shape))
    if local.numel():
        padded.narrow(dim, 0, local.shape[dim]).copy_(local)
    return padded


def _gather(local, group, n: int, dim: int, shape: tuple):
    if n == 1:
        return local
    size = shape[dim]
    width = -(-size // n)
    piece = _padded(local, dim, width).movedim(dim, 0).contiguous()
    out = piece.new_empty((n * width, *piece.shape[1:]))
    issue("all_gather_into_tensor", out, piece, group=group)
    return out.narrow(0, 0, size).movedim(0, dim).contiguous()


def _all_to_all(local, group, n: int, source: int, target: int):
    """Shard(source) → Shard(target), both dimensions divisible by the ranks: rank j is sent this rank's rows of
    its chunk along `target`, and the pieces received are joined along `source`."""
    pieces = local.unflatten(target, (n, local.shape[target] // n)).movedim(target, 0).contiguous()
    received = pieces.new_empty(tuple(pieces.shape))
    issue("all_to_all_single", received, pieces, group=group)
    joined = received.movedim(0, source)
    merged = list(joined.shape)
    merged[source:source + 2] = [merged[source] * merged[source + 1]]
    return joined.reshape(tuple(merged)).contiguous()


def _norm_of_norms(local, group, n: int):
    """The 2-norm of every rank's 2-norm: their squares all-reduced, then the square root."""
    squares = local.square()
    if n > 1:
        issue("all_reduce", squares, group=group)
    return squares.sqrt()


def _all_reduce(local, group, n: int):
    if n == 1:
        return local
    out = local.contiguous().clone()
    issue("all_reduce", out, group=group)
    return out


def _reduce_scatter(local, group, n: int, index: int, dim: int, shape: tuple):
    if n == 1:
        return local
    size = shape[dim]
    width = -(-size // n)
    whole = _padded(local.movedim(dim, 0), 0, n * width)
    out = whole.new_empty((width, *whole.shape[1:]))
    issue("reduce_scatter_tensor", out, whole, group=group)
    start, stop = chunk_bounds(size, n, index)
    return _copied(out, 0, 0, stop - start).movedim(0, dim).contiguous()


class Redistribute(Function):
    """Forward: the local tensor moved from `source` to `target` layout. Backward: the gradient moved from the
    layout the output's uses give it (`grad_layout.resolve`) back to the input's layout, Partial read as
    Replicate."""

    @staticmethod
    def forward(ctx, local, mesh, source, target, shape, output):
        ctx.mesh, ctx.source, ctx.shape, ctx.output = mesh, source, shape, output
        moved = redistribute_local(local, mesh, source, target, shape)
        return moved.detach() if moved is local else moved

    @staticmethod
    def backward(ctx, grad):
        layout = resolve(ctx.output[0])
        with backward_pass():
            moved = redistribute_local(grad, ctx.mesh, layout, normalized(ctx.source), ctx.shape, backward=True)
        return moved, None, None, None, None, None


"""`Shard(dim)`, `Replicate()` and `Partial()`: how a DTensor's global value lies on one mesh dimension.

A placement is a frozen value, compared and hashed as PyTorch's are, so a
tuple of them (one per mesh dimension) names a layout. `Shard` splits as
`torch.chunk` does — ranks hold ⌈n/k⌉ elements each, the last ones fewer or
none — which is PyTorch's rule for a dimension the mesh does not divide.
"""

from __future__ import annotations

from dataclasses import dataclass


class Placement:
    """One mesh dimension's part of a layout."""

    def is_shard(self, dim: int | None = None) -> bool:
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        return isinstance(self, Replicate)

    def is_partial(self) -> bool:
        return isinstance(self, Partial)


@dataclass(frozen=True)
class Shard(Placement):
    """The tensor split along `dim` over the mesh dimension's ranks, in rank order (chunks as `torch.chunk`)."""

    dim: int = 0

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"


@dataclass(frozen=True)
class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole tensor."""

    def __repr__(self) -> str:
        return "Replicate()"


@dataclass(frozen=True)
class Partial(Placement):
    """Every rank holds a term of the tensor; the value is their reduction (`reduce_op`, a sum by default)."""

    reduce_op: str = "sum"

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"


@dataclass(frozen=True)
class NormPartial(Partial):
    """Every rank holds the 2-norm of its part; the value is the 2-norm of those terms, √Σ termᵢ² (PyTorch's
    `_NormPartial`): what a norm over a sharded tensor leaves before its one small all-reduce."""

    reduce_op: str = "norm"

    def __repr__(self) -> str:
        return "_NormPartial(2)"


def chunk_bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    """[start, stop) of chunk `index` when `size` elements are chunked into `parts` as `torch.chunk` does."""
    full = -(-size // parts) if parts else 0
    start = min(size, index * full)
    return start, min(size, start + full)


def normalized(placements: tuple) -> tuple:
    """`placements` with each `Partial` seen as `Replicate`: the layout a gradient is taken to have when nothing
    says otherwise (PyTorch's rule for backward)."""
    return tuple(Replicate() if p.is_partial() else p for p in placements)

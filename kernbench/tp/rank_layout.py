"""Megatron's rank layout: the world as a grid of tp, cp, ep, dp and pp coordinates, and its groups.

Pure arithmetic, no state: `RankGenerator` lays ranks out along an order
(the first token varies fastest) and lists the ranks that differ only in
some coordinates; `rank_groups` builds every kind of group Megatron's
`initialize_model_parallel` creates, from a dense grid (ep 1) and an expert
grid (cp 1, tp = the expert tensor size) over the same pipelines, and
refuses what Megatron asserts. `kernbench.tp.parallel_state` creates the
groups and keeps each rank's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable

import numpy as np

from kernbench.tp.errors import ModelParallelError

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
ORDER_TOKENS = ("tp", "cp", "ep", "dp", "pp")


class ParallelSizeError(ModelParallelError, RuntimeError):
    """Sizes or an order that cannot lay out the world: also a `RuntimeError`, as Megatron raises for them."""


class LayoutAssertionError(ParallelSizeError, AssertionError):
    """A layout Megatron refuses with an assertion (an order against the expert layers): an `AssertionError` too,
    so code and tests that expect Megatron's type see it."""


class RankGenerator:
    """Megatron's `RankGenerator`: the world as a tp·ep·dp·pp·cp grid laid out along `order`.

    `order` names the parallelisms, hyphen-separated, the fastest-varying
    first; one of size 1 may be left out (it is appended). `get_ranks(token)`
    gives every group of the parallelisms `token` names, each a list of
    global ranks (ascending), the groups in Megatron's order. Raises
    `ParallelSizeError` for an unknown or repeated token, a size above 1 the
    order leaves out, or both `ep` and `cp` above 1 (dense grids have ep = 1,
    expert grids cp = 1).
    """

    def __init__(self, tp: int, ep: int, dp: int, pp: int, cp: int, order: str, rank_offset: int = 0):
        sizes = {"tp": tp, "ep": ep, "dp": dp, "pp": pp, "cp": cp}
        if ep != 1 and cp != 1:
            raise ParallelSizeError(f"RankGenerator(ep={ep}, cp={cp}): one grid holds expert or context "
                                    f"parallelism, not both (dense grids have ep 1, expert grids cp 1)")
        tokens = _order_tokens(order)
        for name, size in sizes.items():
            if name not in tokens:
                if size != 1:
                    raise ParallelSizeError(f"order={order!r} does not name {name}, whose size is {size}; "
                                            f"every parallelism of size above 1 must be in the order")
                tokens.append(name)
        self.order = "-".join(tokens)
        self.ordered_size = [sizes[name] for name in tokens]
        self.world_size = prod(self.ordered_size)
        self.rank_offset = rank_offset

    def get_ranks(self, token: str) -> list[list[int]]:
        """Every group of the parallelisms in `token` (`"tp"`, `"tp-dp"`, ...): the ranks that differ only there."""
        tokens = self.order.split("-")
        wanted = _order_tokens(token)
        unknown = [name for name in wanted if name not in tokens]
        if unknown:
            raise ParallelSizeError(f"get_ranks({token!r}): {', '.join(unknown)} is not a parallelism of "
                                    f"order {self.order!r}")
        # grid[i_last, ..., i_first] is the rank whose coordinates are i (the first token varies fastest).
        grid = np.arange(self.world_size).reshape(self.ordered_size[::-1])
        position = {name: len(tokens) - 1 - i for i, name in enumerate(tokens)}
        outer = [position[name] for name in reversed(tokens) if name not in wanted]
        inner = [position[name] for name in reversed(tokens) if name in wanted]
        group_size = prod(self.ordered_size[i] for i, name in enumerate(tokens) if name in wanted)
        groups = grid.transpose(outer + inner).reshape(-1, group_size) + self.rank_offset
        return groups.tolist()


def default_embedding_ranks(pp_ranks: list[int]) -> list[int]:
    """Megatron's default: the word embeddings live on the first and last stage of a pipeline."""
    return [pp_ranks[0]] if len(pp_ranks) == 1 else [pp_ranks[0], pp_ranks[-1]]


def default_position_embedding_ranks(pp_ranks: list[int]) -> list[int]:
    """Megatron's default: the position embeddings live on the first stage of a pipeline."""
    return [pp_ranks[0]]


# Each kind of group: the grid that forms it ("dense" or "expert") and Megatron's token for it.
_KINDS = {
    "data_with_context": ("dense", "dp-cp"),
    "data": ("dense", "dp"),
    "context": ("dense", "cp"),
    "model": ("dense", "tp-pp"),
    "tensor": ("dense", "tp"),
    "pipeline": ("dense", "pp"),
    "tensor_and_data_with_context": ("dense", "tp-dp-cp"),
    "tensor_and_data": ("dense", "tp-dp"),
    "tensor_and_context": ("dense", "tp-cp"),
    "expert_model": ("expert", "ep"),
    "expert_tensor": ("expert", "tp"),
    "expert_tensor_and_model": ("expert", "tp-ep"),
    "expert_tensor_model_pipeline": ("expert", "tp-ep-pp"),
    "expert_data": ("expert", "dp"),
}


@dataclass(frozen=True)
class RankGroups:
    """Every group of each kind, as tuples of global ranks in ascending order, in Megatron's creation order."""

    tensor: tuple[tuple[int, ...], ...]
    data: tuple[tuple[int, ...], ...]
    pipeline: tuple[tuple[int, ...], ...]
    context: tuple[tuple[int, ...], ...]
    data_with_context: tuple[tuple[int, ...], ...]
    model: tuple[tuple[int, ...], ...]
    tensor_and_data: tuple[tuple[int, ...], ...]
    tensor_and_data_with_context: tuple[tuple[int, ...], ...]
    tensor_and_context: tuple[tuple[int, ...], ...]
    embedding: tuple[tuple[int, ...], ...]
    position_embedding: tuple[tuple[int, ...], ...]
    expert_model: tuple[tuple[int, ...], ...]
    expert_tensor: tuple[tuple[int, ...], ...]
    expert_tensor_and_model: tuple[tuple[int, ...], ...]
    expert_tensor_model_pipeline: tuple[tuple[int, ...], ...]
    expert_data: tuple[tuple[int, ...], ...]

    def kinds(self) -> tuple[str, ...]:
        """The kinds in the order every rank creates them (Megatron's: data with context first)."""
        return (*_KINDS, "embedding", "position_embedding")


def rank_groups(world_size: int, tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1, *,
                context_parallel_size: int = 1, expert_model_parallel_size: int = 1,
                expert_tensor_parallel_size: int | None = None, order: str = DEFAULT_ORDER,
                get_embedding_ranks: Callable | None = None,
                get_position_embedding_ranks: Callable | None = None) -> RankGroups:
    """Megatron's partition of `world_size` ranks into every kind of group.

    Raises `ParallelSizeError` when a size is not a positive integer, when
    tp x pp x cp or etp x ep x pp does not divide the world size, for an
    order `RankGenerator` refuses, and where Megatron asserts: an order not
    ending in pp with pipelining whose dense and expert data-parallel sizes
    differ, or dense and expert grids with different pipeline groups.
    """
    tp, pp, cp, ep = (tensor_model_parallel_size, pipeline_model_parallel_size, context_parallel_size,
                      expert_model_parallel_size)
    etp = tp if expert_tensor_parallel_size is None else expert_tensor_parallel_size
    for name, size in (("tensor_model_parallel_size", tp), ("pipeline_model_parallel_size", pp),
                       ("context_parallel_size", cp), ("expert_model_parallel_size", ep),
                       ("expert_tensor_parallel_size", etp)):
        if not positive_int(size):
            raise ParallelSizeError(f"{name} must be a positive integer, got {size!r}")
    dense = [("tensor_model_parallel_size", tp), ("pipeline_model_parallel_size", pp)]
    if cp != 1:
        dense.append(("context_parallel_size", cp))
    _check_divides(world_size, dense)
    _check_divides(world_size, [("expert_tensor_parallel_size", etp), ("expert_model_parallel_size", ep),
                                ("pipeline_model_parallel_size", pp)])
    dp, expert_dp = world_size // (tp * pp * cp), world_size // (etp * ep * pp)
    grids = {"dense": RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order),
             "expert": RankGenerator(tp=etp, ep=ep, dp=expert_dp, pp=pp, cp=1, order=order)}
    if not (order.endswith("pp") or pp == 1 or expert_dp == dp):
        raise LayoutAssertionError(f"When not using pp-last rank ordering, the data parallel size of the attention "
                                   f"and moe layers must be the same (order={order!r} does not end in pp; with "
                                   f"pipelining the data-parallel sizes are {dp} and {expert_dp})")
    found = {kind: tuple(map(tuple, grids[grid].get_ranks(token))) for kind, (grid, token) in _KINDS.items()}
    if found["pipeline"] != tuple(map(tuple, grids["expert"].get_ranks("pp"))):
        raise LayoutAssertionError(f"Pipeline parallel groups are expected to be the same for Non-Expert and "
                                   f"Expert part (order={order!r})")
    embedding = get_embedding_ranks or default_embedding_ranks
    position_embedding = get_position_embedding_ranks or default_position_embedding_ranks
    return RankGroups(**found,
                      embedding=tuple(tuple(sorted(embedding(list(ranks)))) for ranks in found["pipeline"]),
                      position_embedding=tuple(tuple(sorted(position_embedding(list(ranks))))
                                               for ranks in found["pipeline"]))


def _order_tokens(order) -> list[str]:
    tokens = order.lower().split("-") if isinstance(order, str) else [order]
    unknown = [token for token in tokens if token not in ORDER_TOKENS]
    if unknown or len(set(tokens)) != len(tokens):
        raise ParallelSizeError(f"order={order!r}: an order is tp, cp, ep, dp and pp, each at most once, "
                                f"joined by '-' (Megatron's default {DEFAULT_ORDER!r})")
    return tokens


def _check_divides(world_size: int, factors: list[tuple[str, int]]) -> None:
    product = prod(size for _, size in factors)
    if world_size % product:
        named = " x ".join(f"{name} ({size})" for name, size in factors)
        raise ParallelSizeError(f"{named} = {product} does not divide the world size ({world_size})")


def positive_int(size) -> bool:
    return isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size > 0

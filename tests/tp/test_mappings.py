"""ADR 0011: the region mappings' forward collectives, and their one-rank fast path."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.tp import ModelParallelError, mappings, parallel_state
from kernbench.numerics import assert_close
from tests.tp.harness import f16, run_tensor_parallel

MAPPINGS = [
    mappings.copy_to_tensor_model_parallel_region,
    mappings.reduce_from_tensor_model_parallel_region,
    mappings.scatter_to_tensor_model_parallel_region,
    mappings.gather_from_tensor_model_parallel_region,
    mappings.reduce_scatter_to_sequence_parallel_region,
    mappings.gather_from_sequence_parallel_region,
]


def test_adr0011_t10_every_mapping_returns_its_input_in_a_one_rank_group():
    def identities(torch, rank):
        x = torch.zeros(6, 10, dtype="f16")
        return [mapping(x) is x for mapping in MAPPINGS]

    assert run_tensor_parallel(1, identities) == {0: [True] * len(MAPPINGS)}


def rank_input(rank: int, rows: int, cols: int) -> np.ndarray:
    """A different, non-symmetric block per rank, so a wrong order or a wrong chunk shows."""
    return f16(np.random.default_rng(100 + rank).standard_normal((rows, cols)))


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.quick
def test_adr0011_t11_mappings_move_data_as_megatrons_do(tp):
    rows, cols = 8, 6

    def moved(torch, rank):
        own = torch.tensor(rank_input(rank, rows, cols), dtype="f16")
        group_full = np.concatenate([rank_input(r, rows, cols) for r in tensor_group(rank, tp)], axis=1)
        out = {}  # each read at once, before the in-place all-reduce rewrites `own`
        side_by_side = torch.tensor(group_full, dtype="f16")
        out["scatter"] = mappings.scatter_to_tensor_model_parallel_region(side_by_side).numpy()
        out["gather"] = mappings.gather_from_tensor_model_parallel_region(own).numpy()
        out["sequence_gather"] = mappings.gather_from_sequence_parallel_region(own).numpy()
        out["reduce_scatter"] = mappings.reduce_scatter_to_sequence_parallel_region(own).numpy()
        out["reduce"] = mappings.reduce_from_tensor_model_parallel_region(own).numpy()
        return out

    for rank, out in run_tensor_parallel(tp, moved).items():
        group = [rank_input(r, rows, cols) for r in tensor_group(rank, tp)]
        index, height = rank % tp, rows // tp
        # The scatter of the group's inputs side by side is this rank's own input: only the right chunk matches.
        np.testing.assert_array_equal(out["scatter"], group[index])
        np.testing.assert_array_equal(out["gather"], np.concatenate(group, axis=1))
        np.testing.assert_array_equal(out["sequence_gather"], np.concatenate(group, axis=0))
        assert_close(out["reduce_scatter"], sum(group)[index * height:(index + 1) * height], "f16")
        assert_close(out["reduce"], sum(group), "f16")


def tensor_group(rank: int, tp: int) -> list[int]:
    """The ranks of `rank`'s tensor-parallel group: tp consecutive ranks."""
    return list(range(rank - rank % tp, rank - rank % tp + tp))


def test_adr0011_t12_splitting_a_size_the_group_does_not_divide_is_named():
    def split_odd(torch, rank):
        mappings.scatter_to_tensor_model_parallel_region(torch.zeros(4, 10, dtype="f16"))

    with pytest.raises(ModelParallelError, match=r"scatter_to_tensor_model_parallel_region: dim -1 .* size 10, "
                                                 r"not divisible by the tensor-parallel size 4"):
        run_tensor_parallel(4, split_odd)


def test_adr0011_t27_a_mapping_given_a_group_works_in_that_group():
    rows, cols = 4, 6

    def in_data_parallel_group(torch, rank):
        own = torch.tensor(rank_input(rank, rows, cols), dtype="f16")
        gathered = mappings.gather_from_sequence_parallel_region(own, group=parallel_state.get_data_parallel_group())
        others = torch.distributed.new_group([r for r in range(4) if r not in tensor_group(rank, 2)])
        with pytest.raises(ModelParallelError, match=r"does not hold the calling rank"):
            mappings.reduce_from_tensor_model_parallel_region(own, group=others)
        return gathered.numpy()

    # world 4, tp 2: data-parallel groups (0, 2) and (1, 3).
    for rank, gathered in run_tensor_parallel(2, in_data_parallel_group).items():
        data_group = [rank % 2, rank % 2 + 2]
        np.testing.assert_array_equal(gathered, np.concatenate([rank_input(r, rows, cols) for r in data_group]))


@pytest.mark.parametrize("tp", [2, 4])
def test_adr0011_t111_last_dim_gather_and_scatter_of_a_1d_tensor_are_its_concatenation_and_chunks(tp):
    width = 8

    def one_dimensional(torch, rank):
        own = torch.tensor(rank_input(rank, 1, width)[0], dtype="f16")
        gathered = mappings.gather_from_tensor_model_parallel_region(own).numpy()
        whole = torch.tensor(np.concatenate([rank_input(r, 1, width)[0] for r in tensor_group(rank, tp)]),
                             dtype="f32", requires_grad=True)
        scattered = mappings.scatter_to_tensor_model_parallel_region(whole)
        # The scatter's backward is a last-dim all-gather: each rank's chunk gradient is its rank number.
        (scattered * float(rank)).sum().backward()
        return gathered, scattered.detach().numpy(), whole.grad.numpy()

    for rank, (gathered, scattered, grad) in run_tensor_parallel(tp, one_dimensional).items():
        group = [rank_input(r, 1, width)[0] for r in tensor_group(rank, tp)]
        np.testing.assert_array_equal(gathered, np.concatenate(group))
        np.testing.assert_array_equal(scattered, group[rank % tp].astype(np.float32))
        np.testing.assert_array_equal(grad, np.repeat(np.array(tensor_group(rank, tp), dtype=np.float32), width))

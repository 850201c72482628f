"""ADR 0011: Megatron's mapping autograd classes, called as Megatron's own unit tests call them, on 8 ranks.

Written here (not copied) to check what Megatron-LM's
`tests/unit_tests/tensor_parallel/test_mappings.py` checks, with its world
and shapes: 8 ranks, `initialize_model_parallel(4, 2)` (tensor-parallel
groups {0..3} and {4..7}), each class's `forward`/`symbolic` through its
public function and its `backward` called directly with a context that
holds only Megatron's fields.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.tp import mappings, parallel_state
from tests.tp.megatron_utils import Utils, on_every_rank

TP = 4


class Ctx:
    """What Megatron's tests hand a backward: the group and the sequence-parallel options, nothing else."""

    def __init__(self, group, **options):
        self.group = group
        self.tensor_parallel_output_grad, self.output_split_sizes, self.input_split_sizes = True, None, None
        self.use_global_buffer = False
        self.__dict__.update(options)


def group_of(rank: int) -> list[int]:
    return list(range(rank - rank % TP, rank - rank % TP + TP))


def shared_input(torch, rows: int, cols: int):
    """The same (rows, cols) values on every rank (seeded alike), and their numpy copy."""
    torch.manual_seed(1234)
    x = torch.randn(rows, cols).cuda()
    return x, x.cpu().numpy()


def moved(torch, rank, world_size):
    """Megatron test_mappings' calls, each class's forward and backward; numpy copies of what they give."""
    Utils.initialize_model_parallel(TP, 2)
    group = parallel_state.get_tensor_model_parallel_group()
    own = lambda n: torch.ones(n).cuda() * rank  # noqa: E731 (Megatron's per-rank input)
    seen = {}
    # test_CopyToModelParallelRegion: forward identity, backward all-reduce.
    seen["copy_forward"] = mappings.copy_to_tensor_model_parallel_region(own(1)).cpu().numpy()
    seen["copy_backward"] = mappings._CopyToModelParallelRegion.backward(Ctx(group), own(1))[0].cpu().numpy()
    # test_ReduceFromModelParallelRegion: forward all-reduce (symbolic and public), backward identity.
    seen["reduce_symbolic"] = mappings._ReduceFromModelParallelRegion.symbolic(None, own(1), group).cpu().numpy()
    seen["reduce_forward"] = mappings.reduce_from_tensor_model_parallel_region(own(1)).cpu().numpy()
    seen["reduce_backward"] = mappings._ReduceFromModelParallelRegion.backward(Ctx(group), own(1))[0].cpu().numpy()
    # test_ScatterToModelParallelRegion / test_GatherFromModelParallelRegion: (8, 4) split by columns; 1-D gathers.
    x, _ = shared_input(torch, 8, 4)
    seen["scatter_forward"] = mappings.scatter_to_tensor_model_parallel_region(x).cpu().numpy()
    seen["scatter_symbolic"] = mappings._ScatterToModelParallelRegion.symbolic(None, x, group).cpu().numpy()
    seen["scatter_backward"] = mappings._ScatterToModelParallelRegion.backward(Ctx(group), own(8))[0].cpu().numpy()
    seen["gather_backward"] = mappings._GatherFromModelParallelRegion.backward(Ctx(group), x)[0].cpu().numpy()
    seen["gather_forward"] = mappings.gather_from_tensor_model_parallel_region(own(8)).cpu().numpy()
    seen["gather_symbolic"] = mappings._GatherFromModelParallelRegion.symbolic(None, own(8), group).cpu().numpy()
    # test_ScatterToSequenceParallelRegion: (8, 4) split by rows.
    seen["sequence_scatter"] = mappings.scatter_to_sequence_parallel_region(x).cpu().numpy()
    seen["sequence_scatter_symbolic"] = mappings._ScatterToSequenceParallelRegion.symbolic(None, x, group).cpu().numpy()
    seen["sequence_scatter_backward"] = \
        mappings._ScatterToSequenceParallelRegion.backward(Ctx(group), own(4).reshape(1, 4))[0].cpu().numpy()
    # test_GatherFromSequenceParallelRegion: 1-D gather; backward reduce-scatters (or splits) the rows.
    seen["sequence_gather"] = mappings.gather_from_sequence_parallel_region(own(4)).cpu().numpy()
    rows = torch.vstack([torch.ones(4) * i for i in range(TP)]).cuda()
    seen["sequence_gather_backward"] = \
        mappings._GatherFromSequenceParallelRegion.backward(Ctx(group), rows)[0].cpu().numpy()
    seen["sequence_gather_backward_split"] = mappings._GatherFromSequenceParallelRegion.backward(
        Ctx(group, tensor_parallel_output_grad=False), rows)[0].cpu().numpy()
    # test_ReduceScatterToSequenceParallelRegion: forward reduce-scatters the rows, backward gathers them.
    seen["reduce_scatter"] = mappings.reduce_scatter_to_sequence_parallel_region(rows).cpu().numpy()
    seen["reduce_scatter_backward"] = \
        mappings._ReduceScatterToSequenceParallelRegion.backward(Ctx(group), own(4))[0].cpu().numpy()
    Utils.destroy_model_parallel()
    return seen


@pytest.mark.quick
def test_adr0011_t112_megatrons_mapping_classes_move_data_as_its_tests_expect_on_8_ranks():
    for rank, seen in on_every_rank(moved).items():
        group, index = group_of(rank), rank % TP
        ranks = np.array(group, dtype=np.float32)
        assert seen["copy_forward"].tolist() == [rank]
        assert seen["copy_backward"].tolist() == [sum(group)]  # 6 on ranks 0-3, 22 on 4-7, as Megatron's test
        assert seen["reduce_symbolic"].tolist() == seen["reduce_forward"].tolist() == [sum(group)]
        assert seen["reduce_backward"].tolist() == [rank]
        assert seen["scatter_forward"].shape == (8, 1)
        np.testing.assert_array_equal(seen["scatter_forward"], seen["scatter_symbolic"])
        np.testing.assert_array_equal(seen["gather_backward"], seen["scatter_forward"])  # the backward splits alike
        np.testing.assert_array_equal(seen["scatter_backward"], np.repeat(ranks, 8))
        np.testing.assert_array_equal(seen["gather_forward"], np.repeat(ranks, 8))
        np.testing.assert_array_equal(seen["gather_symbolic"], np.repeat(ranks, 8))
        assert seen["sequence_scatter"].shape == (2, 4)
        np.testing.assert_array_equal(seen["sequence_scatter"], seen["sequence_scatter_symbolic"])
        np.testing.assert_array_equal(seen["sequence_scatter_backward"], np.repeat(ranks, 4).reshape(TP, 4))
        np.testing.assert_array_equal(seen["sequence_gather"], np.repeat(ranks, 4))
        np.testing.assert_array_equal(seen["sequence_gather_backward"], np.full((1, 4), TP * index))
        np.testing.assert_array_equal(seen["sequence_gather_backward_split"], np.full((1, 4), index))
        np.testing.assert_array_equal(seen["reduce_scatter"], np.full((1, 4), TP * index))
        np.testing.assert_array_equal(seen["reduce_scatter_backward"], np.repeat(ranks, 4))


def test_adr0011_t113_the_scatters_keep_this_ranks_chunk_of_the_shared_input():
    def chunks(torch, rank, world_size):
        Utils.initialize_model_parallel(TP, 2)
        x, values = shared_input(torch, 8, 4)
        columns = mappings.scatter_to_tensor_model_parallel_region(x).cpu().numpy()
        rows = mappings.scatter_to_sequence_parallel_region(x).cpu().numpy()
        Utils.destroy_model_parallel()
        return values, columns, rows

    for rank, (values, columns, rows) in on_every_rank(chunks).items():
        index = rank % TP
        np.testing.assert_array_equal(columns, values[:, index:index + 1])
        np.testing.assert_array_equal(rows, values[2 * index:2 * index + 2])

"""ADR 0011: `parallel_state` on Megatron's world of 8 ranks, checked as Megatron-LM's test_parallel_state.py checks it.

Written here (not copied). Each test names the Megatron tests it mirrors
and keeps their worlds, sizes, orders and expected values; the rank-layout
reference below is derived from the definition of an order (coordinates
times strides), not from Megatron's code or kernbench's.

Not mirrored: Megatron's first check in test_initialize_and_destroy_model_parallel,
that initializing before torch.distributed fails (kernbench initializes a
world of one without a process group and names groups of more ranks, T23);
the hybrid data-and-context groups (refused, T31); and the all-gather groups
and `ProcessGroupCollection` tests (not implemented).
"""

from __future__ import annotations

import itertools

import pytest

from kernbench.tp import ParallelSizeError, parallel_state
from kernbench.tp.errors import ModelParallelError
from kernbench.tp.parallel_state import RankGenerator
from kernbench.tp.process_groups_config import ProcessGroupCollection
from tests.tp.megatron_utils import Utils, on_every_rank

ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-pp-ep-dp"]  # the two layouts Megatron's tests run each case under


@pytest.mark.parametrize("order", ORDERS)
def test_adr0011_t131_sizes_the_world_cannot_hold_are_refused_and_destroy_drops_every_group(order):
    """Mirrors test_initialize_and_destroy_model_parallel: tp 16, pp 16, tp 8 x pp 8 and a virtual pipeline
    without pipelining are RuntimeErrors that leave the rank uninitialized; tp 2 x pp 4 makes every group;
    destroying drops them."""

    def lifecycle(torch, rank, world_size):
        Utils.initialize_distributed()
        for sizes in ({"tensor_model_parallel_size": 16}, {"pipeline_model_parallel_size": 16},
                      {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 8},
                      {"virtual_pipeline_model_parallel_size": 2}):
            with pytest.raises(RuntimeError):
                parallel_state.initialize_model_parallel(order=order, **sizes)
            assert not parallel_state.model_parallel_is_initialized()
        Utils.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=4, order=order)
        getters = (parallel_state.get_model_parallel_group, parallel_state.get_tensor_model_parallel_group,
                   parallel_state.get_pipeline_model_parallel_group, parallel_state.get_data_parallel_group,
                   parallel_state.get_expert_model_parallel_group, parallel_state.get_expert_tensor_parallel_group,
                   parallel_state.get_expert_data_parallel_group,
                   parallel_state.get_expert_tensor_model_pipeline_parallel_group)
        sizes = [len(torch.distributed.get_process_group_ranks(getter())) for getter in getters]
        initialized = parallel_state.model_parallel_is_initialized()
        Utils.destroy_model_parallel()
        return initialized, sizes, parallel_state.get_model_parallel_group(check_initialized=False), \
            parallel_state.model_parallel_is_initialized()

    for rank, (initialized, sizes, left, after) in on_every_rank(lifecycle).items():
        assert initialized and sizes == [8, 2, 4, 1, 1, 2, 1, 8]  # tp 2 x pp 4 fills the world: no dp, ep 1
        assert left is None and not after


def _rank_itself(rank):
    return rank


# (what Megatron's test initializes, the getter, the value on `rank`, the setter whose None must not change it)
READINGS = [
    ({"tensor_model_parallel_size": 8}, "get_tensor_model_parallel_world_size", lambda rank: 8,
     "set_tensor_model_parallel_world_size"),
    ({"tensor_model_parallel_size": 8}, "get_tensor_model_parallel_rank", _rank_itself,
     "set_tensor_model_parallel_rank"),
    ({"tensor_model_parallel_size": 8}, "get_tensor_model_parallel_src_rank", lambda rank: 0, None),
    ({"expert_tensor_parallel_size": 8}, "get_expert_tensor_parallel_world_size", lambda rank: 8,
     "set_expert_tensor_parallel_world_size"),
    ({"expert_tensor_parallel_size": 8}, "get_expert_tensor_parallel_rank", _rank_itself,
     "set_expert_tensor_parallel_rank"),
    ({"pipeline_model_parallel_size": 8}, "get_pipeline_model_parallel_world_size", lambda rank: 8,
     "set_pipeline_model_parallel_world_size"),
    ({"pipeline_model_parallel_size": 8}, "get_pipeline_model_parallel_rank", _rank_itself,
     "set_pipeline_model_parallel_rank"),
    ({"pipeline_model_parallel_size": 8}, "get_data_parallel_world_size", lambda rank: 1, None),
    ({"pipeline_model_parallel_size": 8}, "get_data_parallel_rank", lambda rank: 0, None),
    ({"context_parallel_size": 8}, "get_context_parallel_rank", _rank_itself, None),
    ({"expert_model_parallel_size": 8}, "get_expert_model_parallel_rank", _rank_itself,
     "set_expert_model_parallel_rank"),
]


@pytest.mark.parametrize("order", ORDERS)
def test_adr0011_t132_each_of_8_ranks_reads_its_own_sizes_and_ranks(order):
    """Mirrors test_tensor_model_parellel_world_size, test_expert_tensor_parellel_world_size,
    test_pipeline_model_parallel_world_size, test_tensor_model_parallel_rank, test_moe_tensor_model_parellel_rank,
    test_pipeline_model_parallel_rank, test_get_tensor_model_parallel_src_rank, test_data_parallel_initializations
    (its sizes and ranks), test_context_parallel_rank and test_expert_model_parallel_rank: one parallelism
    spanning the 8 ranks, each rank's getter; a setter given None leaves the initialized value."""

    def readings(torch, rank, world_size):
        seen = []
        for sizes, getter, _, setter in READINGS:
            Utils.initialize_model_parallel(order=order, **sizes)
            value = getattr(parallel_state, getter)()
            if setter is not None:
                getattr(parallel_state, setter)(None)
            seen.append((value, getattr(parallel_state, getter)()))
            Utils.destroy_model_parallel()
        return seen

    for rank, seen in on_every_rank(readings).items():
        expected = [(value(rank), value(rank)) for _, _, value, _ in READINGS]
        assert seen == expected, [getter for (_, getter, _, _), a, b in zip(READINGS, seen, expected) if a != b]


@pytest.mark.parametrize("order", ORDERS)
def test_adr0011_t133_pipeline_stages_neighbours_and_sources_at_world_8(order):
    """Mirrors test_pipeline_parallel_initializations (tp 2 x pp 4), test_data_parallel_initializations (its
    source rank), test_is_pipeline_first_stage, test_is_pipeline_last_stage and
    test_virtual_pipeline_model_parallel_rank (pp 8)."""

    def stages(torch, rank, world_size):
        Utils.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=4, order=order)
        paired = (parallel_state.get_pipeline_model_parallel_first_rank(), parallel_state.get_data_parallel_src_rank(),
                  parallel_state.get_pipeline_model_parallel_next_rank(),
                  parallel_state.get_pipeline_model_parallel_prev_rank())
        Utils.initialize_model_parallel(pipeline_model_parallel_size=world_size, order=order)
        ends = (parallel_state.is_pipeline_first_stage(ignore_virtual=False), parallel_state.is_pipeline_first_stage(),
                parallel_state.is_pipeline_last_stage(ignore_virtual=False), parallel_state.is_pipeline_last_stage(),
                parallel_state.get_data_parallel_src_rank())
        parallel_state.set_virtual_pipeline_model_parallel_rank(rank)
        virtual = parallel_state.get_virtual_pipeline_model_parallel_rank()
        Utils.destroy_model_parallel()
        return paired, ends, virtual

    for rank, (paired, ends, virtual) in on_every_rank(stages).items():
        # tp 2 x pp 4 on 8 ranks: no data parallelism, the pipeline steps over the tensor pair.
        assert paired == (rank % 2, rank, (rank + 2) % 8, (rank - 2) % 8)
        assert ends == (rank == 0, rank == 0, rank == 7, rank == 7, rank)
        assert virtual == rank


GROUP_GETTERS = {  # the process groups Megatron's order tests compare, by the getter's call
    "tensor": lambda: parallel_state.get_tensor_model_parallel_group(),
    "data": lambda: parallel_state.get_data_parallel_group(False),
    "pipeline": lambda: parallel_state.get_pipeline_model_parallel_group(),
    "context": lambda: parallel_state.get_context_parallel_group(),
    "model": lambda: parallel_state.get_model_parallel_group(),
    "expert_data": lambda: parallel_state.get_expert_data_parallel_group(),
    "expert_tensor_and_model": lambda: parallel_state.get_expert_tensor_and_model_parallel_group(),
    "tensor_and_data": lambda: parallel_state.get_tensor_and_data_parallel_group(False),
    "amax": lambda: parallel_state.get_amax_reduction_group(False),
}
RANK_GETTERS = ("get_tensor_model_parallel_rank", "get_data_parallel_rank", "get_pipeline_model_parallel_rank",
                "get_expert_model_parallel_rank")


def _order_cases():
    same = [((1, 8), 1), ((2, 4), 1), ((4, 2), 1), ((8, 1), 1), ((4, 1), 2), ((1, 1), 8), ((1, 1), 2), ((2, 1), 4)]
    differs = [((1, 2), 1), ((1, 4), 1), ((2, 2), 1)]
    refused = [((1, 2), 2), ((1, 4), 2), ((2, 2), 2)]
    return [(*case, outcome) for outcome, cases in (("same", same), ("differs", differs), ("refused", refused))
            for case in cases]


@pytest.mark.parametrize("tp_pp, ep, outcome", _order_cases())
def test_adr0011_t134_pipeline_last_and_expert_before_pipeline_orders_agree_where_megatron_says(tp_pp, ep, outcome):
    """Mirrors test_different_initialize_order_consistency and test_different_initialize_order_unconsistency:
    'tp-ep-dp-pp' against 'tp-pp-ep-dp' on 8 ranks. Without pipelining (or with ep spanning the data ranks) each
    rank's ranks and groups agree; with pipelining the tensor and context groups still agree and the data,
    pipeline, amax and model groups move; with pipelining and ep 2 the dense and expert data sizes differ, which
    Megatron asserts against and kernbench refuses with Megatron's AssertionError."""

    def both_orders(torch, rank, world_size):
        seen = []
        for order in ("tp-ep-dp-pp", "tp-pp-ep-dp"):
            try:
                Utils.initialize_model_parallel(*tp_pp, expert_model_parallel_size=ep, order=order)
            except ParallelSizeError as refused:
                seen.append(refused)
                continue
            ranks = [getattr(parallel_state, getter)() for getter in RANK_GETTERS]
            groups = {kind: torch.distributed.get_process_group_ranks(get()) for kind, get in GROUP_GETTERS.items()}
            Utils.destroy_model_parallel()
            seen.append((ranks, groups))
        return seen

    for rank, (pipeline_last, expert_first) in on_every_rank(both_orders).items():
        if outcome == "refused":
            assert isinstance(expert_first, AssertionError) and "does not end in pp" in str(expert_first)
            assert str(expert_first).startswith("When not using pp-last rank ordering")  # Megatron's assertion
            continue
        if outcome == "same":
            assert pipeline_last == expert_first
        else:
            kept = {"tensor", "context"}
            moved = {"data", "pipeline", "amax", "model"}
            assert all(pipeline_last[1][kind] == expert_first[1][kind] for kind in kept)
            assert all(pipeline_last[1][kind] != expert_first[1][kind] for kind in moved)


def layout_groups(order: str, sizes: dict[str, int], varying: str) -> list[list[int]]:
    """The groups of the parallelisms in `varying`, listed as a rank layout lists them.

    A rank is the sum of its coordinates times their strides, the order's first token the fastest. Groups come
    in the order of the other coordinates and members in the order of their own, each earliest token fastest.
    """
    tokens = order.split("-")
    strides, step = {}, 1
    for token in tokens:
        strides[token], step = step, step * sizes[token]

    def offsets(names):  # each coordinate assignment of `names` (names[0] changing fastest) as its strides' sum
        return [sum(strides[name] * value for name, value in zip(reversed(names), values))
                for values in itertools.product(*(range(sizes[name]) for name in reversed(names)))]

    inner = [token for token in tokens if token in varying.split("-")]
    outer = [token for token in tokens if token not in inner]
    return [[fixed + moving for moving in offsets(inner)] for fixed in offsets(outer)]


# One small case spelled out: 8 ranks, tp 2, pp 2, dp 2.
SPELLED_OUT = {"tp": [[0, 1], [2, 3], [4, 5], [6, 7]], "dp": [[0, 2], [1, 3], [4, 6], [5, 7]],
               "pp": [[0, 4], [1, 5], [2, 6], [3, 7]], "tp-pp": [[0, 1, 4, 5], [2, 3, 6, 7]],
               "tp-dp": [[0, 1, 2, 3], [4, 5, 6, 7]]}


@pytest.mark.parametrize("nodes, gpus, tp, pp, cp, ep", [
    (1, 1, 1, 1, 1, 1), (1, 8, 8, 1, 1, 1), (1, 8, 2, 2, 1, 1), (1, 8, 2, 4, 1, 1), (3, 8, 8, 3, 1, 1),
    (4, 8, 2, 4, 1, 1), (8, 8, 8, 8, 1, 1), (8, 8, 2, 1, 1, 4), (8, 8, 2, 2, 2, 4), (8, 8, 2, 1, 4, 8),
    (8, 8, 2, 2, 2, 8), (16, 8, 4, 8, 1, 1), (16, 8, 4, 8, 1, 4), (16, 8, 4, 8, 4, 1), (16, 8, 8, 8, 1, 1),
    (32, 8, 4, 8, 1, 1), (32, 8, 8, 8, 1, 1), (32, 8, 4, 8, 1, 4), (32, 8, 8, 8, 4, 1), (64, 8, 4, 2, 8, 8),
    (64, 8, 4, 8, 1, 1), (64, 8, 8, 8, 1, 1), (96, 8, 4, 8, 1, 1), (128, 8, 4, 2, 8, 8), (128, 8, 4, 8, 1, 1),
    (256, 8, 4, 8, 1, 1), (316, 8, 4, 8, 1, 1), (384, 8, 4, 8, 1, 1), (512, 8, 4, 8, 1, 1), (768, 8, 4, 8, 1, 1),
    (1024, 8, 4, 8, 1, 1), (1280, 8, 4, 8, 1, 1), (1344, 8, 4, 8, 1, 1)])
def test_adr0011_t135_rank_generator_groups_are_the_layouts_on_clusters_up_to_1344_nodes(nodes, gpus, tp, pp, cp,
                                                                                         ep):
    """Mirrors test_rank_generator_for_tp_dp_pp (its distinct clusters): the dense generator ('tp-cp-dp-pp', ep 1)
    and the expert one ('tp-ep-dp-pp', cp 1) give, in order, the groups of the layout's definition."""
    world = nodes * gpus
    dense = {"tp": tp, "cp": cp, "dp": world // (tp * pp * cp), "pp": pp}
    expert = {"tp": tp, "ep": ep, "dp": world // (tp * ep * pp), "pp": pp}
    dense_generator = RankGenerator(tp=tp, ep=1, dp=dense["dp"], pp=pp, cp=cp, order="tp-cp-dp-pp")
    expert_generator = RankGenerator(tp=tp, ep=ep, dp=expert["dp"], pp=pp, cp=1, order="tp-ep-dp-pp")
    for token in ("dp", "dp-cp", "cp", "tp-pp", "tp", "pp", "tp-dp", "tp-dp-cp"):
        assert dense_generator.get_ranks(token) == layout_groups("tp-cp-dp-pp", dense, token), token
    for token in ("tp-ep", "dp"):
        assert expert_generator.get_ranks(token) == layout_groups("tp-ep-dp-pp", expert, token), f"expert {token}"
    if (world, tp, pp, cp) == (8, 2, 2, 1):
        assert {token: dense_generator.get_ranks(token) for token in SPELLED_OUT} == SPELLED_OUT


def test_adr0011_t139_sizes_are_checked_before_a_second_initialization_and_megatrons_globals_are_the_ranks_groups():
    """On an initialized rank, sizes the world cannot hold are still Megatron's RuntimeError (it checks the world
    before its groups); the same sizes again are the one line saying the rank is initialized. Megatron's module
    globals (`_MODEL_PARALLEL_GROUP`, ...) are the rank's groups, and None once destroyed."""

    def groups(torch, rank, world_size):
        Utils.initialize_model_parallel(2, 4)
        with pytest.raises(RuntimeError, match="tensor_model_parallel_size"):
            parallel_state.initialize_model_parallel(tensor_model_parallel_size=16)
        with pytest.raises(ModelParallelError, match="already initialized on this rank"):
            parallel_state.initialize_model_parallel(2, 4)
        held = {name: torch.distributed.get_process_group_ranks(getattr(parallel_state, name))
                for name in ("_MODEL_PARALLEL_GROUP", "_TENSOR_MODEL_PARALLEL_GROUP", "_PIPELINE_MODEL_PARALLEL_GROUP",
                             "_DATA_PARALLEL_GROUP")}
        Utils.destroy_model_parallel()
        with pytest.raises(AttributeError, match="_NO_SUCH_GROUP"):
            parallel_state._NO_SUCH_GROUP
        return held, parallel_state._MODEL_PARALLEL_GROUP, parallel_state._TENSOR_MODEL_PARALLEL_GROUP

    for rank, (held, model_after, tensor_after) in on_every_rank(groups).items():
        tensor = [rank // 2 * 2, rank // 2 * 2 + 1]
        pipeline = [rank % 2 + 2 * stage for stage in range(4)]
        assert held == {"_MODEL_PARALLEL_GROUP": list(range(8)), "_TENSOR_MODEL_PARALLEL_GROUP": tensor,
                        "_PIPELINE_MODEL_PARALLEL_GROUP": pipeline, "_DATA_PARALLEL_GROUP": [rank]}
        assert model_after is None and tensor_after is None


def test_adr0011_t140_all_gather_groups_are_new_communicators_of_the_data_ranks_and_a_collection_holds_groups():
    """Mirrors test_separate_all_gather_group, test_expert_all_gather_group and
    test_process_group_collection_defaults: at cp 4 × ep 2 the all-gather groups have the ranks of the data x
    context and expert data groups, are other communicators and reduce over those ranks; a ProcessGroupCollection
    holds the rank's groups by Megatron's names, the all-gather ones None until set; bad names are Megatron's
    ValueErrors, and the groups before initialization Megatron's RuntimeError."""

    def groups(torch, rank, world_size):
        dist = torch.distributed
        Utils.initialize_distributed()
        with pytest.raises(RuntimeError, match=r"requires parallel state to be initialized"):
            parallel_state.create_all_gather_groups()
        Utils.initialize_model_parallel(context_parallel_size=4, expert_model_parallel_size=2)
        dp_cp, expert_dp = parallel_state.get_data_parallel_group(True), parallel_state.get_expert_data_parallel_group()
        ag, expert_ag = parallel_state.create_all_gather_groups(for_expert_parallelism=True)
        collection = ProcessGroupCollection.use_mpu_process_groups()
        defaults = (collection.dp_cp_ag, collection.expt_dp_ag, collection.gtp_remat)
        collection.dp_cp_ag, collection.expt_dp_ag = ag, expert_ag
        total = torch.full((4,), float(rank))
        dist.all_reduce(total, group=ag)
        with pytest.raises(ValueError, match="Unknown attribute: nope"):
            ProcessGroupCollection(nope=ag)
        with pytest.raises(ValueError, match=r"Invalid process groups requested: \['nope'\]"):
            ProcessGroupCollection.use_mpu_process_groups(["nope", "tp"])
        only = ProcessGroupCollection.use_mpu_process_groups(["tp"])
        seen = {"ag": (dist.get_process_group_ranks(ag), ag is not dp_cp, dist.get_process_group_ranks(dp_cp)),
                "expert": (dist.get_process_group_ranks(expert_ag), expert_ag is not expert_dp,
                           dist.get_process_group_ranks(expert_dp)),
                "collection": (collection.tp is parallel_state.get_tensor_model_parallel_group(),
                               collection.dp_cp is dp_cp, collection.expt_dp is expert_dp, collection.dp_cp_ag is ag,
                               defaults, only.tp is collection.tp, only.dp),
                "sum": total.cpu().numpy().tolist()}
        Utils.destroy_model_parallel()
        return seen

    for rank, seen in on_every_rank(groups).items():
        ranks, distinct, dp_cp = seen["ag"]
        assert ranks == dp_cp and rank in ranks and len(ranks) == 8 and distinct
        expert_ranks, distinct, expert_dp = seen["expert"]
        assert expert_ranks == expert_dp and rank in expert_ranks and len(expert_ranks) == 4 and distinct
        assert seen["collection"] == (True, True, True, True, (None, None, None), True, None)
        assert seen["sum"] == [float(sum(ranks))] * 4


@pytest.mark.parametrize("cp", [1, 2])
def test_adr0011_t142_hybrid_data_context_groups_cut_each_data_context_group_by_powers_of_two(cp):
    """Mirrors test_hybrid_dp_cp_groups on Megatron's node of 8 GPUs (`torch.cuda.device_count()` is 8): with
    `hybrid_context_parallel` the 8 data x context ranks are cut into consecutive groups of 2 and of 4, each rank
    in one of each, which reduce among their members; the whole size is the data x context group; a size with no
    group is Megatron's assertion."""

    def hybrid(torch, rank, world_size):
        dist = torch.distributed
        Utils.initialize_model_parallel(context_parallel_size=cp, hybrid_context_parallel=True)
        seen = {"devices": torch.cuda.device_count()}
        for size in (2, 4):
            group = parallel_state.get_hybrid_data_context_parallel_groups(group_size=size)
            total = torch.full((2,), float(rank))
            dist.all_reduce(total, group=group)
            seen[size] = (dist.get_process_group_ranks(group), total.cpu().numpy().tolist())
        seen[8] = parallel_state.get_hybrid_data_context_parallel_groups(group_size=8) is \
            parallel_state.get_data_parallel_group(with_context_parallel=True)
        with pytest.raises(AssertionError, match="sizes \\[2, 4\\]"):
            parallel_state.get_hybrid_data_context_parallel_groups(group_size=16)
        Utils.destroy_model_parallel()
        return seen

    for rank, seen in on_every_rank(hybrid).items():
        assert seen["devices"] == 8 and seen[8]
        for size in (2, 4):
            start = rank // size * size
            ranks, total = seen[size]
            assert ranks == list(range(start, start + size)) and total == [float(sum(ranks))] * 2

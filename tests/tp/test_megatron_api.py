"""ADR 0011: Megatron's names and signatures — parallel_state's layout and lookups, the configs, the RNG tracker,
VocabParallelEmbedding, and `tensor_parallel` as one import."""

from __future__ import annotations

import itertools
import operator

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.tp import (ModelParallelConfig, ModelParallelError, ParallelSizeError, RowParallelLinear,
                          TransformerConfig, VocabParallelEmbedding, parallel_state, tensor_parallel)
from kernbench.tp.config import config_value
from kernbench.tp.megatron_fields import MODEL_PARALLEL_CONFIG, TRANSFORMER_CONFIG
from kernbench.tp.parallel_state import RankGenerator, rank_groups
from kernbench.tp.random import get_cuda_rng_tracker, model_parallel_cuda_manual_seed
from tests.tp.harness import TP_SIZES, run_tensor_parallel
from tests.tp.megatron_utils import Utils, on_every_rank

SEED = 1234
VOCAB, HIDDEN = 32, 8


def groups_by_definition(order: str, sizes: dict[str, int], varying: set[str]) -> set[tuple[int, ...]]:
    """Every set of ranks whose coordinates differ only in `varying`, the grid laid out along `order`.

    The definition the layout follows: rank = sum of coordinate x stride over the order's tokens, the first
    token varying fastest (a token the order leaves out has size 1).
    """
    tokens = order.split("-")
    strides = dict(zip(tokens, itertools.accumulate([1] + [sizes.get(t, 1) for t in tokens], operator.mul)))
    tokens = sorted(sizes)
    found = set()
    for outer in itertools.product(*(range(sizes[t]) if t not in varying else [0] for t in tokens)):
        members = []
        for inner in itertools.product(*(range(sizes[t]) if t in varying else [0] for t in tokens)):
            members.append(sum((o + i) * strides.get(t, 0) for t, o, i in zip(tokens, outer, inner)))
        found.add(tuple(sorted(members)))
    return found


# Orders Megatron accepts with these sizes: pipelines differ between dense and expert grids unless pp is last or
# the sizes before it agree (T31 has the refused ones).
@pytest.mark.parametrize("order, cp, ep", [("tp-cp-ep-dp-pp", 2, 2), ("cp-dp-ep-tp-pp", 2, 2), ("tp-pp-dp", 1, 1),
                                           ("tp-cp-pp-ep-dp", 1, 1), ("pp-dp-tp", 1, 1)])
def test_adr0011_t30_groups_follow_megatrons_order_layout(order, cp, ep):
    world, tp, pp = 16, 2, 2
    dense = {"tp": tp, "cp": cp, "dp": world // (tp * pp * cp), "pp": pp}
    groups = rank_groups(world, tp, pp, context_parallel_size=cp, expert_model_parallel_size=ep, order=order)
    for kind, varying in (("tensor", {"tp"}), ("data", {"dp"}), ("pipeline", {"pp"}), ("context", {"cp"}),
                          ("data_with_context", {"dp", "cp"}), ("model", {"tp", "pp"}),
                          ("tensor_and_data", {"tp", "dp"}), ("tensor_and_context", {"tp", "cp"})):
        assert set(getattr(groups, kind)) == groups_by_definition(order, dense, varying), kind
    # Expert layers: a grid of their own (expert tp = tp, cp 1), over the same pipeline groups.
    expert = {"tp": tp, "ep": ep, "dp": world // (tp * ep * pp), "pp": pp}
    for kind, varying in (("expert_model", {"ep"}), ("expert_tensor", {"tp"}), ("expert_data", {"dp"}),
                          ("expert_tensor_and_model", {"tp", "ep"}),
                          ("expert_tensor_model_pipeline", {"tp", "ep", "pp"})):
        assert set(getattr(groups, kind)) == groups_by_definition(order, expert, varying), kind
    assert set(groups.pipeline) == groups_by_definition(order, expert, {"pp"})
    # Word embeddings on each pipeline's first and last stage, position embeddings on its first.
    assert groups.embedding == tuple((ranks[0], ranks[-1]) for ranks in groups.pipeline)
    assert groups.position_embedding == tuple((ranks[0],) for ranks in groups.pipeline)


def test_adr0011_t31_orders_sizes_and_arguments_kernbench_refuses_are_one_line():
    layouts = [
        (lambda: rank_groups(8, 2, order="tp-xp-dp-pp"), r"order='tp-xp-dp-pp': an order is tp, cp, ep, dp and pp"),
        (lambda: rank_groups(8, 2, order="tp-dp-tp"), r"order='tp-dp-tp': .*each at most once"),
        (lambda: rank_groups(8, 2, context_parallel_size=2, order="tp-dp-pp"),
         r"order='tp-dp-pp' does not name cp, whose size is 2"),
        (lambda: rank_groups(8, 2, context_parallel_size=3),
         r"context_parallel_size \(3\) = 6 does not divide the world size \(8\)"),
        (lambda: rank_groups(8, expert_model_parallel_size=3), r"expert_model_parallel_size \(3\) .* = 3 does not"),
        (lambda: rank_groups(8, 1, 2, expert_model_parallel_size=2, order="tp-pp-ep-dp"),
         r"data parallel size of the attention and moe layers must be the same .*does not end in pp.* 4 and 2"),
        (lambda: rank_groups(16, 2, 2, context_parallel_size=2, expert_model_parallel_size=2,
                             order="tp-cp-pp-ep-dp"),
         r"Pipeline parallel groups are expected to be the same for Non-Expert and Expert"),
        (lambda: RankGenerator(tp=1, ep=2, dp=1, pp=1, cp=2, order="tp-cp-ep-dp-pp"), r"not both"),
    ]
    for call, message in layouts:
        with pytest.raises(ParallelSizeError, match=message) as raised:
            call()
        assert isinstance(raised.value, RuntimeError) and "\n" not in str(raised.value)  # Megatron's type too

    def refused(torch, rank, world_size):
        torch.distributed.init_process_group(backend="ahbm")
        messages = []
        for keyword, value in (("hierarchical_context_parallel_sizes", [2, 2]),
                               ("gtp_remat_size", 2), ("expert_gtp_remat_size", 2),
                               ("num_distributed_optimizer_instances", 2), ("rank_offset", 4),
                               ("local_world_size", 4), ("pipeline_model_parallel_comm_backend", "gloo")):
            with pytest.raises(ModelParallelError, match=rf"^initialize_model_parallel\({keyword}=") as raised:
                parallel_state.initialize_model_parallel(**{keyword: value})
            messages.append(str(raised.value))
        assert not parallel_state.model_parallel_is_initialized()
        return messages

    for messages in on_every_rank(refused, world_size=4).values():
        assert all("\n" not in message for message in messages)


def test_adr0011_t32_each_rank_sees_its_own_context_and_expert_groups():
    sizes = dict(tensor_model_parallel_size=2, context_parallel_size=2, expert_model_parallel_size=2)
    layout = rank_groups(8, **sizes)
    lookups = {  # getter of the process group -> the kind of group it must be
        "context": lambda: parallel_state.get_context_parallel_group(),
        "data_with_context": lambda: parallel_state.get_data_parallel_group(with_context_parallel=True),
        "tensor_and_context": parallel_state.get_tensor_and_context_parallel_group,
        "expert_model": parallel_state.get_expert_model_parallel_group,
        "expert_tensor": parallel_state.get_expert_tensor_parallel_group,
        "expert_data": parallel_state.get_expert_data_parallel_group,
        "expert_tensor_and_model": parallel_state.get_expert_tensor_and_model_parallel_group,
        "tensor_and_data_with_context": lambda: parallel_state.get_tensor_and_data_parallel_group(
            with_context_parallel=True),
    }

    def seen(torch, rank, world_size):
        torch.distributed.init_process_group(backend="ahbm")
        parallel_state.initialize_model_parallel(**sizes)
        groups = {kind: tuple(torch.distributed.get_process_group_ranks(lookup())) for kind, lookup in lookups.items()}
        return (groups, parallel_state.get_context_parallel_rank(), parallel_state.get_context_parallel_world_size(),
                parallel_state.get_expert_model_parallel_rank(), parallel_state.get_expert_data_parallel_rank(),
                parallel_state.get_data_parallel_src_rank(with_context_parallel=True),
                parallel_state.get_expert_model_parallel_src_rank(), parallel_state.get_all_ranks())

    for rank, (groups, cp_rank, cp_size, ep_rank, edp_rank, dp_cp_src, ep_src, all_ranks) in \
            on_every_rank(seen).items():
        own = {kind: next(g for g in getattr(layout, kind) if rank in g) for kind in lookups}
        assert groups == own
        assert (cp_rank, cp_size) == (own["context"].index(rank), 2)
        assert (ep_rank, edp_rank) == (own["expert_model"].index(rank), own["expert_data"].index(rank))
        assert (dp_cp_src, ep_src) == (own["data_with_context"][0], own["expert_model"][0])
        tensor = next(g for g in layout.tensor if rank in g)
        data = next(g for g in layout.data if rank in g)
        assert all_ranks == f"{tensor.index(rank)}_0_{data.index(rank)}_{cp_rank}_0_{ep_rank}"


def test_adr0011_t33_setters_override_this_ranks_getters_until_destroyed():
    def overridden(torch, rank, world_size):
        before = parallel_state.get_tensor_model_parallel_world_size() if rank == 0 else None
        if rank == 0:
            parallel_state.set_tensor_model_parallel_world_size(7)
            parallel_state.set_pipeline_model_parallel_rank(3)
            parallel_state.set_data_parallel_rank(5)
        torch.distributed.barrier()  # rank 1 looks after rank 0 has set: the values are rank 0's alone
        seen = (parallel_state.get_tensor_model_parallel_world_size(),
                parallel_state.get_pipeline_model_parallel_rank(), parallel_state.get_data_parallel_rank())
        parallel_state.destroy_model_parallel()
        with pytest.raises(ModelParallelError, match="not initialized on this rank"):
            parallel_state.get_tensor_model_parallel_world_size()
        return before, seen

    def harness_initialized(torch, rank, world_size):
        torch.distributed.init_process_group(backend="ahbm")
        parallel_state.initialize_model_parallel(2)
        return overridden(torch, rank, world_size)

    seen = on_every_rank(harness_initialized, world_size=2)
    assert seen == {0: (2, (7, 3, 5)), 1: (None, (2, 0, 0))}

    def fake(torch, rank, world_size):  # Megatron's fake_initialize_model_parallel: sizes without groups
        Utils.fake_initialize_model_parallel(tensor_model_parallel_size=4, pipeline_model_parallel_size=2,
                                             virtual_pipeline_model_parallel_size=3)
        return (parallel_state.get_tensor_model_parallel_world_size(), parallel_state.get_tensor_model_parallel_rank(),
                parallel_state.get_pipeline_model_parallel_world_size(),
                parallel_state.get_virtual_pipeline_model_parallel_world_size(),
                parallel_state.get_expert_tensor_parallel_world_size(), parallel_state.model_parallel_is_initialized())

    assert on_every_rank(fake, world_size=1) == {0: (4, 0, 2, 3, 4, False)}


def test_adr0011_t34_pipeline_stages_and_embedding_groups():
    def stages(torch, rank, world_size):
        torch.distributed.init_process_group(backend="ahbm")
        # Megatron's positional order: tensor, pipeline, virtual pipeline.
        parallel_state.initialize_model_parallel(2, 4, 2, get_embedding_ranks=lambda ranks: [ranks[-1]])
        return (parallel_state.get_pipeline_model_parallel_rank(),
                [parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=s) for s in (0, 1)],
                [parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=s) for s in (0, 1)],
                parallel_state.is_pipeline_first_stage(), parallel_state.is_pipeline_last_stage(),
                parallel_state.get_pipeline_model_parallel_first_rank(),
                parallel_state.get_pipeline_model_parallel_last_rank(),
                parallel_state.get_pipeline_model_parallel_next_rank(),
                parallel_state.get_pipeline_model_parallel_prev_rank(),
                parallel_state.is_rank_in_embedding_group(), parallel_state.is_rank_in_position_embedding_group(),
                parallel_state.get_virtual_pipeline_model_parallel_rank())

    pipelines = rank_groups(8, 2, 4).pipeline
    for rank, seen in on_every_rank(stages).items():
        pipe = next(g for g in pipelines if rank in g)
        stage = pipe.index(rank)
        first, last = stage == 0, stage == len(pipe) - 1
        assert seen == (stage, [first, False], [False, last], first, last, pipe[0], pipe[-1],
                        pipe[(stage + 1) % 4], pipe[(stage - 1) % 4], last, first, 0)


def test_adr0011_t35_configs_have_megatrons_fields_and_defaults():
    config = ModelParallelConfig()
    transformer = TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=8, tensor_model_parallel_size=2)
    for name, default in MODEL_PARALLEL_CONFIG.items():
        assert getattr(config, name) == default, name
    for name, default in {**MODEL_PARALLEL_CONFIG, **TRANSFORMER_CONFIG}.items():
        assert getattr(transformer, name) == default, name
    assert (config.params_dtype.name, config.perform_initialization, config.use_cpu_initialization,
            config.sequence_parallel) == ("f32", True, False, False)
    # Megatron's derived defaults.
    assert (transformer.ffn_hidden_size, transformer.kv_channels, transformer.num_query_groups,
            transformer.expert_tensor_parallel_size, transformer.autocast_dtype) == (256, 8, 8, 2, config.params_dtype)
    drawn = {}
    for method in ("init_method", "output_layer_init_method", "embedding_init_method"):
        weight = np.empty((400, 400), dtype=np.float32)
        getattr(transformer, method)(weight, np.random.default_rng(0))
        drawn[method] = weight.std()
    assert drawn["init_method"] == pytest.approx(0.02, rel=0.02)
    assert drawn["embedding_init_method"] == pytest.approx(0.02, rel=0.02)
    assert drawn["output_layer_init_method"] == pytest.approx(0.02 / np.sqrt(2 * 4), rel=0.02)
    assert config_value(transformer, "sequence_parallel") is False and config_value(None, "params_dtype").name == "f32"
    # Megatron's configs are built by keyword: a name Megatron does not have is one line naming the close ones.
    with pytest.raises(ModelParallelError, match=r"^TransformerConfig: 'hiden_size' is not a field of Megatron's "
                                                 r"TransformerConfig \(close: .*hidden_size"):
        TransformerConfig(num_layers=1, hiden_size=8, num_attention_heads=1)
    for refused, message in ((dict(num_attention_heads=3, tensor_model_parallel_size=2), "must be a multiple"),
                             (dict(num_attention_heads=0), "num_attention_heads must be positive"),
                             (dict(fp16=True, bf16=True), "only one of fp16 and bf16"),
                             (dict(use_mup=True), "not implemented")):
        with pytest.raises(ModelParallelError, match=message):
            TransformerConfig(**{"num_layers": 1, "hidden_size": 12, "num_attention_heads": 4, **refused})

    def layer(torch, rank):  # a TransformerConfig is a layer's config=, as in Megatron
        row = RowParallelLinear(16, 12, config=transformer, init_method=transformer.output_layer_init_method)
        return row.weight.dtype.name

    assert run_tensor_parallel(1, layer) == {0: "f32"}


def rng_state_of_seed(torch, seed: int):
    """The state a default generator has right after `manual_seed(seed)`, from a fresh torch.Generator."""
    return torch.Generator().manual_seed(seed).get_state()


def test_adr0011_t36_model_parallel_seed_offsets_differ_across_tp_and_repeat_across_dp():
    def seeded(torch, rank):
        model_parallel_cuda_manual_seed(SEED)
        states = get_cuda_rng_tracker().get_states()
        tp_rank = parallel_state.get_tensor_model_parallel_rank()
        expected = {"data-parallel-rng": SEED, "model-parallel-rng": SEED + 2718 + tp_rank,
                    "expert-parallel-rng": SEED + 1024 + 100 * 0 + tp_rank}  # ep 1; expert tp = tp
        matches = {name: torch.equal(states[name], rng_state_of_seed(torch, seed)) for name, seed in expected.items()}
        with get_cuda_rng_tracker().fork():
            dropout = torch.rand(64, device="ahbm").numpy()
        outside = torch.rand(64, device="ahbm").numpy()
        return matches, torch.ahbm.initial_seed(), dropout, outside  # the device's: Megatron seeds CUDA

    seen = run_tensor_parallel(2, seeded)  # 4 SIPs: tensor groups (0, 1), (2, 3)
    for rank, (matches, initial_seed, _, _) in seen.items():
        assert all(matches.values()) and initial_seed == SEED, rank
    dropout = {rank: values[2] for rank, values in seen.items()}
    assert np.array_equal(dropout[0], dropout[2]) and np.array_equal(dropout[1], dropout[3])  # dp replicas
    assert not np.array_equal(dropout[0], dropout[1])  # tensor-parallel ranks
    assert all(np.array_equal(values[3], seen[0][3]) for values in seen.values())  # outside the fork: one stream


def test_adr0011_t37_forks_swap_the_default_stream_and_restore_it():
    def forked(torch, rank):
        tracker = get_cuda_rng_tracker()
        tracker.add("dropout", 7)
        torch.ahbm.manual_seed(3)
        with tracker.fork("dropout"):
            inside = torch.randn(16, device="ahbm").numpy()
        after = torch.randn(16, device="ahbm").numpy()
        torch.ahbm.manual_seed(3)
        uninterrupted = torch.randn(16, device="ahbm").numpy()
        reference = torch.randn(16, generator=torch.Generator().manual_seed(7)).numpy()
        with pytest.raises(ModelParallelError, match="^cuda rng state model-parallel-rng is not added$"):
            with tracker.fork():
                pass
        with pytest.raises(ModelParallelError, match="seed 7 already exists"):
            tracker.add("other", 7)
        return np.array_equal(inside, reference), np.array_equal(after, uninterrupted)

    assert run_tensor_parallel(1, forked) == {0: (True, True)}


def full_table(torch, config) -> np.ndarray:
    """The (VOCAB, HIDDEN) master table host initialization draws after `torch.manual_seed(SEED)`."""
    table = np.empty((VOCAB, HIDDEN), dtype=np.float32)
    config.embedding_init_method(table, torch.Generator().manual_seed(SEED).numpy_rng)
    return table


TOKEN_IDS = np.array([[0, 31, 8, 8, 17], [3, 24, 16, 15, 0], [9, 9, 30, 1, 23]])  # every partition, repeats


@pytest.mark.parametrize("tp", TP_SIZES)
def test_adr0011_t38_vocab_parallel_embedding_is_the_tables_rows_at_every_tp(tp):
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=2, use_cpu_initialization=True)

    def looked_up(torch, rank):
        torch.manual_seed(SEED)
        embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=config.embedding_init_method, config=config)
        output = embedding(torch.tensor(TOKEN_IDS, device="ahbm"))
        return (full_table(torch, config), embedding.weight.numpy(), output.numpy(),
                (embedding.vocab_start_index, embedding.vocab_end_index))

    for rank, (table, weight, output, rows) in run_tensor_parallel(tp, looked_up).items():
        part = VOCAB // tp
        assert rows == ((rank % tp) * part, (rank % tp + 1) * part)
        np.testing.assert_array_equal(weight, table[rows[0]:rows[1]])
        np.testing.assert_array_equal(output, table[TOKEN_IDS])  # masked rows are zeros, so the sum is exact


@pytest.mark.parametrize("tp", TP_SIZES)
def test_adr0011_t49_the_embedding_gradient_sums_the_rows_of_repeated_ids(tp):
    # TOKEN_IDS repeats 8, 9 and 0, and at tp > 1 every id outside a rank's rows reads (and is masked from)
    # row 0: the table's gradient is numpy's np.add.at of the output gradient, partitioned by rows.
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=2, use_cpu_initialization=True)
    upstream = np.random.default_rng(5).standard_normal((*TOKEN_IDS.shape, HIDDEN)).astype(np.float32)

    def trained(torch, rank):
        torch.manual_seed(SEED)
        embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=config.embedding_init_method, config=config)
        output = embedding(torch.tensor(TOKEN_IDS, device="ahbm"))
        (output.float() * torch.tensor(upstream)).sum().backward()
        return embedding.weight.grad.numpy(), (embedding.vocab_start_index, embedding.vocab_end_index)

    expected = np.zeros((VOCAB, HIDDEN), dtype=np.float32)
    np.add.at(expected, TOKEN_IDS, upstream)
    for grad, (first, last) in run_tensor_parallel(tp, trained).values():
        assert_close(grad, expected[first:last], "f32")


@pytest.mark.parametrize("tp", [2, 4])
def test_adr0011_t39_reduce_scatter_embeddings_give_this_ranks_sequence_rows(tp):
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=4, use_cpu_initialization=True,
                               sequence_parallel=True, tensor_model_parallel_size=tp)
    ids = np.arange(24).reshape(3, 8) * 5 % VOCAB  # [batch 3, sequence 8]

    def scattered(torch, rank):
        torch.manual_seed(SEED)
        embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=config.embedding_init_method, config=config,
                                           reduce_scatter_embeddings=True)
        return full_table(torch, config), embedding(torch.tensor(ids, device="ahbm")).numpy()

    for rank, (table, output) in run_tensor_parallel(tp, scattered).items():
        sequence_first = table[ids].transpose(1, 0, 2)  # [s, b, h]
        np.testing.assert_array_equal(output, np.split(sequence_first, tp)[rank % tp])


def test_adr0011_t40_device_initialization_draws_each_ranks_rows_in_the_model_parallel_fork():
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=2)  # use_cpu_initialization=False

    def initialized(torch, rank):
        with pytest.raises(ModelParallelError, match="call model_parallel_cuda_manual_seed"):
            VocabParallelEmbedding(VOCAB, HIDDEN, init_method=config.init_method, config=config)
        model_parallel_cuda_manual_seed(SEED)
        before = torch.get_rng_state()
        embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=config.init_method, config=config)
        rows = np.empty((VOCAB // 2, HIDDEN), dtype=np.float32)
        seed = SEED + 2718 + parallel_state.get_tensor_model_parallel_rank()
        config.init_method(rows, torch.Generator().manual_seed(seed).numpy_rng)
        return embedding.weight.numpy(), rows, torch.equal(before, torch.get_rng_state())

    seen = run_tensor_parallel(2, initialized)
    for rank, (weight, rows, stream_untouched) in seen.items():
        np.testing.assert_array_equal(weight, rows)
        assert stream_untouched, rank
    assert np.array_equal(seen[0][0], seen[2][0]) and not np.array_equal(seen[0][0], seen[1][0])


MEGATRON_PARALLEL_STATE = """initialize_model_parallel model_parallel_is_initialized is_initialized
destroy_model_parallel RankGenerator get_model_parallel_group get_tensor_model_parallel_group
get_pipeline_model_parallel_group
get_data_parallel_group get_data_parallel_group_gloo get_context_parallel_group get_context_parallel_global_ranks
get_embedding_group get_position_embedding_group get_amax_reduction_group get_tensor_and_data_parallel_group
get_tensor_and_context_parallel_group set_tensor_model_parallel_world_size set_pipeline_model_parallel_world_size
set_virtual_pipeline_model_parallel_world_size get_tensor_model_parallel_world_size
get_pipeline_model_parallel_world_size set_tensor_model_parallel_rank set_pipeline_model_parallel_rank
get_tensor_model_parallel_rank get_pipeline_model_parallel_rank is_pipeline_first_stage is_pipeline_last_stage
is_rank_in_embedding_group is_rank_in_position_embedding_group get_virtual_pipeline_model_parallel_rank
set_virtual_pipeline_model_parallel_rank get_virtual_pipeline_model_parallel_world_size
get_tensor_model_parallel_src_rank get_model_parallel_src_rank get_data_parallel_src_rank
get_pipeline_model_parallel_first_rank get_pipeline_model_parallel_last_rank get_pipeline_model_parallel_next_rank
get_pipeline_model_parallel_prev_rank get_data_parallel_world_size set_data_parallel_rank get_data_parallel_rank
get_context_parallel_world_size get_context_parallel_rank get_tensor_and_context_parallel_world_size
get_tensor_and_context_parallel_rank get_expert_model_parallel_group get_expert_model_parallel_src_rank
get_expert_model_parallel_world_size set_expert_model_parallel_world_size get_expert_model_parallel_rank
set_expert_model_parallel_rank get_expert_tensor_parallel_group get_expert_tensor_parallel_world_size
set_expert_tensor_parallel_world_size get_expert_tensor_parallel_rank set_expert_tensor_parallel_rank
get_expert_tensor_and_model_parallel_group get_expert_tensor_and_model_parallel_world_size
get_expert_tensor_and_model_parallel_rank get_expert_tensor_model_pipeline_parallel_group
get_expert_data_parallel_group get_expert_data_parallel_rank get_expert_data_parallel_world_size
get_all_ranks""".split()
MEGATRON_TENSOR_PARALLEL = """ColumnParallelLinear RowParallelLinear VocabParallelEmbedding
copy_to_tensor_model_parallel_region gather_from_tensor_model_parallel_region gather_from_sequence_parallel_region
reduce_from_tensor_model_parallel_region reduce_scatter_to_sequence_parallel_region
scatter_to_tensor_model_parallel_region scatter_to_sequence_parallel_region get_cuda_rng_tracker
model_parallel_cuda_manual_seed get_expert_parallel_rng_tracker_name get_data_parallel_rng_tracker_name""".split()


def test_adr0011_t41_one_import_gives_megatrons_parallel_state_and_tensor_parallel_names():
    missing = [name for name in MEGATRON_PARALLEL_STATE if not callable(getattr(parallel_state, name, None))]
    missing += [name for name in MEGATRON_TENSOR_PARALLEL if not callable(getattr(tensor_parallel, name, None))]
    assert not missing
    assert tensor_parallel.VocabParallelEmbedding is VocabParallelEmbedding
    assert tensor_parallel.model_parallel_cuda_manual_seed is model_parallel_cuda_manual_seed

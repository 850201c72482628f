"""ADR 0011: the parallel layers as Megatron's code uses them — modules with marked shards, Megatron's linear
function, detached parameters written in place — and Megatron's errors in one line from `kernbench run`.

Written here (not copied). The linear-function test mirrors Megatron-LM's
`test_layers.py::test_linear_default_output_dtype_preserves_input_dtype`
(tp 1, (4, 3, 16) input, (32, 16) weight, each float dtype); the attribute
checks mirror what `test_tp_attrs_without_init.py` reads off the layers.
"""

from __future__ import annotations

import functools
import re
import textwrap

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.tp.errors import NotDivisibleError, NotInitializedError
from kernbench.tp import (ColumnParallelLinear, ModelParallelConfig, RowParallelLinear, TransformerConfig,
                          VocabParallelEmbedding, parallel_state)
from kernbench.tp.layers import (linear_with_grad_accumulation_and_async_allreduce,
                                 param_is_not_tensor_parallel_duplicate,
                                 set_defaults_if_not_set_tensor_model_parallel_attributes,
                                 set_tensor_model_parallel_attributes)
from kernbench.tp.random import model_parallel_cuda_manual_seed
from tests.tp.megatron_utils import Utils, on_every_rank


def test_adr0011_t122_layers_are_modules_whose_shards_carry_megatrons_attributes():
    def described(torch, rank, world_size):
        Utils.initialize_model_parallel(4, 2)
        config = ModelParallelConfig(tensor_model_parallel_size=4, params_dtype=torch.float32,
                                     use_cpu_initialization=True)
        model = torch.nn.ModuleDict({
            "fc1": ColumnParallelLinear(16, 32, config=config), "fc2": RowParallelLinear(32, 16, config=config),
            "embedding": VocabParallelEmbedding(64, 16, init_method=lambda a, r: a.fill(0.5), config=config)})
        names = [name for name, _ in model.named_parameters()]
        keys = sorted(model.state_dict())
        marks = {name: (getattr(p, "tensor_model_parallel", None), getattr(p, "partition_dim", None),
                        getattr(p, "partition_stride", None), param_is_not_tensor_parallel_duplicate(p))
                 for name, p in model.named_parameters()}
        plain = torch.zeros(3)
        set_defaults_if_not_set_tensor_model_parallel_attributes(plain)
        defaults = (plain.tensor_model_parallel, plain.partition_dim, plain.partition_stride)
        with pytest.raises(Exception, match="already has 'tensor_model_parallel'"):
            set_tensor_model_parallel_attributes(model["fc1"].weight, True, 0, 1)
        Utils.destroy_model_parallel()
        return names, keys, marks, defaults, isinstance(model["fc1"], torch.nn.Module)

    for rank, (names, keys, marks, defaults, is_module) in on_every_rank(described).items():
        assert is_module and defaults == (False, -1, 1)
        assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "embedding.weight"]
        assert keys == sorted(names)
        first = rank % 4 == 0
        assert marks == {"fc1.weight": (True, 0, 1, True), "fc1.bias": (True, 0, 1, True),
                         "fc2.weight": (True, 1, 1, True), "fc2.bias": (None, None, None, first),
                         "embedding.weight": (True, 0, 1, True)}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_adr0011_t123_megatrons_linear_function_keeps_the_input_dtype_and_is_torchs_linear(dtype):
    def linear(torch, rank, world_size):
        Utils.initialize_model_parallel(1, 1)
        torch.manual_seed(rank)
        x = torch.randn(4, 3, 16, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
        w = torch.randn(32, 16, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
        out = linear_with_grad_accumulation_and_async_allreduce(x, w, None, False, False, False, tp_group=None,
                                                                output_dtype=None)
        reference = torch.nn.functional.linear(x, w)
        out.sum().backward()
        Utils.destroy_model_parallel()
        return str(out.dtype), out.detach().cpu().numpy(), reference.detach().cpu().numpy(), x.grad.cpu().numpy(), \
            w.cpu().numpy()

    for rank, (seen_dtype, out, reference, grad, weight) in on_every_rank(linear).items():
        assert seen_dtype == f"torch.{dtype}"
        np.testing.assert_array_equal(out, reference)
        assert_close(grad, np.broadcast_to(weight.astype(np.float32).sum(0), (4, 3, 16)),
                     {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}[dtype])


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_adr0011_t124_a_detached_parameter_takes_writes_that_the_parameter_shows(sequence_parallel):
    """A parameter's `detach()` (and `.data`) requires no grad and may be written in place, with grad mode on,
    after a training step of a tp 4 × dp 2 MLP in float32; the parameter shows the write."""

    def written(torch, rank, world_size):
        Utils.initialize_model_parallel(4, 2)
        config = ModelParallelConfig(tensor_model_parallel_size=4, sequence_parallel=sequence_parallel,
                                     params_dtype=torch.float32)
        fc1 = ColumnParallelLinear(16, 64, config=config, gather_output=False)
        fc2 = RowParallelLinear(64, 16, config=config, input_is_parallel=True)
        x = torch.ones(8, 2, 16, requires_grad=True).cuda()
        hidden, _ = fc1(x)
        out, _ = fc2(hidden)
        out.sum().backward()
        seen = []
        for parameter in (fc1.weight, fc1.bias, fc2.bias):
            detached = parameter.detach()
            seen.append((detached.requires_grad, detached.is_leaf))
            detached.copy_(torch.full(parameter.shape, 2.0))
            parameter.data.mul_(3.0)
            detached.view(-1)[0] = 7.0
            seen.append(parameter.cpu().numpy().reshape(-1)[:2].tolist())
        Utils.destroy_model_parallel()
        return seen

    for rank, seen in on_every_rank(written).items():
        assert seen == [(False, True), [7.0, 6.0]] * 3


BAD_BENCHES = {
    "not_initialized": ("import torch\nfrom kernbench.tp import mappings\n\n"
                        "def run(torch):\n    mappings.reduce_from_tensor_model_parallel_region(torch.ones(4))\n",
                        "model parallel state is not initialized on this rank"),
    "not_divisible": ("from kernbench.tp import mappings, parallel_state\n\n"
                      "def worker(rank, torch):\n"
                      "    torch.ahbm.set_device(rank)\n"
                      "    torch.distributed.init_process_group(backend='nccl')\n"
                      "    parallel_state.initialize_model_parallel(4)\n"
                      "    mappings.scatter_to_sequence_parallel_region(torch.ones(6, 2).cuda())\n\n"
                      "def run(torch):\n    torch.multiprocessing.spawn(worker, args=(torch,), nprocs=4)\n",
                      "dim 0 of .* has size 6, not divisible by the tensor-parallel size 4"),
}


@pytest.mark.parametrize("case", sorted(BAD_BENCHES))
def test_adr0011_t125_megatrons_errors_are_one_line_and_exit_2_from_kernbench_run(case, tmp_path, capsys):
    from kernbench.cli import main

    source, said = BAD_BENCHES[case]
    path = tmp_path / f"{case}.py"
    path.write_text(textwrap.dedent(source))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernbench: error: ") and "Traceback" not in err
    assert re.search(said, err.splitlines()[-1]), err
    # Megatron asserts both, so code catching AssertionError around them catches kernbench's too.
    assert issubclass(NotInitializedError, AssertionError) and issubclass(NotDivisibleError, AssertionError)


def test_adr0011_t128_megatrons_tensor_init_methods_give_partitions_of_one_master_weight():
    """Mirrors test_initialization.py's test_col_init, test_row_init and test_embedding_init: with CPU
    initialization seeded by `torch.manual_seed(42)`, tp 1 and tp 4 hold partitions of the same master
    (16 x 16 linears, a 16 x 4 table) whatever the model-parallel seed (42 at tp 1, 41 at tp 4), for the
    TransformerConfig's own init method (hidden 12, 4 heads, 1 layer) and init methods of Megatron's kind
    (one argument, a tensor filled in place)."""

    def weights(torch, rank, world_size):
        normal = functools.partial(torch.nn.init.normal_, mean=0.0, std=0.02)
        seen = {}
        for tp, model_parallel_seed in ((1, 42), (4, 41)):
            Utils.initialize_model_parallel(tp, 1)
            config = TransformerConfig(num_layers=1, hidden_size=12, num_attention_heads=4,
                                       use_cpu_initialization=True)
            methods = {"config": (config.init_method,) * 3,
                       "tensor": (normal, torch.nn.init.xavier_normal_, normal)}
            for kind, (column_init, row_init, embedding_init) in methods.items():
                drawn = []
                for make in (lambda: ColumnParallelLinear(16, 16, init_method=column_init, bias=True, config=config,
                                                          skip_bias_add=False),
                             lambda: RowParallelLinear(16, 16, init_method=row_init, bias=True, config=config,
                                                       input_is_parallel=False, skip_bias_add=False),
                             lambda: VocabParallelEmbedding(num_embeddings=16, embedding_dim=4,
                                                            init_method=embedding_init, config=config)):
                    torch.manual_seed(42)
                    model_parallel_cuda_manual_seed(model_parallel_seed)
                    drawn.append(make().weight.detach().cpu().numpy())
                seen[tp, kind] = drawn
            Utils.destroy_model_parallel()
        return seen

    for rank, seen in on_every_rank(weights).items():
        index = rank % 4
        for kind in ("config", "tensor"):
            (column, row, embedding), (column4, row4, embedding4) = seen[1, kind], seen[4, kind]
            assert (column.shape, row.shape, embedding.shape) == ((16, 16), (16, 16), (16, 4))
            assert column.std() > 0.01 and row.std() > 0.01 and embedding.std() > 0.01  # drawn, not left empty
            np.testing.assert_array_equal(column4, column[4 * index:4 * index + 4])
            np.testing.assert_array_equal(row4, row[:, 4 * index:4 * index + 4])
            np.testing.assert_array_equal(embedding4, embedding[4 * index:4 * index + 4])


def test_adr0011_t129_collectives_write_into_parameters_as_c10d_does_list_forms_too():
    """`all_gather`, `gather` and `all_to_all` into a list of parameters (and a parameter's own collectives) with
    grad mode on: c10d writes outside autograd, so PyTorch takes them; the parameters show the values."""

    def received(torch, rank, world_size):
        Utils.initialize_model_parallel(4, 2)
        group = parallel_state.get_tensor_model_parallel_group()
        own = torch.ones(3).cuda() * rank
        gathered = [torch.nn.Parameter(torch.zeros(3).cuda()) for _ in range(4)]
        torch.distributed.all_gather(gathered, own, group=group)
        exchanged = [torch.nn.Parameter(torch.zeros(3).cuda()) for _ in range(4)]
        torch.distributed.all_to_all(exchanged, [own + 10 * k for k in range(4)], group=group)
        first = parallel_state.get_tensor_model_parallel_src_rank()
        collected = [torch.nn.Parameter(torch.zeros(3).cuda()) for _ in range(4)] if rank == first else None
        torch.distributed.gather(own, collected, dst=first, group=group)
        whole = torch.nn.Parameter(own.clone())
        torch.distributed.all_reduce(whole, group=group)
        Utils.destroy_model_parallel()
        values = lambda tensors: [t.detach().cpu().numpy()[0] for t in tensors]  # noqa: E731
        return values(gathered), values(exchanged), None if collected is None else values(collected), \
            whole.detach().cpu().numpy()[0], [t.requires_grad and t.is_leaf for t in gathered]

    for rank, (gathered, exchanged, collected, whole, leaves) in on_every_rank(received).items():
        group = [rank - rank % 4 + k for k in range(4)]
        assert gathered == group and whole == sum(group) and all(leaves)
        assert exchanged == [member + 10 * (rank % 4) for member in group]
        assert collected == (group if rank % 4 == 0 else None)


@pytest.mark.parametrize("tp, allreduce_dgrad", [(1, False), (8, False), (8, True)])
def test_adr0011_t130_a_frozen_weight_linear_gathers_to_the_whole_product_and_all_reduces_its_input_gradient(
        tp, allreduce_dgrad):
    """Mirrors test_layers.py's test_LinearWithFrozenWeight (tp 1 without, tp 8 with `allreduce_dgrad`): an 8 x 8
    identity through an all-ones weight split by output rows, gathered over the group, gives ones; the summed
    output's input gradient is 8 everywhere once all-reduced, and at tp 8 without it each rank's own part, 1."""
    from kernbench.tp.layers import linear_with_frozen_weight
    from kernbench.tp.mappings import gather_from_tensor_model_parallel_region

    def frozen(torch, rank, world_size):
        Utils.initialize_model_parallel(tp, 1)
        rows = 8 // tp
        x = torch.eye(8).cuda()
        x.requires_grad = True
        out = linear_with_frozen_weight(x, torch.ones((rows, 8)).cuda(), torch.zeros(rows).cuda(), False,
                                        allreduce_dgrad, False, None, None)
        whole = gather_from_tensor_model_parallel_region(out)
        whole.sum().backward()
        Utils.destroy_model_parallel()
        return tuple(out.shape), whole.detach().cpu().numpy(), x.grad.cpu().numpy()

    gradient = 8.0 if tp == 1 or allreduce_dgrad else 1.0
    for rank, (shape, whole, grad) in on_every_rank(frozen).items():
        assert shape == (8, 8 // tp)
        np.testing.assert_array_equal(whole, np.ones((8, 8), np.float32))
        np.testing.assert_array_equal(grad, np.full((8, 8), gradient, np.float32))


def test_adr0011_t141_expert_layers_use_the_expert_tensor_group_and_their_gradients_the_expert_data_group():
    """Mirrors test_expert_linear_parameters_use_expert_topology_metadata, and beyond it what `is_expert` does. At
    tp 2 × expert tp 1 on 8 ranks an expert layer is whole on every rank, marked `allreduce = False`, computes
    numpy's product, and `finalize_model_grads` sums its gradient over the 8 expert data ranks scaled by 1 / 4
    (the data-parallel size), as Megatron's DDP does. At expert tp 2 (explicit expert communication) the layers
    leave the communication to the dispatcher: a row-parallel output is this rank's partial sum, its bias returned,
    and a bias added inside is Megatron's assertion."""
    from kernbench.tp.errors import MegatronAssertionError
    from kernbench.tp.finalize import finalize_model_grads

    def experts(torch, rank, world_size):
        Utils.initialize_model_parallel(2, 1, expert_tensor_parallel_size=1)
        config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=4, tensor_model_parallel_size=2,
                                   expert_tensor_parallel_size=1, use_cpu_initialization=True)
        up = ColumnParallelLinear(8, 16, config=config, init_method=config.init_method, bias=True, is_expert=True)
        down = RowParallelLinear(16, 8, config=config, init_method=config.init_method, bias=True,
                                 input_is_parallel=True, is_expert=True)
        dense = ColumnParallelLinear(8, 16, config=config, init_method=config.init_method, bias=True)
        torch.manual_seed(rank)
        x = torch.randn(4, 8).cuda()
        out, _ = down(up(x)[0])
        out.sum().backward()
        before = up.weight.grad.cpu().numpy()
        finalize_model_grads([up, down])
        seen = {"shapes": (tuple(up.weight.shape), tuple(down.weight.shape), tuple(dense.weight.shape)),
                "allreduce": (up.weight.allreduce, up.bias.allreduce, down.weight.allreduce, dense.weight.allreduce),
                "values": (x.cpu().numpy(), up.weight.detach().cpu().numpy(), up.bias.detach().cpu().numpy(),
                           down.weight.detach().cpu().numpy(), down.bias.detach().cpu().numpy(), out.cpu().numpy()),
                "grads": (before, up.weight.grad.cpu().numpy())}
        Utils.destroy_model_parallel()
        Utils.initialize_model_parallel(2, 1)
        config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=4, tensor_model_parallel_size=2,
                                   use_cpu_initialization=True)
        down = RowParallelLinear(16, 8, config=config, init_method=config.init_method, bias=True,
                                 input_is_parallel=True, is_expert=True, skip_bias_add=True)
        part = torch.ones(4, 8).cuda()
        partial, bias = down(part)
        seen["explicit"] = (down.explicit_expert_comm, down.weight.allreduce, bias is down.bias,
                            partial.cpu().numpy(), down.weight.detach().cpu().numpy())
        adding = RowParallelLinear(16, 8, config=config, init_method=config.init_method, bias=True,
                                   input_is_parallel=True, is_expert=True)
        with pytest.raises(MegatronAssertionError, match="skip_bias_add=True"):
            adding(part)
        Utils.destroy_model_parallel()
        return seen

    seen = on_every_rank(experts)
    total = sum(ranks["grads"][0] for ranks in seen.values())
    for rank, ranks in seen.items():
        assert ranks["shapes"] == ((16, 8), (8, 16), (8, 8))
        assert ranks["allreduce"] == (False, False, False, True)
        x, w1, b1, w2, b2, out = ranks["values"]
        assert_close(out, (x @ w1.T + b1) @ w2.T + b2, "f32")
        np.testing.assert_allclose(ranks["grads"][1], total / 4, rtol=1e-5, atol=1e-6)
        explicit, allreduce, returned, partial, weight = ranks["explicit"]
        assert explicit and allreduce and returned
        np.testing.assert_allclose(partial, np.ones((4, 8)) @ weight.T, rtol=1e-6)  # not reduced over the group

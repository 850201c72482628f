"""ADR 0011: ColumnParallelLinear and RowParallelLinear partition Megatron's way."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.tp import (ColumnParallelLinear, ModelParallelConfig, ModelParallelError, RowParallelLinear,
                          bias_gelu_impl, init_method_normal)
from kernbench.tp import kernels
from kernbench.tp.fusions import elementwise_block_of
from kernbench.tp.layers import linear_kernel, triton_linear
from tests.tp.harness import TP_SIZES, gelu_tanh, mlp_reference, random_f16, run_tensor_parallel

TOKENS, IN, OUT = 40, 96, 384  # no size equals another, so a transposed or wrong partition cannot pass


def weights(seed: int, out_features: int, in_features: int):
    """Random, non-symmetric full weights and bias scaled to keep fp16 activations near 1."""
    rng = np.random.default_rng(seed)
    return random_f16(rng, out_features, in_features, scale=in_features ** -0.5), random_f16(rng, out_features)


@pytest.mark.parametrize("tp", TP_SIZES)
def test_adr0011_t13_layer_shapes_follow_the_partitioning(tp):
    def shapes(torch, rank):
        x = torch.zeros(TOKENS, IN, dtype="f16")
        column = ColumnParallelLinear(IN, OUT)
        gathered = ColumnParallelLinear(IN, OUT, gather_output=True, skip_bias_add=True)
        row = RowParallelLinear(OUT, IN, input_is_parallel=True)
        out, bias = column(x)
        full, skipped = gathered(x)
        reduced, none = row(out)
        return (column.weight.shape, column.bias.shape, out.shape, bias, full.shape, skipped.shape,
                row.weight.shape, row.bias.shape, reduced.shape, none)

    expected = ((OUT // tp, IN), (OUT // tp,), (TOKENS, OUT // tp), None, (TOKENS, OUT), (OUT // tp,),
                (IN, OUT // tp), (IN,), (TOKENS, IN), None)
    assert all(seen == expected for seen in run_tensor_parallel(tp, shapes).values())


@pytest.mark.parametrize("tp", TP_SIZES)
def test_adr0011_t14_seeded_weights_are_one_master_weight_whatever_the_tp_size(tp):
    def partitions(torch, rank):
        return ColumnParallelLinear(IN, OUT, seed=5).weight.numpy(), RowParallelLinear(OUT, IN, seed=5).weight.numpy()

    master_column, master_row = run_tensor_parallel(1, partitions)[0]
    assert 0.015 < master_column.std() < 0.025  # Megatron's default init: N(0, 0.02^2)
    for rank, (column, row) in run_tensor_parallel(tp, partitions).items():
        part = rank % tp
        np.testing.assert_array_equal(column, np.split(master_column, tp, axis=0)[part])
        np.testing.assert_array_equal(row, np.split(master_row, tp, axis=1)[part])

    def other_seed(torch, rank):
        return ColumnParallelLinear(IN, OUT, seed=6).weight.numpy()

    assert not np.array_equal(run_tensor_parallel(1, other_seed)[0], master_column)


@pytest.mark.parametrize("tp", TP_SIZES)
@pytest.mark.parametrize("input_is_parallel", [False, True], ids=["full_input", "parallel_input"])
@pytest.mark.quick
def test_adr0011_t15_row_parallel_output_is_the_full_matmul(tp, input_is_parallel):
    x = random_f16(np.random.default_rng(14), TOKENS, OUT)
    w, b = weights(15, IN, OUT)

    def row_parallel(torch, rank):
        layer = RowParallelLinear(OUT, IN, input_is_parallel=input_is_parallel)
        layer.load_full_weight(w, b)
        given = np.split(x, tp, axis=1)[rank % tp] if input_is_parallel else x
        out, bias = layer(torch.tensor(given, dtype="f16"))
        return out.numpy(), bias

    for out, bias in run_tensor_parallel(tp, row_parallel).values():
        assert bias is None
        assert_close(out, x @ w.T + b, "f16")


@pytest.mark.parametrize("tp", TP_SIZES)
@pytest.mark.parametrize("gather_output", [False, True], ids=["split_output", "gathered_output"])
@pytest.mark.quick
def test_adr0011_t16_column_parallel_output_is_its_columns_of_the_full_matmul(tp, gather_output):
    x = random_f16(np.random.default_rng(16), TOKENS, IN)
    w, b = weights(17, OUT, IN)

    def column_parallel(torch, rank):
        layer = ColumnParallelLinear(IN, OUT, gather_output=gather_output)
        layer.load_full_weight(w, b)
        out, bias = layer(torch.tensor(x, dtype="f16"))
        return out.numpy(), bias

    full = x @ w.T + b
    for rank, (out, bias) in run_tensor_parallel(tp, column_parallel).items():
        assert bias is None
        assert_close(out, full if gather_output else np.split(full, tp, axis=1)[rank % tp], "f16")


@pytest.mark.quick
def test_adr0011_t17_skip_bias_add_returns_the_bias_instead_of_adding_it():
    x = random_f16(np.random.default_rng(18), TOKENS, IN)
    w, b = weights(19, OUT, IN)

    def skipped(torch, rank):
        column = ColumnParallelLinear(IN, OUT, skip_bias_add=True)
        column.load_full_weight(w, b)
        out, bias = column(torch.tensor(x, dtype="f16"))
        row = RowParallelLinear(OUT, IN, skip_bias_add=True)
        row.load_full_weight(w.T.copy(), b[:IN])
        reduced, row_bias = row(out)
        return out.numpy(), bias.numpy(), reduced.numpy(), row_bias.numpy()

    out, bias, reduced, row_bias = run_tensor_parallel(1, skipped)[0]
    assert_close(out, x @ w.T, "f16")
    np.testing.assert_array_equal(bias, b)
    assert_close(reduced, out @ w, "f16")
    np.testing.assert_array_equal(row_bias, b[:IN])


def test_adr0011_t18_weights_of_the_wrong_shape_are_named():
    def load_wrong(torch, rank):
        layer = ColumnParallelLinear(IN, OUT)
        with pytest.raises(ModelParallelError, match=r"weight has shape \(96, 384\), expected .* \(384, 96\)"):
            layer.load_full_weight(np.zeros((IN, OUT)), np.zeros(OUT))
        with pytest.raises(ModelParallelError, match=r"built with bias=True but was given bias=False"):
            layer.load_full_weight(np.zeros((OUT, IN)))
        with pytest.raises(ModelParallelError, match=r"input 'x' has shape \(40, 95\), expected \(\.\.\., 96\)"):
            layer(torch.zeros(TOKENS, IN - 1, dtype="f16", name="x"))

    run_tensor_parallel(1, load_wrong)


@pytest.mark.parametrize("layer, sizes, named", [
    (ColumnParallelLinear, (IN, 382), r"ColumnParallelLinear: output_size \(382\) is not divisible by the "
                                      r"tensor-parallel size \(4\)"),
    (RowParallelLinear, (382, IN), r"RowParallelLinear: input_size \(382\) is not divisible by the "
                                   r"tensor-parallel size \(4\)"),
], ids=["column", "row"])
def test_adr0011_t19_a_partitioned_size_the_tp_size_does_not_divide_is_named(layer, sizes, named):
    with pytest.raises(ModelParallelError, match=named):
        run_tensor_parallel(4, lambda torch, rank: layer(*sizes))


def test_adr0011_t25_a_megatron_config_sets_dtype_initialization_and_refuses_what_is_not_implemented():
    def configured(torch, rank):
        float32 = ColumnParallelLinear(IN, OUT, config=ModelParallelConfig(), keep_master_weight_for_test=True,
                                       init_method=init_method_normal(1.0))
        half = RowParallelLinear(OUT, IN, config=ModelParallelConfig(params_dtype=torch.float16))
        uninitialized = RowParallelLinear(OUT, IN, config=ModelParallelConfig(perform_initialization=False),
                                          keep_master_weight_for_test=True)
        x = random_f16(np.random.default_rng(25), TOKENS, IN)
        out, _ = float32(torch.tensor(x, dtype=torch.float32))
        for unsupported, named in ((lambda: ColumnParallelLinear(IN, OUT, stride=2), "only stride 1"),
                                   (lambda: ModelParallelConfig(context_parallel_size=2), "context and expert")):
            with pytest.raises(ModelParallelError, match=named):
                unsupported()
        return (float32.weight.dtype, float32.master_weight.dtype, half.weight.dtype, uninitialized.master_weight,
                x, float32.master_weight.numpy(), out.numpy())

    weight_dtype, master_dtype, half_dtype, no_master, x, master, out = run_tensor_parallel(1, configured)[0]
    assert (weight_dtype.name, master_dtype.name, half_dtype.name, no_master) == ("f32", "f32", "f16", None)
    assert 0.9 < master.std() < 1.1  # the given init_method drew it
    assert_close(out, x @ master.T, "f32")  # f32 parameters: the same Triton kernel with f32 operands


@pytest.mark.parametrize("tp", [2, 4])
def test_adr0011_t26_sequence_parallel_layers_gather_and_reduce_scatter_the_sequence(tp):
    # Megatron's [sequence, batch, hidden] activations, split along the sequence outside the region.
    sequence, batch = 8, 3
    rng = np.random.default_rng(26)
    x = random_f16(rng, sequence, batch, IN)
    (w1, b1), (w2, b2) = weights(27, OUT, IN), weights(28, IN, OUT)

    def sequence_parallel(torch, rank):
        config = ModelParallelConfig(sequence_parallel=True, params_dtype=torch.float16)
        fc1 = ColumnParallelLinear(IN, OUT, config=config, skip_bias_add=True)
        fc1.load_full_weight(w1, b1)
        fc2 = RowParallelLinear(OUT, IN, config=config, input_is_parallel=True)
        fc2.load_full_weight(w2, b2)
        own_sequence = torch.tensor(np.split(x, tp, axis=0)[rank % tp], dtype=torch.float16)
        intermediate, bias = fc1(own_sequence)
        output, _ = fc2(bias_gelu_impl(intermediate, bias))
        with pytest.raises(ModelParallelError, match="gather_output=True and sequence parallelism"):
            ColumnParallelLinear(IN, OUT, config=config, gather_output=True)
        with pytest.raises(ModelParallelError, match="sequence parallelism, input_is_parallel must be True"):
            RowParallelLinear(OUT, IN, config=config)
        return intermediate.shape, output.numpy()

    expected = mlp_reference(x, w1, b1, w2, b2)
    for rank, (intermediate_shape, output) in run_tensor_parallel(tp, sequence_parallel).items():
        assert intermediate_shape == (sequence, batch, OUT // tp)  # the whole sequence, this rank's features
        assert_close(output, np.split(expected, tp, axis=0)[rank % tp], "f16")  # this rank's slice of the sequence


def test_adr0011_t46_timing_only_layers_draw_no_initial_weights():
    # No value is computed with --timing-only, so the host draw of a master weight (2.4 GB per rank at GPT-3
    # width) is skipped; with values the same construction draws it once per layer.
    from kernbench.session import Session
    from kernbench.tp import VocabParallelEmbedding, parallel_state

    draws = []

    def counting_init(weight, rng):
        draws.append(weight.shape)
        weight[...] = 0.0

    for timing_only in (True, False):
        session = Session("single_sip", timing_only=timing_only)

        def bench(torch):
            parallel_state.initialize_model_parallel(1, torch=torch)
            config = ModelParallelConfig(use_cpu_initialization=True)
            ColumnParallelLinear(8, 16, config=config, init_method=counting_init)
            VocabParallelEmbedding(32, 8, init_method=counting_init, config=config)
            parallel_state.destroy_model_parallel()

        session.run(bench, session.torch)
        assert (len(draws) == 0) if timing_only else (len(draws) == 2)


def test_adr0011_t51_linear_with_frozen_weight_refuses_what_has_no_weight_gradient_in_one_line():
    """Megatron's contract: no gradient buffer or deferral for a frozen weight, and `allreduce_dgrad` only
    without sequence parallelism (whose gather already reduce-scatters the input gradient); the old
    `async_grad_allreduce` name still works, with a warning."""
    from kernbench.tp.layers import linear_with_frozen_weight

    def calls(torch, rank):
        x = torch.eye(4)
        x.requires_grad = True
        weight, bias = torch.ones(4, 4), torch.zeros(4)
        refusals = []
        for kwargs in ({"grad_output_buffer": []}, {"wgrad_deferral_limit": 2}):
            with pytest.raises(ModelParallelError, match="frozen weight does not have") as caught:
                linear_with_frozen_weight(x, weight, bias, False, False, False, **kwargs)
            refusals.append(str(caught.value))
        with pytest.raises(ModelParallelError, match="allreduce_dgrad and sequence_parallel"):
            linear_with_frozen_weight(x, weight, bias, False, True, True)
        with pytest.warns(DeprecationWarning, match="async_grad_allreduce is deprecated"):
            out = linear_with_frozen_weight(x, weight, bias, False, False, False, async_grad_allreduce=True)
        out.sum().backward()
        return refusals, out.numpy(), x.grad.numpy()

    refusals, out, grad = run_tensor_parallel(1, calls)[0]
    assert all("\n" not in message for message in refusals)
    np.testing.assert_array_equal(out, np.ones((4, 4), np.float32))  # eye @ onesᵀ
    np.testing.assert_array_equal(grad, np.full((4, 4), 4.0, np.float32))  # ones @ ones


def test_adr0011_t106_a_large_linear_runs_in_the_tile_a_gemm_library_picks_with_the_same_values():
    """1024 tokens x 256 -> 1024 on one SIP of 32 PEs: 8 x 8 = 64 tiles of 128 fill it, and 128² · (2·2 + 4 + 2)
    bytes = 160 KiB fit a quarter of its 1 MiB TCM (`device_ops.gemm_tile`), so the Triton linear (a layer's
    kernel within `linear_kernel(triton_linear)`) runs in 128 x 128 tiles with K in blocks of 64 instead of its
    smallest (64, 128, 64)."""
    tokens, features, out_features = 1024, 256, 1024
    x = random_f16(np.random.default_rng(106), tokens, features)
    w, b = weights(107, out_features, features)

    def column_parallel(torch, rank):
        layer = ColumnParallelLinear(features, out_features)
        layer.load_full_weight(w, b)
        with linear_kernel(triton_linear):
            out, _ = layer(torch.tensor(x, dtype="f16"))
        values = out.numpy()
        return values, [op.flops for op in out._ctx.machine.oplog.select(label="linear_kernel") if op.kind == "gemm"]

    (out, dots), = run_tensor_parallel(1, column_parallel).values()
    assert_close(out, x @ w.T + b, "f16")
    assert dots == [2 * 128 * 128 * 64] * (8 * 8 * features // 64)


def test_adr0011_t107_a_large_bias_kernel_runs_in_the_block_a_library_picks_with_the_same_values():
    """gelu(x + b) over 1024 x 1024 f16 on one SIP of 32 PEs: x, b and the output take 6 bytes an element, so a
    quarter of the 1 MiB TCM holds 43 690 and the block is 2^15 = 32 768 elements, which still gives the 32 PEs
    a program each (`device_ops.elementwise_block`): 32 programs instead of 1024 of Triton's 1024. The layers'
    own bias-GELU (`bias_gelu_impl`) is one fused elementwise device op, as Megatron's scripted function is."""
    x = random_f16(np.random.default_rng(107), 1024, 1024)
    b = random_f16(np.random.default_rng(108), 1024)

    def fused(torch, rank):
        inputs, bias = torch.tensor(x, dtype="f16"), torch.tensor(b, dtype="f16")
        out = kernels.bias_gelu(inputs, bias, torch.empty(1024, 1024, dtype="f16"),
                                block_size=elementwise_block_of(inputs, bias))
        values = out.numpy()
        layers = bias_gelu_impl(inputs, bias).numpy()
        assert {op.label for op in out._ctx.machine.oplog if op.kind == "vector"} >= {"bias_gelu"}
        assert_close(layers, values, "f16")
        ops = out._ctx.machine.oplog.select(label="bias_gelu_kernel")
        return values, len({op.program for op in ops}), {op.nbytes for op in ops if op.kind == "dma"}

    (out, programs, dma_bytes), = run_tensor_parallel(1, fused).values()
    assert_close(out, gelu_tanh(x + b), "f16")
    assert programs == 32
    assert 32768 * 2 in dma_bytes  # a whole block of x loaded, or of the output stored, in one DMA


def test_adr0011_t110_the_layers_gemm_is_the_librarys_unless_a_kernel_is_brought_for_a_block():
    x = random_f16(np.random.default_rng(110), TOKENS, IN)
    w, b = weights(111, OUT, IN)

    def column_parallel(torch, rank):
        layer = ColumnParallelLinear(IN, OUT)
        layer.load_full_weight(w, b)
        labels, values = [], []
        for kernel in (None, triton_linear, None):
            oplog = layer.weight._ctx.machine.oplog
            first = len(oplog)
            if kernel is None:
                out, _ = layer(torch.tensor(x, dtype="f16"))
            else:
                with linear_kernel(kernel):
                    out, _ = layer(torch.tensor(x, dtype="f16"))
            values.append(out.numpy())
            labels.append({op.label for op in list(oplog)[first:] if op.kind == "gemm"})
        return values, labels

    (values, labels), = run_tensor_parallel(1, column_parallel).values()
    for got in values:
        assert_close(got, x @ w.T + b, "f16")
    assert labels == [{"linear"}, {"linear_kernel"}, {"linear"}]

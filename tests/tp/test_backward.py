"""ADR 0017: the tensor-parallel MLP's backward pass — gradients against the analytic ones of the unsharded MLP."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.tp import ColumnParallelLinear, ModelParallelConfig, RowParallelLinear, fusions, mappings
from tests.tp.harness import gelu_tanh, run_tensor_parallel

TOKENS, HIDDEN, FFN = 16, 32, 64


def _problem():
    rng = np.random.default_rng(30)
    x = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
    w1 = (rng.standard_normal((FFN, HIDDEN)) * HIDDEN ** -0.5).astype(np.float32)
    b1 = rng.standard_normal(FFN).astype(np.float32) * 0.1
    w2 = (rng.standard_normal((HIDDEN, FFN)) * FFN ** -0.5).astype(np.float32)
    b2 = rng.standard_normal(HIDDEN).astype(np.float32) * 0.1
    upstream = rng.standard_normal((TOKENS, HIDDEN)).astype(np.float32)
    return x, w1, b1, w2, b2, upstream


def _reference():
    """Gradients of loss = Σ (gelu(x W1ᵀ + b1) W2ᵀ + b2) ⊙ upstream, analytically."""
    x, w1, b1, w2, b2, upstream = (a.astype(np.float64) for a in _problem())
    a = x @ w1.T + b1
    k = np.sqrt(2 / np.pi)
    t = np.tanh(k * (a + 0.044715 * a ** 3))
    slope = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a)
    d_hidden = (upstream @ w2) * slope
    return {"x": d_hidden @ w1, "w1": d_hidden.T @ x, "b1": d_hidden.sum(0),
            "w2": upstream.T @ gelu_tanh(a), "b2": upstream.sum(0)}


def _train_step(sequence_parallel: bool):
    x, w1, b1, w2, b2, upstream = _problem()

    def step(torch, rank):
        from kernbench.tp import parallel_state
        tp = parallel_state.get_tensor_model_parallel_world_size()
        tp_rank = parallel_state.get_tensor_model_parallel_rank()
        config = ModelParallelConfig(sequence_parallel=sequence_parallel, params_dtype=torch.float32)
        fc1 = ColumnParallelLinear(HIDDEN, FFN, config=config, skip_bias_add=True)
        fc1.load_full_weight(w1, b1)
        fc2 = RowParallelLinear(FFN, HIDDEN, config=config, input_is_parallel=True)
        fc2.load_full_weight(w2, b2)
        rows = slice(tp_rank * TOKENS // tp, (tp_rank + 1) * TOKENS // tp) if sequence_parallel and tp > 1 \
            else slice(None)
        inputs = torch.tensor(x[rows]).requires_grad_()
        hidden, bias = fc1(inputs)
        output, _ = fc2(fusions.bias_gelu_impl(hidden, bias))
        (output * torch.tensor(upstream[rows])).sum().backward()
        return {"x": inputs.grad.numpy(), "w1": fc1.weight.grad.numpy(), "b1": fc1.bias.grad.numpy(),
                "w2": fc2.weight.grad.numpy(), "b2": fc2.bias.grad.numpy(), "tp": tp, "tp_rank": tp_rank,
                "rows": rows}

    return step


@pytest.mark.parametrize("tp, sequence_parallel", [(1, False), (2, False), (4, False), (2, True), (4, True)])
def test_adr0017_t9_tensor_parallel_mlp_gradients_are_the_unsharded_ones(tp, sequence_parallel):
    expected = _reference()
    results = run_tensor_parallel(tp, _train_step(sequence_parallel))
    for rank, got in results.items():
        part = got["tp_rank"]
        assert_close(got["x"], expected["x"][got["rows"]], "f32")
        assert_close(got["w1"], np.split(expected["w1"], tp, axis=0)[part], "f32")
        assert_close(got["b1"], np.split(expected["b1"], tp)[part], "f32")
        assert_close(got["w2"], np.split(expected["w2"], tp, axis=1)[part], "f32")
    if sequence_parallel:  # each rank holds its tokens' share of the (unpartitioned) row bias's gradient
        group = [results[rank] for rank in range(tp)]  # the first tensor-parallel group
        assert_close(sum(got["b2"] for got in group), expected["b2"], "f32")
    else:
        for got in results.values():
            assert_close(got["b2"], expected["b2"], "f32")


@pytest.mark.parametrize("mapping, backward_collective", [
    (mappings.copy_to_tensor_model_parallel_region, "all_reduce"),
    (mappings.gather_from_sequence_parallel_region, "reduce_scatter"),
    (mappings.scatter_to_tensor_model_parallel_region, "all_gather"),
])
def test_adr0017_t10_each_mapping_runs_its_backward_twin_collective(mapping, backward_collective):
    def step(torch, rank):
        x = torch.ones(8, 8, dtype=torch.float32).requires_grad_()
        records = x._ctx.collectives  # the run's collective records, in order
        torch.distributed.barrier()
        y = mapping(x)
        torch.ahbm.synchronize()
        torch.distributed.barrier()
        before = len(records)
        y.sum().backward()
        torch.ahbm.synchronize()
        torch.distributed.barrier()
        return {record["collective"] for record in records[before:]} - {"barrier"}

    results = run_tensor_parallel(4, step)
    assert results[0] == {backward_collective}

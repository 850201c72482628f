"""ADR 0011: the parallel linear layers take the keywords Megatron's current layers and mlp.py pass."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.numerics import assert_close
from kernbench.tp import ColumnParallelLinear, ModelParallelConfig, RowParallelLinear, parallel_state
from kernbench.tp.errors import ModelParallelError
from tests.tp.harness import run_tensor_parallel

IN, OUT = 32, 64


def test_adr0011_t42_layers_honour_tp_group_name_runtime_gather_and_external_weights():
    rng = np.random.default_rng(42)
    x = rng.standard_normal((8, IN)).astype(np.float32)
    w1 = rng.standard_normal((OUT, IN)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((IN, OUT)).astype(np.float32) * 0.1

    def step(torch, rank):
        config = ModelParallelConfig(params_dtype=torch.float32)
        group = parallel_state.get_tensor_model_parallel_group()
        fc1 = ColumnParallelLinear(IN, OUT, config=config, bias=False, tp_group=group, name="fc1")
        fc1.load_full_weight(w1)
        fc2 = RowParallelLinear(OUT, IN, config=config, bias=False, input_is_parallel=True, tp_group=group,
                                name="fc2", pg_collection=None)
        fc2.load_full_weight(w2)
        hidden, _ = fc1(torch.tensor(x))
        gathered, _ = fc1(torch.tensor(x), runtime_gather_output=True)
        out, _ = fc2(hidden)
        external = ColumnParallelLinear(IN, OUT, config=config, bias=False, skip_weight_param_allocation=True)
        with pytest.raises(ModelParallelError, match="needs weight="):
            external(torch.tensor(x))
        again, _ = external(torch.tensor(x), weight=fc1.weight)
        return out.numpy(), gathered.numpy(), np.array_equal(again.numpy(), hidden.numpy()), hidden.name

    for out, gathered, same, name in run_tensor_parallel(2, step).values():
        assert_close(out, x @ w1.T @ w2.T, "f32")
        assert_close(gathered, x @ w1.T, "f32")
        assert same and name.endswith(".fc1")

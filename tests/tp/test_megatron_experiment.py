"""ADR 0011: an MLP experiment written from Megatron-LM's documentation runs with only its imports changed.

`megatron_mlp_experiment` below is written the way Megatron's docs and its
`initialize_distributed` example write one, by someone who has not read
kernbench: `parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)`
with no extra argument, a `ModelParallelConfig`, the layers with Megatron's
keywords (`config=`, `init_method=`, `bias=`, `gather_output=`,
`skip_bias_add=`, `input_is_parallel=`, `keep_master_weight_for_test=`),
[sequence, batch, hidden] activations, the fused `bias_gelu_impl`, and the
master weights for the numpy check. What differs from the Megatron script is
marked `# kernbench:`: the imports, and what a run's `torch` is — given to the
bench rather than imported, its device module `torch.ahbm` in place of
`torch.cuda`, and ranks started by `torch.multiprocessing.spawn` in place of
torchrun (so the rank is spawn's argument, not LOCAL_RANK).
"""

from __future__ import annotations

import numpy as np

from kernbench.numerics import assert_close
from kernbench.session import Session
from kernbench.tp import parallel_state  # kernbench: from megatron.core import parallel_state
from kernbench.tp import ColumnParallelLinear, RowParallelLinear  # kernbench: from megatron.core.tensor_parallel
from kernbench.tp import ModelParallelConfig  # kernbench: from megatron.core import ModelParallelConfig
from kernbench.tp import init_method_normal  # kernbench: from megatron.core.utils import init_method_normal
from kernbench.tp import bias_gelu_impl  # kernbench: from megatron.core.fusions.fused_bias_gelu import bias_gelu_impl

SEQUENCE, BATCH, HIDDEN = 16, 2, 64


def megatron_mlp_experiment(torch):  # kernbench: a bench receives the run's torch; Megatron's script imports it
    results = {}
    # kernbench: torchrun would start one process per GPU; spawn starts one rank per SIP.
    torch.multiprocessing.spawn(worker, args=(torch, results), nprocs=torch.ahbm.device_count())
    return results


def worker(rank, torch, results):
    # Megatron's initialize_distributed(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)
    parallel_state.destroy_model_parallel()
    world_size = torch.ahbm.device_count()  # kernbench: torch.cuda.device_count()
    torch.ahbm.set_device(rank)  # kernbench: torch.cuda.set_device(rank)
    torch.distributed.init_process_group(world_size=world_size, rank=rank)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=1)

    config = ModelParallelConfig(tensor_model_parallel_size=2, params_dtype=torch.float16,
                                 use_cpu_initialization=True)
    fc1 = ColumnParallelLinear(HIDDEN, 4 * HIDDEN, config=config, init_method=init_method_normal(HIDDEN ** -0.5),
                               bias=True, gather_output=False, skip_bias_add=True, keep_master_weight_for_test=True)
    fc2 = RowParallelLinear(4 * HIDDEN, HIDDEN, config=config, init_method=init_method_normal((4 * HIDDEN) ** -0.5),
                            bias=True, input_is_parallel=True, skip_bias_add=False, keep_master_weight_for_test=True)

    torch.manual_seed(1234)
    hidden_states = torch.randn(SEQUENCE, BATCH, HIDDEN, dtype=torch.float16)
    intermediate_parallel, bias_parallel = fc1(hidden_states)
    intermediate_parallel = bias_gelu_impl(intermediate_parallel, bias_parallel)
    output, output_bias = fc2(intermediate_parallel)

    results[rank] = {
        "input": hidden_states.numpy(), "fc1": fc1.master_weight.numpy(), "fc2": fc2.master_weight.numpy(),
        "output": output.numpy(), "output_bias": output_bias,
        "tp": (parallel_state.get_tensor_model_parallel_rank(), parallel_state.get_tensor_model_parallel_world_size()),
        "dp": (parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_world_size()),
    }


def numpy_mlp(x, w1, w2):
    """The same MLP unsharded: Megatron's layers start their biases at zero; GELU as bias_gelu_impl's tanh form."""
    z = x @ w1.T
    return (0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z ** 3)))) @ w2.T


def test_adr0011_t29_an_mlp_written_from_megatrons_documentation_runs_with_only_its_imports_changed():
    session = Session("default")
    results = session.run(megatron_mlp_experiment, session.torch)

    assert sorted(results) == [0, 1, 2, 3]
    first = results[0]
    for rank, seen in results.items():
        assert seen["tp"] == (rank % 2, 2) and seen["dp"] == (rank // 2, 2)
        # Seeded the same way, every rank drew the same input and the same master weights, as Megatron's would.
        for name in ("input", "fc1", "fc2"):
            np.testing.assert_array_equal(seen[name], first[name], err_msg=f"rank {rank}: {name}")
        assert seen["output"].shape == (SEQUENCE, BATCH, HIDDEN) and seen["output_bias"] is None
        expected = numpy_mlp(*(first[name].astype(np.float32) for name in ("input", "fc1", "fc2")))
        assert_close(seen["output"], expected, "f16")
        np.testing.assert_array_equal(seen["output"], first["output"], err_msg=f"rank {rank}")

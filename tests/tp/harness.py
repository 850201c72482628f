"""Running a function on every rank of a tensor-parallel world, and the numpy references the tp tests use."""

from __future__ import annotations

import numpy as np

from kernbench.session import Session
from kernbench.tp import parallel_state
from tests.spawned import run_ranks

# tp 1 runs on one SIP as a world of one (no process group); 2 and 4 on the default machine's 4 SIPs,
# where tp 2 leaves two data-parallel replicas.
TP_SIZES = [1, 2, 4]


def run_tensor_parallel(tp: int, fn, *args) -> dict:
    """`fn(torch, rank, *args)` on every rank after `initialize_model_parallel(tp)`; its results by rank.

    A rank's exception is re-raised as itself (the root cause of the spawn failure), so tests can
    `pytest.raises` the error a rank met.
    """
    session = Session("single_sip" if tp == 1 else "default")
    torch = session.torch
    results = {}

    def worker(rank: int, world_size: int) -> None:
        torch.ahbm.set_device(rank)
        if world_size > 1:
            torch.distributed.init_process_group(backend="ahbm")
        parallel_state.initialize_model_parallel(tp, torch=torch)
        results[rank] = fn(torch, rank, *args)

    def bench(torch) -> None:
        world_size = torch.ahbm.device_count()
        torch.multiprocessing.spawn(worker, args=(world_size,), nprocs=world_size)

    run_ranks(session, bench)
    return results


def f16(array: np.ndarray) -> np.ndarray:
    """Values as the device holds them: rounded to fp16, computed with in fp32."""
    return np.asarray(array).astype(np.float16).astype(np.float32)


def random_f16(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return f16(rng.standard_normal(shape) * scale)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """Megatron's `bias_gelu` approximation, in fp32."""
    return x * 0.5 * (1.0 + np.tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)))


def mlp_reference(x, w1, b1, w2, b2) -> np.ndarray:
    """The unsharded MLP `gelu(x @ w1.T + b1) @ w2.T + b2`, rounding to fp16 where the device stores."""
    hidden = f16(gelu_tanh(f16(x @ w1.T) + b1))
    return hidden @ w2.T + b2

"""Megatron-LM's test `Utils` for kernbench, and the world its ported unit tests run in.

Megatron's unit tests run under torchrun on 8 GPUs, one process per GPU:
each process runs the test with its own `Utils.rank`. Here the ranks are
greenlets of one run: `on_every_rank(body)` spawns a world of 8 SIPs on the
`large` machine and runs `body(torch, rank, world_size)` on each, so a
ported test keeps Megatron's statements inside a `body` whose arguments
stand for Megatron's module-level `torch`, `rank` and `world_size`.

`Utils` keeps the methods the ported tests call, doing what Megatron's do
on one rank: `initialize_distributed` (the process group; ranks come from
spawn, not a TCP rendezvous), `initialize_model_parallel` (destroy, then
Megatron's positional call with the virtual pipeline size third) and
`destroy_model_parallel` (no barrier: state is per rank).
"""

from __future__ import annotations

from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config
from kernbench.runtime_api.current_run import current_torch
from kernbench.runtime_api.namespace.spawn import SpawnException
from kernbench.session import Session
from kernbench.tp import parallel_state as ps

# Megatron's CI: one node of 8 GPUs.
WORLD_SIZE = 8


def on_every_rank(body, world_size: int = WORLD_SIZE) -> dict:
    """`body(torch, rank, world_size)` on every rank of a world of `world_size` SIPs; its results by rank.

    A rank's exception is re-raised as itself, so a failing assertion reads as in Megatron's test.
    """
    session = Session("large", ccl={**load_ccl_config(SHIPPED_CCL_PATH), "world_size": world_size})
    results = {}

    def worker(rank: int, torch) -> None:
        torch.ahbm.set_device(rank)  # Megatron's Utils: torch.cuda.set_device(local_rank)
        results[rank] = body(torch, rank, world_size)

    try:
        session.run(lambda torch: torch.multiprocessing.spawn(worker, args=(torch,), nprocs=world_size),
                    session.torch)
    except SpawnException as failure:
        raise failure.failures[failure.error_index] from failure
    return results


class Utils:
    world_size = WORLD_SIZE

    @staticmethod
    def initialize_distributed():
        torch = current_torch()
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(backend="nccl")

    @staticmethod
    def destroy_model_parallel():
        ps.destroy_model_parallel()

    @staticmethod
    def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                  virtual_pipeline_model_parallel_size=None, **kwargs):
        ps.destroy_model_parallel()
        Utils.initialize_distributed()
        ps.initialize_model_parallel(tensor_model_parallel_size, pipeline_model_parallel_size,
                                     virtual_pipeline_model_parallel_size, **kwargs)

    @staticmethod
    def fake_initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                       virtual_pipeline_model_parallel_size=None, expert_model_parallel_size=1):
        """Megatron's proxy for NeMo-style initialization: sizes and ranks set, no groups."""
        ps.set_tensor_model_parallel_world_size(tensor_model_parallel_size)
        ps.set_tensor_model_parallel_rank(0)
        ps.set_expert_model_parallel_world_size(expert_model_parallel_size)
        ps.set_expert_model_parallel_rank(0)
        if virtual_pipeline_model_parallel_size is not None:
            ps.set_virtual_pipeline_model_parallel_world_size(virtual_pipeline_model_parallel_size)
        ps.set_virtual_pipeline_model_parallel_rank(0)
        ps.set_pipeline_model_parallel_world_size(pipeline_model_parallel_size)

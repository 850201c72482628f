"""The 8-rank world kernbench's Megatron-style tests run in, and the `Utils` names Megatron's tests call.

Megatron-LM's unit tests run once per process under torchrun on one node of
8 GPUs. Here the 8 ranks are greenlets of one simulated run:
`on_every_rank(body)` spawns them on `megatron_node()`, the `large` machine
cut to 8 SIPs (so `torch.cuda.device_count()` is 8, as there), and calls
`body(torch, rank, world_size)` on each, returning what each rank returned.

`Utils` carries the names Megatron's tests reach for (`upstream_plugin`
serves it as `tests.unit_tests.test_utilities.Utils`), written for a world
whose ranks come from `spawn`: there is no rendezvous to make and no
barrier to wait at, since model-parallel state is held per rank.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config
from kernbench.runtime_api.current_run import current_torch
from kernbench.session import Session
from kernbench.tp import parallel_state
from tests.derived_topology import derived_topology
from tests.spawned import run_ranks

WORLD_SIZE = 8  # the GPUs of Megatron's CI node


@functools.cache
def megatron_node() -> Path:
    """The `large` machine with 8 SIPs, written once per process to a folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="kernbench-megatron-node-"))
    return derived_topology(folder, "large", [("sips: {count: 32}", "sips: {count: 8}")], "megatron_node.yaml")


def on_every_rank(body, world_size: int = WORLD_SIZE) -> dict:
    """Run `body(torch, rank, world_size)` on each rank of a `world_size`-SIP world; {rank: its result}.

    The first failing rank's exception is raised unwrapped, so an assertion inside `body` fails the test as
    itself rather than as a `SpawnException`.
    """
    session = Session(str(megatron_node()), ccl={**load_ccl_config(SHIPPED_CCL_PATH), "world_size": world_size})
    returned = {}

    def one_rank(rank: int, torch) -> None:
        torch.ahbm.set_device(rank)  # one SIP per rank, as torchrun gives each process its GPU
        returned[rank] = body(torch, rank, world_size)

    def launch(torch) -> None:
        torch.multiprocessing.spawn(one_rank, args=(torch,), nprocs=world_size)

    run_ranks(session, launch)
    return returned


def _ensure_process_group() -> None:
    dist = current_torch().distributed
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl")


# What Megatron's fake initialization sets on a rank without making groups: each setter of parallel_state and
# the keyword (or constant) it takes its value from.
_FAKE_SETTINGS = (
    ("set_tensor_model_parallel_world_size", "tensor_model_parallel_size"),
    ("set_tensor_model_parallel_rank", 0),
    ("set_expert_model_parallel_world_size", "expert_model_parallel_size"),
    ("set_expert_model_parallel_rank", 0),
    ("set_virtual_pipeline_model_parallel_world_size", "virtual_pipeline_model_parallel_size"),
    ("set_virtual_pipeline_model_parallel_rank", 0),
    ("set_pipeline_model_parallel_world_size", "pipeline_model_parallel_size"),
)


class Utils:
    """Megatron's test-utility names over kernbench's `parallel_state`, for the rank that calls them."""

    world_size = WORLD_SIZE

    @staticmethod
    def initialize_distributed() -> None:
        """The run's process group, made on the first call (ranks and world come from `spawn`)."""
        _ensure_process_group()

    @staticmethod
    def destroy_model_parallel() -> None:
        parallel_state.destroy_model_parallel()

    @staticmethod
    def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                  virtual_pipeline_model_parallel_size=None, **kwargs) -> None:
        """A fresh model-parallel state on this rank: whatever an earlier test left is dropped first.

        Megatron's tests pass the virtual pipeline size third, positionally; the rest go by keyword.
        """
        parallel_state.destroy_model_parallel()
        _ensure_process_group()
        sizes = (tensor_model_parallel_size, pipeline_model_parallel_size, virtual_pipeline_model_parallel_size)
        parallel_state.initialize_model_parallel(*sizes, **kwargs)

    @staticmethod
    def fake_initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                                       virtual_pipeline_model_parallel_size=None, expert_model_parallel_size=1):
        """Sizes and rank 0 set on this rank with no process groups, for code that only reads them.

        A virtual pipeline size of None leaves the virtual world size unset, as Megatron does.
        """
        given = {"tensor_model_parallel_size": tensor_model_parallel_size,
                 "pipeline_model_parallel_size": pipeline_model_parallel_size,
                 "virtual_pipeline_model_parallel_size": virtual_pipeline_model_parallel_size,
                 "expert_model_parallel_size": expert_model_parallel_size}
        for setter, source in _FAKE_SETTINGS:
            value = given[source] if isinstance(source, str) else source
            if value is not None:
                getattr(parallel_state, setter)(value)

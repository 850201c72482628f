"""What GPU host code asks Triton before a launch, answered from the PE model (ADR 0007)."""

import numpy as np
import pytest
import triton
import triton.language as tl
from flat_port import FlatMemory, FlatPort, run_grid
from triton.runtime.driver import driver

from kernbench.kernels import (
    CompiledKernel,
    DeviceProperties,
    UnsupportedKernelError,
    install_driver,
    prepare_launch,
    uninstall_driver,
)
from kernbench.runtime_api.device import Device
from kernbench.session import Session
from kernbench.topology import load_topology


class TopologyHost:
    """A `DriverHost` as the runtime provides it: device 0 of a topology."""

    def __init__(self, topology):
        self.topology = topology

    def active_torch_device(self):
        return Device("ahbm", 0)

    def device_properties(self, index):
        return DeviceProperties.from_topology(self.topology, index)


@pytest.fixture
def topology():
    topology = load_topology("default")
    install_driver(TopologyHost(topology))
    yield topology
    uninstall_driver()


@triton.jit
def copy_rows(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        cols = tl.arange(0, BLOCK)
        tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols),
                 mask=cols < n_cols)


def test_adr0007_t47_the_driver_reports_the_pe_model_and_restores_tritons_on_uninstall(topology):
    properties = driver.active.utils.get_device_properties(0)
    pe = topology.pe

    assert properties["multiprocessor_count"] == topology.pes_per_sip
    assert properties["warpSize"] == pe.vector_unit.lanes
    assert properties["max_shared_mem"] == pe.tcm.capacity_bytes
    assert properties["max_num_regs"] == pe.tcm.capacity_bytes // 4
    assert driver.active.get_current_target().backend == "kernbench"
    assert driver.active.get_active_torch_device() == Device("ahbm", 0)
    with pytest.raises(UnsupportedKernelError, match="launcher_cls"):
        driver.active.launcher_cls
    install_driver(TopologyHost(topology))  # installing again replaces the host, not what is restored
    uninstall_driver()
    assert driver._active is None or driver._active.__class__.__name__ != "KernbenchDriver"


def _occupancy_bench(torch, n_rows, n_cols, num_warps):
    x = torch.randn(n_rows, n_cols)
    y = torch.empty_like(x)
    kernel = copy_rows.warmup(x, y, n_rows, n_cols, BLOCK=64, num_warps=num_warps, grid=(1,))
    properties = triton.runtime.driver.active.utils.get_device_properties(0)
    occupancy = min(properties["max_num_regs"] // (kernel.n_regs * properties["warpSize"] * num_warps),
                    properties["max_shared_mem"] // kernel.metadata.shared)
    kernel[(properties["multiprocessor_count"] * occupancy, 1, 1)](x, y, n_rows, n_cols, 64)
    return kernel, occupancy, x.numpy(), y.numpy()


@pytest.mark.parametrize("num_warps", [4, 8])
def test_adr0007_t48_warmup_returns_a_compiled_kernel_whose_occupancy_is_resident_programs(topology, num_warps):
    session = Session("default")
    kernel, occupancy, x, y = session.run(_occupancy_bench, session.torch, 300, 50, num_warps)

    assert isinstance(kernel, CompiledKernel)
    assert (kernel.n_spills, kernel.metadata.num_warps) == (0, num_warps)
    assert occupancy == topology.pe.resident_programs
    np.testing.assert_array_equal(y, x)
    assert session.ctx.programs_done == topology.pes_per_sip * occupancy


def test_adr0007_t49_autotune_runs_the_first_config_left_by_early_pruning_and_its_pre_hook():
    seen = []

    def prune(configs, named_args, **kwargs):
        return [c for c in configs if c.kwargs["BLOCK"] <= kwargs["n_cols"]]

    configs = [triton.Config({"BLOCK": b}, pre_hook=lambda nargs: seen.append(nargs["BLOCK"])) for b in (128, 64)]
    tuned = triton.autotune(configs, key=["n_cols"], prune_configs_by={"early_config_prune": prune})(copy_rows)
    memory = FlatMemory()
    x = np.arange(6 * 64, dtype=np.float32).reshape(6, 64)
    X, Y = memory.from_numpy("x", x, "f32"), memory.zeros("y", (6, 64), "f32")

    launch = prepare_launch(tuned, (2,), (X, Y, 6), {"n_cols": 64})
    run_grid(launch, FlatPort(memory))

    assert seen == [64]
    np.testing.assert_array_equal(Y.numpy(), x)

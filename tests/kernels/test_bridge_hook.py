"""The launch hook: kernbench tensors go to the runtime, everything else to Triton."""

import importlib
import sys
import textwrap

import numpy as np
import pytest
from flat_port import FlatMemory, FlatPort, run_grid
from kernels_under_test import add_kernel, heuristic_add_kernel
from numpy_torch import NumpyTensor
from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernbench.kernels import PreparedLaunch, install_launch_hook, uninstall_launch_hook


@pytest.fixture
def launches():
    """Install a hook that runs each launch on a flat memory and records it."""
    seen = []

    def on_launch(launch: PreparedLaunch):
        seen.append(launch)
        run_grid(launch, FlatPort(memory))
        return "ran on kernbench"

    memory = FlatMemory()
    install_launch_hook(on_launch)
    yield memory, seen
    uninstall_launch_hook()


def operands(memory, n=64):
    x = memory.from_numpy("x", np.arange(n), "f32")
    y = memory.from_numpy("y", np.ones(n), "f32")
    return x, y, memory.zeros("out", (n,), "f32")


def test_adr0007_t20_subscript_launch_on_kernbench_tensors_calls_the_hook(launches):
    memory, seen = launches
    x, y, out = operands(memory)

    result = add_kernel[(2,)](x, y, out, 64, BLOCK_SIZE=32, num_warps=4)

    assert result == "ran on kernbench"
    assert [launch.kernel_name for launch in seen] == ["add_kernel"]
    assert out.numpy().tolist() == (np.arange(64) + 1.0).tolist()


def test_adr0007_t21_run_and_wrapped_kernels_call_the_hook_once(launches):
    memory, seen = launches
    x, y, out = operands(memory, 20)

    add_kernel.run(x, y, out, 20, grid=(1,), warmup=False, BLOCK_SIZE=32)
    heuristic_add_kernel[(1,)](x, y, out, 20)

    assert [launch.kernel_name for launch in seen] == ["add_kernel", "heuristic_add_kernel"]


def test_adr0007_t22_kernels_defined_after_the_hook_and_interpreter_kernels_are_hooked(launches, tmp_path, monkeypatch):
    memory, seen = launches
    x, y, out = operands(memory, 8)
    (tmp_path / "late_kernels.py").write_text(textwrap.dedent('''
        import triton
        import triton.language as tl

        @triton.jit
        def late_copy(src, dst, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(dst + offs, tl.load(src + offs))
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    late = importlib.import_module("late_kernels")

    late.late_copy[(1,)](x, out, BLOCK=8)
    InterpretedFunction(add_kernel.fn)[(1,)](x, y, out, 8, BLOCK_SIZE=8)

    assert [launch.kernel_name for launch in seen] == ["late_copy", "add_kernel"]
    assert out.numpy().tolist() == (np.arange(8) + 1.0).tolist()
    sys.modules.pop("late_kernels")


def test_adr0007_t23_launches_without_kernbench_tensors_are_stock_triton(launches):
    _, seen = launches
    x, y = np.arange(16, dtype=np.float32), np.ones(16, dtype=np.float32)
    out = np.zeros(16, dtype=np.float32)

    InterpretedFunction(add_kernel.fn)[(1,)](NumpyTensor(x), NumpyTensor(y), NumpyTensor(out), 16, BLOCK_SIZE=16)
    # Stock Triton's own refusal: no driver on a CPU-only machine, host memory on a GPU one.
    with pytest.raises((RuntimeError, ValueError), match="active drivers|cannot be accessed from Triton"):
        add_kernel[(1,)](NumpyTensor(x), NumpyTensor(y), NumpyTensor(out), 16, BLOCK_SIZE=16)

    assert seen == []
    assert out.tolist() == (x + y).tolist()


def test_adr0007_t24_uninstall_restores_triton_run_methods():
    uninstall_launch_hook()  # a session run earlier in this process leaves its hook installed (a new one replaces it)
    classes = (JITFunction, InterpretedFunction, Autotuner, Heuristics)
    originals = [vars(c)["run"] for c in classes]
    install_launch_hook(lambda launch: None)
    assert [vars(c)["run"] for c in classes] != originals
    uninstall_launch_hook()
    assert [vars(c)["run"] for c in classes] == originals


_KERNEL_FILE = '''
import triton
import triton.language as tl

# Asked at import, as tutorial 02 asks for its device's properties: the run's driver must already answer.
DEVICE = triton.runtime.driver.active.get_active_torch_device()
PES = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)["multiprocessor_count"]


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)
'''

_BENCH = '''
import sys


def run(torch):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(worker, args=(torch,), nprocs=torch.distributed.get_world_size())
    print("triton loaded by the collectives:", "triton" in sys.modules)
    import late_kernels  # Triton is first imported here, during the run

    x = torch.arange(100, dtype=torch.float32)
    late_kernels.double[(2,)](x, 100, BLOCK=64)
    print("device", late_kernels.DEVICE, "pes", late_kernels.PES, "doubled", x.numpy()[[0, 1, 99]].tolist())


def worker(rank, torch):
    torch.ahbm.set_device(rank)
    x = torch.ones(64) * (rank + 1)
    torch.distributed.all_reduce(x)
    torch.ahbm.synchronize()
'''


def test_adr0007_t110_triton_is_loaded_when_the_runs_code_imports_it_and_finds_the_hook_and_driver(tmp_path):
    """In a fresh interpreter, as a user runs a bench: an all-reduce and device ops load no Triton; a kernel file
    the bench imports mid-run asks the driver about the device on import (answered from the run's topology: the
    default machine's 32 PEs a SIP, device ahbm:0) and its launch on a kernbench tensor runs on the simulator."""
    from tests.cli import run_kernbench

    (tmp_path / "late_kernels.py").write_text(_KERNEL_FILE)
    (tmp_path / "mid_run_import.py").write_text(_BENCH)
    result = run_kernbench("run", "mid_run_import.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "triton loaded by the collectives: False" in result.stdout
    assert "device ahbm:0 pes 32 doubled [0.0, 2.0, 198.0]" in result.stdout

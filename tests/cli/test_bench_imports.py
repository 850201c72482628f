"""ADR 0019: a bench says `import torch` as a script does, and gets kernbench's namespace of the run."""

from __future__ import annotations

import builtins
import sys
import textwrap
import types
from pathlib import Path

import pytest

from kernbench.cli.bench_loader import BenchError, load_bench
from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.runtime_api.namespace.torch_imports import SUBMODULES
from kernbench.runtime_api.unsupported import UnsupportedError
from kernbench.session import RUN_INDEPENDENT_NAMES, Session


def bench_file(folder: Path, source: str, name: str = "imports_bench.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def run_bench(path: Path, topology: str = "default"):
    """`run(torch)` of the bench file in a new session; what it returns, and the session."""
    session = Session(topology)
    return session.run(load_bench(str(path)), session.torch), session


def test_adr0019_t19_module_level_imports_are_the_runs_namespace(tmp_path):
    path = bench_file(tmp_path, '''\
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
        import torch.nn.functional as F
        from torch import nn, float16, Tensor

        def run(bench_torch):
            x = torch.full((4,), 2.0, dtype=float16)
            return {"x": x, "bench_torch": bench_torch, "dist": dist.get_world_size, "mp": mp.spawn,
                    "F": F.gelu, "nn": nn.Parameter, "Tensor": Tensor, "float16": float16}
        ''')
    held, session = run_bench(path)
    torch = session.torch
    assert held["x"]._ctx is session.ctx and held["x"].tolist() == [2.0] * 4
    assert held["bench_torch"] is torch
    assert held["dist"] == torch.distributed.get_world_size and held["mp"] is torch.multiprocessing.spawn
    assert held["F"] is torch.nn.functional.gelu and held["nn"] is torch.nn.Parameter
    assert held["Tensor"] is torch.Tensor and held["float16"] is torch.float16


def test_adr0019_t20_imports_inside_spawned_and_process_workers_are_the_runs(tmp_path):
    path = bench_file(tmp_path, '''\
        def spawned(rank, sums):
            import torch
            import torch.distributed as dist
            dist.init_process_group("nccl")
            x = torch.full((8,), rank + 1.0, device=f"cuda:{rank}")
            dist.all_reduce(x)
            sums[("spawn", rank)] = x.tolist()
            dist.destroy_process_group()

        def process(rank, sums):
            from torch import distributed as dist, ones
            dist.init_process_group("gloo", rank=rank, world_size=2)
            x = ones(2, device=f"cuda:{rank}") * (rank + 1)
            dist.all_reduce(x)
            sums[("process", rank)] = x.tolist()
            dist.destroy_process_group()

        def run(_torch):
            import torch.multiprocessing as mp
            sums = {}
            mp.spawn(spawned, args=(sums,), nprocs=4)
            workers = [mp.Process(target=process, args=(rank, sums)) for rank in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            return sums
        ''')
    sums, _ = run_bench(path)
    assert [sums[("spawn", rank)] for rank in range(4)] == [[float(sum(range(1, 5)))] * 8] * 4
    assert sums[("process", 0)] == sums[("process", 1)] == [1.0 + 2.0] * 2


def test_adr0019_t21_from_torch_nn_import_functional_as_f_at_module_and_function_level(tmp_path):
    path = bench_file(tmp_path, '''\
        from torch.nn import functional as F

        def run(torch):
            from torch.nn import functional as inner
            x = torch.tensor([[-1.0, 0.0, 2.0]])
            return F.gelu is inner.gelu is torch.nn.functional.gelu, F.relu(x).tolist()
        ''')
    (same, relu), _ = run_bench(path)
    assert same and relu == [[0.0, 0.0, 2.0]]


def test_adr0019_t22_a_name_kernbench_lacks_is_its_one_unsupported_line_through_any_import(tmp_path):
    for statement in ("from torch import compile", "import torch.fft", "from torch.nn import Conv2d",
                      "from torch.distributed import rpc"):
        missing = statement.split()[-1] if statement.startswith("from") else "torch.fft"
        inside = bench_file(tmp_path, f"def run(torch):\n    {statement}\n", name="inside.py")
        with pytest.raises(UnsupportedError) as raised:
            run_bench(inside)
        assert "\n" not in str(raised.value)
        assert str(raised.value).split()[0].endswith(missing) and "is not supported by kernbench" in str(raised.value)
        at_import = bench_file(tmp_path, f"{statement}\n\ndef run(torch):\n    pass\n", name="at_import.py")
        with pytest.raises(BenchError) as refused:
            load_bench(str(at_import))
        assert "\n" not in str(refused.value)
        assert f"at_import.py:1: importing the bench failed: UnsupportedError: {raised.value}" in str(refused.value)
    called_early = bench_file(tmp_path, "from torch import zeros\n\nEARLY = zeros(2)\n\ndef run(torch):\n    pass\n",
                              name="called_early.py")
    with pytest.raises(BenchError, match="RuntimeUsageError: torch.zeros belongs to a kernbench run and none is in "
                                         "progress: use it inside the bench's run") as early:
        load_bench(str(called_early))
    assert "\n" not in str(early.value)


def test_adr0019_t29_a_runs_function_imported_at_module_level_is_the_run_in_progresss_at_each_call(tmp_path):
    path = bench_file(tmp_path, "from torch import zeros, ones\nfrom torch.distributed import all_reduce\n\n"
                                "def run(torch):\n    x = ones(3)\n    return (x + zeros(3)).tolist(), repr(zeros)\n")
    for topology in ("single_sip", "default"):  # one module-level name, each run's own factory
        (values, shown), _ = run_bench(path, topology)
        assert values == [1.0, 1.0, 1.0] and shown == "<torch.zeros of the kernbench run in progress>"
    bench = load_bench(str(path))
    with pytest.raises(RuntimeUsageError, match="torch.distributed.all_reduce belongs to a kernbench run and none "
                                                "is in progress"):
        bench.__globals__["all_reduce"](None)  # after its runs


def test_adr0019_t27_kernbench_run_of_an_unsupported_import_exits_2_with_one_line(tmp_path, capsys):
    from kernbench.cli import main

    path = bench_file(tmp_path, "def run(_torch):\n    from torch.nn import Conv2d\n")
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == ("kernbench: error: torch.nn.Conv2d is not supported by kernbench "
                                       "(see docs/torch-surface.md)\n")


def test_adr0019_t28_the_tutorial_bench_says_in_one_line_that_it_needs_values(capsys):
    # The tutorial prints the tensors it holds; --timing-only computes none, so the bench stops before any work.
    from kernbench.cli import main

    assert main(["run", "dist_tutorial", "--timing-only"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err == ("kernbench: error: dist_tutorial prints the tutorial's tensors, which --timing-only does "
                           "not compute: run it with values\n")


def test_adr0019_t23_sys_modules_and_the_real_torch_are_untouched_and_kernbench_and_triton_keep_it(
        tmp_path, monkeypatch):
    real_torch, real_distributed = types.ModuleType("torch"), types.ModuleType("torch.distributed")
    real_torch.distributed = real_distributed
    monkeypatch.setitem(sys.modules, "torch", real_torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", real_distributed)
    before = dict(sys.modules)
    import_before = builtins.__import__
    path = bench_file(tmp_path, '''\
        import sys
        import torch

        def run(bench_torch):
            import torch as inside
            library = {}
            for package in ("triton.backends.nvidia", "kernbench.kernels"):  # code kernbench runs itself
                namespace = {"__name__": package}
                exec("import torch\\nimport torch.distributed as dist", namespace)
                library[package] = (namespace["torch"], namespace["dist"])
            return torch.zeros(1)._ctx, inside.ones is bench_torch.ones, sys.modules["torch"], library
        ''')
    (ctx, inside_is_the_runs, seen_in_sys_modules, library), session = run_bench(path)
    assert ctx is session.ctx and inside_is_the_runs
    assert seen_in_sys_modules is real_torch  # what Triton's driver checks for a real torch
    assert all(pair == (real_torch, real_distributed) for pair in library.values())
    assert all(sys.modules.get(name) is module for name, module in before.items())
    assert {n for n in sys.modules if n.partition(".")[0] == "torch"} == {"torch", "torch.distributed"}
    assert sys.modules["torch"] is real_torch and sys.modules["torch.distributed"] is real_distributed
    assert builtins.__import__ is import_before
    failing = bench_file(tmp_path, "def run(_torch):\n    import torch\n    raise ValueError('the bench failed')\n",
                         name="failing.py")
    with pytest.raises(ValueError, match="the bench failed"):
        run_bench(failing)
    assert builtins.__import__ is import_before and sys.modules["torch"] is real_torch
    import torch
    assert torch is real_torch  # outside a run, `import torch` is Python's


def test_adr0019_t24_the_importable_modules_and_module_level_names_are_a_runs(tmp_path):
    torch = Session("single_sip").torch
    modules = set()

    def walk(obj, path: str) -> None:
        for name in dir(obj):
            value = getattr(obj, name)
            if not name.startswith("_") and isinstance(value, types.ModuleType):
                modules.add(f"{path}{name}")
                walk(value, f"{path}{name}.")
    walk(torch, "")
    walk(torch.distributed, "distributed.")
    # PyTorch's, private by their spelling
    private = {"distributed._tensor", "distributed._tensor.device_mesh", "distributed.tensor._random"}
    assert modules | {"ahbm", "cuda", "distributed"} | private == set(SUBMODULES)  # ahbm, cuda, distributed: objects
    for module, names in RUN_INDEPENDENT_NAMES.items():
        owner = torch
        for part in module.split(".")[1:]:
            owner = getattr(owner, part)
        assert all(getattr(owner, name) is value for name, value in names.items()), module
    path = bench_file(tmp_path, "import torch\n\ndef run(_torch):\n    pass\n")
    outside = load_bench(str(path)).__globals__["torch"]  # the bench's module-level torch, after its import
    with pytest.raises(RuntimeUsageError, match="torch.randn belongs to a kernbench run and none is in progress"):
        outside.randn(2)

"""`Session`: one simulated run and the fake `torch` namespace bound to it.

This is what `kernbench run` builds for a bench, and what a test or script
uses to drive kernbench directly:

    session = Session("default")
    session.run(bench_function, session.torch)   # in a rank greenlet; drains the engine
    print(session.report())

The namespace follows PyTorch's names wherever PyTorch has the concept; the
device module is `torch.ahbm` (as `torch.cuda`), and `torch.spec` is the
topology file as a plain nested dict.
"""

from __future__ import annotations

import functools

from kernbench import dtypes
from kernbench.ccl.distributed import Distributed
from kernbench.ccl.install import SHIPPED_CCL_PATH, load_ccl_config
from kernbench.dtypes import ALL_DTYPES, DType
from kernbench.errors import KernbenchError
from kernbench.policy import DPPolicy
from kernbench.runtime_api.launch import kernel_launch
from kernbench.runtime_api.launch.kernel_launch import MAX_PROGRAMS
from kernbench.runtime_api.namespace.accelerator import accelerator_namespace
from kernbench.runtime_api.namespace.ahbm import AhbmModule
from kernbench.runtime_api.context import RuntimeContext
from kernbench.runtime_api.current_run import set_current_torch
from kernbench.runtime_api.device import Device
from kernbench.runtime_api.namespace.factories import Factories
from kernbench.runtime_api.namespace.random import RandomFactories, RankRandom
from kernbench.runtime_api.streams import failed_operation
from kernbench.runtime_api.namespace.processes import multiprocessing_namespace
from kernbench.runtime_api.namespace.torch_imports import (GradModeBeforeARun, RunBound, outside_a_run, resolve,
                                                           torch_imports)
from kernbench.runtime_api.namespace.worker_stdout import as_worker, worker_stdout
from kernbench.runtime_api import autograd
from kernbench.runtime_api.tensor.core import Tensor
from kernbench.runtime_api.ops.binding import FUNCTIONAL, TESTING, TORCH_FUNCTIONS
from kernbench.runtime_api.namespace.method_functions import METHOD_FUNCTIONS
from kernbench.runtime_api.data import collate as data_collate, dataloader as data_loader, dataset as data_dataset
from kernbench.runtime_api.data import distributed as data_distributed, sampler as data_sampler
from kernbench.runtime_api.nn import init as nn_init, layers as nn_layers, module as nn_module, utils as nn_utils
from kernbench.runtime_api.nn.parameter import Parameter
from kernbench.runtime_api.optim import lr_scheduler, optimizers
from kernbench import data_parallel, dtensor
from kernbench.dtensor import debug as tensor_debug, parallel as tensor_parallel, random as dtensor_random
from kernbench.runtime_api.ops.overrides import overridable
from kernbench.runtime_api.unsupported import Namespace
from kernbench.sim_engine import ProcessFailed
from kernbench.sim_engine.interrupts import ctrl_c_in_driver
from kernbench.topology import Topology, load_topology

_FACTORY_NAMES = ("empty", "zeros", "ones", "full", "arange", "range", "linspace", "eye", "randn", "rand", "tensor",
                  "from_numpy", "empty_like", "zeros_like", "ones_like", "full_like")
_RANDOM_FACTORY_NAMES = ("randint", "randperm", "normal", "randn_like", "rand_like", "randint_like")
_SEED_NAMES = ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state")
# The run's grad modes a bench may make at module level, as a decorator (`@torch.no_grad()` on a model's method).
GRAD_MODES = ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode")


class Session:
    """A runtime context plus the `torch` namespace a bench receives."""

    def __init__(self, topology: Topology | str | None = None, *, ccl=None, timing_only: bool = False, seed: int = 0,
                 strict_hazards: bool = False, memcheck: bool = True, caches: bool = True,
                 max_programs: int = MAX_PROGRAMS, spmd: bool = False, spmd_skip: frozenset = frozenset()):
        """`topology` and `ccl` are files (or shipped topology names, or loaded objects); None is the shipped default.

        `memcheck=False` turns off the kernels' memcheck (ADR 0014): an access that runs from its tensor into
        another live one is then not a fault, as on a GPU without compute-sanitizer. `caches=False` turns off
        the run's speed caches (`kernbench.run_caches`): the same op log, times and values, more slowly.
        `max_programs` is the most programs one kernel launch may have (more is one `KernelLaunchError`).
        `spmd=True` simulates a spawn whose ranks do the same work once, on the first SIP (adr/0022), except the
        spawns numbered in `spmd_skip`; where one does not, `run` raises `SpmdDiverged` naming it, for the
        caller to run again with it skipped (`kernbench run` does).
        """
        if not isinstance(topology, Topology):
            topology = load_topology(topology)
        self.ccl_config = load_ccl_config(SHIPPED_CCL_PATH if ccl is None else ccl)
        kernel_launch.install()
        self.ctx = RuntimeContext(topology, timing_only=timing_only, seed=seed, strict_hazards=strict_hazards,
                                  memcheck=memcheck, caches=caches, max_programs=max_programs, spmd=spmd,
                                  spmd_skip=spmd_skip)
        self.torch = build_torch_namespace(self.ctx, self.ccl_config)

    @property
    def engine(self):
        return self.ctx.engine

    def run(self, fn, *args):
        """Run `fn(*args)` as the first rank's greenlet, then drain all device work; return its result.

        An exception `fn` raises propagates with its own traceback (wrapped by
        the engine as `ProcessFailed`'s cause is unwrapped here). So does a
        user error (`KernbenchError`: a `KernelFault`, a timing-only refusal,
        a data hazard in strict mode) from device work nobody waited for, so
        it reads as itself rather than as the stream operation that died of it.
        Any other failure of device work nobody waited for is `ProcessFailed`
        naming the operation it arose in (`streams.failed_operation`), not
        the last operation on its stream that inherited it.

        While it runs, `import torch` in the bench is this run's namespace
        (`torch_imports`), and each worker prints whole lines (`worker_stdout`).
        """
        set_current_torch(self.torch)
        process = self.engine.spawn(as_worker, fn, *args, name="bench")
        try:
            with ctrl_c_in_driver(self.engine), torch_imports(functools.partial(resolve, self.torch)), worker_stdout():
                self.engine.run()
        except ProcessFailed as failure:
            cause = failure.__cause__
            if cause is not None and (failure.process is process or isinstance(cause, KernbenchError)):
                raise cause from None
            origin = failed_operation(cause) if cause is not None else None
            if origin is not None and origin[0] is not failure.process:
                raise ProcessFailed(origin[0], origin[1], cause) from cause
            raise
        episode = self.ctx.spmd_spawn
        if episode is not None and episode.active:  # a spawn never joined: its ranks' ends are unknown to it
            episode.diverge("the spawn's ranks were never joined")
        return process.value


def _with_autograd_keywords(factory):
    """A factory that also takes torch's `requires_grad=` (a leaf that requires grad) and `pin_memory=`.

    Pinned host memory has no meaning for a simulated host, so `pin_memory`
    is accepted and has no effect. The size may be given as `size=`, as
    torch's factories take it (`torch.randn(size=(2, 3))`).
    """
    @functools.wraps(factory)
    def make(*args, requires_grad: bool = False, pin_memory: bool = False, **kwargs):
        if not args and "size" in kwargs:
            args = (kwargs.pop("size"),)
        tensor = factory(*args, **kwargs)
        return tensor.requires_grad_() if requires_grad else tensor
    return make


def _like_factory(name: str, factory):
    """`torch.zeros_like` and the other `*_like` factories defer to a DTensor argument (a DTensor like it, as an
    optimizer's state of a DTensor parameter is); the other factories take no tensor."""
    if not name.endswith("_like"):
        return factory
    factory.__name__ = name
    return overridable(factory)


def _tensor_namespace(path: str, fixed: dict) -> Namespace:
    """`torch.distributed.tensor` (or its old name `torch.distributed._tensor`) with its submodules."""
    subs = {"parallel": Namespace("torch.distributed.tensor.parallel", None,
                                  **fixed["torch.distributed.tensor.parallel"]),
            "placement_types": Namespace("torch.distributed.tensor.placement_types", None,
                                         **fixed["torch.distributed.tensor.placement_types"]),
            "device_mesh": Namespace("torch.distributed.device_mesh", None, **fixed["torch.distributed.device_mesh"]),
            "debug": Namespace("torch.distributed.tensor.debug", None, **fixed["torch.distributed.tensor.debug"]),
            "_random": Namespace("torch.distributed.tensor._random", None, **fixed["torch.distributed.tensor._random"])}
    return Namespace(path, None, **fixed["torch.distributed.tensor"], **subs)


def _inference_mode(ctx):
    """`torch.inference_mode(mode=True)`: no autograd recording inside (as `no_grad`; kernbench has no version
    counters to skip); `inference_mode(False)` keeps grad mode as it is. A context manager and a decorator."""
    def inference_mode(mode=True):
        if callable(mode):  # @torch.inference_mode, without parentheses
            return autograd.GradMode(ctx, False)(mode)
        return autograd.GradMode(ctx, False if mode else autograd.grad_enabled(ctx))
    inference_mode.__doc__ = _inference_mode.__doc__
    return inference_mode


def _public(module, names=None) -> dict:
    """The public names a module defines itself (or `names` of them), for a namespace of the fake torch."""
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
            and (names is None or name in names)}


def _submodules(fixed: dict, *paths: str) -> dict:
    """The namespaces `paths` (dotted under `torch.`, children of one parent) from their run-independent names."""
    return {path.rpartition(".")[2]: Namespace(path, None, **fixed[path]) for path in paths}


def build_torch_namespace(ctx: RuntimeContext, ccl_config) -> Namespace:
    """The fake `torch` module for one run, its `distributed` using `ccl_config`.

    A name it lacks is one `UnsupportedError` line (unsupported.py);
    docs/torch-surface.md lists what it has, generated from it. Its names are
    `RUN_INDEPENDENT_NAMES` and those bound to the run made here.
    """
    factories = Factories(ctx)
    random_factories = RandomFactories(factories)
    seeding = RankRandom(ctx)
    ahbm = AhbmModule(ctx)

    fixed = RUN_INDEPENDENT_NAMES
    distributed = Distributed(ctx, ccl_config, {
        "device_mesh": Namespace("torch.distributed.device_mesh", None, **fixed["torch.distributed.device_mesh"]),
        "tensor": _tensor_namespace("torch.distributed.tensor", fixed),
        "_tensor": _tensor_namespace("torch.distributed._tensor", fixed),
        "DeviceMesh": dtensor.DeviceMesh, "init_device_mesh": dtensor.init_device_mesh})
    return Namespace(
        "torch", "The fake torch module of one kernbench run.",
        **fixed["torch"],
        spec=ctx.topology.spec,
        ahbm=ahbm,
        cuda=ahbm,
        accelerator=accelerator_namespace(ahbm),
        Generator=ctx.Generator,
        set_default_device=ctx.set_default_device,
        get_default_device=ctx.get_default_device,
        _device_scope=(ctx.enter_device_scope, ctx.exit_device_scope),
        _host_generator=ctx.default_generator,  # the calling rank's, for torch.utils.data's samplers
        is_timing_only=ahbm.is_timing_only,
        distributed=distributed,
        multiprocessing=multiprocessing_namespace(ctx, distributed._check_spawn),
        **{name: _like_factory(name, _with_autograd_keywords(getattr(factories, name))) for name in _FACTORY_NAMES},
        **{name: _like_factory(name, _with_autograd_keywords(getattr(random_factories, name)))
           for name in _RANDOM_FACTORY_NAMES},
        **{name: getattr(seeding, name) for name in _SEED_NAMES},
        nn=Namespace("torch.nn", None, **fixed["torch.nn"],
                     **_submodules(fixed, "torch.nn.functional", "torch.nn.init", "torch.nn.parallel",
                                   "torch.nn.utils")),
        optim=Namespace("torch.optim", None, **fixed["torch.optim"],
                        **_submodules(fixed, "torch.optim.lr_scheduler")),
        autograd=Namespace("torch.autograd", None, **fixed["torch.autograd"]),
        utils=Namespace("torch.utils", None, data=Namespace(
            "torch.utils.data", None, **fixed["torch.utils.data"],
            **_submodules(fixed, "torch.utils.data.dataloader", "torch.utils.data.dataset",
                          "torch.utils.data.sampler", "torch.utils.data.distributed"))),
        testing=Namespace("torch.testing", None, **fixed["torch.testing"]),
        no_grad=lambda: autograd.GradMode(ctx, False),
        inference_mode=_inference_mode(ctx),
        enable_grad=lambda: autograd.GradMode(ctx, True),
        set_grad_enabled=lambda mode: autograd.GradMode(ctx, bool(mode)),
        is_grad_enabled=lambda: autograd.grad_enabled(ctx),
    )


def lookup_before_a_run(module: str, attr: str):
    """`module.attr` as a bench's module-level code finds it, before its run exists
    (runtime_api/namespace/torch_imports.py).

    A run-independent name is itself; a name no run has is its
    `UnsupportedError` line; a run's function is a `RunBound`, found in the
    run in progress when called; any other name (a run's tensor, class or
    settings) is one line saying it needs the run.
    """
    fixed = RUN_INDEPENDENT_NAMES.get(module, {})
    if attr in fixed:
        return fixed[attr]
    value = resolve(_reference_torch(), module, attr)
    if module == "torch" and attr in GRAD_MODES:
        return GradModeBeforeARun(module, attr, getattr(value, "__doc__", None))
    if callable(value) and not isinstance(value, type):
        return RunBound(module, attr, getattr(value, "__doc__", None))
    raise outside_a_run(module, attr)


@functools.cache
def _reference_torch() -> Namespace:
    """A namespace on the smallest shipped machine, to tell a name every run has from one none has: a run's names
    do not depend on its machine or configuration, only their values do. Made once per process, not per run
    (`kernbench.run_caches`): only its names are read, and they are the same for every run."""
    return build_torch_namespace(RuntimeContext(load_topology("single_sip")), load_ccl_config(SHIPPED_CCL_PATH))


# The names of the fake torch and its submodules that are the same objects in every run (no runtime context behind
# them), by module: a bench's module-level `from torch import float16`, run before its run starts, gets these
# (runtime_api/namespace/torch_imports.py).
RUN_INDEPENDENT_NAMES = {
    "torch": {
        "Tensor": Tensor, "dtype": DType, "Size": tuple, "device": Device, "DPPolicy": DPPolicy,
        **TORCH_FUNCTIONS,
        **METHOD_FUNCTIONS,
        **{d.torch_name: d for d in ALL_DTYPES},
        "half": dtypes.float16, "float": dtypes.float32, "double": dtypes.float64,
        "int": dtypes.int32, "long": dtypes.int64, "short": dtypes.int16, "bool": dtypes.bool_,
        "cfloat": dtypes.complex64, "cdouble": dtypes.complex128,
    },
    "torch.distributed": {**{name: value for name, value in vars(Distributed).items() if isinstance(value, type)},
                          "DeviceMesh": dtensor.DeviceMesh, "init_device_mesh": dtensor.init_device_mesh},
    "torch.distributed.device_mesh": {"DeviceMesh": dtensor.DeviceMesh, "init_device_mesh": dtensor.init_device_mesh},
    "torch.distributed.tensor": {name: getattr(dtensor, name) for name in dtensor.__all__ if name != "DTensorError"},
    "torch.distributed.tensor.placement_types": {name: getattr(dtensor, name)
                                                 for name in ("Placement", "Shard", "Replicate", "Partial")},
    "torch.distributed.tensor.parallel": {name: getattr(tensor_parallel, name) for name in tensor_parallel.__all__},
    "torch.distributed.tensor.debug": {"CommDebugMode": tensor_debug.CommDebugMode},
    "torch.distributed.tensor._random": {name: getattr(dtensor_random, name) for name in (
        "OffsetBasedRNGTracker", "manual_seed", "is_rng_supported_mesh", "get_rng_tracker", "set_rng_tracker")},
    "torch.nn": {"Parameter": Parameter, **_public(nn_module, ("Module", "Sequential", "ModuleList", "ModuleDict")),
                 **_public(nn_layers)},
    "torch.nn.functional": FUNCTIONAL,
    "torch.nn.init": _public(nn_init),
    "torch.nn.utils": _public(nn_utils),
    "torch.nn.parallel": _public(data_parallel),
    "torch.optim": _public(optimizers),
    "torch.optim.lr_scheduler": _public(lr_scheduler),
    "torch.autograd": {"Function": autograd.Function, "backward": autograd.backward},
    "torch.utils.data.dataloader": {**_public(data_loader, ("DataLoader", "get_worker_info")),
                                    **_public(data_collate, ("default_collate", "default_convert"))},
    "torch.utils.data.dataset": _public(data_dataset, ("Dataset", "IterableDataset", "TensorDataset", "StackDataset",
                                                       "ConcatDataset", "ChainDataset", "Subset", "random_split")),
    "torch.utils.data.sampler": _public(data_sampler, ("Sampler", "SequentialSampler", "RandomSampler",
                                                       "SubsetRandomSampler", "WeightedRandomSampler",
                                                       "BatchSampler")),
    "torch.utils.data.distributed": _public(data_distributed),
    "torch.testing": TESTING,
    # A test's module-level `skipif(not torch.cuda.is_available())`: the simulated device is in every run.
    "torch.ahbm": {"is_available": AhbmModule.is_available},
    "torch.cuda": {"is_available": AhbmModule.is_available},
}
RUN_INDEPENDENT_NAMES["torch.utils.data"] = {
    name: value for path in ("dataloader", "dataset", "sampler", "distributed")
    for name, value in RUN_INDEPENDENT_NAMES[f"torch.utils.data.{path}"].items()}
# PyTorch's older names of the same modules (pytorch/examples still import them).
RUN_INDEPENDENT_NAMES["torch.distributed._tensor"] = RUN_INDEPENDENT_NAMES["torch.distributed.tensor"]
RUN_INDEPENDENT_NAMES["torch.distributed._tensor.device_mesh"] = RUN_INDEPENDENT_NAMES["torch.distributed.device_mesh"]
RUN_INDEPENDENT_NAMES["torch.distributed.tensor.device_mesh"] = RUN_INDEPENDENT_NAMES["torch.distributed.device_mesh"]

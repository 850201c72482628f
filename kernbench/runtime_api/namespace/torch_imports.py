"""`import torch` inside a bench: kernbench's namespace, while kernbench imports or runs the bench.

A ported script says `import torch`, `import torch.distributed as dist`,
`from torch import nn`, `from torch.nn import functional as F`, at module
level and inside its workers. Within `torch_imports(...)` (the bench's import,
`bench_loader`, and `Session.run`) those statements give `RunTorch` modules:
each name is looked up at use in the namespace of the run in progress, so
one module-level `import torch` serves whichever run calls the bench. Names
that are the same in every run (dtypes, `Tensor`, the device ops:
`session.RUN_INDEPENDENT_NAMES`) resolve with no run, so `from torch import
float16` works at module level (`session.lookup_before_a_run`); a run's
function imported there (`from torch import zeros`) is a `RunBound` that
finds it in the run in progress at each call; any other run name used
outside a run is one line saying so. A name kernbench lacks is its one `UnsupportedError`
line, also through `import torch.X` and `from torch.X import Y` (which
Python would otherwise turn into a bare ImportError).

The statements are caught in `builtins.__import__`, not by putting modules
in `sys.modules`: so `sys.modules` is never touched (a real torch loaded in
the same process stays as it was), and code kernbench runs itself keeps the
real torch. Triton (3.6+) decides whether a real torch is loaded by
`sys.modules.get("torch")` and then calls `torch.cuda` and `torch.version`
to pick and build its GPU driver, and it imports torch inside its driver and
testing functions: those imports, made from the packages of
`REAL_TORCH_IMPORTERS`, go to Python's own import.
"""

from __future__ import annotations

import builtins
import functools
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

from greenlet import getcurrent

from kernbench.runtime_api.errors import RuntimeUsageError
from kernbench.runtime_api.unsupported import UnsupportedError

# The fake torch's submodules, as `import torch.X` reaches them (a test holds this to the namespace's modules).
SUBMODULES = ("accelerator", "ahbm", "autograd", "cuda", "distributed", "distributed.device_mesh", "distributed.tensor",
              "distributed.tensor.debug", "distributed.tensor.device_mesh", "distributed.tensor.parallel",
              "distributed.tensor._random",
              "distributed.tensor.placement_types", "distributed._tensor", "distributed._tensor.device_mesh",
              "multiprocessing", "nn", "nn.functional", "nn.init", "nn.parallel", "nn.utils", "optim",
              "optim.lr_scheduler", "testing", "utils", "utils.data", "utils.data.dataloader", "utils.data.dataset",
              "utils.data.sampler", "utils.data.distributed")

# Top-level packages whose `import torch` is Python's: kernbench's own code never means the fake, and Triton's
# means a real GPU's torch.
REAL_TORCH_IMPORTERS = frozenset({"kernbench", "triton"})

_lookup = [None]  # how a name is found now: in the run in progress, before a bench's run, or (None) nowhere


class RunTorch(ModuleType):
    """`torch` or one of its submodules as a bench imports it: each name is found at use, in the run in progress.

    A name a simulated worker sets on the module (a test's
    `monkeypatch.setattr(torch.distributed, "all_reduce", fake)` on a rank)
    is that worker's alone, as each of torchrun's processes has its own
    `torch`: it is found before the run's, by the worker's code and by
    kernbench code that calls through the module as PyTorch code does
    (`torch_module`), until the worker sets the name back to the value it
    replaced or deletes it (monkeypatch's undo, inside the worker or after the
    run, when the worker's names are gone already). A name set outside any worker (a bench's
    module level) is the module's, seen in every run.
    """

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        patched = _WORKER_PATCHES.get().get((self.__name__, attr))
        if patched is not None:
            return patched[0]
        if _lookup[0] is None:
            raise outside_a_run(self.__name__, attr)
        return _lookup[0](self.__name__, attr)

    def __setattr__(self, attr: str, value) -> None:
        if getcurrent().parent is None or attr.startswith("_") or isinstance(value, ModuleType):
            super().__setattr__(attr, value)  # not in a worker: the module's own, as Python's
            return
        key, patches = (self.__name__, attr), dict(_WORKER_PATCHES.get())
        replaced = patches[key][1] if key in patches else getattr(self, attr)
        if key in patches and (value is replaced or value == replaced):
            del patches[key]
        else:
            patches[key] = (value, replaced)
        _WORKER_PATCHES.set(patches)

    def __delattr__(self, attr: str) -> None:
        patches = _WORKER_PATCHES.get()
        if (self.__name__, attr) not in patches:
            if attr in self.__dict__ or attr.startswith("_"):
                super().__delattr__(attr)
            # else a worker's own name, gone with its worker (a test's monkeypatch undone after the run): the name
            # is the run's again already
            return
        _WORKER_PATCHES.set({key: value for key, value in patches.items() if key != (self.__name__, attr)})


# What the calling worker (a greenlet: each has its own context) set on the modules: (module, name) -> (the value
# set, the value it replaced).
_WORKER_PATCHES: ContextVar[dict] = ContextVar("kernbench_torch_worker_patches", default={})


class RunBound:
    """A run's function named at a bench's module level (`from torch import zeros`): each call finds it in the
    run in progress, so one module-level name serves every run; a call outside a run is `outside_a_run`'s line."""

    def __init__(self, module: str, attr: str, doc: str | None):
        self._module, self._attr = module, attr
        self.__name__, self.__qualname__, self.__doc__ = attr, attr, doc

    def __call__(self, *args, **kwargs):
        target = None if _lookup[0] is None else _lookup[0](self._module, self._attr)
        if target is None or isinstance(target, RunBound):
            raise outside_a_run(self._module, self._attr)
        return target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self._module}.{self._attr} of the kernbench run in progress>"


class GradModeBeforeARun(RunBound):
    """`torch.no_grad` and its kind named before a run: a call there (`@torch.no_grad()` on a model's method, at
    the bench's module level) makes a `DeferredGradMode`; a call in a run is the run's own."""

    def __call__(self, *args, **kwargs):
        target = None if _lookup[0] is None else _lookup[0](self._module, self._attr)
        if target is None or isinstance(target, RunBound):
            return DeferredGradMode(self._module, self._attr, args, kwargs)
        return target(*args, **kwargs)


class DeferredGradMode:
    """A grad mode made before its run (`@torch.no_grad()` at module level): a decorator and a context manager
    that enter the grad mode of the run in progress when they are entered."""

    def __init__(self, module: str, attr: str, args: tuple, kwargs: dict):
        self._module, self._attr, self._args, self._kwargs = module, attr, args, kwargs
        self._entered: list = []

    def __enter__(self):
        target = None if _lookup[0] is None else _lookup[0](self._module, self._attr)
        if target is None or isinstance(target, RunBound):
            raise outside_a_run(self._module, self._attr)
        mode = target(*self._args, **self._kwargs)
        self._entered.append(mode)
        return mode.__enter__()

    def __exit__(self, *exc):
        return self._entered.pop().__exit__(*exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with DeferredGradMode(self._module, self._attr, self._args, self._kwargs):
                return fn(*args, **kwargs)
        return wrapped


def resolve(torch, module: str, attr: str):
    """`module.attr` (`module` a dotted name under `torch`: "torch", "torch.nn", ...) in the namespace `torch`."""
    for part in module.split(".")[1:]:
        torch = getattr(torch, part)
    return getattr(torch, attr)


def outside_a_run(module: str, attr: str) -> RuntimeUsageError:
    """The one line for a run's name used where no run is in progress (a bench's module level, after a run)."""
    return RuntimeUsageError(f"{module}.{attr} belongs to a kernbench run and none is in progress: use it inside "
                             "the bench's run (at module level, import torch and its submodules and name its "
                             "dtypes and Tensor)")


def _module_tree() -> dict[str, RunTorch]:
    """`torch` and its submodules by dotted name, each submodule also an attribute of its parent."""
    modules = {"torch": RunTorch("torch", "kernbench's torch: the namespace of the run in progress.")}
    for path in SUBMODULES:
        parent, _, leaf = f"torch.{path}".rpartition(".")
        modules[f"torch.{path}"] = RunTorch(f"torch.{path}")
        setattr(modules[parent], leaf, modules[f"torch.{path}"])
    return modules


MODULES = _module_tree()


def torch_module(name: str) -> RunTorch:
    """`torch` or a submodule (`"torch.distributed"`) as `import` gives it to a bench: for kernbench code that calls
    a name the way PyTorch code does (`torch.distributed.all_reduce`), so a test that replaces it there is seen."""
    return MODULES[name]


def _fake_import(name: str, fromlist) -> ModuleType:
    """What `import name` (no fromlist: the top module) or `from name import ...` gives a bench."""
    module = MODULES.get(name)
    if module is None:
        raise UnsupportedError(name, "kernbench's torch has no module by that name; ")
    if not fromlist:
        return MODULES["torch"]
    for attr in fromlist:
        if attr != "*":
            getattr(module, attr)  # a missing name is its own one line here, not Python's ImportError
    return module


def _imports_real_torch(importer_globals) -> bool:
    name = (importer_globals or {}).get("__name__") or ""
    return name.partition(".")[0] in REAL_TORCH_IMPORTERS


@contextmanager
def torch_imports(lookup):
    """Inside the block `import torch` (and its submodules) outside kernbench and Triton is kernbench's.

    `lookup(module, attr)` finds each name: `functools.partial(resolve,
    torch)` in a run, `session.lookup_before_a_run` while a bench is
    imported. The previous state comes back when the block ends, however it
    ends, so blocks nest.
    """
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if level or name.partition(".")[0] != "torch" or _imports_real_torch(globals):
            return real_import(name, globals, locals, fromlist, level)
        return _fake_import(name, fromlist)

    previous = _lookup[0]
    _lookup[0] = lookup
    builtins.__import__ = import_
    try:
        yield
    finally:
        builtins.__import__ = real_import
        _lookup[0] = previous

"""A pytest plugin that runs Megatron-LM's own tensor_parallel unit tests, unchanged, on kernbench's 8 ranks.

For a user with a Megatron-LM checkout (`test_upstream.py` runs it when
KERNBENCH_MEGATRON_LM names one). Nothing of Megatron's is kept here: the
test files are read from the checkout. Three things stand in for
Megatron's world:

- **Imports, remapped name by name.** A meta-path finder answers
  `megatron.*` and `tests.unit_tests.*`: a Megatron module kernbench
  mirrors is the kernbench module itself (so a test's monkeypatching
  reaches it), the `tensor_parallel` package an alias of
  `kernbench.tp.tensor_parallel` that can hold submodules, `megatron.core.utils` names
  are mapped one by one, Megatron's Transformer Engine extension is the
  module as Megatron has it without Transformer Engine (`te_general_gemm`
  None), and any other Megatron name (Transformer Engine layers, models) is
  a placeholder that skips the test using it. `import torch` is kernbench's
  (`torch_imports`).
- **torchrun's 8 processes.** Each test runs on 8 ranks (`on_every_rank`,
  Megatron's world of 8, on a machine of 8 SIPs); every rank imports its own copy of the test module, as
  each process would, so module-level `rank = Utils.rank` is per rank, and a function its test monkeypatches
  onto a module is its own (`_RankMonkeyPatch`).
- **`Utils`** (`tests.unit_tests.test_utilities`): Megatron's methods, with
  `Utils.rank` the calling rank.
- **Tests Megatron fails itself** (`FAILS_IN_MEGATRON`) are expected to fail
  with the error Megatron raises (strict xfail).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from contextvars import ContextVar
from types import ModuleType

import pytest

from kernbench.runtime_api.namespace.torch_imports import torch_imports
from kernbench.session import lookup_before_a_run
from kernbench.tp.rank_layout import LayoutAssertionError
from megatron_utils import Utils as KernbenchUtils  # tests/tp, on the path beside this folder
from megatron_utils import on_every_rank

ALIASES = {
    "megatron.core.tensor_parallel": "kernbench.tp.tensor_parallel",
    "megatron.core.tensor_parallel.mappings": "kernbench.tp.mappings",
    "megatron.core.tensor_parallel.layers": "kernbench.tp.layers",
    "megatron.core.tensor_parallel.random": "kernbench.tp.random",
    "megatron.core.tensor_parallel.cross_entropy": "kernbench.tp.cross_entropy",
    "megatron.core.tensor_parallel.data": "kernbench.tp.data",
    "megatron.core.tensor_parallel.utils": "kernbench.tp.utils",
    "megatron.core.parallel_state": "kernbench.tp.parallel_state",
    "megatron.core.process_groups_config": "kernbench.tp.process_groups_config",
    "megatron.core.models.common.language_module.language_module": "kernbench.tp.language_module",
    "megatron.core.transformer.transformer_config": "kernbench.tp.config",
    "megatron.core.model_parallel_config": "kernbench.tp.config",
    "tests.unit_tests.test_utilities": __name__,
}
PACKAGES = {"megatron.core.tensor_parallel"}  # aliases that hold submodules
# Upstream tests that fail in Megatron itself, and why: each is expected to fail here with the error Megatron
# raises (strict: a pass is reported as a failure).
FAILS_IN_MEGATRON = {
    f"test_parallel_state.py::test_different_initialize_order_unconsistency[src_tp_pp{case}-2]": (
        LayoutAssertionError,
        "Megatron asserts too: with pipelining and ep 2 under 'tp-pp-ep-dp' the dense and expert data-parallel sizes "
        "differ (Megatron marks the test flaky, and its CI deselects flaky tests)")
    for case in (3, 4, 5)
}
NAMES = {
    "megatron.core.utils": {
        "get_tensor_model_parallel_group_if_none": ("kernbench.tp.mappings", "get_tensor_model_parallel_group_if_none"),
        "divide": ("kernbench.tp.utils", "divide"),
        "init_method_normal": ("kernbench.tp.init_methods", "init_method_normal"),
        "scaled_init_method_normal": ("kernbench.tp.init_methods", "scaled_init_method_normal"),
    },
    "megatron.core.extensions.transformer_engine": {"te_general_gemm": None},
}


class _Alias(ModuleType):
    """A Megatron package for a kernbench module: attribute reads and writes go to the kernbench module, except
    the submodules the import system binds on the package."""

    def __init__(self, name: str, target: ModuleType):
        super().__init__(name)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "__path__", [])

    def __getattr__(self, attr):
        return getattr(object.__getattribute__(self, "_target"), attr)

    def __setattr__(self, attr, value):
        if attr.startswith("__") or isinstance(value, ModuleType):
            object.__setattr__(self, attr, value)
        else:
            setattr(object.__getattribute__(self, "_target"), attr, value)

    def __delattr__(self, attr):
        delattr(object.__getattribute__(self, "_target"), attr)


class _Absent:
    """A Megatron name kernbench does not have: using it skips the test, naming it."""

    def __init__(self, where: str):
        self._where = where

    def __call__(self, *args, **kwargs):
        if ".transformer_engine." in self._where:
            pytest.skip(f"{self._where} is Transformer Engine's (NVIDIA's CUDA library, which kernbench does not "
                        "simulate)")
        pytest.skip(f"{self._where} is not part of kernbench (Megatron's models)")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self()


class _Names(ModuleType):
    """A Megatron module of which kernbench has some names, mapped one by one; the others are `_Absent`."""

    def __init__(self, name: str, table: dict):
        super().__init__(name)
        self.__path__, self._table = [], table

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if f"{self.__name__}.{attr}" in ALIASES:  # a submodule kernbench mirrors (`from package import module`)
            return importlib.import_module(f"{self.__name__}.{attr}")
        if attr not in self._table:
            return _Absent(f"{self.__name__}.{attr}")
        if self._table[attr] is None:
            return None
        module, name = self._table[attr]
        return getattr(importlib.import_module(module), name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "megatron" or fullname.startswith(("megatron.", "tests.unit_tests")):
            leaf = fullname in ALIASES and fullname not in PACKAGES
            return importlib.machinery.ModuleSpec(fullname, self, is_package=not leaf)
        return None

    def create_module(self, spec):
        if spec.name in PACKAGES:
            return _Alias(spec.name, importlib.import_module(ALIASES[spec.name]))
        if spec.name in ALIASES:
            return importlib.import_module(ALIASES[spec.name])
        return _Names(spec.name, NAMES.get(spec.name, {}))

    def exec_module(self, module):
        pass


# ---- Megatron's test Utils ------------------------------------------------------------------------------------
_RANK: ContextVar[int] = ContextVar("megatron_test_rank", default=0)


class _PerRank(type):
    @property
    def rank(cls) -> int:
        return _RANK.get()


class Utils(KernbenchUtils, metaclass=_PerRank):
    """Megatron's `tests.unit_tests.test_utilities.Utils` as kernbench's tests have it, with `Utils.rank`
    the calling rank (Megatron's LOCAL_RANK)."""


# ---- a test's monkeypatch, per rank ----------------------------------------------------------------------------
class _PerRankFunction:
    """A module's function that several ranks' tests replace at once: a call goes to the calling rank's
    replacement, else to the function replaced (each of torchrun's processes patches its own module)."""

    def __init__(self, replaced):
        self.replaced, self.by_rank = replaced, {}

    def __call__(self, *args, **kwargs):
        return self.by_rank.get(_RANK.get(), self.replaced)(*args, **kwargs)


class _RankMonkeyPatch:
    """The test's `monkeypatch` as one rank uses it: a function set on a Python module is this rank's alone (the
    fixture itself undoes the module's attribute after the test); anything else is the fixture's own setattr
    (kernbench's torch modules keep a worker's names per worker already)."""

    def __init__(self, shared):
        self._shared = shared

    def setattr(self, target, name, *value, raising: bool = True):
        if not value or type(target) not in (ModuleType, _Alias) or not callable(value[0]):
            return self._shared.setattr(target, name, *value, raising=raising)
        value = value[0]
        current = getattr(target, name)
        if not isinstance(current, _PerRankFunction):
            current = _PerRankFunction(current)
            self._shared.setattr(target, name, current, raising=raising)
        current.by_rank[_RANK.get()] = value
        return None

    def __getattr__(self, attr):
        return getattr(self._shared, attr)


# ---- the plugin's hooks ---------------------------------------------------------------------------------------
_IMPORTS = []


def pytest_configure(config):
    sys.meta_path.insert(0, _Finder())
    _IMPORTS.append(torch_imports(lookup_before_a_run))
    _IMPORTS[-1].__enter__()  # collection: a test module's `import torch` is kernbench's


def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid in FAILS_IN_MEGATRON:
            raises, reason = FAILS_IN_MEGATRON[item.nodeid]
            item.add_marker(pytest.mark.xfail(raises=raises, strict=True, reason=reason))


def pytest_unconfigure(config):
    while _IMPORTS:
        _IMPORTS.pop().__exit__(None, None, None)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """The test on every rank of a world of 8, each in its own copy of the test module; a rank's failure is
    raised as itself."""
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    path, cls = pyfuncitem.module.__file__, pyfuncitem.cls
    name = pyfuncitem.originalname or pyfuncitem.name

    def worker(torch, rank, world_size):
        token = _RANK.set(rank)
        own = {name: _RankMonkeyPatch(value) if name == "monkeypatch" else value for name, value in kwargs.items()}
        try:
            module = _module_copy(path, rank)
            if cls is None:
                getattr(module, name)(**own)
                return
            instance = getattr(module, cls.__name__)()
            try:
                getattr(instance, name)(**own)
            finally:
                if hasattr(instance, "teardown_method"):
                    instance.teardown_method(getattr(instance, name))
        finally:
            _RANK.reset(token)

    on_every_rank(worker)
    return True


def _module_copy(path: str, rank: int) -> ModuleType:
    name = f"megatron_test_rank{rank}_{os.path.splitext(os.path.basename(path))[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

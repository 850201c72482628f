"""docs/torch-surface.md, generated from the code: every name kernbench's torch provides, and common ones it does not.

`render_surface(torch)` walks a run's namespace — `torch`, `torch.ahbm`
(also `torch.cuda`), `torch.distributed`, every submodule, and `Tensor` —
and gives each public name the first paragraph of its docstring, which
states what it does and, for device work, its cost rule; then it lists the
op table's rows (ops/table.py): each op's forms, cost class and whether it
has a derivative. A test compares the committed page with this text, so the
page cannot go stale:

    python docs/torch_surface.py > docs/torch-surface.md
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from kernbench.dtypes import DType
from kernbench.runtime_api.ops.table import FORMS, ROWS
from kernbench.runtime_api.tensor.core import HOST_READS, Tensor
from kernbench.runtime_api.unsupported import KNOWN_UNSUPPORTED, SURFACE_DOC, Namespace

REGENERATE = "python docs/torch_surface.py > docs/torch-surface.md"
_INTROS = {
    "torch.ahbm": "`torch.cuda` is this same module. One default random generator per rank serves every device.",
    "torch.distributed": "The collectives are PE programs over IPCQ (ADR 0010, 0012); ccl.yaml picks the algorithm.",
}
# Tensor's own dunders that are plumbing, not torch's surface.
_TENSOR_PLUMBING = {"__init__", "__getattr__", "__kernbench_pointer__", "__kernbench_extent__"}


def public_names(obj) -> list[str]:
    """The public names of one part of the surface: a module's own names, an object's attributes and methods."""
    names = vars(obj) if isinstance(obj, Namespace) else dir(obj)
    return sorted(name for name in names if not name.startswith("_"))


def tensor_names(sample: Tensor) -> list[str]:
    """`Tensor`'s methods, properties and attributes, with the operator and protocol dunders it defines."""
    own = {name for name, value in _class_names().items() if name not in _TENSOR_PLUMBING
           and (not name.startswith("_") or _is_dunder(name) and _is_method_or_property(value))}
    attributes = {name for name in vars(sample) if not name.startswith("_")}
    return sorted(own | attributes, key=lambda name: (name.startswith("__"), name))


def _class_names() -> dict:
    """`Tensor`'s own names and those its op-table base gives it (a name of both is Tensor's own)."""
    names = {}
    for cls in reversed(Tensor.__mro__[:-1]):
        names.update(vars(cls))
    return names


def sections(torch) -> list[tuple[str, object]]:
    """(path, object) of every part of the surface: torch, its device and distributed modules, its submodules."""
    found = [("torch", torch), ("torch.ahbm", torch.ahbm), ("torch.distributed", torch.distributed)]
    pending = [("torch", torch), ("torch.distributed", torch.distributed)]
    while pending:
        path, module = pending.pop(0)
        for name in public_names(module):
            value = vars(module).get(name)
            if isinstance(value, Namespace):
                found.append((f"{path}.{name}", value))
                pending.append((f"{path}.{name}", value))
    return found


def render_surface(torch) -> str:
    """The text of docs/torch-surface.md for this namespace."""
    lines = [
        "# The torch surface of kernbench",
        "",
        f"Generated from the code by `{REGENERATE}`; a test fails when this page",
        "differs from what the code generates. Each name's description is the first paragraph of its",
        "docstring: what it does and, for device work, what it costs. A public name not listed here",
        "raises one line, `torch.X is not supported by kernbench (see " + SURFACE_DOC + ")` — an",
        "`AttributeError`, so `hasattr` is False, and a `KernbenchError`, so `kernbench run` exits 2.",
        "`torch.cuda` is `torch.ahbm`, and the device type `cuda` is read as `ahbm`.",
        "",
    ]
    parts = sections(torch)
    modules = {id(obj): path for path, obj in parts}
    for path, obj in parts:
        lines += _table(path, [(name, _described(obj, name, path, modules)) for name in public_names(obj)],
                        _INTROS.get(path, ""))
    sample = torch.from_numpy(np.zeros(1, dtype=np.float32), name="surface_sample")
    lines += _table("torch.Tensor", [(name, _tensor_description(sample, name)) for name in tensor_names(sample)],
                    "Methods and properties; *host read* marks a barrier that waits for the writes in flight "
                    "(ADR 0005).")
    lines += _op_table()
    lines += ["## Known unsupported", "", "Common PyTorch names kernbench does not provide, and why.", "",
              "| name | why |", "|---|---|"]
    lines += [f"| `{name}` | {_cell(why)} |" for name, why in sorted(KNOWN_UNSUPPORTED.items())]
    return "\n".join(lines) + "\n"


def _op_table() -> list[str]:
    """The op table's rows: where each op is found, how its device work is timed, how autograd differentiates it."""
    out = ["## The op table", "",
           "One row per op (`kernbench/runtime_api/ops/table.py`): the forms it takes, its cost class "
           "(how its device work is timed) and how autograd differentiates it.", "",
           "| op | aliases | forms | cost class | derivative |", "|---|---|---|---|---|"]
    for name, row in sorted(ROWS.items()):
        forms = ", ".join(form for form in FORMS if form in row.forms)
        aliases = ", ".join(f"`{alias}`" for alias in row.aliases)
        out.append(f"| `{name}` | {aliases} | {forms} | {row.cost.name.lower()} | {row.derivative} |")
    return out + [""]


def _table(path: str, rows: list[tuple[str, str]], intro: str = "") -> list[str]:
    out = [f"## `{path}`", ""]
    if intro:
        out += [intro, ""]
    out += ["| name | description |", "|---|---|"]
    out += [f"| `{path}.{name}` | {_cell(text)} |" for name, text in rows]
    return out + [""]


def _described(owner, name: str, path: str, modules: dict[int, str]) -> str:
    """One name of a module or object: an alias, a section of its own, a dtype, a callable's docstring, a value."""
    value = vars(owner)[name] if isinstance(owner, Namespace) else getattr(owner, name)
    if isinstance(owner, Namespace):
        first = next(other for other in public_names(owner) if vars(owner)[other] is value)
        if isinstance(value, DType) and name != value.torch_name:
            return f"alias of `torch.{value.torch_name}`"
        if first != name and not isinstance(value, DType):
            return f"alias of `{path}.{first}`"
    if id(value) in modules:
        return f"module: see `{modules[id(value)]}` below"
    if isinstance(value, DType):
        plural = "s" if value.itemsize > 1 else ""
        return f"element type of {value.itemsize} byte{plural} (kernbench name `{value.name}`)"
    return _docstring(value)


def _tensor_description(sample: Tensor, name: str) -> str:
    static = inspect.getattr_static(sample, name)
    if name in vars(sample):
        text = f"attribute ({type(static).__name__})"
    elif isinstance(static, property):
        text = "(property) " + _docstring(static.fget)
    else:
        alias = next((other for other, candidate in _class_names().items() if candidate is static and other < name),
                     None)
        text = f"alias of `torch.Tensor.{alias}`" if alias else _docstring(getattr(Tensor, name))
    return text + (" — *host read*" if name in HOST_READS else "")


def _docstring(value) -> str:
    """The first paragraph of `value`'s own docstring, on one line; builtins and plain values say what they are."""
    if isinstance(value, functools.partial):
        value = value.func
    if isinstance(value, type) and value.__module__ == "builtins":
        return f"Python's `{value.__name__}`"
    if not (callable(value) or inspect.isclass(value)):
        return f"a `{type(value).__name__}` value"
    doc = inspect.getdoc(value)
    if not doc:
        return "(no description)"
    return " ".join(doc.split("\n\n")[0].split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _is_method_or_property(value) -> bool:
    return inspect.isfunction(value) or isinstance(value, property)

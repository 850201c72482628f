"""Finding and importing a bench: a path to a `.py` file, a shipped name, or a shipped bench's number.

A bench is a Python file defining `run(torch)` (or `run(torch, argv)` with
its options declared by `add_arguments(parser)`, `bench_options.py`). It may
also `import torch` (and `torch.distributed`, ...) as a script does, at module
level or in its functions: that is the same namespace (`torch_imports.py`).
Shipped benches live in `kernbench/benches/` (the repository's `benches/`
folder links there), so `kernbench run ccl_allreduce` works from any
folder, and are numbered 1, 2, … in name order (`kernbench list`), so
`kernbench run 2` is the second. A bench's description is the first line of
its module docstring, read from the source without importing it. Problems
finding or importing a bench are the user's to fix, so they become one-line
`BenchError`s; an exception raised *inside* `run` is the bench's own and
keeps its traceback (the CLI prints it and exits 1).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from kernbench.errors import KernbenchError
from kernbench.report.natural_sort import natural_key
from kernbench.runtime_api.namespace.torch_imports import torch_imports

SHIPPED_BENCHES = Path(__file__).resolve().parent.parent / "benches"


class BenchError(KernbenchError):
    """A bench that cannot be found, imported, or has no `run(torch)`."""


@dataclass(frozen=True)
class Bench:
    """A loaded bench: its name (the file's stem), file, entry point and option declarations (or None)."""

    name: str
    path: Path
    run: Callable
    add_arguments: Callable | None


def shipped_bench_names() -> list[str]:
    """The shipped benches' names in `kernbench list` order: bench number N is element N - 1."""
    return [path.stem for path in benches_in(SHIPPED_BENCHES)]


def benches_in(folder: Path) -> list[Path]:
    """The `.py` files directly in `folder` that define a top-level `run`, in natural name order.

    Found by reading each file's syntax tree, not by importing it: listing a
    folder must not run the scripts that happen to be there. A file that is
    not valid Python is not a bench here (`kernbench run` says why).
    """
    found = []
    for path in sorted(folder.glob("*.py"), key=lambda p: natural_key(p.name)):
        if path.name.startswith("_") or not path.is_file():
            continue
        outline = _outline(path)
        if outline is not None and outline.has_run:
            found.append(path)
    return found


def is_script(path: Path) -> bool:
    """Whether the file is a script with no top-level `run` (`scripts.py` runs it as torchrun would), read from
    its syntax tree without running it; a file that is not valid Python is not (importing it says why)."""
    outline = _outline(path)
    return outline is not None and not outline.has_run


def description_of(path: Path) -> str:
    """The first line of the bench's module docstring (read, not imported); empty when it has none."""
    outline = _outline(path)
    return outline.description if outline is not None else ""


def resolve_bench_path(bench: str) -> Path:
    """The file of a bench given as a path, a shipped name, or the number `kernbench list` gives it."""
    path = Path(bench)
    if path.suffix == ".py" or len(path.parts) > 1:
        if not path.is_file():
            raise BenchError(f"bench file not found: {bench}")
        return path
    if bench.isdigit():
        names = shipped_bench_names()
        if not 1 <= int(bench) <= len(names):
            raise BenchError(f"no bench numbered {bench}; `kernbench list` numbers the shipped benches 1 to "
                             f"{len(names)} (a bench in a folder runs by its path)")
        return SHIPPED_BENCHES / f"{names[int(bench) - 1]}.py"
    shipped = SHIPPED_BENCHES / f"{bench}.py"
    if not shipped.is_file():
        names = ", ".join(shipped_bench_names())
        raise BenchError(f"no bench named {bench!r}; shipped benches: {names} (or give a path to a .py file)")
    return shipped


def load_bench(bench: str) -> Callable:
    """Import the bench and return its `run` function, checked against the contract before anything runs."""
    return load_bench_entry(bench).run


def bench_module(bench: str) -> ModuleType:
    """A bench imported as a module (a path, name or number), for a bench built on another's definitions: its
    `import torch` statements give kernbench's torch as the bench's own do."""
    return _import_file(resolve_bench_path(bench))


def load_bench_entry(bench: str) -> Bench:
    """Import the bench (a path, name or number) and check it against the contract before anything runs.

    `run` must be a plain function taking the `torch` namespace (and, for
    benches with arguments, `argv`): an `async def` or a generator would
    return without running a line, and a `def run():` would fail only once
    called, as an internal-looking TypeError. A bench that declares options
    (`add_arguments`) must take them: its `run` must accept `argv`.
    """
    path = resolve_bench_path(bench)
    module = _import_file(path)
    run = _checked_run(module, path)
    add_arguments = getattr(module, "add_arguments", None)
    if add_arguments is not None:
        if not callable(add_arguments):
            raise BenchError(f"{path}: add_arguments must be a function add_arguments(parser)")
        if not accepts_argv(run):
            raise BenchError(f"{_definition_of(run, path)}: the bench declares options (add_arguments) but "
                             "run takes none; expected def run(torch, argv)")
    return Bench(path.stem, path, run, add_arguments)


def _checked_run(module: ModuleType, path: Path) -> Callable:
    run = getattr(module, "run", None)
    if not callable(run):
        raise BenchError(f"{path}: a bench must define a function run(torch); none found")
    where = _definition_of(run, path)
    if inspect.iscoroutinefunction(run) or inspect.isasyncgenfunction(run):
        raise BenchError(f"{where}: run is `async def`; a bench's run(torch) must be a plain function "
                         "(the simulator schedules device work itself, with no event loop)")
    if inspect.isgeneratorfunction(run):
        raise BenchError(f"{where}: run is a generator (it yields); a bench's run(torch) must be a plain function")
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return run  # a builtin or an extension callable: nothing to check it against
    if not any(_binds(signature, *args) for args in (("torch",), ("torch", []))):
        raise BenchError(f"{where}: run{signature} cannot be called as run(torch); "
                         "expected def run(torch) or def run(torch, argv)")
    return run


def takes_argv(run: Callable, bench: str, argv: list[str]) -> bool:
    """Whether `run` is `run(torch, argv)`; bench arguments given to a `run(torch)` are an error."""
    wants = accepts_argv(run)
    if argv and not wants:
        raise BenchError(f"{bench}: unrecognized arguments {' '.join(argv)} (the bench's run(torch) takes none)")
    return wants


def accepts_argv(run: Callable) -> bool:
    """Whether `run` can be called as run(torch, argv)."""
    try:
        parameters = list(inspect.signature(run).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    return len(parameters) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


@dataclass(frozen=True, slots=True)
class _Outline:
    """What a file's syntax tree says of it: whether it defines a top-level `run`, and its description."""

    has_run: bool
    description: str


def _outline(path: Path) -> _Outline | None:
    """The file's outline, None where it is unreadable or not valid Python.

    Kept per version of the file (its path, modification time and size):
    listing the shipped benches parses each of them, and a process that
    lists them often (a bench given by number, a sweep's checks, the test
    suite's in-process runs) parsed them all every time.
    """
    try:
        stat = path.stat()
    except OSError:
        return None
    return _outline_of(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=1024)
def _outline_of(path: str, _mtime_ns: int, _size: int) -> _Outline | None:
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    docstring = (ast.get_docstring(tree) or "").strip()
    return _Outline(has_run=any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run"
                                for node in tree.body),
                    description=docstring.splitlines()[0].strip() if docstring else "")


def _binds(signature: inspect.Signature, *args) -> bool:
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _definition_of(run: Callable, path: Path) -> str:
    """`bench.py:LINE` of `run`'s `def`, or the bench's path when the line is not known."""
    code = getattr(inspect.unwrap(run), "__code__", None)
    if code is None or Path(code.co_filename).resolve() != path.resolve():
        return str(path)
    return f"{path}:{code.co_firstlineno}"


def _import_file(path: Path) -> ModuleType:
    """Import the bench, its `import torch` statements giving kernbench's torch (`torch_imports`)."""
    from kernbench.session import lookup_before_a_run  # the simulator: slow, and only needed to import a bench

    spec = importlib.util.spec_from_file_location(f"kernbench_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        with torch_imports(lookup_before_a_run):
            spec.loader.exec_module(module)
    except SyntaxError as error:
        raise BenchError(f"{path}:{error.lineno}: syntax error in bench: {error.msg}") from None
    except Exception as error:
        where = _innermost_frame_in(path, error)
        raise BenchError(f"{where}: importing the bench failed: {type(error).__name__}: {error}") from None
    return module


def _innermost_frame_in(path: Path, error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    return f"{path}:{frames[-1].lineno}" if frames else str(path)

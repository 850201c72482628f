"""Finding and importing a bench: a path to a `.py` file or a shipped name.

A bench is a Python file defining `run(torch)`. Shipped benches live in
`kernbench/benches/` (the repository's `benches/` folder links there), so
`kernbench run ccl_allreduce` works from any folder. Problems finding or
importing a bench are the user's to fix, so they become one-line
`BenchError`s; an exception raised *inside* `run` is the bench's own and
keeps its traceback (the CLI prints it and exits 1).
"""

from __future__ import annotations

import importlib.util
import inspect
import traceback
from pathlib import Path
from types import ModuleType
from typing import Callable

from kernbench.errors import KernbenchError

SHIPPED_BENCHES = Path(__file__).resolve().parent.parent / "benches"


class BenchError(KernbenchError):
    """A bench that cannot be found, imported, or has no `run(torch)`."""


def shipped_bench_names() -> list[str]:
    return sorted(p.stem for p in SHIPPED_BENCHES.glob("*.py") if not p.name.startswith("_"))


def resolve_bench_path(bench: str) -> Path:
    path = Path(bench)
    if path.suffix == ".py" or len(path.parts) > 1:
        if not path.is_file():
            raise BenchError(f"bench file not found: {bench}")
        return path
    shipped = SHIPPED_BENCHES / f"{bench}.py"
    if not shipped.is_file():
        names = ", ".join(shipped_bench_names())
        raise BenchError(f"no bench named {bench!r}; shipped benches: {names} (or give a path to a .py file)")
    return shipped


def load_bench(bench: str) -> Callable:
    """Import the bench and return its `run` function, checked against the contract before anything runs.

    `run` must be a plain function taking the `torch` namespace (and, for
    benches with arguments, `argv`): an `async def` or a generator would
    return without running a line, and a `def run():` would fail only once
    called, as an internal-looking TypeError.
    """
    path = resolve_bench_path(bench)
    module = _import_file(path)
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
    try:
        parameters = list(inspect.signature(run).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    wants = len(parameters) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if argv and not wants:
        raise BenchError(f"{bench}: unrecognized arguments {' '.join(argv)} (the bench's run(torch) takes none)")
    return wants


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
    spec = importlib.util.spec_from_file_location(f"kernbench_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
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
